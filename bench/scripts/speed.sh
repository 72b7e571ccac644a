#!/bin/sh
# bench/scripts/speed.sh: `make speed`. `openssl speed` with OpenSSL's default provider and with accelaes, side by
# side, alternated over several rounds because the machine is shared and noisy; prints medians and a ratio.
#
# Environment: SPEED_PROVIDER (default accelaes; `default` proves the script on both sides), SPEED_TESTS
# (cipher:dir pairs, replacing the list below; e.g. "aes-256-gcm:enc aes-256-xts:dec"),
# SPEED_ROUNDS (3), SPEED_SECONDS (1), OPENSSL (openssl), SPEED_OUT (build/results/speed-latest.md: under
# build/, so that running it leaves the checkout clean; `make bench-publish` copies it to bench/results/).
set -u
OPENSSL=${OPENSSL:-openssl}
PROV=${SPEED_PROVIDER:-accelaes}
ROUNDS=${SPEED_ROUNDS:-3}
SECS=${SPEED_SECONDS:-1}
OUT=${SPEED_OUT:-build/results/speed-latest.md}
mkdir -p "$(dirname "$OUT")"
OPENSSL_MODULES=$(pwd)/build
export OPENSSL_MODULES

# cipher and direction; `dec` adds -decrypt (ECB/CTR decrypt is the same work as encrypt; CBC, GCM and XTS differ).
TESTS=${SPEED_TESTS:-"aes-128-ctr:enc aes-128-cbc:enc aes-128-cbc:dec aes-128-ecb:enc aes-128-gcm:enc aes-128-gcm:dec aes-128-xts:enc aes-128-xts:dec"}
# "" = speed's default sizes (16 B .. 16 KiB), then one 1 MiB buffer.
SIZESETS="default 1048576"

if [ "$PROV" = accelaes ] && [ ! -f build/accelaes.so ]; then
    echo "speed.sh: build/accelaes.so is missing (run make); SPEED_PROVIDER=default measures default twice" >&2
    exit 1
fi
# A provider that fails to load would make every accelaes run fail; say so once, clearly.
if ! "$OPENSSL" list -provider "$PROV" -providers >/dev/null 2>&1; then
    echo "speed.sh: openssl cannot load provider '$PROV' from $OPENSSL_MODULES" >&2
    "$OPENSSL" list -provider "$PROV" -providers >&2
    exit 1
fi

raw=$(mktemp) || exit 1
trap 'rm -f "$raw"' EXIT INT TERM

# run_one SIDE PROVIDER CIPHER DIR SIZESET: appends "N|cipher:dir side size bytes_per_s" lines to $raw
# (N: the test's place in TESTS, so the table keeps that order).
# -provider must precede -evp: otherwise speed fetches the cipher before loading it and measures default.
run_one() {
    side=$1 p=$2 c=$3 d=$4 set=$5 n=$6
    # -elapsed: wall-clock divisor. The default (user CPU time of all threads) would undercount work spread over
    # pool threads and overcount time spent waiting on a device.
    set -- -mr -elapsed -seconds "$SECS" -provider "$p"
    [ "$set" = default ] || set -- "$@" -bytes "$set"
    set -- "$@" -evp "$c"
    [ "$d" = dec ] && set -- "$@" -decrypt
    if ! res=$("$OPENSSL" speed "$@" 2>&1); then
        echo "speed.sh: openssl speed $* failed:" >&2
        echo "$res" | tail -3 >&2
        return 1
    fi
    echo "$res" | awk -F: -v key="$n|$c:$d" -v side="$side" '
        /^\+H:/ { n = NF - 1; for (i = 2; i <= NF; i++) sz[i - 1] = $i }
        /^\+F:/ { for (i = 4; i <= NF; i++) if (i - 3 <= n) print key, side, sz[i - 3], $i }' >>"$raw"
}

start=$(date +%s)
fail=0
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "speed.sh: round $r of $ROUNDS" >&2
    i=0
    for t in $TESTS; do
        c=${t%%:*} d=${t#*:} i=$((i + 1))
        for s in $SIZESETS; do
            # Alternate which side goes first, so a slow spell of the machine hits both alike.
            if [ $((r % 2)) -eq 1 ]; then
                run_one default default "$c" "$d" "$s" "$i" || fail=1
                run_one accel "$PROV" "$c" "$d" "$s" "$i" || fail=1
            else
                run_one accel "$PROV" "$c" "$d" "$s" "$i" || fail=1
                run_one default default "$c" "$d" "$s" "$i" || fail=1
            fi
        done
    done
    r=$((r + 1))
done
elapsed=$(($(date +%s) - start))

model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
machine="machine: ${model:-unknown cpu}, $(nproc) CPUs, $("$OPENSSL" version)"
cmd="command: OPENSSL_MODULES=build openssl speed -mr -elapsed -seconds $SECS -provider {default|$PROV} [-bytes 1048576] -evp CIPHER [-decrypt]; $ROUNDS alternated rounds, median"

# Median per (test, size, side), then one row per (test, size).
table=$(sort -k1,1n -k3,3n -k2,2 -k4,4g "$raw" | awk -v prov="$PROV" '
    function flush() {
        if (cnt == 0) return
        med = (cnt % 2) ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2
        m[key SUBSEP size SUBSEP side] = med
        if (!(key SUBSEP size in seen)) { seen[key SUBSEP size] = 1; order[++no] = key SUBSEP size }
        cnt = 0
    }
    { if ($1 != key || $2 != side || $3 != size) { flush(); key = $1; side = $2; size = $3 } v[++cnt] = $4 }
    END {
        flush()
        printf "| cipher | op | size (B) | default MB/s | %s MB/s | ratio |\n", prov
        printf "| --- | --- | ---: | ---: | ---: | ---: |\n"
        for (i = 1; i <= no; i++) {
            split(order[i], ks, SUBSEP); split(ks[1], tk, "|"); split(tk[2], co, ":")
            d = m[order[i] SUBSEP "default"]; a = m[order[i] SUBSEP "accel"]
            ratio = (d > 0 && a != "") ? sprintf("%.2f", a / d) : "n/a"
            printf "| %s | %s | %d | %.1f | %s | %s |\n", co[1], (co[2] == "dec" ? "decrypt" : "encrypt"),
                ks[2], d / 1e6, (a == "" ? "n/a" : sprintf("%.1f", a / 1e6)), ratio
        }
    }')

{
    echo "# openssl speed: default provider vs $PROV"
    echo
    echo "$machine"
    echo "$cmd"
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), run time ${elapsed}s; MB = 10^6 bytes"
    [ "$PROV" = default ] && echo "note: SPEED_PROVIDER=default: both columns are the default provider (script check)"
    echo
    echo "$table"
} >"$OUT.tmp" && mv "$OUT.tmp" "$OUT"
cat "$OUT"
[ "$fail" -eq 0 ] || { echo "speed.sh: some runs failed (see above)" >&2; exit 1; }
