/* accel/cpu/xts.c: AES-XTS (IEEE 1619) for the inline engines: the xmm AES-NI code (aesni.c's
 * engine, and short units on the VAES engine) and the VAES zmm code, four tweaks per register.
 * A unit: T0 = E(k2, IV), block j: C = E(k1, P ^ Tj) ^ Tj with Tj = T0 * x^j in GF(2^128)
 * (x^128 + x^7 + x^2 + x + 1, the tweak read as a little-endian integer); a partial last block
 * steals ciphertext from the block before it. Nothing here branches on data or keys. */
#include "accel/cpu/aes_z.h"
#include "accel/cpu/xts_x.h"
#include "accel/cpu/cpu_features.h"

/* ------------------------------------------------------------------------------------------
 * zmm: lane i of register j holds the tweak of block 4j + i
 * ------------------------------------------------------------------------------------------ */

/* The tweaks are made with VPCLMULQDQ (acc_xts_vaes checks the CPU has it). */
#define TGT_XTS __attribute__((target("aes,sse4.1,ssse3,avx,avx2,avx512f,avx512bw,vaes,vpclmulqdq")))
#define NREG 8
/* Below 5 blocks the tweak encrypted on zmm (z_tweak), else on xmm and broadcast (measured). */
#ifndef XTS_ZTWEAK
#define XTS_ZTWEAK 5
#endif
/* From 2 blocks the zmm code (1-block units on zmm ran 0.85-0.92 of 3.5's default under EVP,
 * Debian 13; 2-7 blocks on zmm beat xmm, which spills 7 blocks with their tweaks). */
#ifndef XTS_VAES_MIN
#define XTS_VAES_MIN 2
#endif

/* Register j's multipliers: x^(4j+i) in the low qword of lane i. */
#define XK(j) _mm512_set_epi64(0, 8ULL << (4 * (j)), 0, 4ULL << (4 * (j)), 0, 2ULL << (4 * (j)), 0, 1ULL << (4 * (j)))

/* Each lane of t times x^k, k < 56 in the low qword of m's lane: both halves multiplied carry-less,
 * the high half's product moved up a qword and its bits past 127 folded back as o * 0x87 (p: 0x87 in
 * each low qword). Carry-less multiplies and byte shifts run beside the AES unit (on Intel port 5,
 * while zmm VAES has port 0 only); vector bit shifts, as the tweaks were made before, took AES
 * slots. */
TGT_XTS INLINE __m512i z_mulk(__m512i t, __m512i m, __m512i p)
{
    __m512i lo = _mm512_clmulepi64_epi128(t, m, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(t, m, 0x01);
    __m512i fold = _mm512_clmulepi64_epi128(hi, p, 0x01);

    return _mm512_ternarylogic_epi64(lo, _mm512_bslli_epi128(hi, 8), fold, 0x96);
}

/* Each lane times x^(8b) for b = 1 or 4 bytes (a byte shift, the 8b bits shifted out folded back as
 * o * 0x87), XORed with c: four operations for a whole register, none on the AES port. */
#define Z_MULB(t, b, p, c)                                                                                    \
    _mm512_ternarylogic_epi64(_mm512_bslli_epi128((t), (b)),                                                \
                              _mm512_clmulepi64_epi128(_mm512_bsrli_epi128((t), 16 - (b)), (p), 0x00), (c), 0x96)

TGT_XTS INLINE __m128i z_lane(__m512i v, int i)
{
    switch (i) {
    case 1:
        return _mm512_extracti32x4_epi32(v, 1);
    case 2:
        return _mm512_extracti32x4_epi32(v, 2);
    case 3:
        return _mm512_extracti32x4_epi32(v, 3);
    default:
        return _mm512_castsi512_si128(v);
    }
}

/* The middle rounds and the last of n registers z (whitened), the last holding rem blocks when
 * rem != 0. kt: each register's tweaks XORed with the last round key, which makes kt the last
 * round's key as it is. Each middle round key is broadcast from the key schedule where it is used,
 * not kept for the call: no copy of it in registers, so none spilled to the stack (the broadcast is
 * a load, beside the AES port; 9 or 13 per 32 blocks). */
TGT_XTS INLINE void z_xts_rounds(const uint8_t *rk, int rounds, __m512i *z, uint8_t *out, const __m512i *kt, int n,
                                 int rem, int dec)
{
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
        __m512i k = _mm512_broadcast_i32x4(XKEY(rk, r));
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            z[j] = dec ? _mm512_aesdec_epi128(z[j], k) : _mm512_aesenc_epi128(z[j], k);
    }
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        zstore(out, j, n, rem, dec ? _mm512_aesdeclast_epi128(z[j], kt[j]) : _mm512_aesenclast_epi128(z[j], kt[j]));
}

