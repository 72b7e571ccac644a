/* accel/cpu/gcm_vaesx.h: the xmm width of accelaes's GCM engine (aesni-gcm), for cores with AES-NI and
 * PCLMULQDQ but no VAES: its key data and its kernels (gcm_vaesx_k.c), which the stream
 * (gcm_vaes_stream.h, compiled for this width by gcm_vaesx.c) calls, and the stream's width-specific
 * helpers. SSE only (no AVX): it runs on any core with AES-NI and PCLMULQDQ. GHASH's representation
 * is gcm_vaes_gf.h's. Internal to accel/cpu/. */
#ifndef ACCELAES_GCM_VAESX_H
#define ACCELAES_GCM_VAESX_H

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>
#include "accel/cpu/gcm_vaes_gf.h"

#define TGT_GVX __attribute__((target("aes,pclmul,sse4.1,ssse3")))

/* Key data, set once per key, read-only afterwards (the split reads it from other threads). The
 * kernels take every part of it as memory operands, never keeping it in registers across groups. */
typedef struct gvx_key {
    __m128i rk[15];      /* round keys */
    __m128i hp[8];       /* hp[i] = R(H^(8 - i)) * x^-1 (gcm_vaes_gf.h): a group of n blocks takes hp[8 - n ..] */
    __m128i hk[8];       /* hp[i]'s two qwords XORed: Karatsuba's middle factor */
    int rounds;          /* 10, 12, 14 */
} gvx_key;

/* gcm_vaesx_k.c, with gcm_vaes.h's contracts for gv_ghash, gv_blocks and gv_powers. All constant
 * time. Each leaves xmm0-15 zeroed (acc_clear_xmm). */
void gvx_ghash(const gvx_key *k, __m128i *x, const uint8_t *in, size_t nblocks);
void gvx_blocks(const gvx_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks,
                int enc);
void gvx_powers(gvx_key *k, __m128i h);

/* gcm_vaesx.c: the stream's message calls. */
struct acc_gcm_state;
int acc_gvx_start(struct acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad,
                  size_t aadlen);
int acc_gvx_update(struct acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len);
int acc_gvx_finish(struct acc_gcm_state *s, uint8_t *tag, size_t taglen);

/* ---- The stream's one-block helpers (gcm_vaes_stream.h) ---- */

TGT_GVX static inline __attribute__((always_inline)) __m128i gvx_ghash1(const gvx_key *k, __m128i x, __m128i b)
{
    return gmul1(_mm_xor_si128(x, _mm_shuffle_epi8(b, GV_BSWAP())), k->hp[7]);
}

/* E(K, b) for a block b in GCM's byte order. */
TGT_GVX static inline __attribute__((always_inline)) __m128i gvx_encrypt1(const gvx_key *k, __m128i b)
{
    b = _mm_xor_si128(b, k->rk[0]);
    for (int r = 1; r < k->rounds; r++)
        b = _mm_aesenc_si128(b, k->rk[r]);
    return _mm_aesenclast_si128(b, k->rk[k->rounds]);
}

TGT_GVX static inline __attribute__((always_inline)) void gvx_set_round_key(gvx_key *k, int r, __m128i rk)
{
    k->rk[r] = rk;
}

TGT_GVX static inline __attribute__((always_inline)) __m128i gvx_load_tail(const uint8_t *p, unsigned n)
{
    return gf_load_tail(p, n);
}

TGT_GVX static inline __attribute__((always_inline)) int gvx_tag_equal(__m128i t, const uint8_t *tag, size_t taglen)
{
    return gf_tag_equal(t, tag, taglen);
}

#endif
