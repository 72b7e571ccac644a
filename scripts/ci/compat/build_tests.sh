#!/usr/bin/env bash
# scripts/ci/compat/build_tests.sh OPENSSL_SRC OUT: OpenSSL's evp_test and ssl_test, compiled from the
# Debian source tree OPENSSL_SRC and linked against the INSTALLED libcrypto.so.3 and libssl.so.3
# (libssl-dev), so the installed library is the one under test and accelaes.so (which links the
# system libcrypto) loads into them. Nothing of the source tree's own libraries is built: no
# Configure, no libcrypto, about 25 files in ~20 s.
#
# Why this works: the test programs and libtestutil (test/testutil/*.c, apps/lib/opt.c) call only
# exported functions. They include a few internal headers (internal/nelem.h, internal/numbers.h,
# crypto/evp.h, ssl/ssl_local.h, internal/sockets.h), which are taken from the source tree; the
# public <openssl/*.h> come from /usr/include (the installed version), because only include/internal
# and include/crypto of the tree are put on the include path. The internal headers are used for
# macros and declarations only: handshake.c includes ssl_local.h but reads no SSL field, and
# evp_test.c's one struct access (evp_pkey_is_provided, EVP_PKEY->keymgmt) is in the key
# generation stanzas, which the cipher and DRBG files here do not have. A missing internal symbol
# would fail the link below, not go unnoticed.
#
# evp_test.c is compiled from a copy patched by compat.py patch-evp-test (one outcome line per
# stanza, nothing else changed). libtestutil is an archive, so its fake_random.c (which needs
# libcrypto internals) is compiled but never linked into these two programs.
set -u -o pipefail
SRC=$1 OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${COMPAT_PYTHON:-/usr/bin/python3}
CC=${CC:-gcc}
mkdir -p "$OUT/inc" "$OUT/obj"
OUT=$(cd "$OUT" && pwd)
log="$OUT/build.log"
: >"$log"
ln -sfn "$SRC/include/internal" "$OUT/inc/internal"
ln -sfn "$SRC/include/crypto" "$OUT/inc/crypto"
"$PY" "$HERE/compat.py" patch-evp-test "$SRC/test/evp_test.c" "$OUT/evp_test_compat.c" || exit 1

CFLAGS="-O2 -g -pthread -Wall -Wno-deprecated-declarations -I$OUT/inc -I$SRC/apps/include -I$SRC -I$SRC/test"
TESTUTIL=$(ls "$SRC"/test/testutil/*.c)
SRCS="$TESTUTIL $SRC/apps/lib/opt.c $OUT/evp_test_compat.c $SRC/test/ssl_test.c
      $SRC/test/helpers/ssl_test_ctx.c $SRC/test/helpers/handshake.c"
# SRP is built in Debian's libssl (ssl_test's SRP callbacks live in handshake_srp.c)
[ -f "$SRC/test/helpers/handshake_srp.c" ] && SRCS="$SRCS $SRC/test/helpers/handshake_srp.c"

obj() { echo "$OUT/obj/$(basename "${1%.c}").o"; }
export CC CFLAGS OUT log
# shellcheck disable=SC2086,SC2016
printf '%s\n' $SRCS | timeout 600 xargs -P "$(nproc)" -I{} sh -c \
  'b=$(basename "$1" .c); $CC $CFLAGS -c -o "$OUT/obj/$b.o" "$1" >"$log.$b" 2>&1 || { echo "compat: compiling $1 failed:" >&2; cat "$log.$b" >&2; exit 1; }' sh {} \
  || { echo "compat: building evp_test/ssl_test failed" >&2; exit 1; }
cat "$log".* >>"$log" 2>/dev/null; rm -f "$log".*

rm -f "$OUT/libtestutil.a"
# shellcheck disable=SC2046
ar rcs "$OUT/libtestutil.a" $(for f in $TESTUTIL "$SRC/apps/lib/opt.c"; do obj "$f"; done) || exit 1
timeout 300 $CC -pthread -o "$OUT/evp_test" "$(obj "$OUT/evp_test_compat.c")" "$OUT/libtestutil.a" -lcrypto >>"$log" 2>&1 \
  || { echo "compat: linking evp_test against the installed libcrypto failed:" >&2; tail -20 "$log" >&2; exit 1; }
SSL_OBJS="$(obj "$SRC/test/ssl_test.c") $(obj "$SRC/test/helpers/ssl_test_ctx.c") $(obj "$SRC/test/helpers/handshake.c")"
[ -f "$SRC/test/helpers/handshake_srp.c" ] && SSL_OBJS="$SSL_OBJS $(obj "$SRC/test/helpers/handshake_srp.c")"
# shellcheck disable=SC2086
timeout 300 $CC -pthread -o "$OUT/ssl_test" $SSL_OBJS "$OUT/libtestutil.a" -lssl -lcrypto >>"$log" 2>&1 \
  || { echo "compat: linking ssl_test against the installed libssl/libcrypto failed:" >&2; tail -20 "$log" >&2; exit 1; }
for p in evp_test ssl_test; do
  lib=$(ldd "$OUT/$p" | awk '/libcrypto\.so/{print $3}')
  echo "compat: built $OUT/$p (libcrypto: $lib)"
done
