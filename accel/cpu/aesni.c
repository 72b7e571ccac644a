/* accel/cpu/aesni.c: the inline AES engine: AES-NI on xmm registers, plus VAES on zmm registers
 * (4 blocks per instruction) where the CPU and the OS allow it, chosen once at run time. */
#define _GNU_SOURCE   /* secure_getenv */
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include <cpuid.h>
#include <immintrin.h>
#include <openssl/crypto.h>
#include "accel/engine.h"

/* Per-function targets, so the Makefile needs no -m flags and the library still loads on any x86-64.
 * The xmm helpers carry the smaller target; gcc inlines them into the VAES functions too, where
 * they come out VEX-encoded. */
#define TGT_NI   __attribute__((target("aes,sse4.1,ssse3")))
#define TGT_VAES __attribute__((target("aes,sse4.1,ssse3,avx,avx2,avx512f,avx512bw,vaes")))
#define INLINE   static inline __attribute__((always_inline))

/* Below this many blocks the xmm code, one straight-line group of n blocks, beats the zmm code
 * (a zmm register chain has about 2 cycles more latency than an xmm one). Measured per EVP call on
 * Zen 4, AES-128, against 5: 80 B CBC-decrypt 16.5 -> 14.1 ns, ECB 14.4 -> 13.7 ns, CTR 19.5 -> 16.6
 * ns; 96 B alike; from 8 blocks on the zmm code wins. */
#define VAES_MIN 8

/* ------------------------------------------------------------------------------------------
 * Helpers shared by every mode
 * ------------------------------------------------------------------------------------------ */

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void store_be64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* How many of n blocks run before the low 64 counter bits wrap: within such a span the counter
 * is a 64-bit add on the low half alone, which is what the vector code does. */
static inline size_t ctr_span(uint64_t lo, size_t n)
{
    uint64_t room = 0 - lo;             /* 0 stands for 2^64 */
    return (room != 0 && room < n) ? (size_t)room : n;
}

/* ------------------------------------------------------------------------------------------
 * xmm: one block per instruction; n independent blocks hide aesenc's latency
 * ------------------------------------------------------------------------------------------ */

#define XLD(p)    _mm_loadu_si128((const __m128i *)(const void *)(p))
#define XST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define XKEY(rk, r) _mm_load_si128((const __m128i *)(const void *)((rk) + 16 * (r)))

/* The middle rounds (1 .. rounds-1) on x[0..n-1], n independent chains in flight. Below eight
 * blocks the rounds are straight-line code: a short request is latency-bound, and a loop around its
 * rounds measured 1-6 cycles more per call (16-64 byte requests on Zen 4; the straight line issues
 * every round-key load at once). Rounds 10-13 exist for 192/256-bit keys. */
