/* accel/cpu/xts_y.c: AES-XTS (IEEE 1619) on the ymm VAES engine, for cores with VAES and VPCLMULQDQ
 * but no AVX-512 (AMD Zen 3, which issues two 256-bit AES rounds a cycle). xts.c's zmm design on
 * half the width: lane i of register j holds the tweak of block 2j + i, tweaks made by VPCLMULQDQ
 * multiplies (the first ones by shifts) and folded into the last round key (kt = T ^ kl), groups
 * of 16 blocks in eight registers, each register's next tweaks its own times x^16 (eight
 * independent chains). With 16 vector registers a group's tweaks do not fit beside its data, so
 * they live in a buffer on the stack, wiped before return; the round keys are broadcast where
 * used, never kept for the call.
 * Below XTSY_MIN blocks the xmm engine's XTS runs, and ciphertext stealing is xts_x.h's. Nothing
 * here branches on data or keys. */
#include "accel/cpu/aes_y.h"
#include "accel/cpu/xts_x.h"

#define TGT_XY __attribute__((target("aes,sse4.1,ssse3,avx,avx2,vaes,vpclmulqdq")))
#define NREG 8
/* From this many whole blocks the ymm code (measured: bench/results/xts-ymm.md). */
#ifndef XTSY_MIN
#define XTSY_MIN 8
#endif

/* Each lane of t times x^k for k < 8 (per lane: k's qwords, k64 = 64 - k), as xts_x.h's x_mulxk
 * with AVX2's per-qword shift counts: 7 operations of one cycle each on the path, where a
 * carry-less multiply as xts.c's z_mulk takes two in a row (~10 cycles; a short unit waits for
 * its tweaks). */
TGT_XY INLINE __m256i y_mulxk(__m256i t, __m256i k, __m256i k64)
{
    __m256i o = _mm256_shuffle_epi32(_mm256_srlv_epi64(t, k64), 0x4E); /* each qword's carry, swapped */
    __m256i red = _mm256_xor_si256(_mm256_xor_si256(o, _mm256_slli_epi64(o, 1)),
                                   _mm256_xor_si256(_mm256_slli_epi64(o, 2), _mm256_slli_epi64(o, 7)));

    return _mm256_xor_si256(_mm256_sllv_epi64(t, k), _mm256_blend_epi32(o, red, 0x33));
}

/* Each lane times x^(8b) for b <= 7 bytes (a byte shift, the 8b bits shifted out folded back as
 * o * 0x87), XORed with c: no bit shift, which would share a port with the AES rounds. */
#define Y_MULB(t, b, p, c)                                                                                 \
    _mm256_xor_si256(_mm256_xor_si256(_mm256_bslli_epi128((t), (b)), (c)),                                \
                     _mm256_clmulepi64_epi128(_mm256_bsrli_epi128((t), 16 - (b)), (p), 0x00))

/* q registers of blocks (rem: one block in the last), whitened P ^ (k0 ^ kl) ^ kt with kt the
 * caller's registers, then the middle rounds, then the last round with each register's kt
 * reloaded from cur (T ^ kl is the last round's key as it is): after the empty asm on cur, gcc
 * cannot keep the whitening's copies live across the rounds, where it would spill them. With
 * nxt, the next group's tweaks (cur's times x^16) go there, one register a round, beside the
 * AES units. */
TGT_XY INLINE void y_xts_group(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, const __m256i *kt,
                               const __m256i *cur, __m256i *nxt, int q, int rem, int dec)
{
    const __m256i p = _mm256_set1_epi64x(0x87);
    __m256i y[NREG], kl = YKEY(rk, rounds), kx = _mm256_xor_si256(YKEY(rk, 0), kl);
    /* kt * x^16 ^ (kl * x^16 ^ kl) = T * x^16 ^ kl; made here, once: in the rounds, after each
     * store to nxt (which may alias the schedule, as gcc sees it), it was made again every round */
    __m256i c = Y_MULB(kl, 2, p, kl);

#pragma GCC unroll 8
    for (int j = 0; j < q; j++)
        y[j] = _mm256_xor_si256(_mm256_xor_si256(yload(in, j, q, rem), kx), kt[j]);
    __asm__("" : "+r"(cur));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
        __m256i k = YKEY(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < q; j++)
            y[j] = dec ? _mm256_aesdec_epi128(y[j], k) : _mm256_aesenc_epi128(y[j], k);
        if (nxt != NULL && r <= NREG)
            nxt[r - 1] = Y_MULB(cur[r - 1], 2, p, c);
    }
