/* accel/cpu/xts_x.h: the xmm AES-XTS code (IEEE 1619) that xts.c (the xmm engine, short units on the
 * zmm one) and xts_y.c (short units and ciphertext stealing on the ymm one) share. Internal to
 * accel/cpu/: every function is static inline. */
#ifndef ACCELAES_XTS_X_H
#define ACCELAES_XTS_X_H

#include "accel/cpu/aes_x.h"

/* ------------------------------------------------------------------------------------------
 * xmm
 * ------------------------------------------------------------------------------------------ */

/* t * x: each qword shifted left one bit; the top bit of the low qword carries into the high
 * qword, the top bit of the high qword folds back as 0x87 (the sign masks make both without a
 * branch). */
TGT_NI INLINE __m128i x_mulx(__m128i t)
{
    __m128i m = _mm_shuffle_epi32(_mm_srai_epi32(t, 31), 0x13); /* dword3's sign -> 0, dword1's -> 2 */

    m = _mm_and_si128(m, _mm_set_epi32(0, 1, 0, 0x87));
    return _mm_xor_si128(_mm_add_epi64(t, t), m);
}

/* t * x^k for 1 <= k <= 8 (as z_mulk in xts.c, on one lane): a tweak k blocks on in one step,
 * where x_mulx would take k (x_xts8's second chain and its integer chain start from it). */
TGT_NI INLINE __m128i x_mulxk(__m128i t, int k)
{
    __m128i o = _mm_shuffle_epi32(_mm_srli_epi64(t, 64 - k), 0x4E); /* swap qwords */
    __m128i red = _mm_xor_si128(_mm_xor_si128(o, _mm_slli_epi64(o, 1)),
                                _mm_xor_si128(_mm_slli_epi64(o, 2), _mm_slli_epi64(o, 7)));

    return _mm_xor_si128(_mm_slli_epi64(t, k), _mm_blend_epi16(o, red, 0x0F));
}

/* n < 8 blocks (x_xts8 below runs whole groups of 8); *t is the first block's tweak and becomes
 * the next one. The tweak XOR after the last round is folded into the last round key. */
TGT_NI INLINE void x_xts_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, int n, __m128i *t, int dec)
{
    __m128i x[8], tw[8], k0 = XKEY(rk, 0), kl;
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        /* each tweak doubled from the one before, five operations, the whitening key XORed into the
         * data first, off the tweak's path to the first round: the tweaks are ready long before the
         * AES units take their block, and x_mulxk's eleven operations for each from the first took
         * vector slots from aesenc (64-112-byte units ~5% slower with them) */
        tw[j] = j == 0 ? *t : x_mulx(tw[j - 1]);
        x[j] = _mm_xor_si128(_mm_xor_si128(XLD(in + 16 * j), k0), tw[j]);
    }
    *t = x_mulx(tw[n - 1]);
    x_rounds(rk, rounds, x, n, dec);
    /* the last round key loaded here, not held across the rounds: with seven blocks and their
     * tweaks in registers gcc 16 spilled it to the stack (tests/c/test_vreg_residue.c) */
    __asm__("" : "+r"(rk));
    kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, tw[j]), dec));
}

/* t * x on the tweak held as two 64-bit halves in general registers: the bulk loop's doubling
 * chain runs on the integer units, which XTS leaves idle, instead of taking vector slots from
 * aesenc (shifts and shuffles share its ports). */
INLINE void g_mulx(uint64_t *lo, uint64_t *hi)
{
    uint64_t c = (uint64_t)((int64_t)*hi >> 63) & 0x87; /* the sign as a mask: no branch */
    uint64_t top = *lo >> 63;

    /* hidden from the combiner: gcc 14 and 16 fuse the shift pair into shld, which Zen 3 issues
     * once per two cycles as four micro-ops (the xmm engine's 16 KiB AES-128 unit under gcc 14:
     * 0.398 c/B with it, 0.295 without; bench/results/xts-ymm.md) */
    __asm__("" : "+r"(top));
    *hi = (*hi << 1) | top;
    *lo = (*lo << 1) ^ c;
}

/* Entry j of a tweak buffer (two 64-bit halves per block) */
#define TK(p, j) _mm_load_si128((const __m128i *)(const void *)((p) + 2 * (j)))

/* The next group's eight tweaks into nxt, from the integer chain (lo, hi: the next tweak). */
INLINE void x_chain8(uint64_t *nxt, uint64_t *lo, uint64_t *hi)
{
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        nxt[2 * j] = *lo;
        nxt[2 * j + 1] = *hi;
        g_mulx(lo, hi);
    }
}

/* One group of 8 whitened blocks x: the middle rounds, the next group's tweaks into nxt after
 * the first (off the data's path; placed there, the stores retire early and the next group's
 * loads need not wait: after each round they made 256-byte units slower, before the rounds the
 * 16 KiB loop), then the last round, its output XORed with this group's tweaks from memory (cur).
 * The last round key is loaded after the rounds: held across them, gcc 16 spilled it. */
TGT_NI INLINE void x_xts8_group(const uint8_t *rk, const int rounds, __m128i *x, uint8_t *out, const uint64_t *cur,
                                uint64_t *nxt, uint64_t *lo, uint64_t *hi, int dec)
{
    __m128i kl;

#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
        __m128i k = XKEY(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            x[j] = dec ? _mm_aesdec_si128(x[j], k) : _mm_aesenc_si128(x[j], k);
        if (r == 1)
            x_chain8(nxt, lo, hi);
    }
    __asm__("" : "+r"(rk));
    kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        XST(out + 16 * j, _mm_xor_si128(x_last(x[j], kl, dec), TK(cur, j)));
}

