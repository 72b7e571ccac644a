/* accel/cpu/gcm_vaesy.h: the ymm width of the VAES + VPCLMULQDQ GCM engine, for cores with VAES and
 * VPCLMULQDQ on ymm but no AVX-512 (AMD Zen 3): its key data and its kernels (gcm_vaesy_k.c),
 * which the stream (gcm_vaes_stream.h, compiled for this width by gcm_vaesy.c) calls, and the
 * stream's width-specific helpers, none of them AVX-512. GHASH's representation is
 * gcm_vaes_gf.h's. Internal to accel/cpu/. */
#ifndef ACCELAES_GCM_VAESY_H
#define ACCELAES_GCM_VAESY_H

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>
#include "accel/cpu/gcm_vaes_gf.h"

#define TGT_GVY __attribute__((target("aes,pclmul,sse4.1,ssse3,avx,avx2,vaes,vpclmulqdq")))

/* Key data, set once per key, read-only afterwards (the split reads it from other threads). The
 * kernels take every part of it as memory operands, never keeping it in registers across groups. */
typedef struct gvy_key {
    __m256i rk[15];      /* round keys, each in both 128-bit lanes */
    __m128i hp[17];      /* hp[i] = R(H^(16 - i)) * x^-1 (as gcm_vaes.h); hp[16] zero: the empty high
                          * lane of a group's last register when the group's count is odd */
    __m128i hk[17];      /* hp[i]'s two qwords XORed, in both qwords: Karatsuba's middle factor */
    int rounds;          /* 10, 12, 14 */
} gvy_key;

/* gcm_vaesy_k.c, with gcm_vaes.h's contracts for gv_ghash, gv_blocks and gv_powers. All constant
 * time. Each leaves the vector registers zeroed (vzeroall). */
void gvy_ghash(const gvy_key *k, __m128i *x, const uint8_t *in, size_t nblocks);
void gvy_blocks(const gvy_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks,
                int enc);
void gvy_powers(gvy_key *k, __m128i h);

/* gcm_vaesy.c: the stream's message calls. */
struct acc_gcm_state;
int acc_gvy_start(struct acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad,
                  size_t aadlen);
int acc_gvy_update(struct acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len);
int acc_gvy_finish(struct acc_gcm_state *s, uint8_t *tag, size_t taglen);

/* ---- The stream's one-block helpers (gcm_vaes_stream.h), on xmm ---- */

TGT_GVY static inline __attribute__((always_inline)) __m128i gvy_ghash1(const gvy_key *k, __m128i x, __m128i b)
{
    return gmul1(_mm_xor_si128(x, _mm_shuffle_epi8(b, GV_BSWAP())), k->hp[15]);
}

/* E(K, b) for a block b in GCM's byte order: lane 0 of rk[r] is the xmm at 2 r. */
TGT_GVY static inline __attribute__((always_inline)) __m128i gvy_encrypt1(const gvy_key *k, __m128i b)
{
    const __m128i *rk = (const __m128i *)(const void *)k->rk;

    b = _mm_xor_si128(b, _mm_load_si128(rk));
    for (int r = 1; r < k->rounds; r++)
        b = _mm_aesenc_si128(b, _mm_load_si128(rk + 2 * r));
    return _mm_aesenclast_si128(b, _mm_load_si128(rk + 2 * k->rounds));
}

TGT_GVY static inline __attribute__((always_inline)) void gvy_set_round_key(gvy_key *k, int r, __m128i rk)
{
    k->rk[r] = _mm256_broadcastsi128_si256(rk);
}

/* n (1..16) bytes from p, zero above, nothing read beyond (gcm_vaes_gf.h's gf_load_tail). */
TGT_GVY static inline __attribute__((always_inline)) __m128i gvy_load_tail(const uint8_t *p, unsigned n)
{
    return gf_load_tail(p, n);
}

TGT_GVY static inline __attribute__((always_inline)) int gvy_tag_equal(__m128i t, const uint8_t *tag, size_t taglen)
{
    return gf_tag_equal(t, tag, taglen);
}

#endif
