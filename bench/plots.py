"""bench/plots.py: the PNG plots of a bench/run.py result: throughput against size per mode, against processes,
and the run-time histogram of the directory workload."""

import matplotlib

matplotlib.use("Agg")  # no display on a build machine
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {128: "tab:blue", 192: "tab:orange", 256: "tab:green"}


def _style(provider):
    return "-" if provider == "default" else "--"


def speed_plot(sweep, accel, path):
    rows = [r for r in sweep["rows"] if r["median"]]
    modes = sorted({r["cipher"].split("-")[2] for r in rows})
    fig, axes = plt.subplots(len(modes), 2, figsize=(11, 3.2 * len(modes)), squeeze=False)
    for i, mode in enumerate(modes):
        for j, op in enumerate(("encrypt", "decrypt")):
            ax = axes[i][j]
            for cipher in sorted({r["cipher"] for r in rows if r["cipher"].endswith(mode)}):
                bits = int(cipher.split("-")[1])
                for prov in ("default", accel):
                    pts = sorted((r["size"], r["median"] / 1e6) for r in rows
                                 if r["cipher"] == cipher and r["op"] == op and r["provider"] == prov)
                    if pts:
                        ax.plot(*zip(*pts), _style(prov), marker="o", ms=3, color=COLORS.get(bits),
                                label=f"{cipher} {prov}")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode.upper()} {op}")
            ax.set_xlabel("buffer size (bytes)")
            ax.set_ylabel("MB/s")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle(f"openssl speed -elapsed: default (solid) vs {accel} (dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def scaling_plot(res, accel, path):
    sec = res["sections"]
    panels = []
    if "multi" in sec:
        for case in sorted({(r["cipher"], r["op"], r["size"]) for r in sec["multi"]}):
            panels.append(("openssl speed -multi", "multi", case,
                           [r for r in sec["multi"] if (r["cipher"], r["op"], r["size"]) == case]))
    if "volume" in sec:
        for case in sorted({(r["cipher"], r["size"]) for r in sec["volume"]}):
            panels.append(("fixed volume (reqload)", "procs", case,
                           [r for r in sec["volume"] if (r["cipher"], r["size"]) == case]))
    if not panels:
        return False
    cols = 3
    rows_n = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(12, 3.2 * rows_n), squeeze=False)
    for k, (title, key, case, rows) in enumerate(panels):
        ax = axes[k // cols][k % cols]
        for prov in ("default", accel):
            val = "median" if key == "multi" else "mb_per_s"
            scale = 1e6 if key == "multi" else 1
            pts = sorted((r[key], r[val] / scale) for r in rows if r["provider"] == prov and r[val])
            if pts:
                ax.plot(*zip(*pts), _style(prov), marker="o", label=prov)
        ax.set_title(f"{title}\n{' '.join(str(c) for c in case)} B", fontsize=8)
        ax.set_xlabel("processes")
        ax.set_ylabel("MB/s (all processes)")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(panels), rows_n * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def files_hist(rows, path):
    counts = sorted({r["files"] for r in rows})
    fig, axes = plt.subplots(1, len(counts), figsize=(6 * len(counts), 3.5), squeeze=False)
    for ax, count in zip(axes[0], counts):
        every = [t * 1e3 for r in rows if r["files"] == count for t in r["times_s"]]
        if not every:
            continue
        lo, hi = min(every), max(every)
        bins = [lo + (hi - lo) * k / 30 for k in range(31)] if hi > lo else 10  # shared, so bars compare
        for r in rows:
            if r["files"] == count and r["times_s"]:
                ax.hist([t * 1e3 for t in r["times_s"]], bins=bins, alpha=0.5,
                        label=f"{r['program']} (median {r['median_s'] * 1e3:.1f} ms)")
        ax.set_title(f"{count} files, {rows[0]['threads']} threads: run times")
        ax.set_xlabel("wall time per run (ms)")
        ax.set_ylabel("runs")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def make_all(res, accel, outdir, tag):
    """Writes the plots the result has data for; returns their file names."""
    made = []
    sec = res["sections"]
    if "speed" in sec and sec["speed"]["rows"]:
        speed_plot(sec["speed"], accel, outdir / f"bench-{tag}-speed.png")
        made.append(f"bench-{tag}-speed.png")
    if scaling_plot(res, accel, outdir / f"bench-{tag}-scaling.png"):
        made.append(f"bench-{tag}-scaling.png")
    if "directory" in sec and any(r["times_s"] for r in sec["directory"]):
        files_hist(sec["directory"], outdir / f"bench-{tag}-files-hist.png")
        made.append(f"bench-{tag}-files-hist.png")
    return made