/* n whole registers; the whitening one ternary XOR with kx = k0 ^ kl: P ^ kx ^ kt = P ^ k0 ^ T. */
TGT_XTS INLINE void z_xts_regs(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, const __m512i *kt,
                               __m512i kx, int n, int dec)
{
    __m512i z[NREG];
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        z[j] = _mm512_ternarylogic_epi64(_mm512_loadu_si512(in + 64 * j), kx, kt[j], 0x96);
    z_xts_rounds(rk, rounds, z, out, kt, n, 0, dec);
}

/* The tweak after the last of q registers' blocks (rem in the last when rem != 0). */
TGT_XTS INLINE __m128i z_next(const __m512i *kt, __m512i kl, int q, int rem)
{
    __m128i last = _mm_xor_si128(z_lane(kt[q - 1], rem != 0 ? rem : 3), _mm512_castsi512_si128(kl));
    return rem != 0 ? last : x_mulx(last);
}

/* A unit below 32 blocks: q registers (rem blocks in the last when rem != 0), each register's
 * tweaks straight from t (the first tweak, broadcast), as z_mulk, and the whitening taken apart so
 * that the last product to arrive, the fold, is one XOR from the first round: a short unit is bound
 * by latency (tweak encryption, multiply, rounds). */
TGT_XTS INLINE __m128i z_xts_short(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, __m512i t,
                                   __m512i k0, __m512i kl, int q, int rem, int dec)
{
    const __m512i p = _mm512_set1_epi64(0x87);
    __m512i z[NREG], kt[NREG];

#pragma GCC unroll 8
    for (int j = 0; j < q; j++) {
        kt[j] = _mm512_xor_si512(z_mulk(t, XK(j), p), kl);
        z[j] = _mm512_ternarylogic_epi64(zload(in, j, q, rem), _mm512_xor_si512(k0, kl), kt[j], 0x96);
    }
    z_xts_rounds(rk, rounds, z, out, kt, q, rem, dec);
    return z_next(kt, kl, q, rem);
}

/* The last q registers of a long unit (rem blocks in the last when rem != 0), kt left by the loop. */
TGT_XTS INLINE __m128i z_xts_tail(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, const __m512i *kt,
                                  __m512i kx, __m512i kl, int q, int rem, int dec)
{
    __m512i z[NREG];
#pragma GCC unroll 8
    for (int j = 0; j < q; j++)
        z[j] = _mm512_ternarylogic_epi64(zload(in, j, q, rem), kx, kt[j], 0x96);
    z_xts_rounds(rk, rounds, z, out, kt, q, rem, dec);
    return z_next(kt, kl, q, rem);
}

/* The first tweak in every lane: the IV encrypted under the tweak key (tk, encryption schedule) on
 * zmm, IV and keys broadcast as loaded (no shuffle on the short unit's path to its first round). */
TGT_XTS INLINE __m512i z_tweak(const uint8_t *tk, int rounds, const uint8_t *iv)
{
    __m512i t = _mm512_xor_si512(_mm512_broadcast_i32x4(XLD(iv)), _mm512_broadcast_i32x4(XKEY(tk, 0)));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++)
        t = _mm512_aesenc_epi128(t, _mm512_broadcast_i32x4(XKEY(tk, r)));
    return _mm512_aesenclast_epi128(t, _mm512_broadcast_i32x4(XKEY(tk, rounds)));
}

/* The first 32 tweaks of a long unit, XORed with kl: registers 0 and 1 from t, each next one two
 * before it times x^8 (c8 = kl * x^8 ^ kl keeps kl in): 39 operations where eight from t took 48. */
