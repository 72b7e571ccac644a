/* accel/cpu/gcm_vaes.h: the zmm width of the VAES + VPCLMULQDQ GCM engine: its key data and
 * its kernels (gcm_vaes_k.c), which the stream (gcm_vaes_stream.h, compiled for this width by
 * gcm_vaes.c) calls. GHASH's representation is gcm_vaes_gf.h's. Internal to accel/cpu/. */
#ifndef ACCELAES_GCM_VAES_H
#define ACCELAES_GCM_VAES_H

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>
#include "accel/cpu/gcm_vaes_gf.h"

#define TGT_GV __attribute__((target("aes,pclmul,sse4.1,ssse3,avx,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))

/* Key data, set once per key, read-only afterwards (the split reads it from other threads). */
typedef struct gv_key {
    __m512i rk[15];      /* round keys, each in the four 128-bit lanes: aesenc takes them from memory */
    __m128i hp[16];      /* hp[i] = R(H^(16 - i)) * x^-1: a group of n blocks takes hp[16 - n ..] */
    int rounds;          /* 10, 12, 14 */
} gv_key;

/* gcm_vaes_k.c. All constant time: no branch or address depends on key or data. */
/* ghash: *x = GHASH of nblocks (whole 16-byte blocks) from in, continued from *x (R form). */
void gv_ghash(const gv_key *k, __m128i *x, const uint8_t *in, size_t nblocks);
/* blocks: nblocks whole blocks from in to out (in == out legal) with counter blocks from *ctr
 * (moved on by inc32), their ciphertext (out when enc, else in) hashed into *x. */
void gv_blocks(const gv_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks, int enc);
/* The hash key powers from H = E(K, 0^128). */
void gv_powers(gv_key *k, __m128i h);

/* The one-block helpers, inline in both files: a small record's start and finish are bound by
 * their latency, which calls (and, in gv_encrypt1, zmm loads and a vzeroupper) only lengthened,
 * and inlined the core overlaps E(K, J0) with the AAD's hash. */

/* x with one more block b (GCM's byte order) hashed in, on xmm: the AAD's and the data's last
 * partial block and the lengths, where a masked zmm group would cost more than it saves. */
TGT_GV static inline __attribute__((always_inline)) __m128i gv_ghash1(const gv_key *k, __m128i x, __m128i b)
{
    return gmul1(_mm_xor_si128(x, _mm_shuffle_epi8(b, GV_BSWAP())), k->hp[15]);
}

/* One AES block: E(K, b) for a block b in GCM's byte order. The round keys' first lanes are read
 * as xmm (no zmm load). */
TGT_GV static inline __attribute__((always_inline)) __m128i gv_encrypt1(const gv_key *k, __m128i b)
{
    const __m128i *rk = (const __m128i *)(const void *)k->rk;   /* lane 0 of rk[r] is rk[4 * r] */

    b = _mm_xor_si128(b, _mm_load_si128(rk));
    for (int r = 1; r < k->rounds; r++)
        b = _mm_aesenc_si128(b, _mm_load_si128(rk + 4 * r));
    return _mm_aesenclast_si128(b, _mm_load_si128(rk + 4 * k->rounds));
}

/* The stream's width-specific loads and stores (gcm_vaes_stream.h). */
TGT_GV static inline __attribute__((always_inline)) void gv_set_round_key(gv_key *k, int r, __m128i rk)
{
    k->rk[r] = _mm512_broadcast_i32x4(rk);
}

/* n (1..16) bytes from p in a masked load: no stack copy, whose 16-byte reload of narrower
 * stores would wait on store forwarding. */
TGT_GV static inline __attribute__((always_inline)) __m128i gv_load_tail(const uint8_t *p, unsigned n)
{
    return _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), p);
}

/* t's first taglen bytes equal tag's: a mask of all of them, one test. */
TGT_GV static inline __attribute__((always_inline)) int gv_tag_equal(__m128i t, const uint8_t *tag, size_t taglen)
{
    __mmask16 want = (__mmask16)((1u << taglen) - 1);

    return _mm_mask_cmpneq_epi8_mask(want, t, _mm_maskz_loadu_epi8(want, tag)) == 0;
}

#endif
