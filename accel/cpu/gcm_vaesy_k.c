/* accel/cpu/gcm_vaesy_k.c: the ymm kernels of the VAES GCM engine (gcm_vaesy.c), for cores without
 * AVX-512: sixteen counter blocks in eight ymm registers through the AES rounds (VEX VAES, two
 * blocks an instruction), and GHASH with VPCLMULQDQ on ymm, Karatsuba (three products per block,
 * the middle factor of each power stored in the key data), one reduction per sixteen blocks.
 * Only 16 vector registers exist, so the eight AES registers leave no room for a second group's
 * data: the GHASH of a group is read back from memory (encrypting: the previous group's
 * ciphertext, already stored; decrypting: this group's, before it is overwritten) and one
 * register's product is issued after each AES round, beside the rounds. Round keys and powers are
 * memory operands of the instructions that use them, reloaded each group (an empty asm on the key
 * pointer: gcc must not hoist them into registers it would spill). Each key size is its own copy
 * with a constant round count. A head up to a counter whose low four bits are zero, a tail, and a
 * call of under 32 blocks run as groups of 1..8 registers (1..16 blocks) with counters added one
 * by one; a call of one block runs on xmm. The representation is gcm_vaes_gf.h's. */
#include "accel/cpu/gcm_vaesy.h"
#include "accel/cpu/gcm_vaes_rounds.h"
#include "accel/cpu/unroll.h"

#define INLINE static inline __attribute__((always_inline))
#define YLD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define YST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
#define XLD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define XST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define NREG 8
/* Every use of the key data loads it anew: without this gcc keeps round keys and powers loaded for
 * one group (a head, the first group) in registers for the next, spilling them to the stack
 * (tests/system/test_key_residue.py finds them there). Each group, tail and hash begins with it. */
#define KEY_FENCE(k) __asm__("" : "+r"(k))

/* ---- GF(2^128) in R form ---- */

#define KTGT TGT_GVY
#define KV __m256i
#define KX _mm256_xor_si256
#define KCL _mm256_clmulepi64_epi128
#define KSW(a) _mm256_shuffle_epi32((a), 0x4e)
#define KLD YLD
#define KPOLY _mm256_set1_epi64x((long long)0xc200000000000000ULL)
#include "accel/cpu/gcm_vaes_kara.h"

/* v (two blocks, R form) times hp[m] and hp[m + 1], added to a (set when first). */
TGT_GVY INLINE void mul2(const gvy_key *k, __m256i v, size_t m, prod *a, int first)
{
    kmul(v, &k->hp[m], &k->hk[m], a, first);
}

/* Both lanes reduced and summed. */
TGT_GVY INLINE __m128i fold(prod a)
{
    __m256i hi = kfold(a);

    return _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
}

/* Register j of q from p (R form), the last one a single block when the count n is odd. */
TGT_GVY INLINE __m256i hload(const uint8_t *p, int j, int q, size_t n)
{
    const __m256i bswap = _mm256_broadcastsi128_si256(GV_BSWAP());
    __m256i v = (j == q - 1 && (n & 1)) ? _mm256_zextsi128_si256(XLD(p + 32 * j)) : YLD(p + 32 * j);

    return _mm256_shuffle_epi8(v, bswap);
}

/* x = (x + b0) H^n + b1 H^(n-1) + ... for the n = 2q or 2q - 1 blocks at p. The register that
 * takes x comes last: the others' products are off the chain from one x to the next. */
TGT_GVY INLINE __m128i hash_q(const gvy_key *k, __m128i x, const uint8_t *p, size_t n, int q)
{
    prod a;

    KEY_FENCE(k);

#pragma GCC unroll 8
    for (int j = q - 1; j >= 0; j--) {
        __m256i v = hload(p, j, q, n);

        if (j == 0)
            v = _mm256_xor_si256(v, _mm256_zextsi128_si256(x));
        mul2(k, v, 16 - n + 2 * (size_t)j, &a, j == q - 1);
    }
    return fold(a);
}