TGT_NI INLINE void x_rounds(const uint8_t *rk, int rounds, __m128i *x, int n, int dec)
{
    if (n < 8) {
#define R1(r)                                                                                  do {                                                                                           __m128i k = XKEY(rk, r);                                                                   _Pragma("GCC unroll 8") for (int j = 0; j < n; j++)                                            x[j] = dec ? _mm_aesdec_si128(x[j], k) : _mm_aesenc_si128(x[j], k);                } while (0)
        R1(1); R1(2); R1(3); R1(4); R1(5); R1(6); R1(7); R1(8); R1(9);
        if (rounds > 10) {
            R1(10); R1(11);
            if (rounds > 12) {
                R1(12); R1(13);
            }
        }
#undef R1
        return;
    }
    for (int r = 1; r < rounds; r++) {
        __m128i k = XKEY(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            x[j] = dec ? _mm_aesdec_si128(x[j], k) : _mm_aesenc_si128(x[j], k);
    }
}

/* One block's middle rounds (CBC encryption's serial chain). */
TGT_NI INLINE __m128i x_one_rounds(const uint8_t *rk, int rounds, __m128i x, int dec)
{
    x_rounds(rk, rounds, &x, 1, dec);
    return x;
}

/* Whitening and the middle rounds. The caller does the last round itself, so it can fold an XOR
 * (CTR input, CBC chaining value) into the last round key for free. */
TGT_NI INLINE void x_mid(const uint8_t *rk, int rounds, __m128i *x, int n, int dec)
{
    __m128i k = XKEY(rk, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        x[j] = _mm_xor_si128(x[j], k);
    x_rounds(rk, rounds, x, n, dec);
}

TGT_NI INLINE __m128i x_last(__m128i x, __m128i k, int dec)
{
    return dec ? _mm_aesdeclast_si128(x, k) : _mm_aesenclast_si128(x, k);
}

/* GROUP(q) with q = 1..8 a constant in each case, so that every group size is its own unrolled copy. */
#define GROUP_OF(q, GROUP)                                                                 \
    switch (q) {                                                                           \
    case 1: GROUP(1); break;                                                               \
    case 2: GROUP(2); break;                                                               \
    case 3: GROUP(3); break;                                                               \
    case 4: GROUP(4); break;                                                               \
    case 5: GROUP(5); break;                                                               \
    case 6: GROUP(6); break;                                                               \
    case 7: GROUP(7); break;                                                               \
    case 8: GROUP(8); break;                                                               \
    default: break;                                                                        \
    }

/* n < 8 blocks as one group of n, so they run side by side whatever n is; GROUP(q) runs q blocks at
 * in/out, which then advance. */
#define X_TAIL(n, GROUP)                                                                   \
    do {                                                                                   \
        GROUP_OF(n, GROUP)                                                                 \
        in += 16 * (n), out += 16 * (n);                                                   \
    } while (0)

TGT_NI INLINE void x_ecb_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           int n, int dec)
{
    __m128i x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        x[j] = XLD(in + 16 * j);
    x_mid(rk, rounds, x, n, dec);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], kl, dec));
}

TGT_NI INLINE void x_ecb(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                         size_t n, int dec)
{
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_ecb_n(rk, rounds, in, out, 8, dec);
#define G(q) x_ecb_n(rk, rounds, in, out, q, dec)
    X_TAIL(n, G);
#undef G
}

/* All n ciphertext blocks are loaded before any store, so in == out is safe; *iv becomes the
 * group's last ciphertext block. */
TGT_NI INLINE void x_cbcdec_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                              int n, __m128i *iv)
{
    __m128i c[8], x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        c[j] = x[j] = XLD(in + 16 * j);
    x_mid(rk, rounds, x, n, 1);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, j ? c[j - 1] : *iv), 1));
    *iv = c[n - 1];
}

TGT_NI INLINE void x_cbcdec(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                            size_t n, uint8_t ivb[16])
{
    __m128i iv = XLD(ivb);
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_cbcdec_n(rk, rounds, in, out, 8, &iv);
#define G(q) x_cbcdec_n(rk, rounds, in, out, q, &iv)
    X_TAIL(n, G);
#undef G
    XST(ivb, iv);
}

/* *ctr holds the counter byte-reversed (qword 0 = low 64 bits), so +1 is one 64-bit add; the
 * caller guarantees the low half does not wrap within the span. */
TGT_NI INLINE void x_ctr_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           int n, __m128i *ctr)
{
    const __m128i bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i x[8], kl = XKEY(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        x[j] = _mm_shuffle_epi8(*ctr, bswap);
        *ctr = _mm_add_epi64(*ctr, _mm_set_epi64x(0, 1));
    }
    x_mid(rk, rounds, x, n, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, XLD(in + 16 * j)), 0));
}

/* Eight blocks whose counter starts with its low three bits clear: adding j < 8 then only sets
 * bits of the last byte, an XOR, which commutes with the whitening. So one byte swap and one
 * whitening serve the group, leaving more of the vector ports to aesenc (+3% on Zen 4). */
