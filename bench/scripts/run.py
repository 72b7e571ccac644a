#!/usr/bin/env python3
"""bench/scripts/run.py: `make bench`. In one run, side by side, OpenSSL's default provider and accelaes: openssl speed
over the ciphers and sizes, -multi and -async_jobs scaling with per-process fairness, the directory workload
(accelaes-files against the seed-style program) and a fixed volume over request sizes x client processes.
Writes build/results/bench-<tag>.{json,md} and PNG plots (under build/: a run leaves the checkout clean;
`make bench-publish` copies them to bench/results/ for a commit). --quick finishes in about 5 minutes on 2 cores."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BUILD, REPO, alternate, jain, machine, machine_line, median, run_speed  # noqa: E402
import workloads  # noqa: E402

RESULTS = BUILD / "results"
MIB = 1 << 20


def plan(quick):
    bits = (128,) if quick else (128, 192, 256)
    return {
        "rounds": 1 if quick else 3,
        "ciphers": [f"aes-{b}-{m}" for m in ("ecb", "cbc", "ctr") for b in bits],
        # None = speed's default set, 16 B .. 16 KiB, in one run
        "sizesets": [None, MIB] if quick else [None, MIB, 16 * MIB],
        "multi": [1, 2, 4, 8],
        "multi_cases": [("aes-128-cbc", False, 16384), ("aes-128-ctr", False, 16384)] if quick else
                       [(c, d, s) for c, d in (("aes-128-cbc", False), ("aes-128-cbc", True), ("aes-128-ctr", False))
                        for s in (1024, 16384, MIB)],
        "async": [1, 16],
        "async_cases": [("aes-128-cbc", False, 16384), ("aes-128-ctr", False, 16384)] if quick else
                       [(c, False, s) for c in ("aes-128-cbc", "aes-128-ctr") for s in (1024, 16384, MIB)],
        "dir_counts": (10, 100),
        "dir_runs": 20,
        "volume_ciphers": ["aes-128-cbc", "aes-128-ctr"],
        "volume_sizes": [1024, 16384, MIB],
        "volume_procs": [1, 2, 4] if quick else [1, 2, 4, 8],
        "volume_total": (256 if quick else 1024) * MIB,
        "volume_rounds": 1 if quick else 3,
    }


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def speed_sweep(p, sides):
    """Throughput per (cipher, op, size, provider): median over alternated rounds."""
    vals, cmds, errors = {}, {}, {}
    for r, order in alternate(p["rounds"], sides):
        log(f"  speed sweep: round {r + 1} of {p['rounds']}")
        for cipher in p["ciphers"]:
            for dec in (False, True):
                for sizeset in p["sizesets"]:
                    for prov, name in order:
                        res = run_speed(name, cipher, decrypt=dec, size=sizeset)
                        key = (cipher, "decrypt" if dec else "encrypt", prov)
                        cmds.setdefault(prov, res["cmd"])
                        if "error" in res:
                            errors[key] = res["error"]
                        for size, v in res["total"].items():
                            vals.setdefault(key + (size,), []).append(v)
    rows = [{"cipher": c, "op": o, "provider": pr, "size": s, "bytes_per_s": v, "median": median(v)}
            for (c, o, pr, s), v in sorted(vals.items())]
    return {"rows": rows, "example_cmds": cmds,
            "errors": [{"cipher": c, "op": o, "provider": pr, "error": e} for (c, o, pr), e in errors.items()]}


def scaling(p, sides, kind):
    """-multi N (N processes, per-process figures -> Jain's index) or -async_jobs N (jobs in one process)."""
    rows = []
    counts = p["multi"] if kind == "multi" else p["async"]
    cases = p["multi_cases"] if kind == "multi" else p["async_cases"]
    for cipher, dec, size in cases:
        for n in counts:
            runs = {label: [] for label, _ in sides}
            for _, order in alternate(p["rounds"], sides):
                for prov, name in order:
                    kw = {"multi": n} if kind == "multi" else {"async_jobs": n}
                    runs[prov].append(run_speed(name, cipher, decrypt=dec, size=size, **kw))
            for prov, _ in sides:
                good = [x for x in runs[prov] if "error" not in x]
                per = [[pp.get(size) for pp in x["per_process"]] for x in good]
                rows.append({
                    "cipher": cipher, "op": "decrypt" if dec else "encrypt", "size": size, kind: n,
                    "provider": prov, "cmd": runs[prov][0]["cmd"],
                    "bytes_per_s": [x["total"].get(size) for x in good],
                    "median": median([x["total"].get(size) for x in good if x["total"].get(size)]),
                    "per_process": per, "jain": median([j for j in (jain(x) for x in per) if j is not None]),
                    "error": next((x["error"] for x in runs[prov] if "error" in x), None)})
            log(f"  {kind} {n} {cipher} {'dec' if dec else 'enc'} {size} B: " + ", ".join(
                f"{r['provider']} {(r['median'] or 0) / 1e6:.0f} MB/s" for r in rows[-len(sides):]))
    return rows


# ---- markdown ----

def fmt(v, scale=1e6, digits=1):
    return "n/a" if v is None else f"{v / scale:.{digits}f}"


def ratio(a, d):
    return "n/a" if not a or not d else f"{a / d:.2f}"


def md_speed(sweep, accel):
    med = {(r["cipher"], r["op"], r["size"], r["provider"]): r["median"] for r in sweep["rows"]}
    keys = sorted({(c, o, s) for c, o, s, _ in med}, key=lambda k: (k[0], k[1] != "encrypt", k[2]))
    out = [f"| cipher | op | size (B) | default MB/s | {accel} MB/s | ratio |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]
    for c, o, s in keys:
        d, a = med.get((c, o, s, "default")), med.get((c, o, s, accel))
        out.append(f"| {c} | {o} | {s} | {fmt(d)} | {fmt(a)} | {ratio(a, d)} |")
    return out


def md_scaling(rows, kind, accel):
    """-multi gets Jain columns (per-process figures); -async_jobs runs in one process and has none."""
    jain_cols = kind == "multi"
    out = [f"| cipher | op | size (B) | {kind} | default MB/s | {accel} MB/s | ratio |" +
           (f" Jain default | Jain {accel} |" if jain_cols else ""),
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if jain_cols else "")]
    idx = {(r["cipher"], r["op"], r["size"], r[kind], r["provider"]): r for r in rows}
    for c, o, s, n in sorted({k[:4] for k in idx}):
        d, a = idx.get((c, o, s, n, "default"), {}), idx.get((c, o, s, n, accel), {})
        line = (f"| {c} | {o} | {s} | {n} | {fmt(d.get('median'))} | {fmt(a.get('median'))} | "
                f"{ratio(a.get('median'), d.get('median'))} |")
        if jain_cols:
            line += "".join(" n/a |" if x.get("jain") is None else f" {x['jain']:.3f} |" for x in (d, a))
        out.append(line)
    return out


def md_dirs(rows):
    out = ["| files | MB | program | threads | median s | MB/s | runs | runs > 2x median |",
           "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        med = "n/a" if r["median_s"] is None else f"{r['median_s']:.4f}"
        out.append(f"| {r['files']} | {r['bytes'] / 1e6:.1f} | {r['program']} | {r['threads']} | {med} | "
                   f"{fmt(r['mb_per_s'], 1)} | {len(r['times_s'])} | {r['over_2x_median']} |")
    return out


def md_volume(rows, accel):
    out = [f"| cipher | request (B) | processes | default MB/s | {accel} MB/s | ratio | Jain default | Jain {accel} |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    idx = {(r["cipher"], r["size"], r["procs"], r["provider"]): r for r in rows}
    for c, s, n in sorted({k[:3] for k in idx}):
        d, a = idx.get((c, s, n, "default"), {}), idx.get((c, s, n, accel), {})
        j = ["n/a" if x.get("jain") is None else f"{x['jain']:.3f}" for x in (d, a)]
        out.append(f"| {c} | {s} | {n} | {fmt(d.get('mb_per_s'), 1)} | {fmt(a.get('mb_per_s'), 1)} | "
                   f"{ratio(a.get('mb_per_s'), d.get('mb_per_s'))} | {j[0]} | {j[1]} |")
    return out


def write_markdown(path, res, accel):
    m = res["meta"]
    lines = [f"# accelaes benchmark ({m['tag']}): default provider vs {accel}", "",
             machine_line(m["machine"]), f"command: {m['command']}",
             f"date: {m['date']}, run time {m['seconds']:.0f} s; MB = 10^6 bytes; every figure a median "
             f"of {m['plan']['rounds']} alternated round(s) unless said otherwise", ""]
    if accel == "default-again":
        lines += ["note: --provider default: both sides are OpenSSL's default provider (a check of the harness)", ""]
    sections = res["sections"]
    if "speed" in sections:
        s = sections["speed"]
        lines += ["## openssl speed", "", "commands: " + "; ".join(f"`{c}`" for c in s["example_cmds"].values()),
                  "(with -bytes 1048576 / 16777216 for the large sizes, -decrypt for decrypt)", ""]
        lines += md_speed(s, accel) + [""]
        lines += [f"error: {e}" for e in s["errors"]]
    for kind, title in (("multi", "openssl speed -multi N (N processes)"),
                        ("async_jobs", "openssl speed -async_jobs N (jobs in one process)")):
        if kind in sections:
            lines += [f"## {title}", "", "command: `" + sections[kind][0]["cmd"] + "` and so on", ""]
            if kind == "multi":
                lines += ["Jain's fairness index over the per-process figures that -multi prints "
                          "(`Got: +F:... from N`): 1 = every process got the same share.", ""]
            lines += md_scaling(sections[kind], kind, accel) + [""]
    if "directory" in sections:
        lines += ["## directory workload (AES-128-CBC encrypt, one stream per file)", "",
                  f"{m['plan']['dir_runs']} runs per program, programs alternated; file sizes log-uniform "
                  f"128 B .. 4 MiB, fixed seed; files in {m['workdir'] or 'the default temporary directory'}.", ""]
        lines += [f"- `{r['cmd']}`" for r in sections["directory"][:3]] + [""]
        lines += md_dirs(sections["directory"]) + [""]
        lines += [f"error ({r['program']}, {r['files']} files): {r['error']}" for r in sections["directory"]
                  if r["error"]]
    if "volume" in sections:
        v = sections["volume"]
        lines += ["## fixed total volume, request size x client processes", "",
                  f"{m['plan']['volume_total'] // MIB} MiB in all, split evenly over the processes; wall time "
                  "from the first start to the last end. Jain over per-process throughput.",
                  f"command: `{v[0]['cmd']}`", ""]
        lines += md_volume(v, accel) + [""]
    lines += ["## plots", ""] + [f"- {p}" for p in res.get("plots", [])]
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer ciphers and rounds: about 5 minutes on 2 cores")
    ap.add_argument("--provider", default="accelaes",
                    help="provider compared with default (default: accelaes; `default` checks the harness)")
    ap.add_argument("--only", default="speed,multi,async_jobs,directory,volume",
                    help="comma-separated sections to run")
    ap.add_argument("--tag", help="results file tag (default: quick or full)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where the directory workload's files go (default /dev/shm: a tmpfs, so the figures are "
                         "the tools' and the cipher's, not the disk's)")
    a = ap.parse_args()
    tag = a.tag or ("quick" if a.quick else "full")
    # Results are labelled by side; with --provider default the second side needs a name of its own.
    accel = a.provider if a.provider != "default" else "default-again"
    if a.provider == "accelaes" and not (BUILD / "accelaes.so").exists():
        sys.exit("bench: build/accelaes.so is missing (run make); --provider default checks the harness alone")
    plots = None
    if not a.no_plots:
        try:   # before the runs, not after them: a missing matplotlib must not cost a 5-minute run
            import plots
        except ImportError as e:
            sys.exit(f"bench: {e}: run `sh scripts/dev/install-deps.sh bench` (make bench does), or pass --no-plots")
    p = plan(a.quick)
    sides = [("default", "default"), (accel, a.provider)]
    only = set(a.only.split(","))
    t0 = time.time()
    res = {"meta": {"tag": tag, "machine": machine(), "plan": p, "provider": accel,
                    "command": "python3 bench/scripts/run.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "workdir": a.workdir}, "sections": {}}
    sec = res["sections"]
    log(f"bench: {machine_line(res['meta']['machine'])}")
    if "speed" in only:
        sec["speed"] = speed_sweep(p, sides)
    if "multi" in only:
        sec["multi"] = scaling(p, sides, "multi")
    if "async_jobs" in only:
        sec["async_jobs"] = scaling(p, sides, "async_jobs")
    if "directory" in only:
        sec["directory"] = workloads.directory_workload(a.provider, p["dir_counts"], p["dir_runs"],
                                                        workdir=a.workdir, log=log)
    if "volume" in only:
        sec["volume"] = workloads.volume_workload(sides, p["volume_ciphers"], p["volume_sizes"],
                                                  p["volume_procs"], p["volume_total"], p["volume_rounds"], log=log)
    res["meta"]["seconds"] = time.time() - t0
    RESULTS.mkdir(parents=True, exist_ok=True)
    if plots is not None:
        res["plots"] = plots.make_all(res, accel, RESULTS, tag)
    base = RESULTS / f"bench-{tag}"
    Path(f"{base}.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    write_markdown(Path(f"{base}.md"), res, accel)
    log(f"bench: wrote {base}.json, {base}.md and {len(res.get('plots', []))} plots in {res['meta']['seconds']:.0f} s")
    print(Path(f"{base}.md").read_text())


if __name__ == "__main__":
    main()