/* g >= 1 groups of 8 blocks, software-pipelined. Eight blocks in flight keep both AES units busy
 * (aesenc's latency is four times its issue interval on current cores; six, as OpenSSL's xmm
 * assembly runs, leave them idle a quarter of the time), but eight blocks and their tweaks do not
 * fit 16 xmm registers, so the tweaks live in memory, made on the integer units, which XTS leaves
 * idle. No round key is held across a group, or across the loop: each is loaded where it is used,
 * so a compiler short of registers has none to spill (tests/c/test_vreg_residue.c checks the stack
 * under gcc 12, 14 and 16), and the frame needs no wipe after the unit. Returns the tweak of the
 * block after the last group. */
TGT_NI INLINE __m128i x_xts8(const uint8_t *rk, const int rounds, const uint8_t *in, uint8_t *out, size_t g,
                             __m128i t, int dec)
{
    uint64_t buf[32] __attribute__((aligned(16))), *cur = buf, *nxt = buf + 16, *sw; /* two groups' tweaks */
    __m128i x[8], t8 = x_mulxk(t, 8), t4 = x_mulxk(t, 4);
    uint64_t lo = (uint64_t)_mm_cvtsi128_si64(t8), hi = (uint64_t)_mm_extract_epi64(t8, 1);

    /* the first group's tweaks: two vector doubling chains, from t and t*x^4 (one chain of 8 made
     * 256-byte units ~1.5 ns slower, x_mulxk for each ~3 ns: its instructions compete with the
     * first rounds for the vector ports) */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++, t = x_mulx(t), t4 = x_mulx(t4)) {
        _mm_store_si128((__m128i *)(void *)(cur + 2 * j), t);
        _mm_store_si128((__m128i *)(void *)(cur + 2 * j + 8), t4);
    }
    for (; g > 0; g--, in += 128, out += 128) {
        __asm__("" : "+r"(rk)); /* the round keys loaded where used, not kept in registers gcc spills */
        __m128i k0 = XKEY(rk, 0);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            x[j] = _mm_xor_si128(_mm_xor_si128(XLD(in + 16 * j), k0), TK(cur, j));
        x_xts8_group(rk, rounds, x, out, cur, nxt, &lo, &hi, dec);
        sw = cur, cur = nxt, nxt = sw;
    }
    t = TK(cur, 0);
    /* the tweaks must not outlive the call (16 stores: gcc's memset here was rep stos, ~10 ns on a
     * 256-byte unit) */
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        _mm_store_si128((__m128i *)(void *)(buf + 2 * j), _mm_setzero_si128());
    __asm__ volatile("" : : "r"(buf) : "memory");
    return t;
}

/* n blocks. From 16, groups of 8 (x_xts8); below, pieces of 4 and then the rest, each with its
 * tweaks in registers: a group's set-up (its first tweaks through memory, the integer chain, the
 * buffer cleared) costs a unit of 8-15 blocks more than its second group of AES gains (128 bytes:
 * 38-41 ns against 44-47 through x_xts8, OpenSSL's own 38-40). */
TGT_NI INLINE void x_xts(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, size_t n, __m128i *t, int dec)
{
    if (n >= 16) { /* the round count a constant, so the rounds unroll around the tweak steps */
        if (rounds == 10)
            *t = x_xts8(rk, 10, in, out, n / 8, *t, dec);
        else if (rounds == 14)
            *t = x_xts8(rk, 14, in, out, n / 8, *t, dec);
        else
            *t = x_xts8(rk, rounds, in, out, n / 8, *t, dec);
        in += 128 * (n / 8), out += 128 * (n / 8), n %= 8;
    }
    for (; n >= 8; n -= 4, in += 64, out += 64) {
        __asm__("" : "+r"(rk)); /* k0 loaded in each piece, not held across them */
        x_xts_n(rk, rounds, in, out, 4, t, dec);
    }
#define G(q) x_xts_n(rk, rounds, in, out, q, t, dec)
    X_TAIL(n, G);
#undef G
}

/* One block with its own tweak (ciphertext stealing). */
TGT_NI INLINE __m128i x_xts_one(const uint8_t *rk, int rounds, __m128i b, __m128i t, int dec)
{
    __m128i x = _mm_xor_si128(b, t);

    x_mid(rk, rounds, &x, 1, dec);
    return x_last(x, _mm_xor_si128(XKEY(rk, rounds), t), dec);
}

/* The last whole block and the r-byte partial one after it (IEEE 1619 5.3.2 / 5.4.2): encryption
 * runs the whole block with tweak t, the stolen block with t*x; decryption the other way round.
 * The partial input is read before anything is written, so in == out is safe. */
TGT_NI INLINE void xts_steal(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t r, __m128i t, int dec)
{
    const uint8_t *rk = dec ? k->dec : k->enc;
    __m128i t2 = x_mulx(t);
    uint8_t cc[16], tail[16];

    memcpy(tail, in + 16, r);
    XST(cc, x_xts_one(rk, k->rounds, XLD(in), dec ? t2 : t, dec));
    memcpy(out + 16, cc, r);
    memcpy(cc, tail, r);
    XST(out, x_xts_one(rk, k->rounds, XLD(cc), dec ? t : t2, dec));
    memset(cc, 0, sizeof(cc));
    memset(tail, 0, sizeof(tail));
    __asm__ volatile("" : : "r"(cc), "r"(tail) : "memory"); /* keep the wipe */
}

#endif
