/* accel/cpu/gcm_vaes_k.c: the zmm kernels of the VAES GCM engine (gcm_vaes.c): sixteen counter
 * blocks in four zmm registers through the AES rounds, their ciphertext hashed with H^16..H^1
 * (four 4-lane schoolbook products per register, summed, one reduction per sixteen blocks). The
 * AES of a group and the GHASH of the group's ciphertext are independent of the next group's AES,
 * so the core overlaps one group's GHASH (VPCLMULQDQ, shuffles) with the next group's rounds
 * (VAES). Each key size is its own copy with a constant round count; the round keys are read
 * from the key data as memory operands (no stack copy of them). A tail of 1..15 blocks runs as
 * one group of 1..4 registers, the last one masked. The representation is gcm_vaes_gf.h's. */
#include "accel/cpu/gcm_vaes.h"

#define INLINE static inline __attribute__((always_inline))

/* ---- GF(2^128) in R form ---- */

/* Four lanes of products of d and h added to (lo, mid, hi). first: set instead of add. */
TGT_GV INLINE void mul4(__m512i d, __m512i h, __m512i *lo, __m512i *mid, __m512i *hi, int first)
{
    __m512i l = _mm512_clmulepi64_epi128(d, h, 0x00), u = _mm512_clmulepi64_epi128(d, h, 0x11);
    __m512i m0 = _mm512_clmulepi64_epi128(d, h, 0x01), m1 = _mm512_clmulepi64_epi128(d, h, 0x10);

    if (first) {
        *lo = l, *hi = u, *mid = _mm512_xor_si512(m0, m1);
        return;
    }
    *lo = _mm512_xor_si512(*lo, l);
    *hi = _mm512_xor_si512(*hi, u);
    *mid = _mm512_ternarylogic_epi64(*mid, m0, m1, 0x96);   /* three-way XOR */
}

TGT_GV INLINE __m128i hsum(__m512i v)
{
    __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

/* The four lanes' products lo + mid y^64 + hi y^128 (y: a bit place), reduced lane by lane and
 * summed: the low qword of lo folded into mid, then the low qword of mid into hi (reduce1's two
 * folds, each landing on the next part instead of a shifted copy), so mid is never shifted. */
TGT_GV INLINE __m128i fold(__m512i lo, __m512i mid, __m512i hi)
{
    const __m512i p = _mm512_set1_epi64((long long)0xc200000000000000ULL);

    mid = _mm512_ternarylogic_epi64(mid, _mm512_shuffle_epi32(lo, 0x4e), _mm512_clmulepi64_epi128(lo, p, 0x00), 0x96);
    hi = _mm512_ternarylogic_epi64(hi, _mm512_shuffle_epi32(mid, 0x4e), _mm512_clmulepi64_epi128(mid, p, 0x00), 0x96);
    return hsum(hi);
}

/* x = (x + d0) H^n + d1 H^(n-1) + ... over the nr registers of d (n blocks, the unused lanes
 * zero), hp: the powers from H^n down. The register that takes x comes last, so the products of
 * the others are summed off the chain from one group's x to the next. */
TGT_GV INLINE __m128i hash_regs(const gv_key *k, __m128i x, __m512i *d, int nr, size_t n, __mmask8 mlast)
{
    const __m512i bswap = _mm512_broadcast_i32x4(GV_BSWAP());
    __m512i lo, mid, hi;

#pragma GCC unroll 4
    for (int j = nr - 1; j >= 0; j--) {
        const __m128i *hp = &k->hp[16 - n + 4 * (size_t)j];
        __m512i h = j < nr - 1 ? _mm512_loadu_si512(hp) : _mm512_maskz_loadu_epi64(mlast, hp);
        __m512i v = _mm512_shuffle_epi8(d[j], bswap);

        if (j == 0)
            v = _mm512_xor_si512(v, _mm512_zextsi128_si512(x));
        mul4(v, h, &lo, &mid, &hi, j == nr - 1);
    }
    return fold(lo, mid, hi);
}

/* ---- GHASH alone (AAD, IV, the split) ---- */

TGT_GV INLINE void ghash_tail(const gv_key *k, __m128i *x, const uint8_t *in, size_t n, int nr)
{
    size_t rem = n - 4 * (size_t)(nr - 1);
    __mmask8 ml = (__mmask8)((1u << (2 * rem)) - 1);
    __m512i d[4];

#pragma GCC unroll 4
    for (int j = 0; j < nr; j++)
        d[j] = j < nr - 1 ? _mm512_loadu_si512(in + 64 * j) : _mm512_maskz_loadu_epi64(ml, in + 64 * j);
    *x = hash_regs(k, *x, d, nr, n, ml);
}

TGT_GV void gv_ghash(const gv_key *k, __m128i *x, const uint8_t *in, size_t nblocks)
{
    __m128i h = *x;

    for (; nblocks >= 16; nblocks -= 16, in += 256) {
        __m512i d[4];
        for (int j = 0; j < 4; j++)
            d[j] = _mm512_loadu_si512(in + 64 * j);
        h = hash_regs(k, h, d, 4, 16, 0xff);
    }
    *x = h;
    switch ((nblocks + 3) / 4) {
    case 1: ghash_tail(k, x, in, nblocks, 1); break;
    case 2: ghash_tail(k, x, in, nblocks, 2); break;
    case 3: ghash_tail(k, x, in, nblocks, 3); break;
    case 4: ghash_tail(k, x, in, nblocks, 4); break;
    default: break;
    }
}

/* ---- AES-CTR with GHASH ---- */

/* nr registers of counter blocks from c (ctr form, lane i = c + i), whitened; c moves on by 4 per
 * register. */
TGT_GV INLINE void counters(const gv_key *k, __m512i *c, __m512i *z, int nr)
{
    const __m512i swap = _mm512_broadcast_i32x4(GV_CTR_SWAP());
    const __m512i four = _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0);

#pragma GCC unroll 4
    for (int j = 0; j < nr; j++) {
        z[j] = _mm512_xor_si512(_mm512_shuffle_epi8(*c, swap), k->rk[0]);
        *c = _mm512_add_epi32(*c, four);
    }
}

