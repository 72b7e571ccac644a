#!/bin/sh
# bench/scripts/multiblock.sh: the stitched ciphers' TLS1_1_MULTIBLOCK write, accelaes against OpenSSL's
# default provider, with `openssl speed -mb` (4 or 8 records per call, 8 KiB to 128 KiB per call),
# the two alternated ROUNDS times in one run; prints each median and the ratio accelaes/default.
# Usage: sh bench/scripts/multiblock.sh [ROUNDS] (OPENSSL_MODULES: the build dir, default build/).
set -eu
ROUNDS=${1:-3}
export OPENSSL_MODULES="${OPENSSL_MODULES:-$(pwd)/build}"
unset OPENSSL_CONF
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for c in aes-128-cbc-hmac-sha1 aes-256-cbc-hmac-sha1 aes-128-cbc-hmac-sha256 aes-256-cbc-hmac-sha256; do
    for p in default accelaes; do
      openssl speed -elapsed -seconds 1 -provider "$p" -provider default -propquery "provider=$p" \
        -mb -evp "$c" 2>/dev/null | tail -1 | sed "s/^[^ ]* */$c $p /" >> "$out/runs"
    done
  done
done
python3 - "$out/runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[1]), []).append([float(x.rstrip("k")) / 1e6 for x in f[2:]])
sizes = ["8 KiB", "16 KiB", "32 KiB", "64 KiB", "128 KiB"]
print("| cipher (GB/s, median) | provider | " + " | ".join(sizes) + " |")
print("| --- | --- |" + " ---: |" * len(sizes))
for c in sorted({k[0] for k in rows}):
    med = {p: [statistics.median(col) for col in zip(*rows[(c, p)])] for p in ("default", "accelaes")}
    for p in ("default", "accelaes"):
        print(f"| {c} | {p} | " + " | ".join(f"{v:.2f}" for v in med[p]) + " |")
    print(f"| {c} | ratio | " + " | ".join(f"**{a / d:.2f}**" for a, d in zip(med["accelaes"], med["default"])) + " |")
PY