TGT_XTS INLINE void z_kt32(__m512i *kt, __m512i t, __m512i kl, __m512i p)
{
    __m512i c8 = Z_MULB(kl, 1, p, kl);

    kt[0] = _mm512_xor_si512(z_mulk(t, XK(0), p), kl);
    kt[1] = _mm512_xor_si512(z_mulk(t, XK(1), p), kl);
#pragma GCC unroll 8
    for (int j = 2; j < NREG; j++)
        kt[j] = Z_MULB(kt[j - 2], 1, p, c8);
}

/* n >= 4 blocks of the unit under IV iv; tk: the tweak key's encryption schedule. Returns the
 * tweak of the block after the last (for ciphertext stealing). Groups of 32 blocks, each register's
 * next tweaks its own times x^32: eight independent chains, advanced only where blocks follow.
 * Nothing of the keys goes to the stack (issue 30 found vaes.c-style broadcast schedules left on
 * pool threads' stacks): kx, kl and kt stay in registers, and the loop's empty asm on rk keeps gcc
 * from hoisting the round keys' broadcasts out of the loop into registers it would then spill. */
TGT_XTS INLINE __m128i z_xts(const uint8_t *rk, const uint8_t *tk, int rounds, const uint8_t *iv, const uint8_t *in,
                             uint8_t *out, size_t n, int dec)
{
    const __m512i p = _mm512_set1_epi64(0x87);
    __m512i t = n < XTS_ZTWEAK ? z_tweak(tk, rounds, iv)
                               : _mm512_broadcast_i32x4(x_xts_one(tk, rounds, XLD(iv), _mm_setzero_si128(), 0));
    __m512i kt[NREG];
    __m512i kl = _mm512_broadcast_i32x4(XKEY(rk, rounds)), k0 = _mm512_broadcast_i32x4(XKEY(rk, 0));
    __m512i kx = _mm512_xor_si512(kl, k0), c = Z_MULB(kl, 4, p, kl); /* kt * x^32 ^ c = T * x^32 ^ kl */
    __m128i next = _mm_setzero_si128();

#define G(q) next = z_xts_short(rk, rounds, in, out, t, k0, kl, q, (int)(n & 3), dec)
    if (n < 32) {
        GROUP_OF((n + 3) / 4, G)
        return next;
    }
#undef G
    z_kt32(kt, t, kl, p);
    for (;;) {
        __asm__("" : "+r"(rk));
        z_xts_regs(rk, rounds, in, out, kt, kx, NREG, dec);
        n -= 32, in += 512, out += 512;
        if (n == 0) /* no group after the last: only the tweak after it */
            return _mm_xor_si128(_mm512_castsi512_si128(Z_MULB(kt[0], 4, p, c)), _mm512_castsi512_si128(kl));
#pragma GCC unroll 8
        for (int j = 0; j < NREG; j++)
            kt[j] = Z_MULB(kt[j], 4, p, c);
        if (n < 32)
            break;
    }
#define G(q) next = z_xts_tail(rk, rounds, in, out, kt, kx, kl, q, (int)(n & 3), dec)
    GROUP_OF((n + 3) / 4, G)
#undef G
    return next;
}

/* One out-of-line copy per key size and direction (XTS has 128- and 256-bit data keys). */
#define XTS_KEY_SIZE(r)                                                                                          \
    TGT_XTS static __attribute__((noinline)) __m128i zxts_enc##r(const uint8_t *rk, const uint8_t *tk,          \
                                                                 const uint8_t *iv, const uint8_t *in,          \
                                                                 uint8_t *out, size_t n)                        \
    {                                                                                                            \
        return z_xts(rk, tk, r, iv, in, out, n, 0);                                                              \
    }                                                                                                            \
    TGT_XTS static __attribute__((noinline)) __m128i zxts_dec##r(const uint8_t *rk, const uint8_t *tk,          \
                                                                 const uint8_t *iv, const uint8_t *in,          \
                                                                 uint8_t *out, size_t n)                        \
    {                                                                                                            \
        return z_xts(rk, tk, r, iv, in, out, n, 1);                                                              \
    }