TGT_GVY void gvy_ghash(const gvy_key *k, __m128i *x, const uint8_t *in, size_t nblocks)
{
    __m128i h = *x;

    for (; nblocks >= 16; nblocks -= 16, in += 256) {
        h = hash_q(k, h, in, 16, NREG);
    }
    if (nblocks > 0) {
#define C(q) h = hash_q(k, h, in, nblocks, q)
        GROUP_OF((nblocks + 1) / 2, C)
#undef C
    }
    *x = h;
    _mm256_zeroall();
}

/* ---- AES-CTR with GHASH ---- */

TGT_GVY INLINE void rounds_mid(const gvy_key *k, int rounds, __m256i *z, int q)
{
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < q; j++)
            z[j] = _mm256_aesenc_epi128(z[j], k->rk[r]);
    }
}

/* 1..16 blocks (q registers) from the counter *cn (ctr form, moved on by n), hashed: decrypting
 * first (in == out), encrypting after the stores; never beside the AES, whose states would not fit
 * the registers beside it (a spilled state before the last round gives that round key away). */
TGT_GVY INLINE void small(const gvy_key *k, int rounds, __m128i *cn, __m128i *x, const uint8_t *in, uint8_t *out,
                          size_t n, int q, int enc)
{
    const __m256i swap = _mm256_broadcastsi128_si256(GV_CTR_SWAP());
    const __m256i two = _mm256_set_epi32(2, 0, 0, 0, 2, 0, 0, 0);
    __m256i c = _mm256_add_epi32(_mm256_broadcastsi128_si256(*cn), _mm256_set_epi32(1, 0, 0, 0, 0, 0, 0, 0));
    __m256i z[NREG];
    int odd = (int)(n & 1);

    if (!enc)
        *x = hash_q(k, *x, in, n, q);
    KEY_FENCE(k);
    *cn = _mm_add_epi32(*cn, _mm_set_epi32((int)n, 0, 0, 0));
#pragma GCC unroll 8
    for (int j = 0; j < q; j++) {
        z[j] = _mm256_xor_si256(_mm256_shuffle_epi8(c, swap), k->rk[0]);
        c = _mm256_add_epi32(c, two);
    }
    rounds_mid(k, rounds, z, q);
#pragma GCC unroll 8
    for (int j = 0; j < q; j++) {
        if (j == q - 1 && odd) {
            __m128i l = _mm256_castsi256_si128(k->rk[rounds]);
            XST(out + 32 * j, _mm_aesenclast_si128(_mm256_castsi256_si128(z[j]), _mm_xor_si128(l, XLD(in + 32 * j))));
        } else {
            YST(out + 32 * j, _mm256_aesenclast_epi128(z[j], _mm256_xor_si256(k->rk[rounds], YLD(in + 32 * j))));
        }
    }
    if (enc) {
        const uint8_t *o = out;
        __asm__("" : "+r"(o));   /* read back, as in group16 */
        *x = hash_q(k, *x, o, n, q);
    }
}

TGT_GVY INLINE void small_n(const gvy_key *k, int rounds, __m128i *cn, __m128i *x, const uint8_t *in, uint8_t *out,
                            size_t n, int enc)
{
#define C(q) small(k, rounds, cn, x, in, out, n, q, enc)
    GROUP_OF((n + 1) / 2, C)
#undef C
}

/* Sixteen blocks from a counter whose low four bits are zero: adding 0..15 only sets those bits,
 * an XOR, which commutes with the whitening, so one byte swap and one XOR with the first round key
 * serve the group and each register is that XOR a constant. With hash, the sixteen blocks at hs
 * are hashed into *x, one register after each round (the register that takes x last). */
TGT_GVY INLINE void group16(const gvy_key *k, int rounds, __m128i *cn, __m128i *x, const uint8_t *in, uint8_t *out,
                            const uint8_t *hs, int hash)
{
    __m256i z[NREG], b = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_shuffle_epi8(*cn, GV_CTR_SWAP())), k->rk[0]);
    prod a;

    /* hs read from memory: encrypting it is the previous group's output, which gcc would
     * otherwise keep in registers it does not have */
    __asm__("" : "+r"(hs));
    KEY_FENCE(k);
    *cn = _mm_add_epi32(*cn, _mm_set_epi32(16, 0, 0, 0));
