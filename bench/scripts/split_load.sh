#!/bin/sh
# bench/scripts/split_load.sh: is a 1 MiB request split over the pool ever slower than the same request
# inline while other processes keep the cores busy? For each background load (0, 1, 2 and 4
# busy-loop processes, and 2 `openssl speed -provider accelaes` processes) build/bench/split_load
# times 1 MiB EVP_CipherUpdate calls (AES-128-CTR, AES-128-ECB, AES-128-CBC decrypt) with the split
# on (default split_min) and off (split_min above 1 MiB), alternated in one process, and prints
# requests/s, GB/s, mean/p50/p99 per request and the split/inline ratios. No timed assertions.
#
# usage: sh bench/scripts/split_load.sh [SECONDS_PER_CIPHER]      (default 6: ~100 s in all)
# env:   ACCELAES_BUILD_DIR (default build), SPLIT_LOAD_LOADS (default "0 1 2 4 speed2"),
#        SPLIT_LOAD_ARGS (more split_load options, e.g. -o for out of place)
# Every background process is killed on exit (also on INT/TERM), and each driver run is bounded by
# timeout(1). The run uses a segment of its own (ACCELAES_SHM_NAME), removed at the end, shared by
# the driver and the openssl speed processes as one user's processes share theirs.
set -u
SECS=${1:-6}
BUILD=${ACCELAES_BUILD_DIR:-build}
LOADS=${SPLIT_LOAD_LOADS:-0 1 2 4 speed2}
DRIVER=$BUILD/bench/split_load
cd "$(dirname "$0")/../.." || exit 1

if [ ! -x "$DRIVER" ] || [ bench/src/split_load.c -nt "$DRIVER" ] || [ "$BUILD/libaccelaes.a" -nt "$DRIVER" ]; then
    make --no-print-directory BUILD="$BUILD" "$DRIVER" >/dev/null || exit 1
fi
[ -f "$BUILD/accelaes.so" ] || { echo "split_load: $BUILD/accelaes.so is not built" >&2; exit 1; }

export OPENSSL_MODULES="$PWD/$BUILD"
export ACCELAES_SHM_NAME="/accelaes-splitload-$$"
unset ACCELAES_SPLIT_MIN
BG=""
cleanup() {
    for p in $BG; do kill "$p" 2>/dev/null; done
    for p in $BG; do wait "$p" 2>/dev/null; done
    BG=""
    rm -f "/dev/shm$ACCELAES_SHM_NAME" "/dev/shm$ACCELAES_SHM_NAME".* 2>/dev/null
}
trap 'cleanup' EXIT
trap 'cleanup; exit 130' INT TERM

start_load() {   # $1: number of busy loops, or speedN
    case "$1" in
    speed*)
        n=${1#speed}
        i=0
        while [ "$i" -lt "$n" ]; do
            # -seconds bounds it even if the trap never runs; it is killed after its phase anyway.
            timeout 300 openssl speed -provider accelaes -elapsed -seconds 200 -bytes 1048576 \
                -evp aes-128-ctr >/dev/null 2>&1 &
            BG="$BG $!"
            i=$((i + 1))
        done ;;
    *)
        i=0
        while [ "$i" -lt "$1" ]; do
            timeout 300 sh -c 'while :; do :; done' &
            BG="$BG $!"
            i=$((i + 1))
        done ;;
    esac
}

echo "# split_load: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), $(uname -r)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- scheduler provider 2>/dev/null || echo ' + uncommitted changes'), $(openssl version), ${SECS} s per cipher, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for load in $LOADS; do
    start_load "$load"
    sleep 0.5
    # shellcheck disable=SC2086
    timeout $((SECS * 3 * 2 + 30)) "$DRIVER" -t "$SECS" -l "load=$load" ${SPLIT_LOAD_ARGS:-}
    rc=$?
    cleanup
    [ "$rc" -eq 0 ] || echo "# load=$load: split_load exited $rc"
    sleep 0.3
done
