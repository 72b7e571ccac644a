#!/bin/sh
# scripts/ci/sanitize.sh asan|tsan [pytest args]: builds everything with a sanitizer into build/<kind> and runs
# the suite against it; `make test-asan` and `make test-tsan` call it. Exit status 0 only when the
# tests pass and no sanitizer report points into this project's code.
#
# asan: -fsanitize=address,undefined, UB fatal. Every C test runs directly with LeakSanitizer on; then
#   the whole pytest suite runs against build/asan. python, bash and the openssl CLI are not
#   instrumented, so libasan is preloaded into every process (LD_PRELOAD) with leak checking off
#   there (they leak by design at exit; leaks of the provider are the C tests' and tests/system/test_valgrind.py's).
# tsan: -fsanitize=thread. python crashes with libtsan preloaded, so the C tests (the pool, the
#   scheduler, batching, the engines and the load generator, from many threads) run directly, then
#   multi-threaded workloads: accelaes-files over many files, and `openssl speed`/`enc` (libtsan
#   preloaded) through the provider.
# Reports go to files (log_path) under build/<kind>/reports, so a report from a child process whose
# failure a test expects is still seen. (UBSan inside the ASan runtime ignores log_path: its reports
# go to stderr, and -fno-sanitize-recover makes the process exit 1, which fails the C test or the
# pytest test that ran it.) Reports whose stack has no frame in this project (e.g. the
# default provider crashing on a NULL output buffer, which tests/conformance/test_errors.py provokes on purpose to
# compare) are listed but not counted.
set -u
kind=${1:-asan}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/../.." || exit 2
CCBASE=${CC:-gcc}
case $kind in
  asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
        rt=$($CCBASE -print-file-name=libasan.so) ;;
  tsan) flags="-fsanitize=thread -fno-omit-frame-pointer"
        rt=$($CCBASE -print-file-name=libtsan.so) ;;
  *) echo "usage: $0 asan|tsan [pytest args]" >&2; exit 2 ;;
esac
BUILD=build/$kind
REPORTS=$PWD/$BUILD/reports
PYTHON=${PYTHON:-python3}
JOBS=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)

# NVCC= : the CUDA plugin is device code that no host sanitizer sees; it is left out of this build.
echo "== building $BUILD with $flags"
make --no-print-directory -j"$JOBS" BUILD="$BUILD" NVCC= CC="$CCBASE $flags" build-only >"$BUILD.log" 2>&1 \
  || { tail -30 "$BUILD.log"; echo "sanitize: build failed (log: $BUILD.log)"; exit 2; }
rm -rf "$REPORTS" && mkdir -p "$REPORTS" && chmod 1777 "$REPORTS"   # tests run tools as nobody too

shm="/accelaes-san-$$"
export ACCELAES_SHM_NAME="$shm" OPENSSL_MODULES="$PWD/$BUILD" ACCELAES_BUILD_DIR="$BUILD" ACCELAES_SANITIZER="$kind"
common="log_path=$REPORTS/$kind:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan"
# fast_unwind_on_malloc=0: libcrypto has no frame pointers, and a leak's stack must reach our code.
export ASAN_OPTIONS="$common:detect_leaks=1:fast_unwind_on_malloc=0"
# die_after_fork=0: the design forks with pool threads alive and starts new ones in the child, which
# TSan supports with that option only. report_thread_leaks=0: a forked child "leaks" every thread of
# its parent (it cannot join them; tests/c/test_engine.c forks while threads hold a key), and pool
# threads are never joined by design (they live as long as the process).
export TSAN_OPTIONS="$common:halt_on_error=0:second_deadlock_stack=1:die_after_fork=0:report_thread_leaks=0"
export TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/tests/tsan.supp"
status=0

echo "== C tests ($BUILD/tests), run directly"
for t in "$BUILD"/tests/test_*; do
  name=$(basename "$t")
  env=
  case $name in
    test_legacy_fetch) env="OPENSSL_CONF=$PWD/conf/accelaes.cnf" ;;   # it needs the configuration
    # pytest runs it (twice) for asan; OpenSSL 3.0 leaks on its own allocation-failure paths, so
    # LeakSanitizer is no judge there: the test counts the blocks accelaes allocates itself.
    test_alloc_fail) [ "$kind" = asan ] && { echo "  $name: run by pytest below"; continue; } ;;
    # a child of tests/system/test_key_residue.py (it waits to be scanned), which pytest runs below
    test_key_residue) echo "  $name: run by pytest below"; continue ;;
  esac
  t0=$(date +%s); out=$(env $env timeout 300 "$t" 2>&1); rc=$?
  last=$(printf '%s\n' "$out" | tail -1)
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    echo "  $name: ${last} ($(($(date +%s) - t0)) s)"
  else
    echo "  $name: FAILED (rc=$rc): $(printf '%s\n' "$out" | tail -3 | tr '\n' ' ')"; status=1
  fi