#pragma GCC unroll 8
    for (int j = 0; j < q; j++)
        ystore(out, j, q, rem, y_last(y[j], cur[j], dec));
}

/* The first tweak in both lanes: the IV encrypted under the tweak key (tk, encryption schedule)
 * on ymm, IV and keys broadcast as loaded (no shuffle on a short unit's path to its rounds). */
TGT_XY INLINE __m256i y_tweak(const uint8_t *tk, int rounds, const uint8_t *iv)
{
    __m256i t = _mm256_xor_si256(_mm256_broadcastsi128_si256(XLD(iv)), YKEY(tk, 0));
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++)
        t = _mm256_aesenc_epi128(t, YKEY(tk, r));
    return _mm256_aesenclast_epi128(t, YKEY(tk, rounds));
}

/* The first m <= NREG + 1 registers of tweaks XORed with kl into cur, the first NREG also into kt:
 * each straight from t (no chain: a short unit waits for its tweaks; T * x^8 from T * x^0 by a
 * byte multiply made 256-byte units slower). Register NREG holds only the tweak after a 16-block
 * unit (for ciphertext stealing). */
TGT_XY INLINE void y_kt(__m256i *kt, __m256i *cur, __m256i t, __m256i kl, int m)
{
#pragma GCC unroll 9
    for (int j = 0; j <= NREG; j++) {
        __m256i v;

        if (j >= m) { /* never read (only gcc cannot tell) */
            if (j < NREG)
                kt[j] = _mm256_setzero_si256();
            continue;
        }
        /* lane i: x^(2j+i) */
        v = _mm256_xor_si256(y_mulxk(t, _mm256_set_epi64x(2 * j + 1, 2 * j + 1, 2 * j, 2 * j),
                                     _mm256_set_epi64x(63 - 2 * j, 63 - 2 * j, 64 - 2 * j, 64 - 2 * j)),
                             kl);
        if (j < NREG)
            kt[j] = v;
        cur[j] = v;
    }
}

/* n >= XTSY_MIN - 1 whole blocks of the unit under IV iv; tk: the tweak key's encryption schedule.
 * Returns the tweak of the block after the last (for ciphertext stealing): block n's entry of the
 * buffer, which always holds it (a one-group unit's registers from y_kt cover block n too). The loop's
 * empty asm on rk keeps gcc from hoisting the round keys' broadcasts into registers it would spill. */
TGT_XY INLINE __m128i y_xts(const uint8_t *rk, const uint8_t *tk, int rounds, const uint8_t *iv, const uint8_t *in,
                            uint8_t *out, size_t n, int dec)
{
    __m256i buf[2 * NREG], *cur = buf, *nxt = buf + NREG, *sw, kt[NREG];
    __m128i next;
    int used = n <= 2 * NREG ? (int)n / 2 + 1 : 2 * NREG; /* registers of buf written */

    y_kt(kt, cur, y_tweak(tk, rounds, iv), YKEY(rk, rounds), used <= NREG + 1 ? used : NREG);
#define G(q) y_xts_group(rk, rounds, in, out, kt, cur, NULL, q, (int)(n & 1), dec)
    if (n <= 2 * NREG) { /* one group: its next tweak, if any, from y_kt (no x^16 step) */
        GROUP_OF((n + 1) / 2, G)
    } else {
        /* later groups whiten with their tweaks from the buffer: copied into registers, they
         * would be kept across the loop's back edge, and spilled */
        y_xts_group(rk, rounds, in, out, kt, cur, nxt, NREG, 0, dec);
        for (;;) {
            n -= 2 * NREG, in += 32 * NREG, out += 32 * NREG;
            sw = cur, cur = nxt, nxt = sw;
            if (n < 2 * NREG)
                break;
            /* rk: no round key hoisted out of the loop; cur: the tweaks read back from memory, not
             * the registers gcc stored them from (it kept them across the loop, and spilled them) */
            __asm__("" : "+r"(rk), "+r"(cur));
            y_xts_group(rk, rounds, in, out, cur, cur, nxt, NREG, 0, dec);
        }
#undef G
#define G(q) y_xts_group(rk, rounds, in, out, cur, cur, NULL, q, (int)(n & 1), dec)
        __asm__("" : "+r"(cur));
        GROUP_OF((n + 1) / 2, G)
    }
#undef G
    /* the last round key loaded again, not kept from y_kt's broadcast across the group (gcc 16
     * kept it so, and spilled it: tests/c/test_vreg_residue.c) */
    __asm__("" : "+r"(rk));
    next = _mm_xor_si128(_mm_load_si128((const __m128i *)(const void *)cur + n), XKEY(rk, rounds));
    /* the tweaks with kl folded in (T ^ kl beside T*x ^ kl gives T, then kl) must not outlive the
     * call; explicit stores, as gcc's memset may be rep stos, and only those written (a short
     * unit's 16 took ~4 ns at 64 bytes) */
#pragma GCC unroll 16
    for (int j = 0; j < 2 * NREG; j++)
        if (j < used)
            _mm256_store_si256(buf + j, _mm256_setzero_si256());
    __asm__ volatile("" : : "r"(buf) : "memory");
    return next;
}