TGT_GV INLINE void rounds_mid(const gv_key *k, int rounds, __m512i *z, int nr)
{
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++)
            z[j] = _mm512_aesenc_epi128(z[j], k->rk[r]);
    }
}

/* One group of nr registers, n blocks (the last register masked to its blocks): the keystream
 * XOR folded into the last round key; d = the ciphertext (zero beyond n) for the hash. */
TGT_GV INLINE void group(const gv_key *k, int rounds, __m512i *c, __m128i *x, const uint8_t *in, uint8_t *out,
                         size_t n, int nr, int enc)
{
    size_t rem = n - 4 * (size_t)(nr - 1);
    __mmask8 ml = (__mmask8)((1u << (2 * rem)) - 1);
    __m512i z[4], d[4];

    counters(k, c, z, nr);
    rounds_mid(k, rounds, z, nr);
#pragma GCC unroll 4
    for (int j = 0; j < nr; j++) {
        int last = j == nr - 1 && n < 16;
        __m512i i = last ? _mm512_maskz_loadu_epi64(ml, in + 64 * j) : _mm512_loadu_si512(in + 64 * j);

        z[j] = _mm512_aesenclast_epi128(z[j], _mm512_xor_si512(k->rk[rounds], i));
        if (last) {
            _mm512_mask_storeu_epi64(out + 64 * j, ml, z[j]);
            d[j] = enc ? _mm512_maskz_mov_epi64(ml, z[j]) : i;
        } else {
            _mm512_storeu_si512(out + 64 * j, z[j]);
            d[j] = enc ? z[j] : i;
        }
    }
    *x = hash_regs(k, *x, d, nr, n, n < 16 ? ml : 0xff);
}

/* Sixteen blocks from a counter whose low four bits are zero; d: their ciphertext, for the hash.
 * Adding 0..15 to such a counter only sets its low bits, an XOR, which commutes with the
 * whitening: one byte swap and one XOR with the first round key serve the group, and each
 * register is that XOR a constant (a three-way XOR). *c: the counter in ctr form, four lanes alike. */
TGT_GV INLINE void aes16(const gv_key *k, int rounds, __m512i *c, const __m512i *lanes, const uint8_t *in,
                         uint8_t *out, __m512i *d, int enc)
{
    const __m512i swap = _mm512_broadcast_i32x4(GV_CTR_SWAP());
    const __m512i sixteen = _mm512_set_epi32(16, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0);
    __m512i z[4], b = _mm512_shuffle_epi8(*c, swap);

    *c = _mm512_add_epi32(*c, sixteen);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        z[j] = _mm512_ternarylogic_epi64(b, k->rk[0], lanes[j], 0x96);
    rounds_mid(k, rounds, z, 4);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i i = _mm512_loadu_si512(in + 64 * j);

        z[j] = _mm512_aesenclast_epi128(z[j], _mm512_xor_si512(k->rk[rounds], i));
        _mm512_storeu_si512(out + 64 * j, z[j]);
        d[j] = enc ? z[j] : i;
    }
}

