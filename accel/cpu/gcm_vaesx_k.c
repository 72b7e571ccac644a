/* accel/cpu/gcm_vaesx_k.c: the xmm kernels of accelaes's GCM engine (gcm_vaesx.c), for cores with
 * AES-NI and PCLMULQDQ but no VAES, SSE only: eight counter blocks in eight xmm registers through the
 * AES rounds, and GHASH with PCLMULQDQ, Karatsuba (three products per block, the middle factor of
 * each power stored in the key data), one reduction per eight blocks. As on ymm (gcm_vaesy_k.c),
 * 16 registers hold no second group's data beside the eight AES states: the GHASH of a group is read
 * back from memory (encrypting: the previous group's ciphertext, already stored; decrypting: this
 * group's, before it is overwritten) and one block's products are issued after each AES round.
 * Round keys and powers are memory operands of the instructions that use them, reloaded each group
 * (an empty asm on the key pointer). Each key size is its own copy with a constant round count. A
 * tail, and a call of under 8 blocks (16 encrypting), run as one group of 1..8 blocks, hashed before
 * (decrypting) or after (encrypting) its AES. The representation is gcm_vaes_gf.h's. */
#include "accel/cpu/gcm_vaesx.h"
#include "accel/cpu/gcm_vaes_rounds.h"
#include "accel/cpu/unroll.h"
#include "accel/wipe.h"

#define INLINE static inline __attribute__((always_inline))
#define XLD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define XST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define NB 8
/* Every use of the key data loads it anew (gcm_vaesy_k.c: gcc would otherwise keep one group's
 * round keys and powers in registers for the next, and spill them). */
#define KEY_FENCE(k) __asm__("" : "+r"(k))

/* ---- GF(2^128) in R form ---- */

#define KTGT TGT_GVX
#define KV __m128i
#define KX _mm_xor_si128
#define KCL _mm_clmulepi64_si128
#define KSW(a) _mm_shuffle_epi32((a), 0x4e)
#define KLD(p) (*(const __m128i *)(p))
#define KPOLY _mm_set_epi64x(0, (long long)0xc200000000000000ULL)
#include "accel/cpu/gcm_vaes_kara.h"

/* v (a block, R form) times hp[m], added to a (set when first). */
TGT_GVX INLINE void mul1(const gvx_key *k, __m128i v, size_t m, prod *a, int first)
{
    kmul(v, &k->hp[m], &k->hk[m], a, first);
}

/* Block j at p, R form. */
TGT_GVX INLINE __m128i hload(const uint8_t *p, int j)
{
    return _mm_shuffle_epi8(XLD(p + 16 * j), GV_BSWAP());
}

/* x = (x + b0) H^n + b1 H^(n-1) + ... + b(n-1) H for the n (1..8) blocks at p. The block that takes
 * x comes last: the others' products are off the chain from one x to the next. */
TGT_GVX INLINE __m128i hash_n(const gvx_key *k, __m128i x, const uint8_t *p, int n)
{
    prod a;

    KEY_FENCE(k);
#pragma GCC unroll 8
    for (int j = n - 1; j >= 0; j--) {
        __m128i v = hload(p, j);

        if (j == 0)
            v = _mm_xor_si128(v, x);
        mul1(k, v, (size_t)(NB - n + j), &a, j == n - 1);
    }
    return kfold(a);
}

TGT_GVX static __attribute__((noinline)) void ghash_n(const gvx_key *k, __m128i *x, const uint8_t *in, size_t nblocks)
{
    __m128i h = *x;

    for (; nblocks >= NB; nblocks -= NB, in += 16 * NB)
        h = hash_n(k, h, in, NB);
    if (nblocks > 0) {
#define C(q) h = hash_n(k, h, in, q)
        GROUP_OF(nblocks, C)
#undef C
    }
    *x = h;
}

/* The kernels' frames: gcc spills constants, and may spill a product or a keystream block, to the red
 * zone below the stack pointer (objdump -d: stores to -0x..(%rsp)); one scrub after each kernel, at the
 * depth it ran at, clears them (wipe.h), with the registers. */
TGT_GVX static inline __attribute__((always_inline)) void wipe_after(void)
{
    acc_stack_scrub_sse();
    acc_clear_xmm();   /* the round keys, keystream, powers and products go (an xsave would write them out) */
}

TGT_GVX void gvx_ghash(const gvx_key *k, __m128i *x, const uint8_t *in, size_t nblocks)
{
    ghash_n(k, x, in, nblocks);
    wipe_after();
}

/* ---- AES-CTR with GHASH ---- */

/* The n counter blocks from cn (ctr form: a 32-bit lane add is inc32), whitened. */
TGT_GVX INLINE void counters(const gvx_key *k, __m128i cn, __m128i *z, int n)
{
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        z[j] = _mm_xor_si128(_mm_shuffle_epi8(_mm_add_epi32(cn, _mm_set_epi32(j, 0, 0, 0)), GV_CTR_SWAP()), k->rk[0]);
}

/* The last round with the data: aesenclast(z, rk ^ d) = aesenclast(z, rk) ^ d. */
TGT_GVX INLINE void last(const gvx_key *k, int rounds, const __m128i *z, const uint8_t *in, uint8_t *out, int n)
{
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, _mm_aesenclast_si128(z[j], _mm_xor_si128(k->rk[rounds], XLD(in + 16 * j))));
}

/* n (1..8) blocks from the counter *cn (moved on by n), hashed: decrypting first (in == out),
 * encrypting after the stores; never beside the AES. */
