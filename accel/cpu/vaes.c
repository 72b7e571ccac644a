/* accel/cpu/vaes.c: the VAES engine's block code: four blocks per zmm instruction, up to eight
 * registers (32 blocks) in flight. Each mode is compiled once per key size, so the round count is a
 * constant: the rounds unroll, and the round keys are broadcast into registers once per call and
 * stay there, rather than reloaded every round of every group. Below VAES_MIN blocks the xmm code
 * of aes_x.h runs instead. Key schedules, the engine table and the CPU checks are in aesni.c. */
#include "accel/cpu/aes_z.h"

#define NREG 8

/* The middle rounds 1 .. rounds-1 on n registers (whitening and the last round are the caller's). */
TGT_VAES INLINE void z_rounds(const zsched *s, int rounds, __m512i *z, int n, int dec)
{
#pragma GCC unroll 13
    for (int r = 1; r < rounds; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            z[j] = dec ? _mm512_aesdec_epi128(z[j], s->k[r]) : _mm512_aesenc_epi128(z[j], s->k[r]);
    }
}

/* A tail of 1..31 blocks as one group of ceil(n/4) registers: every register count is its own
 * unrolled copy, so a tail runs at the latency of one group whatever its size. */
#define Z_TAIL(n, GROUP) GROUP_OF(((n) + 3) / 4, GROUP)

/* One call per key size, each with its constant round count. */
#define BY_ROUNDS(rounds, CALL)                                                            \
    switch (rounds) {                                                                      \
    case 10: CALL(10); break;                                                              \
    case 12: CALL(12); break;                                                              \
    default: CALL(14); break;                                                              \
    }

/* ------------------------------------------------------------------------------------------
 * ECB
 * ------------------------------------------------------------------------------------------ */

TGT_VAES INLINE void z_ecb_n(const zsched *s, int rounds, const uint8_t *in, uint8_t *out,
                             int n, int rem, int dec)
{
    __m512i z[NREG];
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        z[j] = _mm512_xor_si512(zload(in, j, n, rem), s->k[0]);
    z_rounds(s, rounds, z, n, dec);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        zstore(out, j, n, rem, dec ? _mm512_aesdeclast_epi128(z[j], s->k[rounds])
                                   : _mm512_aesenclast_epi128(z[j], s->k[rounds]));
}

TGT_VAES INLINE void z_ecb(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           size_t n, int dec)
{
    zsched s;
    zs_load(&s, rk, rounds);
    for (; n >= 32; n -= 32, in += 512, out += 512)
        z_ecb_n(&s, rounds, in, out, NREG, 0, dec);
#define G(q) z_ecb_n(&s, rounds, in, out, q, (int)(n & 3), dec)
    Z_TAIL(n, G)
#undef G
}

/* ------------------------------------------------------------------------------------------
 * CBC decryption
 * ------------------------------------------------------------------------------------------ */

/* Each lane's chaining value is the ciphertext block before it: for register 0 an alignr pulls
 * the previous group's last block (*iv, top lane) in; for the others it is an unaligned load 16
 * bytes back, which costs a load instead of a shuffle beside the AES units. Every chaining value
 * is taken before the first store, so in == out is safe. */
TGT_VAES INLINE void z_cbcdec_n(const zsched *s, int rounds, const uint8_t *in, uint8_t *out,
                                int n, int rem, __m512i *iv)
{
    __m512i z[NREG], c0 = zload(in, 0, n, rem), last;
    z[0] = _mm512_xor_si512(c0, s->k[0]);
#pragma GCC unroll 8
    for (int j = 1; j < n; j++)
        z[j] = _mm512_xor_si512(zload(in, j, n, rem), s->k[0]);
    z_rounds(s, rounds, z, n, 1);
    /* the group's last block, the next group's chaining value, in the top lane */
    last = _mm512_broadcast_i32x4(XLD(in + 64 * (n - 1) + 16 * (rem ? rem : 4) - 16));
    __m512i prev0 = _mm512_alignr_epi64(c0, *iv, 6);
#pragma GCC unroll 8
    for (int j = n - 1; j >= 1; j--)      /* the loads of later registers come before any store */
        z[j] = _mm512_aesdeclast_epi128(z[j], _mm512_xor_si512(s->k[rounds], zload(in - 16, j, n, rem)));
    zstore(out, 0, n, rem, _mm512_aesdeclast_epi128(z[0], _mm512_xor_si512(s->k[rounds], prev0)));
#pragma GCC unroll 8
    for (int j = 1; j < n; j++)
        zstore(out, j, n, rem, z[j]);
    *iv = last;
}