TGT_NI INLINE void x_ctr8_aligned(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                                  __m128i *ctr)
{
    const __m128i bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i x[8], kl = XKEY(rk, rounds);
    __m128i y = _mm_xor_si128(_mm_shuffle_epi8(*ctr, bswap), XKEY(rk, 0));
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        x[j] = _mm_xor_si128(y, _mm_slli_si128(_mm_cvtsi32_si128(j), 15));
    *ctr = _mm_add_epi64(*ctr, _mm_set_epi64x(0, 8));
    x_rounds(rk, rounds, x, 8, 0);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        XST(out + 16 * j, x_last(x[j], _mm_xor_si128(kl, XLD(in + 16 * j)), 0));
}

TGT_NI INLINE void x_ctr(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                         size_t n, uint64_t hi, uint64_t lo)
{
    __m128i c = _mm_set_epi64x((long long)hi, (long long)lo);
#define G(q) x_ctr_n(rk, rounds, in, out, q, &c)
    if (n >= 8 && (lo & 7)) {                       /* reach a counter with its low bits clear */
        size_t head = 8 - (lo & 7);
        X_TAIL(head, G);
        n -= head;
    }
    for (; n >= 8; n -= 8, in += 128, out += 128)
        x_ctr8_aligned(rk, rounds, in, out, &c);
    X_TAIL(n, G);
#undef G
}

/* ------------------------------------------------------------------------------------------
 * zmm (VAES + AVX-512): four blocks per instruction, up to eight registers in flight.
 * A group is n registers of which only the last may be partial.
 * ------------------------------------------------------------------------------------------ */

TGT_VAES INLINE __m512i zkey(const uint8_t *rk, int r)
{
    return _mm512_broadcast_i32x4(XKEY(rk, r));
}

/* Loads and stores of register j of n; the last one holds only rem blocks when rem != 0. The
 * partial one uses 256/128-bit moves, not masked ones: a masked store does not forward to a
 * later load, which costs dearly when the caller re-reads its buffer at once (openssl speed). */
TGT_VAES INLINE __m512i zload(const uint8_t *p, int j, int n, int rem)
{
    p += 64 * j;
    if (j < n - 1 || rem == 0)
        return _mm512_loadu_si512(p);
    if (rem == 1)
        return _mm512_zextsi128_si512(XLD(p));
    __m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return rem == 2 ? v : _mm512_inserti32x4(v, XLD(p + 32), 2);
}

TGT_VAES INLINE void zstore(uint8_t *p, int j, int n, int rem, __m512i v)
{
    p += 64 * j;
    if (j < n - 1 || rem == 0) {
        _mm512_storeu_si512(p, v);
    } else if (rem == 1) {
        XST(p, _mm512_castsi512_si128(v));
    } else {
        _mm256_storeu_si256((__m256i *)(void *)p, _mm512_castsi512_si256(v));
        if (rem == 3)
            XST(p + 32, _mm512_extracti32x4_epi32(v, 2));
    }
}

TGT_VAES INLINE void z_mid(const uint8_t *rk, int rounds, __m512i *z, int n, int dec)
{
    __m512i k = zkey(rk, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        z[j] = _mm512_xor_si512(z[j], k);
    for (int r = 1; r < rounds; r++) {
        k = zkey(rk, r);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            z[j] = dec ? _mm512_aesdec_epi128(z[j], k) : _mm512_aesenc_epi128(z[j], k);
    }
}

TGT_VAES INLINE __m512i z_last(__m512i z, __m512i k, int dec)
{
    return dec ? _mm512_aesdeclast_epi128(z, k) : _mm512_aesenclast_epi128(z, k);
}

TGT_VAES INLINE void z_ecb_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                             int n, int rem, int dec)
{
    __m512i z[8], kl = zkey(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        z[j] = zload(in, j, n, rem);
    z_mid(rk, rounds, z, n, dec);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        zstore(out, j, n, rem, z_last(z[j], kl, dec));
}

/* *iv carries the previous ciphertext block in its top lane; alignr shifts each register's
 * ciphertext up one block and pulls that block in, giving every lane its chaining value. */
TGT_VAES INLINE void z_cbcdec_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                                int n, int rem, __m512i *iv)
{
    __m512i c[8], z[8], kl = zkey(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        c[j] = z[j] = zload(in, j, n, rem);
    z_mid(rk, rounds, z, n, 1);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        __m512i prev = _mm512_alignr_epi64(c[j], j ? c[j - 1] : *iv, 6);
        zstore(out, j, n, rem, z_last(z[j], _mm512_xor_si512(kl, prev), 1));
    }
    *iv = c[n - 1];
}

