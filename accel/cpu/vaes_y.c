/* accel/cpu/vaes_y.c: the VAES engine's block code for cores with VAES but no AVX-512 (AMD Zen 3):
 * the VEX forms of VAES on ymm, two blocks per instruction, eight registers (16 blocks) in flight.
 * Such a core issues two 256-bit AES rounds a cycle, twice what xmm AES-NI reaches. Only 16 vector
 * registers exist, so a round key is broadcast from the schedule where it is used (one load per
 * round of a group, beside the AES units) and never kept for the call: nothing of the key is
 * spilled to the stack. The zmm code (vaes.c) is its own file: it cannot run on the cores this
 * code is for, nor this code's register budget on its cores. Below VAESY_MIN blocks the xmm code of
 * aes_x.h runs. Key schedules, the engine table and the CPU checks are in aesni.c. */
#include "accel/cpu/aes_y.h"

#define NREG 8
/* From 8 blocks the ymm code wins. Four to seven blocks fill the two AES units within one round's
 * latency on xmm too, without the ymm path's set-up: 64-byte ECB calls read 0.93-0.98 of the
 * default provider with 4 here, 1.04-1.13 with 8 (bench/evp_records, thread CPU time, Zen 3). */
#define VAESY_MIN 8

/* The middle rounds 1 .. rounds-1 on n whitened registers. */
TGT_VY INLINE void y_rounds(const uint8_t *rk, int rounds, __m256i *y, int n, int dec)
{
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
        __m256i k = YKEY(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            y[j] = dec ? _mm256_aesdec_epi128(y[j], k) : _mm256_aesenc_epi128(y[j], k);
    }
}

/* A run of n blocks: whole groups of 16, then one group of the rest (each register count its own
 * unrolled copy). GROUP(q, rem) runs q registers at in/out; the empty asm keeps gcc from hoisting
 * the round keys' broadcasts out of the loop into registers it would spill. */
#define Y_RUN(n, GROUP)                                                                    \
    do {                                                                                   \
        for (; (n) >= 2 * NREG; (n) -= 2 * NREG, in += 32 * NREG, out += 32 * NREG) {      \
            __asm__("" : "+r"(rk));                                                        \
            GROUP(NREG, 0);                                                                \
        }                                                                                  \
        int rem_ = (int)((n) & 1);                                                         \
        (void)rem_;                                                                        \
        GROUP_OF(((n) + 1) / 2, GROUP, rem_)                                               \
    } while (0)

/* ---- ECB ---- */

TGT_VY INLINE void y_ecb_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, int n, int rem, int dec)
{
    __m256i y[NREG], k0 = YKEY(rk, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        y[j] = _mm256_xor_si256(yload(in, j, n, rem), k0);
    y_rounds(rk, rounds, y, n, dec);
    __m256i kl = YKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        ystore(out, j, n, rem, y_last(y[j], kl, dec));
}

TGT_VY INLINE void y_ecb(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, size_t n, int dec)
{
#define G(q, rem) y_ecb_n(rk, rounds, in, out, q, rem, dec)
    Y_RUN(n, G);
#undef G
}

/* ---- CBC decryption ---- */

/* Each lane's chaining value is the ciphertext block before it: for register 0 the previous
 * group's last block (*iv, high lane) and this group's first, for the others a load 16 bytes back.
 * Every load comes before the first store, so in == out is safe. */
TGT_VY INLINE void y_cbcdec_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, int n, int rem,
                              __m256i *iv)
{
    __m256i y[NREG], c0 = yload(in, 0, n, rem), k0 = YKEY(rk, 0), kl, last;
    y[0] = _mm256_xor_si256(c0, k0);
#pragma GCC unroll 8
    for (int j = 1; j < n; j++)
        y[j] = _mm256_xor_si256(yload(in, j, n, rem), k0);
    y_rounds(rk, rounds, y, n, 1);
    kl = YKEY(rk, rounds);
    last = _mm256_broadcastsi128_si256(XLD(in + 32 * (n - 1) + (rem ? 0 : 16)));
#pragma GCC unroll 8
    for (int j = n - 1; j >= 1; j--)
        y[j] = _mm256_aesdeclast_epi128(y[j], _mm256_xor_si256(kl, yload(in - 16, j, n, rem)));
    y[0] = _mm256_aesdeclast_epi128(y[0], _mm256_xor_si256(kl, _mm256_permute2x128_si256(*iv, c0, 0x21)));
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        ystore(out, j, n, rem, y[j]);
    *iv = last;
}

TGT_VY INLINE void y_cbcdec(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, size_t n, __m256i *iv)
{
#define G(q, rem) y_cbcdec_n(rk, rounds, in, out, q, rem, iv)
    Y_RUN(n, G);
#undef G
}

/* ---- CTR ---- */

/* n registers of whitened counter blocks, lane i of register j holding counter (hi:lo) + 2j + i.
 * When the counter's last byte cannot overflow within them, a 32-bit add on the big-endian block
 * makes each one (no byte swap); otherwise 64-bit adds on the byte-reversed counter, swapped back
 * (the caller keeps lo from wrapping within the call: ctr_span). */