TGT_VAES INLINE void z_cbcdec(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                              size_t n, __m512i *iv)
{
    zsched s;
    zs_load(&s, rk, rounds);
    for (; n >= 32; n -= 32, in += 512, out += 512)
        z_cbcdec_n(&s, rounds, in, out, NREG, 0, iv);
#define G(q) z_cbcdec_n(&s, rounds, in, out, q, (int)(n & 3), iv)
    Z_TAIL(n, G)
#undef G
}

/* ------------------------------------------------------------------------------------------
 * CTR
 * ------------------------------------------------------------------------------------------ */

/* n registers of whitened counter blocks, lane i of register j holding counter (hi:lo) + 4j + i.
 * When the last byte of the counter cannot overflow within them, a 32-bit add on the big-endian
 * block (whose last byte is the top byte of its last dword) makes every counter, with no byte swap
 * per register. Otherwise each lane holds a byte-reversed 64-bit counter, added to and swapped
 * back; the caller keeps lo from wrapping within the group (ctr_span). */
TGT_VAES INLINE void z_ctr_blocks(__m512i k0, uint64_t hi, uint64_t lo, __m512i *z, int n)
{
    if ((lo & 0xff) + 4u * (unsigned)n <= 256) {
        const __m512i step = _mm512_set_epi32(4 << 24, 0, 0, 0, 4 << 24, 0, 0, 0,
                                              4 << 24, 0, 0, 0, 4 << 24, 0, 0, 0);
        __m512i c = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)__builtin_bswap64(lo),
                                                          (long long)__builtin_bswap64(hi)));
        c = _mm512_add_epi32(c, _mm512_set_epi32(3 << 24, 0, 0, 0, 2 << 24, 0, 0, 0,
                                                 1 << 24, 0, 0, 0, 0, 0, 0, 0));
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) {
            z[j] = _mm512_xor_si512(c, k0);
            c = _mm512_add_epi32(c, step);
        }
        return;
    }
    const __m512i bswap = _mm512_broadcast_i32x4(
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
    __m512i c = _mm512_add_epi64(_mm512_broadcast_i32x4(_mm_set_epi64x((long long)hi, (long long)lo)),
                                 _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0));
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        z[j] = _mm512_xor_si512(_mm512_shuffle_epi8(c, bswap), k0);
        c = _mm512_add_epi64(c, four);
    }
}

/* The keystream XOR is folded into the last round key, so it costs no instruction of its own. */
TGT_VAES INLINE void z_ctr_n(const zsched *s, int rounds, const uint8_t *in, uint8_t *out,
                             int n, int rem, uint64_t hi, uint64_t lo)
{
    __m512i z[NREG];
    z_ctr_blocks(s->k[0], hi, lo, z, n);
    z_rounds(s, rounds, z, n, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        zstore(out, j, n, rem, _mm512_aesenclast_epi128(z[j], _mm512_xor_si512(s->k[rounds],
                                                                                  zload(in, j, n, rem))));
}

TGT_VAES INLINE void z_ctr(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           size_t n, uint64_t hi, uint64_t lo)
{
    zsched s;
    zs_load(&s, rk, rounds);
    for (; n >= 32; n -= 32, in += 512, out += 512, lo += 32)
        z_ctr_n(&s, rounds, in, out, NREG, 0, hi, lo);
#define G(q) z_ctr_n(&s, rounds, in, out, q, (int)(n & 3), hi, lo)
    Z_TAIL(n, G)
#undef G
}

/* ------------------------------------------------------------------------------------------
 * One out-of-line copy per mode and key size: each saves only the registers it uses, where one
 * function holding all three would pay the largest one's stack frame on every call.
 * ------------------------------------------------------------------------------------------ */

#define PER_KEY_SIZE(r)                                                                    \
    TGT_VAES static __attribute__((noinline)) void ecb_enc##r(const uint8_t *rk, const uint8_t *in, \
                                                              uint8_t *out, size_t n)      \
    { z_ecb(rk, r, in, out, n, 0); }                                                       \
    TGT_VAES static __attribute__((noinline)) void ecb_dec##r(const uint8_t *rk, const uint8_t *in, \
                                                              uint8_t *out, size_t n)      \
    { z_ecb(rk, r, in, out, n, 1); }                                                       \
    TGT_VAES static __attribute__((noinline)) void cbc_dec##r(const uint8_t *rk, const uint8_t *in, \
                                                              uint8_t *out, size_t n, __m512i *iv) \
    { z_cbcdec(rk, r, in, out, n, iv); }                                                   \
    TGT_VAES static __attribute__((noinline)) void ctr##r(const uint8_t *rk, const uint8_t *in,     \
                                                          uint8_t *out, size_t n, uint64_t hi, uint64_t lo) \
    { z_ctr(rk, r, in, out, n, hi, lo); }

PER_KEY_SIZE(10)
PER_KEY_SIZE(12)
PER_KEY_SIZE(14)

/* ------------------------------------------------------------------------------------------
 * Entry points (the engine table is in aesni.c). They cannot fail.
 * ------------------------------------------------------------------------------------------ */