/* *ctr: four byte-reversed counters, lane i = base + i; the same no-wrap span rule as x_ctr. */
TGT_VAES INLINE void z_ctr_n(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                             int n, int rem, __m512i *ctr)
{
    const __m512i bswap = _mm512_broadcast_i32x4(
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
    __m512i z[8], kl = zkey(rk, rounds);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++) {
        z[j] = _mm512_shuffle_epi8(*ctr, bswap);
        *ctr = _mm512_add_epi64(*ctr, four);
    }
    z_mid(rk, rounds, z, n, 0);
#pragma GCC unroll 8
    for (int j = 0; j < n; j++)
        zstore(out, j, n, rem, z_last(z[j], _mm512_xor_si512(kl, zload(in, j, n, rem)), 0));
}

/* A tail of 1..31 blocks as one group of ceil(n/4) registers: every register count is its own
 * unrolled copy, so a tail runs at the latency of one group whatever its size. */
#define Z_TAIL(n, GROUP) GROUP_OF(((n) + 3) / 4, GROUP)

TGT_VAES INLINE void z_ecb(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           size_t n, int dec)
{
    for (; n >= 32; n -= 32, in += 512, out += 512)
        z_ecb_n(rk, rounds, in, out, 8, 0, dec);
#define G(q) z_ecb_n(rk, rounds, in, out, q, (int)(n & 3), dec)
    Z_TAIL(n, G)
#undef G
}

TGT_VAES INLINE void z_cbcdec(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                              size_t n, __m512i *iv)
{
    for (; n >= 32; n -= 32, in += 512, out += 512)
        z_cbcdec_n(rk, rounds, in, out, 8, 0, iv);
#define G(q) z_cbcdec_n(rk, rounds, in, out, q, (int)(n & 3), iv)
    Z_TAIL(n, G)
#undef G
}

TGT_VAES INLINE void z_ctr(const uint8_t *rk, int rounds, const uint8_t *in, uint8_t *out,
                           size_t n, uint64_t hi, uint64_t lo)
{
    __m512i c = _mm512_add_epi64(_mm512_broadcast_i32x4(_mm_set_epi64x((long long)hi, (long long)lo)),
                                 _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0));
    for (; n >= 32; n -= 32, in += 512, out += 512)
        z_ctr_n(rk, rounds, in, out, 8, 0, &c);
#define G(q) z_ctr_n(rk, rounds, in, out, q, (int)(n & 3), &c)
    Z_TAIL(n, G)
#undef G
}

/* ------------------------------------------------------------------------------------------
 * Key schedule
 * ------------------------------------------------------------------------------------------ */

/* aeskeygenassist with the word in dword 1 gives SubWord(w) in dword 0 and RotWord(SubWord(w))
 * in dword 1; rcon is XORed afterwards so one immediate serves every round. */
TGT_NI static uint32_t sub_word(uint32_t w, int rot)
{
    __m128i v = _mm_aeskeygenassist_si128(_mm_set_epi32(0, 0, (int)w, 0), 0);
    return (uint32_t)(rot ? _mm_extract_epi32(v, 1) : _mm_extract_epi32(v, 0));
}

/* FIPS-197 section 5.2, word by word: the same loop for 128-, 192- and 256-bit keys. */
TGT_NI static void expand_enc(acc_aes_key *k, const uint8_t *key, int nk)
{
    static const uint8_t rcon[10] = { 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36 };
    uint32_t w[4 * (ACC_AES_MAXROUNDS + 1)];
    int total = 4 * (k->rounds + 1);

    memcpy(w, key, 4 * (size_t)nk);
    for (int i = nk; i < total; i++) {
        uint32_t t = w[i - 1];
        if (i % nk == 0)
            t = sub_word(t, 1) ^ rcon[i / nk - 1];
        else if (nk > 6 && i % nk == 4)
            t = sub_word(t, 0);
        w[i] = w[i - nk] ^ t;
    }
    memcpy(k->enc, w, 4 * (size_t)total);
    OPENSSL_cleanse(w, sizeof(w));
}

