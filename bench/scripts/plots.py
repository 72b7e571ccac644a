"""bench/scripts/plots.py: the PNG plots of a bench/scripts/run.py result: throughput against size per mode, against processes,
and the run-time histogram of the directory workload."""

import matplotlib

matplotlib.use("Agg")  # no display on a build machine
import matplotlib.pyplot as plt  # noqa: E402

# The provider is the colour (what the eye compares first); the key size is the line style and marker.
PROVIDER_COLORS = {"default": "tab:gray"}
ACCEL_COLOR = "tab:red"
BITS_STYLE = {128: ("-", "o"), 192: ("--", "s"), 256: (":", "^")}


def _color(provider):
    return PROVIDER_COLORS.get(provider, ACCEL_COLOR)


def _figure_legend(fig, axes, ncol):
    """One legend for the whole figure, above the panels, at a readable size (the panels share it)."""
    handles, labels = {}, []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = h
                labels.append(label)
    if labels:
        fig.legend([handles[x] for x in labels], labels, loc="lower center", ncol=ncol, fontsize=10,
                   frameon=False, bbox_to_anchor=(0.5, 1.0))
    return len(labels)


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
                        ls, mk = BITS_STYLE.get(bits, ("-", "o"))
                        ax.plot(*zip(*pts), linestyle=ls, marker=mk, ms=4, lw=1.6, color=_color(prov),
                                label=f"{prov}, AES-{bits}")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode.upper()} {op}")
            ax.set_xlabel("buffer size (bytes)")
            ax.set_ylabel("MB/s")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    n = _figure_legend(fig, [ax for row in axes for ax in row], ncol=2)
    # above the legend (its rows), both outside the panels; bbox_inches="tight" keeps them in the file
    fig.suptitle(f"openssl speed -elapsed: default ({PROVIDER_COLORS['default'][4:]}) vs {accel} "
                 f"({ACCEL_COLOR[4:]}); line style = key size", y=1.0 + (n + 1) // 2 * 0.3 / (3.2 * len(modes)) + 0.012,
                 va="bottom")
    fig.savefig(path, dpi=90, bbox_inches="tight")
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
                ax.plot(*zip(*pts), "-", marker="o", color=_color(prov), label=prov)
        ax.set_title(f"{title}\n{' '.join(str(c) for c in case)} B", fontsize=8)
        ax.set_xlabel("processes")
        ax.set_ylabel("MB/s (all processes)")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
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
