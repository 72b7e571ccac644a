#!/usr/bin/env bash
# scripts/ci/compat/run.sh: `make test-compat`. Peer projects' test suites, each run twice:
#   default   OPENSSL_CONF and OPENSSL_MODULES unset: the installed OpenSSL as it comes
#   accelaes  OPENSSL_CONF=conf/accelaes.cnf, OPENSSL_MODULES=a folder of links: accelaes.so from
#             $COMPAT_MODULES (default build/) beside the installed modules (as after make install)
# and every test case (evp_test stanza, ssl_test test, pytest test and subtest) must end the same
# way in both. The suites:
#   - OpenSSL's evp_test on test/recipes/30-test_evp_data/evpciph_aes_*.txt (each file that the
#     source has; evpciph_aes_stitched.txt among them) and evprand.txt;
#   - OpenSSL's ssl_test on test/ssl-tests/*.cnf (exclusions below, each with its reason);
#   - pyca/cryptography's tests for AES, padding, CMAC and Fernet against Debian's
#     python3-cryptography and python3-cryptography-vectors.
# Sources: the Debian source packages of the installed versions (scripts/ci/compat/sources.sh); the two
# OpenSSL programs are compiled against the installed libraries (scripts/ci/compat/build_tests.sh).
# accelaes-stat must show accelaes bytes for the evpciph_aes_common.txt and pyca runs with
# accelaes, and none for any default run. Output: one line per suite,
#   compat: <suite>: default N pass M fail / accelaes N pass M fail: SAME|DIFFERENT
# and the differing cases. Exit status 0 only if every suite ran and is SAME and the counters
# agree. Logs, sources and binaries: $COMPAT_DIR (default build/compat).
set -u -o pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$REPO" || exit 1
HERE="$REPO/scripts/ci/compat"
MODULES=$(cd "${COMPAT_MODULES:-build}" 2>/dev/null && pwd) || { echo "compat: build dir ${COMPAT_MODULES:-build} does not exist (make build-only)" >&2; exit 1; }
COMPAT_DIR=${COMPAT_DIR:-build/compat}
mkdir -p "$COMPAT_DIR"
COMPAT_DIR=$(cd "$COMPAT_DIR" && pwd)
PY=${COMPAT_PYTHON:-/usr/bin/python3}
CONF="$REPO/conf/accelaes.cnf"
STAT="$MODULES/accelaes-stat"
LOGS="$COMPAT_DIR/logs"
START=$(date +%s)
say() { echo "compat: $*"; }

for f in "$MODULES/accelaes.so" "$STAT" "$PY"; do
  [ -x "$f" ] || [ -f "$f" ] || { say "$f is missing (make BUILD=... build-only; sh scripts/dev/install-deps.sh compat)" >&2; exit 1; }
