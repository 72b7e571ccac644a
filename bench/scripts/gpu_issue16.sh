#!/bin/sh
# bench/scripts/gpu_issue16.sh: issue #16's device session, in parts that each fit one 10-minute device command, on a
# tree built elsewhere (`make bench-gpu` here; it builds nothing). Prints the issue's line
#   accelaes-gpu-summary: ctr=X ecb=Y cbcdec=Z GB/s cpu=W ns/B multi8=A multi1=B
# prefixed with why it is not a measurement where it is not one (emulation:, not-as-specified:, failed-checks:,
# incomplete:). Each part writes at most 6 files (the device tool brings back 8 per command; more parts in one
# call go back as one issue16-results.tar.gz).
#
#   part1  (~4 min on an H100) machine, plugin tests on the real plugin, kernels and copies, gpu_bench for
#          each ACCELAES_CUDA_DMA mode alternated, gpu_multi CTR 1 and 8 processes; its own summary line
#   part2  (~4 min) gpu_multi 1/4/8/16 processes, CTR (MPS off, on, on, off), ECB and CBC-decrypt (off, on)
#   part3  (~2 min) fresh buffers for every request (a freed and remapped buffer must never be used stale):
#          gpu_bench and gpu_multi CTR for each DMA mode
#   summary [DIR...]  the line from every part's files found in the results directory and the DIRs given
#   all    part1 part2 part3 summary
# usage: bench/scripts/gpu_issue16.sh PART... (several parts run in turn)
# Settings (environment): ISSUE16_BUILD the built tree (build), ISSUE16_DIR results (build/results/issue16;
# each part's files are also copied to $OUT when set), ISSUE16_PLUGIN (build/accelaes-cuda.so), ISSUE16_MIB
# (256), ISSUE16_REQUESTS (8), ISSUE16_PROCS ("1 4 8 16"), ISSUE16_DMA modes besides the default ("staged
# register cache pageable auto"), ISSUE16_ROUNDS of gpu_bench per mode (2), ISSUE16_TESTS (pytest files; ""
# skips them), ISSUE16_TIMEOUT seconds per gpu_multi run (240).
set -u
cd "$(dirname "$0")/../.." || exit 2
BUILD=${ISSUE16_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
DIR=${ISSUE16_DIR:-$BUILD/results/issue16}
PLUGIN=${ISSUE16_PLUGIN:-$BUILD/accelaes-cuda.so}
MIB=${ISSUE16_MIB:-256}
REQ=${ISSUE16_REQUESTS:-8}
PROCS=${ISSUE16_PROCS:-1 4 8 16}
MODES=${ISSUE16_DMA-staged register cache pageable auto}
ROUNDS=${ISSUE16_ROUNDS:-2}
TESTS=${ISSUE16_TESTS-tests/unit/test_gpu_plugin.py tests/unit/test_gpu_provider.py}
TMO=${ISSUE16_TIMEOUT:-240}
PY=${PYTHON:-python3}
export OPENSSL_MODULES="$BUILD" ACCELAES_BACKEND=cuda PYTHONUNBUFFERED=1
mkdir -p "$DIR" || exit 2
rc=0

say() { printf '\n$ %s\n' "$*"; }
# A step: the command shown, then run under a wall-clock bound; a failure is counted, the part goes on.
step() {
    secs=$1; shift
    say "$@"
    timeout -k 10 "$secs" "$@" || { echo "(exit $? from: $*)"; rc=1; }
}
rev_words() { out=; for w in $1; do out="$w $out"; done; echo "$out"; }
procs_csv() { echo "$1" | tr ' ' ','; }
multi() {   # multi FILE-STEM gpu_multi-arguments...
    stem=$1; shift
    step $((TMO * 8 > 570 ? 570 : TMO * 8)) "$PY" bench/scripts/gpu_multi.py --size "${MIB}M" --requests "$REQ" \
        --plugin "$PLUGIN" --build "$BUILD" --timeout "$TMO" --json "$DIR/$stem.jsonl" "$@"
}
bench() {   # bench DMA-MODE|default BUFFERS OPS
    if [ "$1" = default ]; then
        step 300 env -u ACCELAES_CUDA_DMA "$BUILD/bench/gpu_bench" "$PLUGIN" "$3" "$MIB" "$2"
    else
        step 300 env ACCELAES_CUDA_DMA="$1" "$BUILD/bench/gpu_bench" "$PLUGIN" "$3" "$MIB" "$2"
    fi
}
need() {
    for f in "$BUILD/accelaes.so" "$BUILD/accelaes-stat" "$BUILD/bench/gpu_bench" "$PLUGIN"; do
        [ -e "$f" ] && continue
        echo "gpu_issue16: $f is missing: run \`make bench-gpu\` where the tree is built" >&2
        exit 2
    done
}
keep() {   # the part's files to the device tool's output folder, which is emptied before every command
    [ -n "${OUT:-}" ] && [ "$OUT" != "$DIR" ] && for f in "$@"; do [ -f "$DIR/$f" ] && cp "$DIR/$f" "$OUT/"; done
    return 0
}

part1() {
    need
    {
        date -u; uname -a; echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'not a git checkout')"
        openssl version -a | head -3; "$PY" --version; nproc; grep -m1 'model name' /proc/cpuinfo
        q=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total,compute_mode
        nvidia-smi --query-gpu=$q --format=csv 2>&1 || echo "nvidia-smi: not available"
        command -v nvidia-cuda-mps-control || echo "nvidia-cuda-mps-control: not found"
        echo "settings: plugin=$PLUGIN MiB=$MIB requests=$REQ procs='$PROCS' dma='default $MODES' rounds=$ROUNDS"
    } >"$DIR/part1-env.txt" 2>&1
    cat "$DIR/part1-env.txt"
    if [ -n "$TESTS" ]; then
        # shellcheck disable=SC2086 # a list of test files, split on purpose
        step 420 env ACCELAES_TEST_GPU_PLUGIN="$PLUGIN" "$PY" -m pytest -q -ra -p no:cacheprovider $TESTS \
            >"$DIR/part1-tests.txt" 2>&1
        tail -15 "$DIR/part1-tests.txt"
    fi
    {
        if ! nvidia-smi -L >/dev/null 2>&1; then echo "no NVIDIA GPU here (nvidia-smi -L): kernel-only figures skipped"
        elif [ -x "$BUILD/bench/gpu_kbench" ]; then step 200 "$BUILD/bench/gpu_kbench" "$MIB"
        else echo "$BUILD/bench/gpu_kbench not built (no nvcc where the tree was built): kernel figures skipped"; fi
        r=1
        while [ "$r" -le "$ROUNDS" ]; do   # the default first, the modes in turn, reversed every other round
            order="default $MODES"
            [ $((r % 2)) = 0 ] && order=$(rev_words "$order")
            for m in $order; do echo "== gpu_bench dma=$m round $r"; bench "$m" reused ctr,ecb,cbcdec; done
            r=$((r + 1))
        done
    } >"$DIR/part1-bench.txt" 2>&1
    grep -E '^(gpu-bench|==|plugin )' "$DIR/part1-bench.txt"
    multi part1-multi --op ctr --procs 1,8 >"$DIR/part1-multi.txt" 2>&1
    cat "$DIR/part1-multi.txt"
    summary "$DIR" | tee "$DIR/part1-summary.txt"
    keep part1-env.txt part1-tests.txt part1-bench.txt part1-multi.txt part1-multi.jsonl part1-summary.txt
}