XTS_KEY_SIZE(10)
XTS_KEY_SIZE(14)

/* ------------------------------------------------------------------------------------------
 * A whole data unit
 * ------------------------------------------------------------------------------------------ */

/* The whole blocks of a unit, on the zmm code (its own tweak encryption) from XTS_VAES_MIN blocks
 * when vaes, else on the xmm code after the tweak encryption here. Returns the tweak after them.
 * Inlined into each entry point below with dec and vaes constants: a unit of a few blocks is bound
 * by latency (the tweak encryption, then the data rounds), and an out-of-line call here spilled the
 * tweak to memory between the two and reloaded it. */
TGT_NI INLINE __m128i xts_bulk(const acc_aes_key *k, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                               uint8_t *out, size_t n, int dec, int vaes)
{
    const uint8_t *rk = dec ? k->dec : k->enc;
    __m128i t;

    if (vaes && n >= XTS_VAES_MIN)
        return k->rounds == 10 ? (dec ? zxts_dec10 : zxts_enc10)(rk, k2->enc, iv, in, out, n)
                               : (dec ? zxts_dec14 : zxts_enc14)(rk, k2->enc, iv, in, out, n);
    t = x_xts_one(k2->enc, k2->rounds, XLD(iv), _mm_setzero_si128(), 0);
    if (n > 0)
        x_xts(rk, k->rounds, in, out, n, &t, dec);
    return t;
}

TGT_NI INLINE int xts_unit(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                           uint8_t *out, size_t len, int dec, int vaes)
{
    size_t whole = len / 16, r = len % 16;
    __m128i t;

    if (len < 16)
        return 0;
    if (r != 0)
        whole--; /* the last whole block goes with the partial one */
    t = xts_bulk(k1, k2, iv, in, out, whole, dec, vaes);
    if (r != 0)
        xts_steal(k1, in + 16 * whole, out + 16 * whole, r, t, dec);
    return 1;
}

/* The xmm engine's unit, out of line, so that the register clear below runs after it. */
TGT_NI static __attribute__((noinline)) int xts_ni_work(const acc_aes_key *k1, const acc_aes_key *k2,
                                                        const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                                                        size_t len, int dec)
{
    if (dec)
        return xts_unit(k1, k2, iv, in, out, len, 1, 0);
    return xts_unit(k1, k2, iv, in, out, len, 0, 0);
}

/* No round key is held across rounds or groups in the xmm code (xts_x.h loads each where it is
 * used), so no compiler has one to spill and the frame needs no wipe (issue 30: no key left on a
 * thread's stack; gcc 12, 14 and 16 checked by tests/c/test_vreg_residue.c). Until 2026-12 the
 * 8-block loop held them, gcc 16 spilled them, and the frame was wiped after every unit of 8 blocks
 * or more: 10-14 ns, a 256-byte unit 0.65 of OpenSSL's default on a core without VAES. */
TGT_NI int acc_xts_ni(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                      uint8_t *out, size_t len, int dec)
{
    int ok = xts_ni_work(k1, k2, iv, in, out, len, dec);

    acc_clear_xmm(); /* the round keys and tweaks in registers go, as every engine entry (wipe.h) */
    return ok;
}

TGT_VAES int acc_xts_vaes(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                        uint8_t *out, size_t len, int dec)
{
    int ok;

    /* every core with VAES on zmm so far has VPCLMULQDQ too; one without gets the xmm code */
    if (!acc_cpu_has(ACC_CPU_VPCLMUL))
        return acc_xts_ni(k1, k2, iv, in, out, len, dec);
    ok = dec ? xts_unit(k1, k2, iv, in, out, len, 1, 1) : xts_unit(k1, k2, iv, in, out, len, 0, 1);

    /* GCC puts no vzeroupper here (the zmm code is inlined into this one function): the caller's
     * SSE code then ran with the upper state dirty, a 16-byte unit ~10x slower on Debian 13, whose
     * GCC 14 vectorizes the provider's byte count (acc_cipher_count) with SSE. */
    _mm256_zeroupper();
    return ok;
}