/* The equivalent inverse cipher: round keys reversed, InvMixColumns on the middle ones. */
TGT_NI static void expand_dec(acc_aes_key *k)
{
    int nr = k->rounds;
    XST(k->dec, XKEY(k->enc, nr));
    for (int i = 1; i < nr; i++)
        XST(k->dec + 16 * i, _mm_aesimc_si128(XKEY(k->enc, nr - i)));
    XST(k->dec + 16 * nr, XKEY(k->enc, 0));
}

TGT_NI static int ni_set_key(acc_aes_key *k, const uint8_t *key, size_t keylen, int enc_only)
{
    if (k == NULL || key == NULL || (keylen != 16 && keylen != 24 && keylen != 32))
        return 0;
    k->keybits = (int)keylen * 8;
    k->rounds = (int)keylen / 4 + 6;
    k->evp = NULL;
    expand_enc(k, key, (int)keylen / 4);
    /* Never leave a previous key's decryption schedule behind. */
    OPENSSL_cleanse(k->dec, sizeof(k->dec));
    k->has_dec = !enc_only;
    if (!enc_only)
        expand_dec(k);
    return 1;
}

static int ni_copy_key(acc_aes_key *dst, const acc_aes_key *src)
{
    if (dst == NULL || src == NULL)
        return 0;
    memcpy(dst, src, sizeof(*dst));
    return 1;
}

static void ni_free_key(acc_aes_key *k)
{
    if (k != NULL)
        OPENSSL_cleanse(k, sizeof(*k));
}

/* ------------------------------------------------------------------------------------------
 * The two engines' entry points. They cannot fail and return 1 at the end: the vtable's int
 * result is for the nested-EVP engine, and costs these a single mov, outside every loop.
 * ------------------------------------------------------------------------------------------ */

TGT_NI static int ni_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    x_ecb(k->enc, k->rounds, in, out, n, 0);
    return 1;
}

TGT_NI static int ni_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    x_ecb(k->dec, k->rounds, in, out, n, 1);
    return 1;
}

/* Serial by nature, so latency is all: the next block's (p ^ rk0) is folded into this block's
 * last round key, leaving only the ten AES instructions on the chain (one XOR fewer than the
 * textbook loop); the ciphertext itself is recovered off the chain. Both engines use this. */
TGT_NI static int ni_cbc_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                             uint8_t iv[16])
{
    const uint8_t *rk = k->enc;
    int rounds = k->rounds;
    __m128i k0 = XKEY(rk, 0), kl = XKEY(rk, rounds), x;

    if (n == 0)
        return 1;
    /* iv ^ rk0 first, then the plaintext: in a run of small requests the plaintext is the load that
     * arrives last (in place, it is the previous request's output), so one XOR follows it, not two.
     * The empty asm keeps gcc from reassociating the XORs. */
    x = _mm_xor_si128(XLD(iv), k0);
    __asm__("" : "+x"(x));
    x = _mm_xor_si128(x, XLD(in));
    for (; n > 1; n--, in += 16, out += 16) {
        __m128i t = _mm_xor_si128(XLD(in + 16), k0);
        x = x_one_rounds(rk, rounds, x, 0);
        x = _mm_aesenclast_si128(x, _mm_xor_si128(kl, t));
        XST(out, _mm_xor_si128(x, t));
    }
    x = x_one_rounds(rk, rounds, x, 0);
    x = _mm_aesenclast_si128(x, kl);
    XST(out, x);
    XST(iv, x);
    return 1;
}

TGT_NI static int ni_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                             uint8_t iv[16])
{
    x_cbcdec(k->dec, k->rounds, in, out, n, iv);
    return 1;
}

