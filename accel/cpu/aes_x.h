/* accel/cpu/aes_x.h: what the two inline engines share (aesni.c: xmm; vaes.c: zmm): the targets,
 * counter helpers and the xmm block code, which the VAES engine also runs below VAES_MIN blocks.
 * Internal to accel/cpu/: every function is static inline. */
#ifndef ACCELAES_AES_X_H
#define ACCELAES_AES_X_H

#include <string.h>
#include <immintrin.h>
#include "accel/engine.h"
#include "accel/wipe.h"
#include "accel/cpu/unroll.h"


/* Per-function targets, so the Makefile needs no -m flags and the library still loads on any x86-64.
 * The xmm helpers carry the smaller target; gcc inlines them into the VAES functions too, where
 * they come out VEX-encoded. */
#define TGT_NI   __attribute__((target("aes,sse4.1,ssse3")))
#define TGT_VAES __attribute__((target("aes,sse4.1,ssse3,avx,avx2,avx512f,avx512bw,vaes")))
#define INLINE   static inline __attribute__((always_inline))

/* Below this many blocks the xmm code, one straight-line group of n blocks, beats the zmm code
 * (a zmm register chain has more latency than an xmm one); from 8 blocks on the zmm code wins
 * (bench/results/engine-notes.md). */
#define VAES_MIN 8

/* ------------------------------------------------------------------------------------------
 * Helpers shared by every mode
 * ------------------------------------------------------------------------------------------ */

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void store_be64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* How many of n blocks run before the low 64 counter bits wrap: within such a span the counter
 * is a 64-bit add on the low half alone, which is what the vector code does. */
static inline size_t ctr_span(uint64_t lo, size_t n)
{
    uint64_t room = 0 - lo;             /* 0 stands for 2^64 */
    return (room != 0 && room < n) ? (size_t)room : n;
}

/* ------------------------------------------------------------------------------------------
 * xmm: one block per instruction; n independent blocks hide aesenc's latency
 * ------------------------------------------------------------------------------------------ */

#define XLD(p)    _mm_loadu_si128((const __m128i *)(const void *)(p))
#define XST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define XKEY(rk, r) _mm_load_si128((const __m128i *)(const void *)((rk) + 16 * (r)))

/* The middle rounds (1 .. rounds-1) on x[0..n-1], n independent chains in flight. Below eight
 * blocks the rounds are straight-line code: a short request is latency-bound, and a loop around its
 * rounds costs cycles per call that the straight line, which issues every round-key load at once,
 * does not (bench/results/engine-notes.md). Rounds 10-13 exist for 192/256-bit keys. */
TGT_NI INLINE void x_rounds(const uint8_t *rk, int rounds, __m128i *x, int n, int dec)
{
    if (n < 8) {
#define R1(r)                                                                                  do {                                                                                           __m128i k = XKEY(rk, r);                                                                   _Pragma("GCC unroll 8") for (int j = 0; j < n; j++)                                            x[j] = dec ? _mm_aesdec_si128(x[j], k) : _mm_aesenc_si128(x[j], k);                } while (0)
        R1(1); R1(2); R1(3); R1(4); R1(5); R1(6); R1(7); R1(8); R1(9);
        if (rounds > 10) {
            R1(10); R1(11);
            if (rounds > 12) {
                R1(12); R1(13);
            }
        }
#undef R1
        return;
    }
    for (int r = 1; r < rounds; r++) {
        __m128i k = XKEY(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            x[j] = dec ? _mm_aesdec_si128(x[j], k) : _mm_aesenc_si128(x[j], k);
    }
}

/* One block's middle rounds (CBC encryption's serial chain). */
TGT_NI INLINE __m128i x_one_rounds(const uint8_t *rk, int rounds, __m128i x, int dec)
{
    x_rounds(rk, rounds, &x, 1, dec);
    return x;
}

/* Whitening and the middle rounds. The caller does the last round itself, so it can fold an XOR
 * (CTR input, CBC chaining value) into the last round key for free. */
TGT_NI INLINE void x_mid(const uint8_t *rk, int rounds, __m128i *x, int n, int dec)
{
    __m128i k = XKEY(rk, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        x[j] = _mm_xor_si128(x[j], k);
    x_rounds(rk, rounds, x, n, dec);
}

TGT_NI INLINE __m128i x_last(__m128i x, __m128i k, int dec)
{
    return dec ? _mm_aesdeclast_si128(x, k) : _mm_aesenclast_si128(x, k);
}

/* n < 8 blocks as one group of n, so they run side by side whatever n is; GROUP(q) runs q blocks at
 * in/out, which then advance. */
#define X_TAIL(n, GROUP)                                                                   \
    do {                                                                                   \
        GROUP_OF(n, GROUP)                                                                 \
        in += 16 * (n), out += 16 * (n);                                                   \
    } while (0)

TGT_NI INLINE void x_ecb_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           int n, int dec)
{
    __m128i x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        x[j] = XLD(in + 16 * j);
    x_mid(rk, rounds, x, n, dec);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], kl, dec));
}

