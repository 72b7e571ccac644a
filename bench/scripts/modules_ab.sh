#!/bin/sh
# bench/scripts/modules_ab.sh DIR_A DIR_B [ROUNDS]: two builds of the module (OPENSSL_MODULES=DIR_A, DIR_B:
# each holds an accelaes.so), alternated round by round in thread CPU time (build/bench/evp_records, which
# also runs the default provider in the same process), for the ciphers `make speed` measures. Prints per
# cipher and size the minimum accelaes ns of each build, B/A (below 1: B is faster), and each build's ratio to
# the default provider measured beside it. Made for "behaviour and speed unchanged" across a refactor.
# Environment: SIZES ("16 64 256 1024 8192 16384").
set -eu
A=$1 B=$2 ROUNDS=${3:-7}
SIZES=${SIZES:-"16 64 256 1024 8192 16384"}
TESTS="AES-128-CTR:enc AES-128-CBC:enc AES-128-CBC:dec AES-128-ECB:enc AES-128-GCM:enc AES-128-GCM:dec AES-128-XTS:enc AES-128-XTS:dec"
BIN=${BIN:-build/bench/evp_records}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
r=0
while [ $r -lt "$ROUNDS" ]; do
  for t in $TESTS; do
    for side in A B; do
      eval dir=\$$side
      # shellcheck disable=SC2086
      OPENSSL_MODULES=$dir "$BIN" "${t%:*}" "${t#*:}" 1 $SIZES | awk -v t="$t" -v s="$side" 'NR > 2 { print t, s, $1, $2, $3 }' >> "$tmp/raw"
    done
  done
  r=$((r + 1))
done
echo "| cipher | op | bytes | A ns | B ns | B/A | A vs default | B vs default |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
awk '{ k = $1 " " $3; i = k " " $2
       if (!(i in acc) || $5 < acc[i]) acc[i] = $5
       if (!(i in def) || $4 < def[i]) def[i] = $4
       if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
     END { for (j = 1; j <= n; j++) { split(order[j], f, " "); split(f[1], c, ":"); a = acc[order[j] " A"]; b = acc[order[j] " B"]
           printf "| %s | %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f |\n", c[1], c[2], f[2], a, b, b / a,
                  def[order[j] " A"] / a, def[order[j] " B"] / b } }' "$tmp/raw"
