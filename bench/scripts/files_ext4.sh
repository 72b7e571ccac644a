#!/bin/bash
# bench/scripts/files_ext4.sh: accelaes-files against the seed-style program and the I/O floor on a disk filesystem, with
# every run's outputs replacing the previous run's (issue #15). Two directories:
#   big    100 files of 1-4 MiB (uniform, random.Random(15): 264.3 MB)
#   bench  bench/scripts/workloads.py make_files(count=100, seed=100): log-uniform 128 B .. 4 MiB, 35.9 MB
# Programs, each with its own OUT_DIR that already holds its previous run's outputs (one untimed run first):
#   accelaes-files   BUILD/accelaes-files encrypt --cipher aes-128-cbc --threads THREADS
#   seed_files       BUILD/bench/seed_files (OpenMP parallel for, one file per thread, read whole, open(O_TRUNC))
#   io_floor         BUILD/bench/io_floor on THREADS processes (read + write only), outputs replaced as cp does:
#                    open(O_TRUNC)
#   io_floor-xchg    the same, outputs replaced as accelaes-files replaces them: O_TMPFILE, RENAME_EXCHANGE, the old
#                    one unlinked by 2 threads per process (4 in all, as the tool's 4 reapers)
# alternated (the order rotates each round), RUNS timed runs each. Before every timed run `sync` (not timed) puts the
# previous outputs on disk, as they are when a directory is encrypted again later: replacing them then frees
# allocated blocks (on a -o discard mount, a discard each), and nothing from the last run is still being written
# back. SYNC=0 skips it. Prints per directory: median seconds, MB/s, min, max, runs over twice the median, median CPU
# (user+sys of the process), and the ratios accelaes-files/seed_files (speed-up: seed median / accelaes median) and
# accelaes-files/io_floor (accelaes median / floor median, for both floors). No timed assertions.
# Builds nothing: `make build-only build/bench/seed_files build/bench/io_floor` first (BUILD=dir for another tree).
# Usage: bench/scripts/files_ext4.sh [RUNS=10]; env: BUILD (build), THREADS (2), WORKDIR (/var/tmp), SYNC (1), SETS ("big
# bench"), KEEP=1 keeps the work directory. Time: ~1 min for 10 runs on 2 cores.
set -eu
cd "$(dirname "$0")/../.."
RUNS=${1:-10}
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
WORKDIR=${WORKDIR:-/var/tmp}
for b in "$BUILD/accelaes-files" "$BUILD/accelaes.so" "$BUILD/bench/seed_files" "$BUILD/bench/io_floor"; do
    [ -e "$b" ] || { echo "files_ext4.sh: $b is missing: make BUILD=$BUILD build-only $BUILD/bench/seed_files $BUILD/bench/io_floor" >&2; exit 2; }