TGT_NI INLINE void x_ecb(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                         size_t n, int dec)
{
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_ecb_n(rk, rounds, in, out, 8, dec);
#define G(q) x_ecb_n(rk, rounds, in, out, q, dec)
    X_TAIL(n, G);
#undef G
}

/* All n ciphertext blocks are loaded before any store, so in == out is safe; *iv becomes the
 * group's last ciphertext block. */
TGT_NI INLINE void x_cbcdec_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                              int n, __m128i *iv)
{
    __m128i c[8], x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        c[j] = x[j] = XLD(in + 16 * j);
    x_mid(rk, rounds, x, n, 1);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, j ? c[j - 1] : *iv), 1));
    *iv = c[n - 1];
}

TGT_NI INLINE void x_cbcdec(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                            size_t n, uint8_t ivb[16])
{
    __m128i iv = XLD(ivb);
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_cbcdec_n(rk, rounds, in, out, 8, &iv);
#define G(q) x_cbcdec_n(rk, rounds, in, out, q, &iv)
    X_TAIL(n, G);
#undef G
    XST(ivb, iv);
}

/* *ctr holds the counter byte-reversed (qword 0 = low 64 bits), so +1 is one 64-bit add; the
 * caller guarantees the low half does not wrap within the span. */
TGT_NI INLINE void x_ctr_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           int n, __m128i *ctr)
{
    const __m128i bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        x[j] = _mm_shuffle_epi8(*ctr, bswap);
        *ctr = _mm_add_epi64(*ctr, _mm_set_epi64x(0, 1));
    }
    x_mid(rk, rounds, x, n, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, XLD(in + 16 * j)), 0));
}

/* Eight blocks whose counter starts with its low three bits clear: adding j < 8 then only sets
 * bits of the last byte, an XOR, which commutes with the whitening. So one byte swap and one
 * whitening serve the group, leaving more of the vector ports to aesenc. */
TGT_NI INLINE void x_ctr8_aligned(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                                  __m128i *ctr)
{
    const __m128i bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i x[8], kl = XKEY(rk, rounds);
    __m128i y = _mm_xor_si128(_mm_shuffle_epi8(*ctr, bswap), XKEY(rk, 0));
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        x[j] = _mm_xor_si128(y, _mm_slli_si128(_mm_cvtsi32_si128(j), 15));
    *ctr = _mm_add_epi64(*ctr, _mm_set_epi64x(0, 8));
    x_rounds(rk, rounds, x, 8, 0);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, XLD(in + 16 * j)), 0));
}

TGT_NI INLINE void x_ctr(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                         size_t n, uint64_t hi, uint64_t lo)
{
    __m128i c = _mm_set_epi64x((long long)hi, (long long)lo);
#define G(q) x_ctr_n(rk, rounds, in, out, q, &c)
    if (n >= 8 && (lo & 7)) {                       /* reach a counter with its low bits clear */
        size_t head = 8 - (lo & 7);
        X_TAIL(head, G);
        n -= head;
    }
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_ctr8_aligned(rk, rounds, in, out, &c);
    X_TAIL(n, G);
#undef G
}


/* The VAES engine's block functions (vaes.c), for the engine table in aesni.c. */
int acc_vaes_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n);
int acc_vaes_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n);
int acc_vaes_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t iv[16]);
int acc_vaes_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t ctr[16]);
/* The ymm VAES engine's (vaes_y.c: VAES without AVX-512). */
int acc_vaesy_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n);
int acc_vaesy_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n);
int acc_vaesy_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t iv[16]);
int acc_vaesy_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t ctr[16]);
/* The XTS data units of both engines (xts.c): xmm only, and VAES from VAES_MIN blocks on. */
int acc_xts_ni(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in, uint8_t *out,
               size_t len, int dec);
int acc_xts_vaes(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                 size_t len, int dec);
/* The ymm VAES engine's (xts_y.c: VAES and VPCLMULQDQ on ymm, from XTSY_MIN blocks on). */
int acc_xts_vaesy(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                  size_t len, int dec);

#endif
