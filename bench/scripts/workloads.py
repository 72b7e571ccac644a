"""bench/scripts/workloads.py: the two benchmark workloads that are not `openssl speed`: the directory of files
(accelaes-files against the seed-style OpenMP program) and a fixed total volume split over client processes in
requests of varied size (bench/src/reqload.c)."""

import json
import math
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import BUILD, alternate, bench_env, jain, median

FILES_TOOL = BUILD / "accelaes-files"
SEED_TOOL = BUILD / "bench" / "seed_files"
REQLOAD = BUILD / "bench" / "reqload"


def make_files(root, count, seed, lo=128, hi=4 << 20):
    """count files of log-uniform sizes from lo to hi bytes (many small, some large, as real directories are)."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    sizes = []
    for i in range(count):
        size = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        (root / f"file{i:04d}.dat").write_bytes(rng.randbytes(size))
        sizes.append(size)
    return sizes


def _variants(provider, threads):
    t = str(threads)
    out = [("accelaes-files", [str(FILES_TOOL), "encrypt", "--cipher", "aes-128-cbc", "--key-file", "{key}",
                               "--provider", provider, "--threads", t, "--quiet", "{src}", "{dst}"]),
           ("seed_files", [str(SEED_TOOL), "encrypt", "--key-file", "{key}", "--threads", t, "{src}", "{dst}"])]
    if provider != "default":  # separates what the tool does from what the provider does
        out.insert(1, ("accelaes-files (default provider)",
                       [str(FILES_TOOL), "encrypt", "--cipher", "aes-128-cbc", "--key-file", "{key}",
                        "--provider", "default", "--threads", t, "--quiet", "{src}", "{dst}"]))
    return out


def directory_workload(provider, counts=(10, 100), runs=20, threads=None, workdir=None, log=print):
    """Each tool encrypts the same directory `runs` times, the tools taking turns; wall time per run."""
    threads = threads or os.cpu_count()
    results = []
    work = Path(tempfile.mkdtemp(prefix="accelaes-bench-", dir=workdir))
    try:
        key = work / "key.hex"
        key.write_text(os.urandom(16).hex() + "\n")
        key.chmod(0o600)   # accelaes-files refuses a key that group or others may read
        for count in counts:
            src = work / f"in{count}"
            sizes = make_files(src, count, seed=count)
            variants = _variants(provider, threads)
            times = {name: [] for name, _ in variants}
            errors = {}
            log(f"  directory workload: {count} files, {sum(sizes) / 1e6:.1f} MB, {runs} runs x "
                f"{len(variants)} programs, {threads} threads")
            for r, order in alternate(runs, variants):
                for name, tmpl in order:
                    dst = work / "out"
                    shutil.rmtree(dst, ignore_errors=True)
                    args = [a.format(key=key, src=src, dst=dst) for a in tmpl]
                    t0 = time.perf_counter()
                    res = subprocess.run(args, capture_output=True, text=True, env=bench_env(), timeout=600)
                    dt = time.perf_counter() - t0
                    if res.returncode != 0:
                        errors[name] = f"exit {res.returncode}: {res.stderr.strip()[-300:]}"
                        continue
                    times[name].append(dt)
            for name, tmpl in variants:
                ts = times[name]
                med = median(ts)
                results.append({
                    "files": count, "bytes": sum(sizes), "program": name, "threads": threads,
                    "cmd": " ".join(a.format(key="KEY.hex", src=f"in{count}", dst="out")
                                    for a in tmpl).replace(str(BUILD), "build"),
                    "times_s": ts, "median_s": med,
                    "mb_per_s": sum(sizes) / med / 1e6 if med else None,
                    "over_2x_median": sum(1 for t in ts if med and t > 2 * med),
                    "error": errors.get(name)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def volume_workload(providers, ciphers, sizes, procs_list, total, rounds=1, log=print):
    """The same total bytes, split over P client processes in requests of S bytes; wall time of the whole.
    providers: [(label, provider name)]."""
    results = []
    for cipher in ciphers:
        for size in sizes:
            for procs in procs_list:
                runs = {label: [] for label, _ in providers}
                cmd = {}
                for _, order in alternate(rounds, list(providers)):
                    for prov, name in order:
                        args = [str(REQLOAD), "--provider", name, "--cipher", cipher, "--total", str(total),
                                "--size", str(size), "--procs", str(procs)]
                        cmd[prov] = " ".join(["build/bench/reqload"] + args[1:])
                        res = subprocess.run(args, capture_output=True, text=True, env=bench_env(), timeout=600)
                        try:
                            rec = json.loads(res.stdout)
                        except ValueError:
                            rec = {"ok": False}
                        if res.returncode != 0 or not rec.get("ok"):
                            rec["error"] = f"exit {res.returncode}: {res.stderr.strip()[-300:]}"
                        runs[prov].append(rec)
                for prov, _ in providers:
                    good = [r for r in runs[prov] if r.get("ok")]
                    walls = [r["wall_s"] for r in good]
                    med = median(walls)
                    fair = median([jain([r["bytes_per_proc"] / t for t in r["per_proc_s"] if t > 0])
                                   for r in good]) if good else None
                    results.append({
                        "cipher": cipher, "size": size, "procs": procs, "provider": prov, "total": total,
                        "cmd": cmd[prov], "wall_s": walls, "median_wall_s": med,
                        "mb_per_s": total / med / 1e6 if med else None, "jain": fair,
                        "error": next((r["error"] for r in runs[prov] if "error" in r), None)})
                log(f"  volume {cipher} {size} B x {procs} procs: " + ", ".join(
                    f"{r['provider']} {r['mb_per_s'] or 0:.0f} MB/s" for r in results[-len(providers):]))
    return results