part2() {
    need
    {
        p=$(procs_csv "$PROCS")
        multi part2-multi --op ctr --procs "$p"
        multi part2-multi --op ctr --procs "$p" --mps
        multi part2-multi --op ctr --procs "$p" --mps
        multi part2-multi --op ctr --procs "$p"
        multi part2-multi --op ecb,cbcdec --procs "$p"
        multi part2-multi --op ecb,cbcdec --procs "$p" --mps
    } >"$DIR/part2-multi.txt" 2>&1
    cat "$DIR/part2-multi.txt"
    keep part2-multi.txt part2-multi.jsonl
}

part3() {
    need
    {
        for m in default $MODES; do echo "== gpu_bench dma=$m fresh buffers"; bench "$m" fresh ctr,ecb,cbcdec; done
    } >"$DIR/part3-bench.txt" 2>&1
    grep -E '^(gpu-bench|==|plugin )' "$DIR/part3-bench.txt"
    {
        for m in default $MODES; do
            if [ "$m" = default ]; then multi part3-multi --op ctr --procs 1,8 --buffers fresh
            else multi part3-multi --op ctr --procs 1,8 --buffers fresh --dma "$m"; fi
        done
    } >"$DIR/part3-multi.txt" 2>&1
    cat "$DIR/part3-multi.txt"
    keep part3-bench.txt part3-multi.txt part3-multi.jsonl
}