/* 1..15 blocks as one group of 1..4 registers from the counter cn (ctr form), moved on by n. */
TGT_GV INLINE void small(const gv_key *k, int rounds, __m128i *cn, __m128i *h, const uint8_t *in, uint8_t *out,
                         size_t n, int enc)
{
    const __m512i lanes = _mm512_set_epi32(3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);
    __m512i c = _mm512_add_epi32(_mm512_broadcast_i32x4(*cn), lanes);

    *cn = _mm_add_epi32(*cn, _mm_set_epi32((int)n, 0, 0, 0));
    switch ((n + 3) / 4) {
    case 1: group(k, rounds, &c, h, in, out, n, 1, enc); break;
    case 2: group(k, rounds, &c, h, in, out, n, 2, enc); break;
    case 3: group(k, rounds, &c, h, in, out, n, 3, enc); break;
    case 4: group(k, rounds, &c, h, in, out, n, 4, enc); break;
    default: break;
    }
}

/* A head up to a counter with its low four bits zero (as small), then groups of sixteen, each
 * hashed while the next one's rounds run, then a tail (as small). */
TGT_GV INLINE void blocks_r(const gv_key *k, int rounds, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out,
                            size_t n, int enc)
{
    __m128i h = *x, cn = *ctr;   /* locals: through *x every group would wait on a store and a load */

    if (n >= 32) {
        size_t head = (16 - ((uint32_t)_mm_extract_epi32(cn, 3) & 15)) & 15;
        __m512i lanes[4], c, d[4];

        if (head != 0) {
            small(k, rounds, &cn, &h, in, out, head, enc);
            in += 16 * head, out += 16 * head, n -= head;
        }
        for (int j = 0; j < 4; j++)   /* lane i of register j: counter + 4j + i, in the last byte */
            lanes[j] = _mm512_set_epi32((4 * j + 3) << 24, 0, 0, 0, (4 * j + 2) << 24, 0, 0, 0,
                                        (4 * j + 1) << 24, 0, 0, 0, (4 * j) << 24, 0, 0, 0);
        c = _mm512_broadcast_i32x4(cn);
        cn = _mm_add_epi32(cn, _mm_set_epi32((int)(uint32_t)(n & ~(size_t)15), 0, 0, 0));   /* inc32, mod 2^32 */
        aes16(k, rounds, &c, lanes, in, out, d, enc);
        for (n -= 16, in += 256, out += 256; n >= 16; n -= 16, in += 256, out += 256) {
            __m512i e[4];

            /* the previous group's hash first: its inputs are ready, so it issues beside this
             * group's rounds instead of waiting behind them */
            h = hash_regs(k, h, d, 4, 16, 0xff);
            aes16(k, rounds, &c, lanes, in, out, e, enc);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                d[j] = e[j];
        }
        h = hash_regs(k, h, d, 4, 16, 0xff);
    }
    while (n > 0) {
        size_t m = n < 16 ? n : 16;
        small(k, rounds, &cn, &h, in, out, m, enc);
        in += 16 * m, out += 16 * m, n -= m;
    }
    *x = h;
    *ctr = cn;
}

#define PER_ROUNDS(r)                                                                                     \
    TGT_GV static __attribute__((noinline)) void enc##r(const gv_key *k, __m128i *ctr, __m128i *x,          \
                                                        const uint8_t *in, uint8_t *out, size_t n)          \
    { blocks_r(k, r, ctr, x, in, out, n, 1); }                                                           \
    TGT_GV static __attribute__((noinline)) void dec##r(const gv_key *k, __m128i *ctr, __m128i *x,          \
                                                        const uint8_t *in, uint8_t *out, size_t n)          \
    { blocks_r(k, r, ctr, x, in, out, n, 0); }

PER_ROUNDS(10)
PER_ROUNDS(12)
PER_ROUNDS(14)

TGT_GV void gv_blocks(const gv_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks,
                      int enc)
{
    if (nblocks == 0)
        return;
    switch (k->rounds) {
    case 10: (enc ? enc10 : dec10)(k, ctr, x, in, out, nblocks); break;
    case 12: (enc ? enc12 : dec12)(k, ctr, x, in, out, nblocks); break;
    default: (enc ? enc14 : dec14)(k, ctr, x, in, out, nblocks); break;
    }
}

/* ---- One block, and the key's powers ---- */

/* hp[15] = H * x^-1 (gcm_vaes_gf.h); hp[15 - i] = H^(i+1) * x^-1 = H^i * x^-1 times H. */
TGT_GV void gv_powers(gv_key *k, __m128i h)
{
    k->hp[15] = h_times_xinv(h);
    for (int i = 14; i >= 0; i--)
        k->hp[i] = gmul1(k->hp[i + 1], k->hp[15]);
}
