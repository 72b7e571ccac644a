/* accel/cpu/gcm_vaes.h: what the VAES + VPCLMULQDQ GCM engine's two files share: the key data
 * and message state kept in acc_gcm_state, and the zmm kernels (gcm_vaes_k.c) that the engine's
 * interface (gcm_vaes.c) calls. Internal to accel/cpu/.
 *
 * GHASH's representation: every block is byte-reversed on load ("R" form: GCM's first bit, the
 * coefficient of x^0, becomes bit 127), so a carry-less multiply is a plain PCLMULQDQ. The product
 * of two R values is the field product times x, one place off; the hash key powers are therefore
 * stored times x^-1 (R(H^k) shifted left by one, reduced), and the 256-bit product of data and
 * such a power is the field product itself, reduced by two multiplies by the constant
 * 0xc2 << 56 (x^-1's low terms). The reduction is linear, so sixteen products are summed first
 * and reduced once. */
#ifndef ACCELAES_GCM_VAES_H
#define ACCELAES_GCM_VAES_H

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>

#define TGT_GV __attribute__((target("aes,pclmul,sse4.1,ssse3,avx,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))

/* Key data, set once per key, read-only afterwards (the split reads it from other threads). */
typedef struct gv_key {
    __m512i rk[15];      /* round keys, each in the four 128-bit lanes: aesenc takes them from memory */
    __m128i hp[16];      /* hp[i] = R(H^(16 - i)) * x^-1: a group of n blocks takes hp[16 - n ..] */
    int rounds;          /* 10, 12, 14 */
} gv_key;

/* One message. */
typedef struct gv_msg {
    __m128i x;           /* the GHASH so far, R form */
    __m128i ctr;         /* the counter block of the next keystream block, bytes 12..15 reversed
                          * (a native 32-bit lane: a vector add is GCM's inc32, wrapping mod 2^32) */
    __m128i ek0;         /* E(K, J0), added to the tag; zero after restart_zero */
    uint8_t ks[16];      /* the keystream of the open partial block */
    uint8_t pb[16];      /* its ciphertext so far, hashed when the block is whole or at finish */
    uint64_t aadlen, datalen;
    unsigned plen;       /* bytes of the open partial block used (0: none open) */
    int enc;
} gv_msg;

typedef struct gv_state {
    gv_key k;            /* first: 64-byte aligned within acc_gcm_state */
    gv_msg m;
} gv_state;

/* gcm_vaes_k.c. All constant time: no branch or address depends on key or data. */
/* ghash: *x = GHASH of nblocks (whole 16-byte blocks) from in, continued from *x (R form). */
void gv_ghash(const gv_key *k, __m128i *x, const uint8_t *in, size_t nblocks);
/* blocks: nblocks whole blocks from in to out (in == out legal) with counter blocks from *ctr
 * (moved on by inc32), their ciphertext (out when enc, else in) hashed into *x. */
void gv_blocks(const gv_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks, int enc);
/* The hash key powers from H = E(K, 0^128). */
void gv_powers(gv_key *k, __m128i h);

/* bytes 12..15 reversed: between GCM's counter block and the state's ctr form, both ways */
#define GV_CTR_SWAP() _mm_set_epi8(12, 13, 14, 15, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GV_BSWAP() _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* The one-block helpers, inline in both files: a small record's start and finish are bound by
 * their latency, which calls (and, in gv_encrypt1, zmm loads and a vzeroupper) only lengthened,
 * and inlined the core overlaps E(K, J0) with the AAD's hash. */

/* (hi:lo), a 256-bit product, times x^-128 modulo the field polynomial, in two 64-bit folds
 * (each: the low qword q times the polynomial's x^-1 terms, added to the value shifted by 64). */
TGT_GV static inline __attribute__((always_inline)) __m128i reduce1(__m128i lo, __m128i hi)
{
    const __m128i p = _mm_set_epi64x(0, (long long)0xc200000000000000ULL);
    __m128i v = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, p, 0x00));
    __m128i w = _mm_xor_si128(_mm_shuffle_epi32(v, 0x4e), _mm_clmulepi64_si128(v, p, 0x00));
    return _mm_xor_si128(hi, w);
}

/* a * b for a in R form and b a stored power (R form times x^-1). */
TGT_GV static inline __attribute__((always_inline)) __m128i gmul1(__m128i a, __m128i b)
{
    __m128i lo = _mm_clmulepi64_si128(a, b, 0x00), hi = _mm_clmulepi64_si128(a, b, 0x11);
    __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return reduce1(_mm_xor_si128(lo, _mm_slli_si128(mid, 8)), _mm_xor_si128(hi, _mm_srli_si128(mid, 8)));
}

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



#endif