# The summary line from gpu-bench-result / gpu-bench-device lines and gpu-multi-result lines in *.txt files.
summary() {
    "$PY" - "$MIB" "$@" <<'EOF'
import glob, json, os, re, statistics, sys
mib, dirs = int(sys.argv[1]), sys.argv[2:]
bench, multi, devices = [], [], set()
for path in sorted({p for d in dirs for p in glob.glob(os.path.join(d, "*.txt"))}):
    for line in open(path, errors="replace"):
        if line.startswith("gpu-bench-result: "):
            bench.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
        elif line.startswith("gpu-bench-device: "):
            devices.add(line.split(": ", 1)[1].strip())
        elif line.startswith("gpu-multi-result: "):
            r = json.loads(line.split(": ", 1)[1])
            multi.append(r)
            devices.add(r.get("device", ""))
def med(xs):
    return statistics.median(xs) if xs else None
def fig(x, f="%.2f"):
    return "n/a" if x is None else f % x
def bench_of(op, dma="default", buffers="reused"):
    rows = [b for b in bench if b["op"] == op and b["bits"] == "128" and b["mib"] == str(mib)
            and b["streams"] == "1" and b["dma"] == dma and b["buffers"] == buffers]
    return rows
def multi_of(procs, mps=False, op="ctr", dma="default", buffers="reuse"):
    return [r for r in multi if r.get("op") == op and r.get("procs") == procs and r.get("mps") == mps
            and r.get("dma") == dma and r.get("buffers") == buffers and "aggregate_gbps" in r]
ops = {"ctr": "CTR", "ecb": "ECB-enc", "cbcdec": "CBC-dec"}
gb = {k: med([float(b["gbps"]) for b in bench_of(v)]) for k, v in ops.items()}
cpu = {k: med([float(b["cpu_ns"]) for b in bench_of(v)]) for k, v in ops.items()}
worst = max((v for v in cpu.values() if v is not None), default=None)
m = {n: med([r["aggregate_gbps"] for r in multi_of(n)]) for n in (1, 8)}
mm = {n: med([r["aggregate_gbps"] for r in multi_of(n, mps=True)]) for n in (1, 8)}
devices.discard("")
devices = {d for d in devices if not any(o != d and o.startswith(d) for o in devices)}   # the unit table's cut names
emul = not devices or any(not d.startswith("NVIDIA") or re.search("mock|fake|emulation", d, re.I) for d in devices)
bad = [b for b in bench if b.get("identical") != "1"] + [r for r in multi if not r.get("ok") and "skipped" not in r]
why = ["emulation"] * emul + ["not-as-specified"] * (mib != 256) + ["failed-checks"] * bool(bad)
why += ["incomplete"] * (None in list(gb.values()) + [worst, m[1], m[8]])
pre = "".join(w + ": " for w in why)
print(f"device: {', '.join(sorted(devices)) or 'unknown'}{' (EMULATION: not a measurement)' if emul else ''}")
print(f"requests of {mib} MiB, AES-128; X/Y/Z and cpu: build/bench/gpu_bench through the plugin, the caller's "
      f"malloc'd buffers reused, default ACCELAES_CUDA_DMA, median over rounds of each run's best; cpu = the worst of "
      f"the three (ctr {fig(cpu['ctr'], '%.3f')}, ecb {fig(cpu['ecb'], '%.3f')}, cbcdec {fig(cpu['cbcdec'], '%.3f')} "
      f"ns/B, process CPU of all threads); multi8/multi1: bench/scripts/gpu_multi.py CTR through EVP, aggregate GB/s, "
      f"median over runs without MPS")
for dma in sorted({b["dma"] for b in bench}):
    for buf in ("reused", "fresh"):
        row = [med([float(b["gbps"]) for b in bench_of(v, dma, buf)]) for v in ops.values()]
        c = [med([float(b["cpu_ns"]) for b in bench_of(v, dma, buf)]) for v in ops.values()]
        if any(x is not None for x in row):
            print(f"  gpu_bench dma={dma:<9} buffers={buf:<6} ctr/ecb/cbcdec {' / '.join(fig(x) for x in row)} GB/s,"
                  f" cpu {' / '.join(fig(x, '%.3f') for x in c)} ns/B")
for r in sorted(multi, key=lambda r: (r.get("op", ""), r.get("mps", False), r.get("dma", ""), r.get("buffers", ""),
                                      r.get("procs", 0))):
    if "aggregate_gbps" in r:
        mem = r["gpu_mem"]
        mem = f"{mem['mean_mib']:.0f} MiB" if isinstance(mem, dict) else "n/a"
        print(f"  gpu_multi {r['op']:<6} procs={r['procs']:<2} mps={'on ' if r['mps'] else 'off'} dma={r['dma']:<8}"
              f" buffers={r['buffers']:<5} {r['aggregate_gbps']:7.2f} GB/s cpu {r['cpu_ns_per_byte']:.3f} ns/B"
              f" GPU mem/proc {mem} waits {r['waits']} gpu {100 * r['gpu_share']:.0f}% p50 {r['p50_ms']:.1f}"
              f" p99 {r['p99_ms']:.1f} ms {'ok' if r['ok'] else 'FAILED'}")
    else:
        print(f"  gpu_multi {r.get('op')} procs={r.get('procs', '-')} mps={r.get('mps')}: "
              f"{r.get('error') or r.get('skipped')}")
print(f"{pre}accelaes-gpu-summary-mps: multi8={fig(mm[8])} multi1={fig(mm[1])}")
print(f"{pre}accelaes-gpu-summary: ctr={fig(gb['ctr'])} ecb={fig(gb['ecb'])} cbcdec={fig(gb['cbcdec'])} GB/s "
      f"cpu={fig(worst, '%.3f')} ns/B multi8={fig(m[8])} multi1={fig(m[1])}")
EOF
}

[ $# -gt 0 ] || { sed -n '2,24p' "$0"; exit 2; }
if [ "$1" = summary ]; then
    shift
    summary "$DIR" "$@"
    exit 0
fi
for part in "$@"; do
    case $part in
    part1) part1 ;;
    part2) part2 ;;
    part3) part3 ;;
    all) part1; part2; part3; summary "$DIR" | tee "$DIR/summary.txt"; keep summary.txt ;;
    *) echo "gpu_issue16: unknown part '$part' (part1, part2, part3, all; or summary [DIR...] alone)" >&2; exit 2 ;;
    esac
done
# The device tool brings back 8 files a command: several parts in one call go back as one archive.
if [ -n "${OUT:-}" ] && [ "$OUT" != "$DIR" ] && [ "$(find "$OUT" -maxdepth 1 -type f | wc -l)" -gt 8 ]; then
    tar -czf "$OUT/issue16-results.tar.gz" -C "$DIR" . && (cd "$OUT" && rm -f part1-* part2-* part3-*)
fi
exit $rc