TGT_NI static int ni_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                         uint8_t ctr[16])
{
    uint64_t hi = load_be64(ctr), lo = load_be64(ctr + 8);
    while (n) {
        size_t m = ctr_span(lo, n);
        x_ctr(k->enc, k->rounds, in, out, m, hi, lo);
        in += 16 * m, out += 16 * m, n -= m;
        lo += m;
        hi += (lo == 0);                /* the low half wrapped: carry into the high half */
    }
    store_be64(ctr, hi);
    store_be64(ctr + 8, lo);
    return 1;
}

TGT_VAES static int vaes_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    if (n < VAES_MIN)
        x_ecb(k->enc, k->rounds, in, out, n, 0);
    else
        z_ecb(k->enc, k->rounds, in, out, n, 0);
    return 1;
}

TGT_VAES static int vaes_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    if (n < VAES_MIN)
        x_ecb(k->dec, k->rounds, in, out, n, 1);
    else
        z_ecb(k->dec, k->rounds, in, out, n, 1);
    return 1;
}

TGT_VAES static int vaes_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                                 uint8_t ivb[16])
{
    const uint8_t *rk = k->dec;
    int rounds = k->rounds;
    if (n < VAES_MIN) {
        x_cbcdec(rk, rounds, in, out, n, ivb);
        return 1;
    }
    /* The last ciphertext block is the next IV; take it before in == out overwrites it. */
    __m128i next = XLD(in + 16 * (n - 1));
    __m512i iv = _mm512_broadcast_i32x4(XLD(ivb));
    z_cbcdec(rk, rounds, in, out, n, &iv);
    XST(ivb, next);
    return 1;
}

TGT_VAES static int vaes_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                             uint8_t ctr[16])
{
    uint64_t hi = load_be64(ctr), lo = load_be64(ctr + 8);
    while (n) {
        size_t m = ctr_span(lo, n);
        if (m < VAES_MIN)
            x_ctr(k->enc, k->rounds, in, out, m, hi, lo);
        else
            z_ctr(k->enc, k->rounds, in, out, m, hi, lo);
        in += 16 * m, out += 16 * m, n -= m;
        lo += m;
        hi += (lo == 0);
    }
    store_be64(ctr, hi);
    store_be64(ctr + 8, lo);
    return 1;
}

static const acc_engine ni_engine = {
    "aesni", ni_set_key, ni_ecb_enc, ni_ecb_dec, ni_cbc_enc, ni_cbc_dec, ni_ctr,
    ni_copy_key, ni_free_key
};

static const acc_engine vaes_engine = {
    "aesni-vaes", ni_set_key, vaes_ecb_enc, vaes_ecb_dec, ni_cbc_enc, vaes_cbc_dec, vaes_ctr,
    ni_copy_key, ni_free_key
};

/* ------------------------------------------------------------------------------------------
 * Run-time selection
 * ------------------------------------------------------------------------------------------ */

static int cpu_has_aesni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c & bit_AES) && (c & bit_SSE4_1) && (c & bit_SSSE3);
}

/* zmm state must be enabled by the OS (XCR0: SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM), not just
 * present in the CPU. */
static int cpu_has_vaes512(void)
{
    unsigned a, b, c, d, xlo, xhi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 0xe6) != 0xe6)
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & bit_AVX512F) && (b & bit_AVX512BW) && (c & bit_VAES);
}

static const acc_engine *aesni_chosen;

static void aesni_choose(void)
{
    const char *no_vaes = secure_getenv("ACCELAES_NO_VAES");
    if (!cpu_has_aesni())
        aesni_chosen = NULL;
    else if (cpu_has_vaes512() && !(no_vaes != NULL && strcmp(no_vaes, "1") == 0))
        aesni_chosen = &vaes_engine;
    else
        aesni_chosen = &ni_engine;
}

/* ACCELAES_NO_VAES=1 (read once) keeps the xmm code, so tests cover both paths on one machine. */
const acc_engine *acc_engine_aesni(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, aesni_choose);
    return aesni_chosen;
}
