#!/bin/sh
# bench/scripts/ccm_speed.sh [CIPHER] [ROUNDS]: `openssl speed -aead` (a key, a nonce, the length, 13 bytes of AAD,
# the data and the tag per record, as TLS does) for accelaes against the running release's default provider,
# alternated round by round in one run; prints each size's best figure of each and their ratio (>1: accelaes
# faster). accelaes is fetched with -propquery provider=accelaes, so the figures are its own; ACCELAES_MODULES=DIR
# measures another build of the module (a before/after). Wall clock: run it
# on a quiet machine. CIPHER: aes-128-ccm (default), aes-256-ccm, aes-128-gcm...; ROUNDS: 3.
set -eu
cd "$(dirname "$0")/../.."
cipher=${1:-aes-128-ccm}
rounds=${2:-3}
mods=${ACCELAES_MODULES:-$PWD/build}   # another build of the module to measure (a before/after)
[ -n "${ACCELAES_MODULES:-}" ] || [ -f build/accelaes.so ] || make -s all
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# the machine-readable line: +F:<n>:<name>:<bytes/s for each size...>
speed() {
  OPENSSL_MODULES=$mods openssl speed -mr -seconds 1 "$@" -aead -evp "$cipher" 2>/dev/null | grep '^+F:' | cut -d: -f4-
}
i=0
while [ $i -lt "$rounds" ]; do
  speed -provider default >> "$out/default"
  speed -provider accelaes -provider default -propquery provider=accelaes >> "$out/accelaes"
  i=$((i + 1))
done
sizes=$(OPENSSL_MODULES=$PWD/build openssl speed -mr -seconds 1 -provider default -aead -evp "$cipher" 2>/dev/null |
  grep '^+H:' | cut -d: -f2- | tr ':' ' ')
echo "$(openssl version | cut -d' ' -f2) $cipher, openssl speed -aead, best of $rounds alternated rounds (MB/s)"
awk -F: -v sizes="$sizes" '
  FNR == 1 { f++ }
  { for (i = 1; i <= NF; i++) if ($i + 0 > best[f, i]) best[f, i] = $i + 0; n = NF }
  END {
    split(sizes, sz, " ")
    printf "| bytes | default | accelaes | ratio |\n| ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++)
      printf "| %s | %.1f | %.1f | %.2f |\n", (sz[i] != "" ? sz[i] : i), best[2, i] / 1e6, best[1, i] / 1e6,
        best[1, i] / best[2, i]
  }' "$out/accelaes" "$out/default"