TGT_VY INLINE void y_ctr_blocks(__m256i k0, uint64_t hi, uint64_t lo, __m256i *y, int n)
{
    if ((lo & 0xff) + 2u * (unsigned)n <= 256) {
        const __m256i step = _mm256_set_epi32(2 << 24, 0, 0, 0, 2 << 24, 0, 0, 0);
        __m256i c = _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)__builtin_bswap64(lo),
                                                               (long long)__builtin_bswap64(hi)));
        c = _mm256_add_epi32(c, _mm256_set_epi32(1 << 24, 0, 0, 0, 0, 0, 0, 0));
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) {
            y[j] = _mm256_xor_si256(c, k0);
            c = _mm256_add_epi32(c, step);
        }
        return;
    }
    const __m256i bswap = _mm256_broadcastsi128_si256(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m256i two = _mm256_set_epi64x(0, 2, 0, 2);
    __m256i c = _mm256_add_epi64(_mm256_broadcastsi128_si256(_mm_set_epi64x((long long)hi, (long long)lo)),
                                 _mm256_set_epi64x(0, 1, 0, 0));
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        y[j] = _mm256_xor_si256(_mm256_shuffle_epi8(c, bswap), k0);
        c = _mm256_add_epi64(c, two);
    }
}

/* The keystream XOR is folded into the last round key. */
TGT_VY INLINE void y_ctr_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, int n, int rem,
                           uint64_t hi, uint64_t lo)
{
    __m256i y[NREG], kl;
    y_ctr_blocks(YKEY(rk, 0), hi, lo, y, n);
    y_rounds(rk, rounds, y, n, 0);
    kl = YKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        ystore(out, j, n, rem, _mm256_aesenclast_epi128(y[j], _mm256_xor_si256(kl, yload(in, j, n, rem))));
}

TGT_VY INLINE void y_ctr(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out, size_t n, uint64_t hi,
                         uint64_t lo)
{
#define G(q, rem) (y_ctr_n(rk, rounds, in, out, q, rem, hi, lo), lo += 2 * (q))
    Y_RUN(n, G);
#undef G
}

/* ---- One out-of-line copy per mode and key size (the round count a constant: the rounds unroll) ---- */

#define BY_ROUNDS(rounds, CALL)                                                            \
    switch (rounds) {                                                                      \
    case 10: CALL(10); break;                                                              \
    case 12: CALL(12); break;                                                              \
    default: CALL(14); break;                                                              \
    }

#define PER_KEY_SIZE(r)                                                                                    \
    TGT_VY static __attribute__((noinline)) void ecb_enc##r(const uint8_t *rk, const uint8_t *in,         \
                                                            uint8_t *out, size_t n)                        \
    { y_ecb(rk, r, in, out, n, 0); }                                                                       \
    TGT_VY static __attribute__((noinline)) void ecb_dec##r(const uint8_t *rk, const uint8_t *in,         \
                                                            uint8_t *out, size_t n)                        \
    { y_ecb(rk, r, in, out, n, 1); }                                                                       \
    TGT_VY static __attribute__((noinline)) void cbc_dec##r(const uint8_t *rk, const uint8_t *in,         \
                                                            uint8_t *out, size_t n, __m256i *iv)           \
    { y_cbcdec(rk, r, in, out, n, iv); }                                                                   \
    TGT_VY static __attribute__((noinline)) void ctr##r(const uint8_t *rk, const uint8_t *in,             \
                                                        uint8_t *out, size_t n, uint64_t hi, uint64_t lo)  \
    { y_ctr(rk, r, in, out, n, hi, lo); }

PER_KEY_SIZE(10)
PER_KEY_SIZE(12)
PER_KEY_SIZE(14)

/* ---- Entry points (the engine table is in aesni.c). They cannot fail. ---- */

/* The round keys and data left in vector registers go (an xsave would write them to the stack:
 * wipe.h); vzeroall also leaves the upper halves clean for the caller's SSE code. */
TGT_VY INLINE void y_done(void)
{
    _mm256_zeroall();
}

/* Inlined into both entry points: one call less on a short request's path. */
TGT_VY INLINE void ecb(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, int dec)
{
    const uint8_t *rk = dec ? k->dec : k->enc;

    if (n < VAESY_MIN)
        x_ecb(rk, k->rounds, in, out, n, dec);
    else {
#define C(r) (dec ? ecb_dec##r : ecb_enc##r)(rk, in, out, n)
        BY_ROUNDS(k->rounds, C)
#undef C
    }
    y_done();
}

TGT_VY int acc_vaesy_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    ecb(k, in, out, n, 0);
    return 1;
}

TGT_VY int acc_vaesy_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    ecb(k, in, out, n, 1);
    return 1;
}

TGT_VY int acc_vaesy_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t ivb[16])
{
    if (n < VAESY_MIN) {
        x_cbcdec(k->dec, k->rounds, in, out, n, ivb);
    } else {
        /* the last ciphertext block is the next IV: taken before in == out overwrites it */
        __m128i next = XLD(in + 16 * (n - 1));
        __m256i iv = _mm256_broadcastsi128_si256(XLD(ivb));
#define C(r) cbc_dec##r(k->dec, in, out, n, &iv)
        BY_ROUNDS(k->rounds, C)
#undef C
        XST(ivb, next);
    }
    y_done();
    return 1;
}

/* Any split where the low 64 counter bits wrap, each span below VAESY_MIN on xmm. */
TGT_VY int acc_vaesy_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t ctr[16])
{
    uint64_t hi = load_be64(ctr), lo = load_be64(ctr + 8);

    while (n) {
        size_t m = ctr_span(lo, n);
        if (m < VAESY_MIN) {
            x_ctr(k->enc, k->rounds, in, out, m, hi, lo);
        } else {
#define C(r) ctr##r(k->enc, in, out, m, hi, lo)
            BY_ROUNDS(k->rounds, C)
#undef C
        }
        in += 16 * m, out += 16 * m, n -= m;
        lo += m;
        hi += (lo == 0);
    }
    store_be64(ctr, hi);
    store_be64(ctr + 8, lo);
    y_done();
    return 1;
}