#pragma GCC unroll 8
    for (int j = 0; j < NREG; j++)   /* lane i of register j: counter + 2j + i, in the last byte */
        z[j] = _mm256_xor_si256(b, _mm256_set_epi32((2 * j + 1) << 24, 0, 0, 0, (2 * j) << 24, 0, 0, 0));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < NREG; j++)
            z[j] = _mm256_aesenc_epi128(z[j], k->rk[r]);
        if (hash && r <= NREG) {
            int j = NREG - r;
            __m256i v = hload(hs, j, NREG, 16);

            if (j == 0)
                v = _mm256_xor_si256(v, _mm256_zextsi128_si256(*x));
            mul2(k, v, 2 * (size_t)j, &a, j == NREG - 1);
            if (j == 0)
                *x = fold(a);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NREG; j++)
        YST(out + 32 * j, _mm256_aesenclast_epi128(z[j], _mm256_xor_si256(k->rk[rounds], YLD(in + 32 * j))));
}

/* A head up to a counter with its low four bits zero, groups of sixteen (encrypting, each one's
 * hash with the next one's rounds; decrypting, with its own), then a tail. */
TGT_GVY INLINE void blocks_r(const gvy_key *k, int rounds, __m128i *ctr, __m128i *x, const uint8_t *in,
                             uint8_t *out, size_t n, int enc)
{
    __m128i h = *x, cn = *ctr;   /* locals: through *x every group would wait on a store and a load */

    if (n >= 32) {
        size_t head = (16 - ((uint32_t)_mm_extract_epi32(cn, 3) & 15)) & 15;

        if (head != 0) {
            small_n(k, rounds, &cn, &h, in, out, head, enc);
            in += 16 * head, out += 16 * head, n -= head;
        }
        if (enc) {
            group16(k, rounds, &cn, &h, in, out, NULL, 0);
            in += 256, out += 256, n -= 16;
        }
        for (; n >= 16; n -= 16, in += 256, out += 256) {
            group16(k, rounds, &cn, &h, in, out, enc ? out - 256 : in, 1);
        }
        if (enc) {
            const uint8_t *o = out - 256;
            __asm__("" : "+r"(o));   /* read back, as in group16 */
            h = hash_q(k, h, o, 16, NREG);
        }
    }
    while (n > 0) {
        size_t m = n < 16 ? n : 16;
        small_n(k, rounds, &cn, &h, in, out, m, enc);
        in += 16 * m, out += 16 * m, n -= m;
    }
    *x = h;
    *ctr = cn;
}

GV_BY_ROUNDS(TGT_GVY, gvy_key)

TGT_GVY void gvy_blocks(const gvy_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks,
                        int enc)
{
    if (nblocks == 0)
        return;
    if (nblocks == 1) {   /* a record of one block: on xmm, its latency without a two-lane fold or a vzeroall */
        __m128i i = XLD(in), o = _mm_xor_si128(i, gvy_encrypt1(k, _mm_shuffle_epi8(*ctr, GV_CTR_SWAP())));

        XST(out, o);
        *x = gvy_ghash1(k, *x, enc ? o : i);
        *ctr = _mm_add_epi32(*ctr, _mm_set_epi32(1, 0, 0, 0));
        return;
    }
    by_rounds(k, ctr, x, in, out, nblocks, enc);
    _mm256_zeroall();   /* the keystream and the products go (an xsave would write them out: wipe.h) */
}

/* ---- The key's powers ---- */

/* hp[15] = H * x^-1 (gcm_vaes_gf.h); hp[15 - i] = H^(i+1) * x^-1 = H^i * x^-1 times H; hk from hp. */
TGT_GVY void gvy_powers(gvy_key *k, __m128i h)
{
    k->hp[15] = h_times_xinv(h);
    for (int i = 14; i >= 0; i--)
        k->hp[i] = gmul1(k->hp[i + 1], k->hp[15]);
    k->hp[16] = _mm_setzero_si128();
    for (int i = 0; i <= 16; i++)
        k->hk[i] = _mm_xor_si128(k->hp[i], _mm_shuffle_epi32(k->hp[i], 0x4e));
}