done
rm -rf "$LOGS" "$COMPAT_DIR"/*.diff "$COMPAT_DIR/summary.txt"
mkdir -p "$LOGS"

# A unit table of this run's own: other processes' accelaes bytes do not enter the before/after
# figures, and the user's real /accelaes.<uid> is not touched. Removed at exit.
export ACCELAES_SHM_NAME="/accelaes-compat-$$"
trap 'rm -f "/dev/shm$ACCELAES_SHM_NAME"' EXIT
# Both runs of every suite see the same environment but for these two variables. ssl_test and
# evp_test shuffle their tests only when OPENSSL_TEST_RAND_ORDER is set.
unset OPENSSL_CONF OPENSSL_MODULES OPENSSL_TEST_RAND_ORDER OPENSSL_ENGINES
# The accelaes runs find accelaes.so beside the installed modules, as after `make install`:
# OPENSSL_MODULES replaces OpenSSL's module directory, so pointing it at the build directory alone
# hides legacy.so, which python3-cryptography loads at import (it then fails to import at all,
# with or without accelaes: docs/transparent-offload.md says so).
MODDIR="$COMPAT_DIR/modules"
rm -rf "$MODDIR"; mkdir -p "$MODDIR"
SYSMOD=$(openssl version -m | sed 's/.*"\(.*\)"/\1/')
for m in "$SYSMOD"/*.so; do [ -e "$m" ] && ln -s "$m" "$MODDIR/"; done
ln -sf "$MODULES/accelaes.so" "$MODDIR/accelaes.so"
[ -e "$MODULES/accelaes-cuda.so" ] && ln -sf "$MODULES/accelaes-cuda.so" "$MODDIR/accelaes-cuda.so"
run_default() { env -u OPENSSL_CONF -u OPENSSL_MODULES "$@"; }
run_accelaes() { env OPENSSL_CONF="$CONF" OPENSSL_MODULES="$MODDIR" "$@"; }

stat_total() { "$PY" "$HERE/compat.py" stat-total "$STAT" 2>>"$LOGS/stat.err" || echo "?"; }

FAILED=0
SUITES=0
SAME=0
declare -a PROBLEMS=()
problem() { PROBLEMS+=("$1"); FAILED=1; }

# ---- sources and binaries -------------------------------------------------------------------------
say "provider: $MODULES/accelaes.so (linked into $MODDIR beside $SYSMOD/*.so); configuration: $CONF; logs: $COMPAT_DIR"
timeout 1200 bash "$HERE/sources.sh" "$COMPAT_DIR/src" || { say "could not fetch the source packages" >&2; exit 1; }
# shellcheck disable=SC1091
. "$COMPAT_DIR/src/sources.env"
t0=$(date +%s)
timeout 900 bash "$HERE/build_tests.sh" "$OPENSSL_SRC" "$COMPAT_DIR/bin" || { say "could not build evp_test/ssl_test" >&2; exit 1; }
say "evp_test and ssl_test built in $(( $(date +%s) - t0 )) s"
PYCA_INSTALLED=$(dpkg-query -W -f='${Version}' python3-cryptography)
VECTORS_INSTALLED=$(dpkg-query -W -f='${Version}' python3-cryptography-vectors 2>/dev/null || echo none)
if [ "$PYCA_INSTALLED" = "$PYCA_SRC_VERSION" ]; then
  say "python3-cryptography $PYCA_INSTALLED matches its source $PYCA_SRC_VERSION (vectors: python3-cryptography-vectors $VECTORS_INSTALLED)"
else
  say "NOTE: python3-cryptography $PYCA_INSTALLED does NOT match the source $PYCA_SRC_VERSION used for its tests (vectors: $VECTORS_INSTALLED)"
fi
if [ "$OPENSSL_SRC_VERSION" != "$OPENSSL_INSTALLED_VERSION" ]; then
  say "NOTE: OpenSSL's tests come from $OPENSSL_SRC_VERSION; the installed library is $OPENSSL_INSTALLED_VERSION ($(openssl version))"
fi

# run_one MODE ID TIMEOUT CMD...: one run (MODE default or accelaes) of CMD, its output appended to
# $LOGS/ID.MODE.log; evp_test (COMPAT_STANZA_LOG) and the pytest plugin (COMPAT_PYTEST_OUTCOMES)
# write their per-case outcomes to $LOGS/ID.MODE.raw. Sets RC[MODE] (exit status) and BYTES[MODE]
# (accelaes-stat's total before and after, all paths: bytes accelaes did during the run).
declare -A RC
run_one() {
  local mode=$1 id=$2 tmo=$3; shift 3
  local raw="$LOGS/$id.$mode.raw" log="$LOGS/$id.$mode.log"
  rm -f "$raw"
  local before after rc
  before=$(stat_total)
  "run_$mode" env COMPAT_STANZA_LOG="$raw" COMPAT_PYTEST_OUTCOMES="$raw" timeout "$tmo" "$@" >>"$log" 2>&1
  rc=$?
  after=$(stat_total)
  RC[$mode]=$rc
  if [ "$before" = "?" ] || [ "$after" = "?" ]; then BYTES[$mode]="?"; else BYTES[$mode]=$((after - before)); fi
}
declare -A BYTES

# compare ID SUITE NEED_BYTES NORMAL_RCS: the verdict line and the accelaes-stat figures.
# NEED_BYTES 1: the accelaes run must show accelaes bytes; 0: they are printed only (the counters
# for the stitched ciphers, which ssl_test uses too, are still being added; OCB, SIV and wrap
# are not accelaes ciphers). A default run must show none.
compare() {
  local id=$1 suite=$2 need=$3 normal=$4
  SUITES=$((SUITES + 1))
  "$PY" "$HERE/compat.py" compare "$suite" "$LOGS/$id.default.tsv" "${RC[default]}" \
      "$LOGS/$id.accelaes.tsv" "${RC[accelaes]}" "$COMPAT_DIR/$id.diff" "$normal" \
      "$LOGS/$id.default.log" "$LOGS/$id.accelaes.log" | tee -a "$COMPAT_DIR/summary.txt"
  local v=${PIPESTATUS[0]}
  case $v in
    0) SAME=$((SAME + 1)) ;;
    1) problem "$suite: DIFFERENT" ;;
    *) problem "$suite: could not run" ;;
  esac
  local b=${BYTES[accelaes]} d=${BYTES[default]}
  local line="  accelaes-stat: accelaes run +$b bytes through accelaes, default run +$d"
  if [ "$d" != 0 ]; then
    line="$line: FAIL (the default run must not use accelaes)"; problem "$suite: default run used accelaes ($d bytes)"
  fi
  if [ "$need" = 1 ]; then
    if [ "$b" = "?" ] || [ "$b" -le 0 ]; then
      line="$line: FAIL (required > 0: the accelaes run did not go through accelaes)"; problem "$suite: no accelaes bytes in the accelaes run"
    else
      line="$line (required > 0: ok)"
    fi
  else
    line="$line (printed only, not required yet)"
  fi
  echo "$line" | tee -a "$COMPAT_DIR/summary.txt"
}

# ---- OpenSSL evp_test ---------------------------------------------------------------------------
# evp_test runs every stanza in a library context of its own (OSSL_LIB_CTX_new, then
# OSSL_LIB_CTX_load_config of its -config file) and loads the null provider into the default
# context: OPENSSL_CONF configures only that default context, so it alone would leave accelaes
# out. Both runs therefore pass -config, as OpenSSL's own test/recipes/30-test_evp.t does: the
# default run OpenSSL's test/default.cnf (the default provider, exactly what that recipe uses),
# the accelaes run conf/accelaes.cnf (with OPENSSL_CONF and OPENSSL_MODULES set as well).
EVP="$COMPAT_DIR/bin/evp_test"
DATA="$OPENSSL_SRC/test/recipes/30-test_evp_data"
say "evp_test: -config $OPENSSL_SRC/test/default.cnf (default run) / -config $CONF (accelaes run)"
before=$(stat_total)
run_accelaes timeout 300 "$EVP" "$DATA/evpciph_aes_common.txt" >"$LOGS/evp_test-probe-env-only.log" 2>&1
after=$(stat_total)
probe_env=$([ "$before" = "?" ] || [ "$after" = "?" ] && echo "?" || echo $((after - before)))
EVP_FILES=$(cd "$DATA" && ls evpciph_aes_*.txt evprand.txt 2>/dev/null)
for f in $EVP_FILES; do
  id="evp_test-${f%.txt}"
  for mode in default accelaes; do
    cnf=$([ $mode = default ] && echo "$OPENSSL_SRC/test/default.cnf" || echo "$CONF")
    run_one $mode "$id" 300 "$EVP" -config "$cnf" "$DATA/$f"
    "$PY" "$HERE/compat.py" results evp "$LOGS/$id.$mode.raw" "$LOGS/$id.$mode.tsv"
  done
  [ "$f" = evpciph_aes_common.txt ] && common_bytes=${BYTES[accelaes]}
  compare "$id" "evp_test $f" "$([ "$f" = evpciph_aes_common.txt ] && echo 1 || echo 0)" 0,1
done
say "evp_test pointing check on evpciph_aes_common.txt: OPENSSL_CONF+OPENSSL_MODULES alone (no -config): +$probe_env bytes through accelaes; with -config $CONF: +${common_bytes:-?} bytes"

# ---- OpenSSL ssl_test ---------------------------------------------------------------------------
# ssl_test is run as 80-test_ssl_new.t runs it for its "none" provider case: `ssl_test FILE.cnf none`,
# which uses the default library context, the one OPENSSL_CONF configures (no -config here). The
# checked-in .cnf files are used as they are (80-test_ssl_new.t regenerates them from the .cnf.in
# for its configuration; they match for a default configuration).
# Excluded by name, only when `openssl list -disabled` shows the library really lacks the feature
# (the same conditions under which 80-test_ssl_new.t skips them):
#   22-compression.cnf           needs zlib (TLS compression); Debian builds no-zlib
#   29-dtls-sctp-label-bug.cnf   needs SCTP (DTLS over SCTP); Debian builds no-sctp
declare -A SSL_EXCLUDE=([22-compression.cnf]=ZLIB [29-dtls-sctp-label-bug.cnf]=SCTP)
DISABLED=$(openssl list -disabled 2>/dev/null | tr '[:lower:]' '[:upper:]')
SSL="$COMPAT_DIR/bin/ssl_test"
id=ssl_test
ssl_files=0
excluded=""
declare -A SSL_BYTES=([default]=0 [accelaes]=0)
declare -A SSL_RC=([default]=0 [accelaes]=0)
for cnf in "$OPENSSL_SRC"/test/ssl-tests/*.cnf; do
  b=$(basename "$cnf")
  feat=${SSL_EXCLUDE[$b]:-}
  if [ -n "$feat" ] && printf '%s\n' "$DISABLED" | grep -qx "$feat"; then
    excluded="$excluded $b(no $feat)"
    continue
  fi
  ssl_files=$((ssl_files + 1))
  for mode in default accelaes; do
    echo "=== $b" >>"$LOGS/$id.$mode.log"
    (cd "$OPENSSL_SRC" && TEST_CERTS_DIR=test/certs CTLOG_FILE=test/ct/log_list.cnf \
      run_one $mode "$id" 300 "$SSL" "$cnf" none
     echo "${RC[$mode]} ${BYTES[$mode]}" >"$LOGS/$id.$mode.last")
    read -r rc bytes <"$LOGS/$id.$mode.last"
    # keep the worst exit status: an abnormal one (crash, timeout) over a plain failure (1)
    if [ "$rc" -gt "${SSL_RC[$mode]}" ]; then SSL_RC[$mode]=$rc; fi
    if [ "$bytes" = "?" ] || [ "${SSL_BYTES[$mode]}" = "?" ]; then SSL_BYTES[$mode]="?"; else SSL_BYTES[$mode]=$((SSL_BYTES[$mode] + bytes)); fi
    # the raw TAP of this file is the log since the "=== FILE" marker
    awk -v m="=== $b" '$0 == m {p = 1; next} /^=== / {p = 0} p' "$LOGS/$id.$mode.log" >"$LOGS/$id.$mode.raw"
    "$PY" "$HERE/compat.py" results ssl "$LOGS/$id.$mode.raw" "$LOGS/$id.$mode.tsv" "$cnf"
  done
done
say "ssl_test: $ssl_files of $(ls "$OPENSSL_SRC"/test/ssl-tests/*.cnf | wc -l) test/ssl-tests/*.cnf files; excluded:${excluded:- none}"
RC[default]=${SSL_RC[default]}; RC[accelaes]=${SSL_RC[accelaes]}
BYTES[default]=${SSL_BYTES[default]}; BYTES[accelaes]=${SSL_BYTES[accelaes]}
compare ssl_test "ssl_test test/ssl-tests" 0 0,1

# ---- pyca/cryptography --------------------------------------------------------------------------
# As Debian's autopkgtest runs them (debian/tests/control: python3 -m pytest tests/ from the source
# tree, against the installed python3-cryptography): its pyproject.toml's pytest options apply.
# Hypothesis draws its examples from a fixed seed, so both runs test the same inputs; its example
# database is removed before each run so the second run does not replay the first's examples.
# Each release's source has its own set of these files (Debian 13's 43.0 has no tests/hypothesis/test_fernet.py):
# the run takes those present, and test_aes.py must be among them.
PYCA_TESTS=""
for t in tests/hazmat/primitives/test_aes.py tests/hazmat/primitives/test_padding.py \
  tests/hazmat/primitives/test_cmac.py tests/test_fernet.py \
  tests/hypothesis/test_fernet.py tests/hypothesis/test_padding.py; do
  if [ -f "$PYCA_SRC/$t" ]; then PYCA_TESTS="$PYCA_TESTS $t"; else say "pyca: $t is not in $PYCA_SRC_VERSION: not run"; fi
done
[ -f "$PYCA_SRC/tests/hazmat/primitives/test_aes.py" ] || problem "pyca: tests/hazmat/primitives/test_aes.py missing in $PYCA_SRC"
pyca_run() {  # ID SUITE
  local id=$1 suite=$2 mode
  for mode in default accelaes; do
    rm -rf "$PYCA_SRC/.hypothesis"
    # shellcheck disable=SC2086
    (cd "$PYCA_SRC" && PYTHONPATH="$HERE" PYTHONDONTWRITEBYTECODE=1 \
      run_one $mode "$id" 600 "$PY" -m pytest -p pytest_outcomes -p no:cacheprovider \
        --hypothesis-seed=0 -rfEs $PYCA_TESTS
     echo "${RC[$mode]} ${BYTES[$mode]}" >"$LOGS/$id.$mode.last")
    read -r RC[$mode] BYTES[$mode] <"$LOGS/$id.$mode.last"
    "$PY" "$HERE/compat.py" results pytest "$LOGS/$id.$mode.raw" "$LOGS/$id.$mode.tsv"
  done
  compare "$id" "$suite" 1 0,1
}
pyca_run pyca "pyca/cryptography $PYCA_SRC_VERSION (AES, padding, CMAC, Fernet)"

# ---- verdict ------------------------------------------------------------------------------------
say "$SUITES suites, $SAME SAME; $(( $(date +%s) - START )) s; logs and per-suite .diff files in $COMPAT_DIR"
if [ "$FAILED" != 0 ]; then
  say "FAILED:"
  for p in "${PROBLEMS[@]}"; do echo "  $p"; done
  exit 1
fi
say "all suites SAME"