/* ECB and CBC decryption of a small request in place are one serial chain per call when the
 * caller feeds each output back in (openssl speed does): the next call's loads wait for this one's
 * stores, and a zmm store that straddles a cache line (a buffer aligned to 16 bytes, not 64, as
 * malloc gives) does not forward to the next call's load (bench/results/engine-notes.md). So a
 * small request whose input and output sit alike off a 64-byte boundary runs its first blocks up
 * to that boundary on xmm, whose 16-byte accesses never straddle one, and the rest on zmm at
 * aligned addresses. Larger requests are throughput-bound and go straight to zmm.
 * Returns the blocks to run on xmm first (all n below VAES_MIN). */
static inline size_t xmm_head(size_t n, const uint8_t *in, const uint8_t *out)
{
    uintptr_t a = (uintptr_t)out & 63;

    if (n < VAES_MIN)
        return n;
    if (n >= 32 || a == 0 || ((uintptr_t)in & 63) != a || (a & 15) != 0)
        return 0;
    return (64 - a) / 16;
}

/* Both ECB directions: the xmm head, then the zmm code of the direction and key size. */
TGT_VAES INLINE void ecb(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, int dec)
{
    const uint8_t *rk = dec ? k->dec : k->enc;
    size_t h = xmm_head(n, in, out);

    x_ecb(rk, k->rounds, in, out, h, dec);
    in += 16 * h, out += 16 * h, n -= h;
    if (n == 0)
        return;
#define C(r) (dec ? ecb_dec##r : ecb_enc##r)(rk, in, out, n)
    BY_ROUNDS(k->rounds, C)
#undef C
    acc_stack_scrub_zmm();      /* the zmm code spills round keys (accel/wipe.h) */
}

TGT_VAES int acc_vaes_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    ecb(k, in, out, n, 0);
    acc_clear_zmm();
    return 1;
}

TGT_VAES int acc_vaes_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    ecb(k, in, out, n, 1);
    acc_clear_zmm();
    return 1;
}

TGT_VAES int acc_vaes_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                              uint8_t ivb[16])
{
    size_t h = xmm_head(n, in, out);

    x_cbcdec(k->dec, k->rounds, in, out, h, ivb);   /* ivb becomes the head's last ciphertext block */
    in += 16 * h, out += 16 * h, n -= h;
    if (n == 0) {
        acc_clear_zmm();
        return 1;
    }
    /* The last ciphertext block is the next IV; take it before in == out overwrites it. */
    __m128i next = XLD(in + 16 * (n - 1));
    __m512i iv = _mm512_broadcast_i32x4(XLD(ivb));
#define C(r) cbc_dec##r(k->dec, in, out, n, &iv)
    BY_ROUNDS(k->rounds, C)
#undef C
    XST(ivb, next);
    acc_stack_scrub_zmm();      /* the zmm code spills round keys (accel/wipe.h) */
    acc_clear_zmm();
    return 1;
}

/* Any split of the request where the low 64 counter bits wrap, and requests below VAES_MIN. */
TGT_VAES static __attribute__((noinline)) void ctr_general(const acc_aes_key *k, const uint8_t *in,
                                                             uint8_t *out, size_t n, uint64_t *hi,
                                                             uint64_t *lo)
{
    while (n) {
        size_t m = ctr_span(*lo, n);
        if (m < VAES_MIN) {
            x_ctr(k->enc, k->rounds, in, out, m, *hi, *lo);
        } else {
#define C(r) ctr##r(k->enc, in, out, m, *hi, *lo)
            BY_ROUNDS(k->rounds, C)
#undef C
        }
        in += 16 * m, out += 16 * m, n -= m;
        *lo += m;
        *hi += (*lo == 0);
    }
}

/* The common case (the low half does not wrap before the request's end) goes straight to one
 * key size's function, from a function small enough to need no saved registers. */
TGT_VAES int acc_vaes_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                          uint8_t ctr[16])
{
    uint64_t hi = load_be64(ctr), lo = load_be64(ctr + 8);

    if (ctr_span(lo, n) == n) {
        if (n < VAES_MIN) {
            x_ctr(k->enc, k->rounds, in, out, n, hi, lo);
        } else {
#define C(r) ctr##r(k->enc, in, out, n, hi, lo)
            BY_ROUNDS(k->rounds, C)
#undef C
            acc_stack_scrub_zmm();
        }
        lo += n;
        hi += (lo == 0);
    } else {
        ctr_general(k, in, out, n, &hi, &lo);   /* rare (a wrap of the low half): spills, scrubbed */
        acc_stack_scrub_zmm();
    }
    store_be64(ctr, hi);
    store_be64(ctr + 8, lo);
    acc_clear_zmm();
    return 1;
}
