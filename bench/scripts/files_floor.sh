#!/bin/bash
# bench/scripts/files_floor.sh: how far the directory workload can go on this machine. Alternates, RUNS times:
#   floor        build/bench/io_floor on THREADS processes (one share of the files each): read + write only
#   floor-mmap   the same, inputs read through mmap
#   seed_files   the seed-style program (OpenMP, one file per thread, EVP, files read whole), THREADS threads
#   accelaes     build/accelaes-files encrypt --cipher aes-128-cbc --threads THREADS
# on bench/scripts/workloads.py's 100-file directory (seed 100, 128 B .. 4 MiB log-uniform, 35.9 MB) in WORKDIR, and
# prints median wall times and the ratios. The issue's target, accelaes-files 3x faster than seed_files, needs
# accelaes-files to finish in a third of the seed's time; the floor says whether a third leaves room for any
# cipher at all.
# Usage: bench/scripts/files_floor.sh [RUNS=20] ; env: THREADS (2), WORKDIR (/dev/shm, else /tmp)
set -eu
cd "$(dirname "$0")/../.."
RUNS=${1:-20}
THREADS=${THREADS:-2}
WORKDIR=${WORKDIR:-$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )}
make -s all build/bench/seed_files build/bench/io_floor >/dev/null
w=$(mktemp -d "$WORKDIR/accelaes-floor.XXXXXX")
trap 'rm -rf "$w"' EXIT
python3 -c "import sys; sys.path.insert(0, 'bench/scripts'); import workloads, pathlib; workloads.make_files(pathlib.Path('$w/in'), 100, 100)"
(umask 077 && openssl rand -hex 16 > "$w/key")   # accelaes-files refuses a key others may read
now() { date +%s%N; }
fresh() { rm -rf "$w/out"; mkdir "$w/out"; }
for r in $(seq "$RUNS"); do
    fresh; s=$(now)
    for k in $(seq 0 $((THREADS - 1))); do build/bench/io_floor --part "$k/$THREADS" "$w/in" "$w/out" & done; wait
    echo "floor $(( ($(now) - s) / 1000 ))"
    fresh; s=$(now)
    for k in $(seq 0 $((THREADS - 1))); do build/bench/io_floor --mmap --part "$k/$THREADS" "$w/in" "$w/out" & done; wait
    echo "floor-mmap $(( ($(now) - s) / 1000 ))"
    fresh; s=$(now)
    build/bench/seed_files encrypt --key-file "$w/key" --threads "$THREADS" "$w/in" "$w/out"
    echo "seed_files $(( ($(now) - s) / 1000 ))"
    fresh; s=$(now)
    OPENSSL_MODULES=build build/accelaes-files encrypt --cipher aes-128-cbc --key-file "$w/key" \
        --threads "$THREADS" --quiet "$w/in" "$w/out"
    echo "accelaes $(( ($(now) - s) / 1000 ))"
done | python3 -c "
import statistics as st, sys
t = {}
for line in sys.stdin:
    name, us = line.split()
    t.setdefault(name, []).append(int(us) / 1000)
m = {k: st.median(v) for k, v in t.items()}
print('| program | median ms | min ms | max ms | runs > 2x median |')
print('| --- | ---: | ---: | ---: | ---: |')
for k, v in t.items():
    print('| %s | %.1f | %.1f | %.1f | %d |' % (k, m[k], min(v), max(v), sum(x > 2 * m[k] for x in v)))
print()
print('seed_files / accelaes-files: %.2fx' % (m['seed_files'] / m['accelaes']))
print('seed_files / I/O floor: %.2fx (the most any tool could reach here with a free cipher)' % (m['seed_files'] / m['floor']))
print('a third of seed_files: %.1f ms; the I/O floor alone: %.1f ms' % (m['seed_files'] / 3, m['floor']))
"