done
w=$(mktemp -d "$WORKDIR/accelaes-ext4.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$w"' EXIT
(umask 077 && openssl rand -hex 16 > "$w/key")   # accelaes-files refuses a key others may read
RUNS=$RUNS BUILD=$BUILD THREADS=$THREADS W=$w SETS=${SETS:-big bench} SYNC=${SYNC:-1} python3 - <<'EOF'
import os, pathlib, random, resource, statistics, subprocess, sys, time
sys.path.insert(0, "bench/scripts")
import workloads

runs, build, threads, w = int(os.environ["RUNS"]), os.environ["BUILD"], int(os.environ["THREADS"]), os.environ["W"]
do_sync = os.environ["SYNC"] == "1"
fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", w], capture_output=True, text=True).stdout.strip()
mnt = subprocess.run(["findmnt", "-n", "-o", "SOURCE,OPTIONS", "-T", w], capture_output=True, text=True).stdout.strip()
print(f"work directory {w}: {fs} ({mnt}); {threads} threads; {runs} timed runs per program; "
      f"sync before each run: {'yes' if do_sync else 'no'}; load average {open('/proc/loadavg').read().split()[0]}")


def make_big(root):
    rng = random.Random(15)
    root.mkdir()
    sizes = []
    for i in range(100):
        n = rng.randint(1 << 20, 4 << 20)
        (root / f"file{i:04d}.dat").write_bytes(rng.randbytes(n))
        sizes.append(n)
    return sizes


def programs(src, key):
    out = lambda name: f"{w}/out-{src.name}-{name}"
    floor = lambda name, extra: [[f"{build}/bench/io_floor", *extra, "--part", f"{k}/{threads}", str(src), out(name)]
                                 for k in range(threads)]
    return [
        ("accelaes-files", out("acc"), [[f"{build}/accelaes-files", "encrypt", "--cipher", "aes-128-cbc", "--key-file",
                                         key, "--threads", str(threads), "--quiet", str(src), out("acc")]]),
        ("seed_files", out("seed"), [[f"{build}/bench/seed_files", "encrypt", "--key-file", key, "--threads",
                                      str(threads), str(src), out("seed")]]),
        ("io_floor", out("floor"), floor("floor", [])),
        ("io_floor-xchg", out("floorx"), floor("floorx", ["--replace", "exchange"])),
    ]


def run(cmds):
    """All of cmds at once (io_floor's processes); wall seconds and the children's CPU seconds."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, env=env) for c in cmds]
    codes = [p.wait() for p in procs]
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if any(codes):
        sys.exit(f"files_ext4.sh: {cmds[0]} exited {codes}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


env = dict(os.environ, OPENSSL_MODULES=build)
key = f"{w}/key"
for set_name in os.environ["SETS"].split():
    src = pathlib.Path(w, set_name)
    sizes = make_big(src) if set_name == "big" else workloads.make_files(src, 100, 100)
    total = sum(sizes)
    progs = programs(src, key)
    for name, out, cmds in progs:  # the outputs each timed run replaces
        os.makedirs(out, exist_ok=True)
        run(cmds)
    times = {name: [] for name, _, _ in progs}
    cpu = {name: [] for name, _, _ in progs}
    for r in range(runs):
        order = progs[r % len(progs):] + progs[:r % len(progs)]
        for name, out, cmds in order:
            if do_sync:
                os.sync()
            dt, c = run(cmds)
            times[name].append(dt)
            cpu[name].append(c)
    med = {n: statistics.median(t) for n, t in times.items()}
    print(f"\n## {set_name}: {len(sizes)} files, {total / 1e6:.1f} MB, {min(sizes)} .. {max(sizes)} B")
    print("\n| program | median s | MB/s | min s | max s | runs > 2x median | CPU s (median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, t in times.items():
        print(f"| {n} | {med[n]:.4f} | {total / med[n] / 1e6:.0f} | {min(t):.4f} | {max(t):.4f} | "
              f"{sum(x > 2 * med[n] for x in t)} | {statistics.median(cpu[n]):.3f} |")
    a = med["accelaes-files"]
    print(f"\naccelaes-files speed-up over seed_files: {med['seed_files'] / a:.2f}x (seed median / accelaes median; "
          f"issue #15 wants >= 1.5x)")
    for f in ("io_floor", "io_floor-xchg"):
        print(f"accelaes-files / {f}: {a / med[f]:.2f}x (accelaes median / floor median; issue #15 wants <= 1.3x)")
    print(f"accelaes-files runs over twice its median: {sum(x > 2 * a for x in times['accelaes-files'])} "
          f"(issue #15 wants 0)")
    print("runs (ms): " + "; ".join(f"{n} " + " ".join(f"{x * 1e3:.0f}" for x in t) for n, t in times.items()))
    print("commands:")
    for n, _, cmds in progs:
        print(f"  {n}: OPENSSL_MODULES={build} " + " & ".join(" ".join(c) for c in cmds).replace(w, "$W"))
EOF
