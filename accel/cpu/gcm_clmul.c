/* accel/cpu/gcm_clmul.c: the GCM arithmetic the split (provider/cipher/gcm_split.c) needs besides the
 * engine's own: a GF(2^128) product (to combine the GHASH of ranges hashed apart), powers of H,
 * and the keystream counted with GCM's inc32 on the CTR engine.
 *
 * Why combining works: GHASH over X1||X2 (m2 blocks in X2) is GHASH(X1) * H^m2 xor GHASH(X2),
 * each GHASH started from zero; and a state S followed by X is S * H^m xor GHASH(X).
 *
 * Only called where a GCM engine with split hooks was chosen (gcm_imb.c): intel-ipsec-mb's GCM
 * itself needs PCLMULQDQ, so the CPU has it. */
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include "accel/gcm.h"

typedef unsigned __int128 u128;

/* GCM's byte string as one integer, first byte most significant: bit 127 - i is the coefficient
 * of x^i ("reflected": GCM numbers its bits from the left). */
static u128 load_be(const uint8_t b[16])
{
    u128 v = 0;

    for (int i = 0; i < 16; i++)
        v = (v << 8) | b[i];
    return v;
}

static void store_be(uint8_t b[16], u128 v)
{
    for (int i = 15; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
}

__attribute__((target("pclmul,sse2"))) static u128 clmul64(uint64_t a, uint64_t b)
{
    __m128i r = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a), _mm_cvtsi64_si128((long long)b), 0x00);
    uint64_t lo = (uint64_t)_mm_cvtsi128_si64(r), hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(r, r));

    return ((u128)hi << 64) | lo;
}

/* F(T) = T * (1 + x + x^2 + x^7) on reflected values, where a right shift by s multiplies by x^s;
 * bits shifted out below bit 0 are the terms of degree >= 128. */
static u128 fold(u128 t)
{
    return t ^ (t >> 1) ^ (t >> 2) ^ (t >> 7);
}

/* Reflected a * b mod x^128 + x^7 + x^2 + x + 1. The carry-less product of two reflected
 * 128-bit values is the reflected 255-bit product one place too low: shifted left by one, its
 * high half is the low-degree half L (coefficients 0..127) and its low half D (128..255), both
 * reflected. x^128 = 1 + x + x^2 + x^7, so the result is L xor F(D); F(D)'s terms that pass
 * degree 128 (D's low 7 bits shifted out) are E = D<<127 ^ D<<126 ^ D<<121 (degree <= 6),
 * folded once more: L xor F(D xor E). Shifts, xors and PCLMULQDQ only: constant time. */
static u128 gf_mul(u128 a, u128 b)
{
    uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64), b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
    u128 lo = clmul64(a0, b0), hi = clmul64(a1, b1), mid = clmul64(a0, b1) ^ clmul64(a1, b0);
    u128 l, d;

    lo ^= mid << 64;
    hi ^= mid >> 64;
    /* (hi:lo) << 1 */
    l = (hi << 1) | (lo >> 127);
    d = lo << 1;
    return l ^ fold(d ^ (d << 127) ^ (d << 126) ^ (d << 121));
}

void acc_gf128_mul(uint8_t x[16], const uint8_t y[16])
{
    store_be(x, gf_mul(load_be(x), load_be(y)));
}

/* Square and multiply from the top bit of e; e (a block count) is public, h is not, and every
 * step costs the same for any h. */
void acc_gf128_pow(uint8_t out[16], const uint8_t h[16], uint64_t e)
{
    u128 hv = load_be(h), r = (u128)1 << 127;   /* the element 1 */

    for (int i = 63; i >= 0; i--) {
        r = gf_mul(r, r);
        if ((e >> i) & 1)
            r = gf_mul(r, hv);
    }
    store_be(out, r);
}

static uint32_t low32(const uint8_t c[16])
{
    return (uint32_t)c[12] << 24 | (uint32_t)c[13] << 16 | (uint32_t)c[14] << 8 | c[15];
}

void acc_gcm_inc32(uint8_t ctr[16], uint64_t n)
{
    uint32_t v = low32(ctr) + (uint32_t)n;   /* mod 2^32: GCM's inc32 */

    ctr[12] = (uint8_t)(v >> 24);
    ctr[13] = (uint8_t)(v >> 16);
    ctr[14] = (uint8_t)(v >> 8);
    ctr[15] = (uint8_t)v;
}

/* The CTR engine carries into byte 11 when the low word wraps; inc32 does not. So each engine
 * call covers at most the blocks up to the wrap, and the counter is recomputed by inc32. */
int acc_gcm_ctr32(const acc_engine *eng, const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks,
                  const uint8_t ctr[16])
{
    uint8_t c[16];

    memcpy(c, ctr, 16);
    while (nblocks > 0) {
        uint64_t room = (UINT64_C(1) << 32) - low32(c);
        size_t n = (uint64_t)nblocks < room ? nblocks : (size_t)room;
        uint8_t e[16];
        acc_req r = { ACC_OP_CTR, k, e, in, out, n };

        memcpy(e, c, 16);   /* the engine moves its copy on with carry; ours moves by inc32 */
        if (!acc_engine_run(eng, &r))
            return 0;
        acc_gcm_inc32(c, n);
        in += n * 16;
        out += n * 16;
        nblocks -= n;
    }
    return 1;
}