/* One out-of-line copy per key size and direction (XTS has 128- and 256-bit data keys). */
#define XTSY_KEY_SIZE(r)                                                                                    \
    TGT_XY static __attribute__((noinline)) __m128i yxts_enc##r(const uint8_t *rk, const uint8_t *tk,      \
                                                                const uint8_t *iv, const uint8_t *in,      \
                                                                uint8_t *out, size_t n)                    \
    {                                                                                                       \
        return y_xts(rk, tk, r, iv, in, out, n, 0);                                                         \
    }                                                                                                       \
    TGT_XY static __attribute__((noinline)) __m128i yxts_dec##r(const uint8_t *rk, const uint8_t *tk,      \
                                                                const uint8_t *iv, const uint8_t *in,      \
                                                                uint8_t *out, size_t n)                    \
    {                                                                                                       \
        return y_xts(rk, tk, r, iv, in, out, n, 1);                                                         \
    }

XTSY_KEY_SIZE(10)
XTSY_KEY_SIZE(14)

/* A unit of XTSY_MIN blocks or more: the whole blocks on ymm (one fewer when the last is partial:
 * it goes with that one), then ciphertext stealing (xts_x.h). */
TGT_XY INLINE void y_unit(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                          uint8_t *out, size_t len, int dec)
{
    const uint8_t *rk = dec ? k1->dec : k1->enc;
    size_t whole = len / 16, r = len % 16;
    __m128i t;

    if (r != 0)
        whole--; /* the last whole block goes with the partial one */
    t = k1->rounds == 10 ? (dec ? yxts_dec10 : yxts_enc10)(rk, k2->enc, iv, in, out, whole)
                         : (dec ? yxts_dec14 : yxts_enc14)(rk, k2->enc, iv, in, out, whole);
    if (r != 0)
        xts_steal(k1, in + 16 * whole, out + 16 * whole, r, t, dec);
}

/* y_unit out of line, so that the entry point below saves no registers before its short units.
 * The round keys and tweaks left in vector registers go, and the upper halves are clean for the
 * caller's SSE code. */
TGT_XY static __attribute__((noinline)) void y_unit_call(const acc_aes_key *k1, const acc_aes_key *k2,
                                                        const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                                                        size_t len, int dec)
{
    if (dec)
        y_unit(k1, k2, iv, in, out, len, 1);
    else
        y_unit(k1, k2, iv, in, out, len, 0);
    _mm256_zeroall();
}

/* The engine's xts (aesni.c checks the CPU has VAES, AVX2 and VPCLMULQDQ before choosing it). Below
 * XTSY_MIN blocks (and len < 16, which it refuses) the xmm engine's own code, by a tail jump: inlined
 * here it ran 64-byte units ~20% slower, called with this function's register saves around it ~8%,
 * and one compare more or its xmm registers cleared after it each cost 16-byte units 2-4%
 * (evp_small against the default provider, bench/results/xts-ymm.md). */
TGT_NI int acc_xts_vaesy(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in,
                         uint8_t *out, size_t len, int dec)
{
    if (len < 16 * XTSY_MIN)
        return acc_xts_ni(k1, k2, iv, in, out, len, dec);
    y_unit_call(k1, k2, iv, in, out, len, dec);
    return 1;
}
