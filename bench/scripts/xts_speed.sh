#!/bin/sh
# bench/scripts/xts_speed.sh: `openssl speed -evp` of AES-XTS (or any cipher), the default provider alone against accelaes
# loaded beside it (`-provider accelaes -provider default -propquery provider=accelaes`: the fetch fails unless
# accelaes serves the cipher, so the accelaes column is accelaes's work), one size per run (-bytes), the two sides
# alternated in every round, which goes first swapped each round. Prints the median of each side and the ratio.
#
# Environment: OPENSSL (openssl), XS_CIPHERS ("aes-128-xts aes-256-xts"), XS_DIRS ("enc dec"),
# XS_SIZES ("16 64 256 1024 8192 16384 1048576"), XS_ROUNDS (5), XS_SECONDS (1), XS_ELAPSED (0: speed divides by
# the process's CPU time, which a shared machine's load does not inflate; 1: wall clock). Needs build/accelaes.so.
set -u
OPENSSL=${OPENSSL:-openssl}
CIPHERS=${XS_CIPHERS:-"aes-128-xts aes-256-xts"}
DIRS=${XS_DIRS:-"enc dec"}
SIZES=${XS_SIZES:-"16 64 256 1024 8192 16384 1048576"}
ROUNDS=${XS_ROUNDS:-5}
SECS=${XS_SECONDS:-1}
OPENSSL_MODULES=$(pwd)/build
export OPENSSL_MODULES
[ -f build/accelaes.so ] || { echo "xts_speed.sh: build/accelaes.so is missing (run make)" >&2; exit 1; }
raw=$(mktemp) || exit 1
trap 'rm -f "$raw"' EXIT INT TERM

# one SIDE CIPHER DIR SIZE: appends "cipher dir size side bytes_per_s" to $raw
one() {
    set -- "$1" "$2" "$3" "$4" -mr -seconds "$SECS"
    [ "${XS_ELAPSED:-0}" = 1 ] && set -- "$@" -elapsed
    if [ "$1" = accel ]; then
        set -- "$@" -provider accelaes -provider default -propquery provider=accelaes
    else
        set -- "$@" -provider default
    fi
    side=$1 c=$2 d=$3 sz=$4
    shift 4
    set -- "$@" -bytes "$sz" -evp "$c"
    [ "$d" = dec ] && set -- "$@" -decrypt
    out=$("$OPENSSL" speed "$@" 2>&1) || { echo "xts_speed.sh: openssl speed $* failed: $out" >&2; return 1; }
    echo "$out" | awk -F: -v k="$c $d $sz $side" '/^\+F:/ { print k, $4 }' >>"$raw"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
    for c in $CIPHERS; do
        for d in $DIRS; do
            for s in $SIZES; do
                if [ $((r % 2)) -eq 1 ]; then one default "$c" "$d" "$s"; one accel "$c" "$d" "$s"; else
                    one accel "$c" "$d" "$s"; one default "$c" "$d" "$s"; fi
            done
        done
    done
    r=$((r + 1))
done

echo "$("$OPENSSL" version); $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'); $ROUNDS alternated rounds of ${SECS}s," \
    "$([ "${XS_ELAPSED:-0}" = 1 ] && echo wall clock || echo CPU time), medians; MB = 10^6 bytes"
echo
echo "| cipher | op | size (B) | default MB/s | accelaes MB/s | ratio | ratio min-max |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
# per (cipher, dir, size): the median of each side, and the spread of the per-round ratios
sort -k1,1 -k2,2r -k3,3n -k4,4 -s "$raw" | awk '
    function med(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function flush(   md, ma, lo, hi, i, q) {
        if (nd == 0) return
        md = med(dv, nd); ma = med(av, na); lo = 1e9; hi = 0
        for (i = 1; i <= na && i <= nd; i++) { q = ar[i] / dr[i]; if (q < lo) lo = q; if (q > hi) hi = q }
        printf "| %s | %s | %d | %.1f | %.1f | %.2f | %.2f-%.2f |\n", c, (d == "dec" ? "decrypt" : "encrypt"), s,
            md / 1e6, ma / 1e6, ma / md, lo, hi
        nd = na = 0
    }
    { if ($1 != c || $2 != d || $3 != s) { flush(); c = $1; d = $2; s = $3 }
      if ($4 == "default") { dv[++nd] = $5; dr[nd] = $5 } else { av[++na] = $5; ar[na] = $5 } }
    END { flush() }'
