#!/bin/sh
# fuzz/run.sh: builds and runs the differential fuzzer (fuzz/README.md).
#   sh fuzz/run.sh build             clang + libFuzzer + ASan + UBSan build: build/fuzz/fuzz_diff
#   sh fuzz/run.sh fuzz [SECONDS]    a long run (default 600 s) growing build/fuzz/corpus
#   sh fuzz/run.sh smoke [SECONDS]   the committed corpus replayed, then SECONDS (default 60) of fuzzing
#   sh fuzz/run.sh replay [INPUT..]  no clang needed: cc (+ASan/UBSan where they link) build of the
#                                    target with a plain main(), replaying fuzz/corpus or the inputs
#   sh fuzz/run.sh replay-build      only that build: build/fuzz/fuzz_replay
# Run from anywhere; everything is built under build/fuzz/. FUZZ_JOBS=N runs N fuzzing processes.
set -e
cd "$(dirname "$0")/.."
B=build/fuzz
CORE_SRC=$(ls provider/*/*.c accel/cpu/*.c scheduler/*.c)
HARNESS="fuzz/fuzz_diff.c fuzz/fuzz_data.c fuzz/fuzz_side.c fuzz/fuzz_params.c fuzz/fuzz_aead.c"
HEADERS=$(ls */*.h accel/*/*.h provider/*/*.h fuzz/*.h 2>/dev/null)
DEFS="-I. -DHAVE_IPSECMB=1 -DHAVE_NUMA=1"
LIBS="-lcrypto -lpthread -ldl"
# as the Makefile decides: the header present, unless HAVE_IPSECMB / HAVE_NUMA say otherwise (`make
# HAVE_IPSECMB=0 fuzz` passes its command-line value down in the environment); anything but 1 is "without"
[ -f /usr/include/intel-ipsec-mb.h ] && : "${HAVE_IPSECMB=1}"
[ -f /usr/include/numa.h ] && : "${HAVE_NUMA=1}"
[ "${HAVE_IPSECMB:-}" = 1 ] && LIBS="$LIBS -lIPSec_MB" || DEFS=$(echo "$DEFS" | sed 's/-DHAVE_IPSECMB=1//')
[ "${HAVE_NUMA:-}" = 1 ] && LIBS="$LIBS -lnuma" || DEFS=$(echo "$DEFS" | sed 's/-DHAVE_NUMA=1//')
COMMON="-g -O1 -fPIC -std=gnu11 -pthread -fno-omit-frame-pointer -fno-strict-aliasing -Wall -Wextra $DEFS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# stale OBJ SRC: true when OBJ must be built again: missing, older than SRC, or older than a header it
# included (its .d file beside it, written by the compiler's -MMD; without one, older than any header here).
stale() {
    [ -f "$1" ] && [ ! "$2" -nt "$1" ] || return 0
    if [ -f "${1%.o}.d" ]; then
        deps=$(sed -e 's/^[^:]*://' -e 's/\\$//' "${1%.o}.d")
    else
        deps=$HEADERS
    fi
    for h in $deps; do
        [ "$h" -nt "$1" ] && return 0
    done
    return 1
}

# compile CC OBJDIR FLAGS SOURCES...: an object per source, rebuilt when stale (after a header change,
# only the sources that include it: a whole sanitizer build of the kernels takes minutes here).
compile() {
    cc=$1 dir=$2 flags="$3 -MMD"
    shift 3
    mkdir -p "$dir"
    todo=""
    for src in "$@"; do
        obj="$dir/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
        if stale "$obj" "$src"; then
            todo="$todo $src"
        fi
    done
    [ -z "$todo" ] && return 0
    echo "fuzz: $cc: compiling$todo" >&2
    pids="" n=0 jobs=$(nproc)
    for src in $todo; do
        obj="$dir/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
        # shellcheck disable=SC2086
        $cc $flags -c -o "$obj" "$src" &
        pids="$pids $!"
        n=$((n + 1))
        if [ $n -ge "$jobs" ]; then
            for p in $pids; do wait "$p" || return 1; done
            pids="" n=0
        fi
    done
    for p in $pids; do wait "$p" || return 1; done
}

objs() {
    dir=$1
    shift
    for src in "$@"; do printf '%s ' "$dir/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"; done
}

have_libfuzzer() {
    command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || return 1
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' \
        > "$B/probe.c"
    "${FUZZ_CC:-clang}" -fsanitize=fuzzer,address,undefined -o "$B/probe" "$B/probe.c" >/dev/null 2>&1
}

# The fake GPU plugin (gcc build of tests/fake_gpu_plugin.c) backs accelaes instance 2.
fake_gpu() {
    [ -f tests/fake_gpu_plugin.c ] && make -s build/accelaes-fakegpu.so >/dev/null || true
}

NO_LIBFUZZER="${FUZZ_CC:-clang} with libFuzzer is not installed (Debian: apt-get install clang libclang-rt-dev, or sh scripts/dev/install-deps.sh test)"

build() {
    mkdir -p "$B"
    if ! have_libfuzzer; then
        echo "fuzz: $NO_LIBFUZZER" >&2
        return 1
    fi
    cc=${FUZZ_CC:-clang}
    san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    # (explicit returns: set -e does not apply inside a function called from an if)
    # shellcheck disable=SC2086
    compile "$cc" "$B/obj" "$COMMON -fvisibility=hidden -Wno-unknown-attributes -fsanitize=fuzzer-no-link $san" \
        $CORE_SRC || return 1
    # shellcheck disable=SC2086
    compile "$cc" "$B/obj" "$COMMON -Werror=missing-prototypes -fsanitize=fuzzer-no-link $san" $HARNESS || return 1
    # shellcheck disable=SC2086
    $cc -fsanitize=fuzzer $san -o "$B/fuzz_diff" $(objs "$B/obj" $HARNESS $CORE_SRC) $LIBS || return 1
    fake_gpu
}

replay_build() {
    mkdir -p "$B"
    cc=${REPLAY_CC:-cc}
    san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    printf 'int main(void) { return 0; }\n' > "$B/probe.c"
    $cc $san -o "$B/probe" "$B/probe.c" >/dev/null 2>&1 || san=""
    # shellcheck disable=SC2086
    compile "$cc" "$B/replay-obj" "$COMMON -fvisibility=hidden $san" $CORE_SRC || return 1
    # shellcheck disable=SC2086
    compile "$cc" "$B/replay-obj" "$COMMON -Werror=missing-prototypes $san" $HARNESS fuzz/replay_main.c || return 1
    # shellcheck disable=SC2086
    $cc $san -o "$B/fuzz_replay" $(objs "$B/replay-obj" $HARNESS fuzz/replay_main.c $CORE_SRC) $LIBS || return 1
    fake_gpu
    echo "fuzz: built $B/fuzz_replay (${san:-no sanitizers})" >&2
}

FLAGS="-max_len=8192 -timeout=60 -rss_limit_mb=4096 -print_final_stats=1"

case "${1:-}" in
build)
    build || exit 1
    ;;
fuzz)
    secs=${2:-600}
    build || exit 1
    mkdir -p "$B/corpus" "$B/artifacts"
    # shellcheck disable=SC2086
    exec "$B/fuzz_diff" $FLAGS -max_total_time="$secs" -artifact_prefix="$B/artifacts/" \
        ${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} "$B/corpus" fuzz/corpus
    ;;
smoke)
    secs=${2:-60}
    mkdir -p "$B"
    if ! have_libfuzzer && [ "${FUZZ_REQUIRE:-0}" != 1 ]; then
        echo "SKIP: fuzz-smoke: $NO_LIBFUZZER; tests/conformance/test_fuzz_corpus.py still replays the corpus"
        exit 0
    fi
    build || { echo "fuzz-smoke: FAILED to build the fuzz target"; exit 1; }
    mkdir -p "$B/artifacts"
    # the corpus through each inline engine (chosen once per process, so one run each)
    for eng in "" ACCELAES_NO_VAES=1 ACCELAES_FORCE_EVP_ENGINE=1; do
        # shellcheck disable=SC2086
        if env $eng "$B/fuzz_diff" $FLAGS -runs=0 fuzz/corpus > "$B/smoke-replay.log" 2>&1; then
            engine=$(sed -n 's/.*inline engine: \([a-z0-9]*\).*/\1/p' "$B/smoke-replay.log" | head -1)
            cov=$(sed -n 's/.*DONE .*cov: \([0-9]*\).*/\1/p' "$B/smoke-replay.log" | tail -1)
            echo "fuzz-smoke: fuzz/corpus ($(ls fuzz/corpus | wc -l) inputs) replayed through the ${engine:-?} engine: ok, coverage ${cov:-?} edges"
        else
            tail -60 "$B/smoke-replay.log"
            echo "fuzz-smoke: FAILED replaying the corpus; rerun: env $eng $B/fuzz_diff fuzz/corpus"
            exit 1
        fi
    done
    rm -rf "$B/smoke-corpus"
    mkdir -p "$B/smoke-corpus"
    # libFuzzer's progress lines, final stats and recommended dictionary go to a log (2000 lines a
    # minute); the console gets one summary line, or the log's tail and the artifact on a failure.
    log="$B/smoke-fuzz.log"
    rm -rf "$B/smoke-artifacts" && mkdir -p "$B/smoke-artifacts"
    echo "fuzz-smoke: fuzzing for $secs s (libFuzzer's output: $log)"
    rc=0
    # shellcheck disable=SC2086
    "$B/fuzz_diff" $FLAGS -max_total_time="$secs" -artifact_prefix="$B/smoke-artifacts/" \
        "$B/smoke-corpus" fuzz/corpus > "$log" 2>&1 || rc=$?
    found=$(ls "$B/smoke-artifacts" | wc -l)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    new=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        tail -60 "$log"
        cp "$B"/smoke-artifacts/* "$B/artifacts/" 2>/dev/null || true
        echo "fuzz-smoke: FAILED (exit $rc, $found crash/leak/timeout input(s) in $B/artifacts: $(ls "$B/smoke-artifacts" | tr '\n' ' ')); log: $log"
        exit 1
    fi
    echo "fuzz-smoke: ${runs:-?} runs in $secs s, corpus ${corp:-?} inputs (${new:-?} units added), coverage ${cov:-?} edges / ${ft:-?} features, crashes 0 (log: $log)"
    ;;
replay-build)
    replay_build || exit 1
    ;;
replay)
    shift
    replay_build || exit 1
    if [ $# -eq 0 ]; then set -- fuzz/corpus; fi
    exec "$B/fuzz_replay" "$@"
    ;;
*)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