done

if [ "$kind" = asan ]; then
  echo "== pytest tests/ against $BUILD (libasan preloaded into python and every child)"
  # LeakSanitizer dies in a setuid process (it cannot ptrace its own threads there), whatever
  # ASAN_OPTIONS says: the setuid test of tests/system/test_faults.py is left to the plain suite.
  # In SAN_JOBS pytest-xdist workers, as make check runs (machine_wide tests still run alone): one process
  # took 15 of CI's 90 minutes.
  par=$(sh scripts/dev/pytest-jobs.sh "$PYTHON" "${SAN_JOBS:-4}")
  ASAN_OPTIONS="$common:detect_leaks=0" LD_PRELOAD="$rt" $PYTHON -m pytest -q -ra -p no:cacheprovider --durations=10 $par \
    --deselect tests/system/test_faults.py::test_setuid_program_ignores_environment tests/ "$@" \
    || status=1
else
  echo "== workloads under TSan"
  d=$(mktemp -d)
  mkdir "$d/in"
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do head -c $((i * 200000 + i)) /dev/urandom >"$d/in/f$i"; done
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 >"$d/key")   # accelaes-files refuses a key others may read
  for c in aes-256-ctr aes-256-cbc; do
    if "$BUILD/accelaes-files" encrypt --cipher "$c" --key-file "$d/key" "$d/in" "$d/enc" --threads 4 --quiet \
       && "$BUILD/accelaes-files" decrypt --cipher "$c" --key-file "$d/key" "$d/enc" "$d/dec" --threads 4 --quiet \
       && diff -r "$d/in" "$d/dec" >/dev/null; then
      echo "  accelaes-files $c, 12 files, 4 threads: round trip ok"
    else
      echo "  accelaes-files $c: FAILED"; status=1
    fi
    rm -rf "$d/enc" "$d/dec"
  done
  # The CLI is not instrumented: libtsan is preloaded so that the provider it loads can run.
  for c in aes-128-ctr aes-256-cbc aes-192-ecb; do
    if LD_PRELOAD="$rt" openssl speed -provider accelaes -evp "$c" -seconds 1 -bytes 1048576 >/dev/null 2>&1 \
       && LD_PRELOAD="$rt" openssl speed -provider accelaes -evp "$c" -seconds 1 -bytes 16384 -async_jobs 8 >/dev/null 2>&1; then
      echo "  openssl speed -provider accelaes -evp $c (1 MiB; 16 KiB with -async_jobs 8): ok"
    else
      echo "  openssl speed $c: FAILED"; status=1
    fi
  done
  rm -rf "$d"
fi
rm -f "/dev/shm$shm"*

# Reports: counted when a frame is in this project's code, listed otherwise. Those outside it are the
# crashes tests provoke on purpose in other code (the default provider's SEGV on a NULL output buffer,
# tests/conformance/test_errors.py): listed in $REPORTS/outside.txt, one console line for all of them.
ours=0; theirs=0
outside="$REPORTS/outside.txt"
: >"$outside"
for f in "$REPORTS"/*; do
  [ -f "$f" ] && [ "$f" != "$outside" ] || continue
  grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer" "$f" || continue
  first=$(grep -m1 "ERROR:\|runtime error:\|WARNING: ThreadSanitizer" "$f")
  if grep -Eq '(^| )(provider|accel|scheduler|tools|tests/c|tests/fake_gpu_plugin)[/.][^ ]*:[0-9]+|build/(asan|tsan)/' "$f"; then
    ours=$((ours + 1)); echo "FINDING ($f): $first"; sed -n '1,40p' "$f" | grep -E "^ *#|SUMMARY" | head -25
  else
    theirs=$((theirs + 1)); echo "$f: $first" >>"$outside"
  fi
done
if [ $theirs -gt 0 ]; then
  kinds=$(sed 's/.*ERROR: [A-Za-z]*Sanitizer: \([A-Za-z-]*\).*/\1/; s/.*runtime error:.*/ubsan/; s/.*WARNING: ThreadSanitizer: \([a-z -]*\).*/\1/' \
          "$outside" | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
  echo "  $theirs report(s) with no frame in this project ($kinds; expected: tests provoke them in other code): $outside"
fi
[ $ours -eq 0 ] || status=1
echo "sanitize $kind: $ours report(s) in this project's code, $theirs outside it; $(($(date +%s) - start)) s; status $status"
exit $status
