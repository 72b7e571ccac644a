/* accel/cpu/gcm_vaes_gf.h: GHASH's representation and one-block arithmetic, shared by the three widths
 * of accelaes's GCM engine (zmm: gcm_vaes.h, ymm: gcm_vaesy.h, xmm: gcm_vaesx.h). Internal to accel/cpu/.
 *
 * Every block is byte-reversed on load ("R" form: GCM's first bit, the coefficient of x^0,
 * becomes bit 127), so a carry-less multiply is a plain PCLMULQDQ. The product of two R values is
 * the field product times x, one place off; the hash key powers are therefore stored times x^-1
 * (R(H^k) shifted left by one, reduced), and the 256-bit product of data and such a power is the
 * field product itself, reduced by two multiplies by the constant 0xc2 << 56 (x^-1's low terms).
 * The reduction is linear, so a group's products are summed first and reduced once.
 *
 * The helpers carry only the target they need: inlined into a wider caller (the zmm or ymm code)
 * they are compiled as the caller is. */
#ifndef ACCELAES_GCM_VAES_GF_H
#define ACCELAES_GCM_VAES_GF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

#define TGT_GF __attribute__((target("pclmul,sse4.1,ssse3")))

/* bytes 12..15 reversed: between GCM's counter block and the state's ctr form, both ways */
#define GV_CTR_SWAP() _mm_set_epi8(12, 13, 14, 15, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GV_BSWAP() _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* (hi:lo), a 256-bit product, times x^-128 modulo the field polynomial, in two 64-bit folds
 * (each: the low qword q times the polynomial's x^-1 terms, added to the value shifted by 64). */
TGT_GF static inline __attribute__((always_inline)) __m128i reduce1(__m128i lo, __m128i hi)
{
    const __m128i p = _mm_set_epi64x(0, (long long)0xc200000000000000ULL);
    __m128i v = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, p, 0x00));
    __m128i w = _mm_xor_si128(_mm_shuffle_epi32(v, 0x4e), _mm_clmulepi64_si128(v, p, 0x00));
    return _mm_xor_si128(hi, w);
}

/* a * b for a in R form and b a stored power (R form times x^-1). */
TGT_GF static inline __attribute__((always_inline)) __m128i gmul1(__m128i a, __m128i b)
{
    __m128i lo = _mm_clmulepi64_si128(a, b, 0x00), hi = _mm_clmulepi64_si128(a, b, 0x11);
    __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return reduce1(_mm_xor_si128(lo, _mm_slli_si128(mid, 8)), _mm_xor_si128(hi, _mm_srli_si128(mid, 8)));
}

/* H' = R(H) * x^-1 from H = E(K, 0^128): R(H) shifted left by one; the bit shifted out (x^0's
 * coefficient) comes back as x^-1 = x^127 + x^6 + x + 1, the constant c2 .. 01 in R form (a
 * mask, not a branch: H is secret). */
TGT_GF static inline __attribute__((always_inline)) __m128i h_times_xinv(__m128i h)
{
    __m128i r = _mm_shuffle_epi8(h, GV_BSWAP());
    unsigned long long lo = (unsigned long long)_mm_cvtsi128_si64(r), hi = (unsigned long long)_mm_extract_epi64(r, 1);
    unsigned long long m = 0 - (hi >> 63);

    hi = (hi << 1 | lo >> 63) ^ (m & 0xc200000000000000ULL);
    lo = (lo << 1) ^ (m & 1);
    return _mm_set_epi64x((long long)hi, (long long)lo);
}

/* ---- Loads of a message's last partial block and the tag compare, for the widths without AVX-512
 * (ymm: gcm_vaesy.h, xmm: gcm_vaesx.h; the zmm width uses masked loads) ---- */

/* m (0..7) bytes from q as the low bytes of a qword, nothing read beyond them: two overlapping
 * loads (equal bytes where they overlap) from 4, the first, middle and last byte below. */
static inline __attribute__((always_inline)) uint64_t gf_load_short(const uint8_t *q, unsigned m)
{
    uint32_t a, b;

    if (m >= 4) {
        memcpy(&a, q, 4);
        memcpy(&b, q + m - 4, 4);
        return (uint64_t)a | (uint64_t)b << (8 * (m - 4));
    }
    if (m == 0)
        return 0;
    return (uint64_t)q[0] | (uint64_t)q[m / 2] << (8 * (m / 2)) | (uint64_t)q[m - 1] << (8 * (m - 1));
}

/* n (1..16) bytes from p, zero above: loads of the bytes themselves, no stack copy (a 16-byte
 * reload of narrower stores would wait on store forwarding). n is public (a length). */
TGT_GF static inline __attribute__((always_inline)) __m128i gf_load_tail(const uint8_t *p, unsigned n)
{
    uint64_t lo;

    if (n == 16)
        return _mm_loadu_si128((const __m128i *)(const void *)p);
    if (n < 8)
        return _mm_cvtsi64_si128((long long)gf_load_short(p, n));
    memcpy(&lo, p, 8);
    return _mm_set_epi64x((long long)gf_load_short(p + 8, n - 8), (long long)lo);
}

/* t's first taglen bytes equal tag's: one byte compare, one test of all taglen bits. */
TGT_GF static inline __attribute__((always_inline)) int gf_tag_equal(__m128i t, const uint8_t *tag, size_t taglen)
{
    unsigned want = (1u << taglen) - 1;
    unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(t, gf_load_tail(tag, (unsigned)taglen)));

    return (eq & want) == want;
}

#endif
