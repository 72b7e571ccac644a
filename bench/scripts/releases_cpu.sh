#!/bin/sh
# bench/scripts/releases_cpu.sh [RELEASE...]: accelaes against the running release's own default provider in thread CPU
# time (bench/evp_records: both providers in one process, taking turns, the minimum of ROUNDS), for every cipher
# `make speed` measures, on this host (bookworm) and inside the release roots of scripts/ci/release-root.sh. CPU time is
# what a shared, noisy machine disturbs least; `make speed` (wall clock) is the user-facing figure beside it.
# Prints one markdown table row per release, cipher and direction: ratio = default ns / accelaes ns (>1: faster).
# Environment: ROUNDS (21), SIZES ("16 64 256 1024 8192 16384").
set -eu
ROUNDS=${ROUNDS:-21}
SIZES=${SIZES:-"16 64 256 1024 8192 16384"}
TESTS="AES-128-CTR:enc AES-128-CBC:enc AES-128-CBC:dec AES-128-ECB:enc AES-128-GCM:enc AES-128-GCM:dec
AES-256-GCM:enc AES-128-XTS:enc AES-128-XTS:dec AES-256-XTS:enc"
[ $# -gt 0 ] || set -- bookworm trixie forky sid-exp

# rows RELEASE: runs in the checkout it is given (the host's or the root's /src/accelaes)
rows() {
  v=$(openssl version | cut -d' ' -f2)
  for t in $TESTS; do
    c=${t%:*} d=${t#*:}
    # shellcheck disable=SC2086
    OPENSSL_MODULES=$PWD/build build/bench/evp_records "$c" "$d" "$ROUNDS" $SIZES |
      awk -v r="$1 $v $c" -v d="$d" 'NR > 2 { row = row sprintf(" %s |", $4) } END { print "| " r " | " d " |" row }'
  done
}

if [ "$1" = --rows ]; then   # inside a root: its rows alone
  rows "$2"
  exit 0
fi
printf '| release, cipher | op |'; for s in $SIZES; do printf ' %s |' "$s"; done; echo
printf '| --- | --- |'; for s in $SIZES; do printf ' ---: |'; done; echo
for rel in "$@"; do
  if [ "$rel" = bookworm ]; then
    make -s all build/bench/evp_records >/dev/null
    rows "$rel"
  else
    scripts/ci/release-root.sh "$rel" sh -c "make -s all build/bench/evp_records >/dev/null &&
      ROUNDS=$ROUNDS SIZES='$SIZES' sh bench/scripts/releases_cpu.sh --rows $rel"
  fi
done