TGT_GVX INLINE void small(const gvx_key *k, int rounds, __m128i *cn, __m128i *x, const uint8_t *in, uint8_t *out,
                          int n, int enc)
{
    __m128i z[NB];

    if (!enc)
        *x = hash_n(k, *x, in, n);
    KEY_FENCE(k);
    counters(k, *cn, z, n);
    *cn = _mm_add_epi32(*cn, _mm_set_epi32(n, 0, 0, 0));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            z[j] = _mm_aesenc_si128(z[j], k->rk[r]);
    }
    last(k, rounds, z, in, out, n);
    if (enc) {
        const uint8_t *o = out;
        __asm__("" : "+r"(o));   /* read back, as in group8 */
        *x = hash_n(k, *x, o, n);
    }
}

/* Eight blocks from a counter whose low three bits are zero: adding 0..7 only sets those bits, an XOR,
 * which commutes with the whitening, so one byte swap and one XOR with the first round key serve the
 * group and each block is that XOR a constant. With hash, the eight blocks at hs are hashed into *x, block r - 1 after round r
 * (rounds 1..8 of at least 9): the block that takes x first, so that x needs no register beyond
 * round 1, and the fold after round 8. */
TGT_GVX INLINE void group8(const gvx_key *k, int rounds, __m128i *cn, __m128i *x, const uint8_t *in, uint8_t *out,
                           const uint8_t *hs, int hash)
{
    __m128i z[NB], b;
    prod a;

    /* hs read from memory: encrypting it is the previous group's output, which gcc would
     * otherwise keep in registers it does not have */
    __asm__("" : "+r"(hs));
    KEY_FENCE(k);
    b = _mm_xor_si128(_mm_shuffle_epi8(*cn, GV_CTR_SWAP()), k->rk[0]);
    *cn = _mm_add_epi32(*cn, _mm_set_epi32(NB, 0, 0, 0));
#pragma GCC unroll 8
    for (int j = 0; j < NB; j++)   /* block j: counter + j, in the low bits of the last byte */
        z[j] = j == 0 ? b : _mm_xor_si128(b, _mm_set_epi32(j << 24, 0, 0, 0));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < NB; j++)
            z[j] = _mm_aesenc_si128(z[j], k->rk[r]);
        if (hash && r <= NB) {
            int j = r - 1;
            __m128i v = hload(hs, j);

            if (j == 0)
                v = _mm_xor_si128(v, *x);
            mul1(k, v, (size_t)j, &a, j == 0);
            if (j == NB - 1)
                *x = kfold(a);
        }
    }
    last(k, rounds, z, in, out, NB);
}

/* The counter's low three bits are zero (public: a count of blocks). */
TGT_GVX INLINE int head_done(__m128i cn)
{
    return ((uint32_t)_mm_extract_epi32(cn, 3) & (NB - 1)) == 0;
}

/* A head up to a counter with its low three bits zero, groups of eight (encrypting, each one's hash with the next one's rounds; decrypting, with its own),
 * then a tail. */
TGT_GVX INLINE void blocks_r(const gvx_key *k, int rounds, __m128i *ctr, __m128i *x, const uint8_t *in,
                             uint8_t *out, size_t n, int enc)
{
    __m128i h = *x, cn = *ctr;   /* locals: through *x every group would wait on a store and a load */
    size_t head = (NB - ((uint32_t)_mm_extract_epi32(cn, 3) & (NB - 1))) & (NB - 1);

    if (n >= head + (enc ? 2 * NB : NB) && head != 0) {   /* up to a counter with its low three bits zero */
#define C(q) small(k, rounds, &cn, &h, in, out, q, enc)
        GROUP_OF(head, C)
#undef C
        in += 16 * head, out += 16 * head, n -= head;
    }
    if (enc && n >= 2 * NB && head_done(cn)) {
        group8(k, rounds, &cn, &h, in, out, NULL, 0);
        in += 16 * NB, out += 16 * NB, n -= NB;
        for (; n >= NB; n -= NB, in += 16 * NB, out += 16 * NB)
            group8(k, rounds, &cn, &h, in, out, out - 16 * NB, 1);
        const uint8_t *o = out - 16 * NB;
        __asm__("" : "+r"(o));   /* read back, as in group8 */
        h = hash_n(k, h, o, NB);
    } else if (!enc && head_done(cn)) {
        for (; n >= NB; n -= NB, in += 16 * NB, out += 16 * NB)
            group8(k, rounds, &cn, &h, in, out, in, 1);
    }
    while (n > 0) {
        int m = n < NB ? (int)n : NB;
#define C(q) small(k, rounds, &cn, &h, in, out, q, enc)
        GROUP_OF(m, C)
#undef C
        in += 16 * (size_t)m, out += 16 * (size_t)m, n -= (size_t)m;
    }
    *x = h;
    *ctr = cn;
}

GV_BY_ROUNDS(TGT_GVX, gvx_key)

TGT_GVX void gvx_blocks(const gvx_key *k, __m128i *ctr, __m128i *x, const uint8_t *in, uint8_t *out, size_t nblocks,
                        int enc)
{
    if (nblocks == 0)
        return;
    by_rounds(k, ctr, x, in, out, nblocks, enc);
    wipe_after();
}

/* ---- The key's powers ---- */

/* hp[7] = H * x^-1 (gcm_vaes_gf.h); hp[7 - i] = H^(i+1) * x^-1 = H^i * x^-1 times H; hk from hp. */
TGT_GVX void gvx_powers(gvx_key *k, __m128i h)
{
    k->hp[7] = h_times_xinv(h);
    for (int i = 6; i >= 0; i--)
        k->hp[i] = gmul1(k->hp[i + 1], k->hp[7]);
    for (int i = 0; i < NB; i++)
        k->hk[i] = _mm_xor_si128(k->hp[i], _mm_shuffle_epi32(k->hp[i], 0x4e));
    acc_clear_xmm();
}
