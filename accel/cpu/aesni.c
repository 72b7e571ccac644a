/* accel/cpu/aesni.c: the inline AES engine: AES-NI on xmm registers (the block code is in aes_x.h),
 * plus VAES on zmm registers (vaes.c) where the CPU and the OS allow it, chosen once at run time;
 * and the key schedule both use. */
#define _GNU_SOURCE   /* secure_getenv */
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include <immintrin.h>
#include <openssl/crypto.h>
#include "accel/cpu/aes_x.h"
#include "accel/cpu/cpu_features.h"

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

/* One step of the AES-128 schedule, or of AES-256's even or odd half: the previous key words folded
 * (w0, w0^w1, w0^w1^w2, ...) and XORed with the new word in every lane (assist below). */
TGT_NI static inline __m128i fold(__m128i k, __m128i assist)
{
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    return _mm_xor_si128(k, assist);
}

/* RotWord(SubWord(word 3)) ^ rcon in every word (rot) or SubWord(word 3) (not): word 3 broadcast by a byte
 * shuffle (rotated or not), then aesenclast with rcon in each word as its round key (ShiftRows moves
 * nothing in four equal columns). aeskeygenassist took twice aesenclast's latency, and the chain of ten
 * was a tenth of a 16-byte CCM record's time (a key per record). */
TGT_NI static inline __m128i assist(__m128i w, __m128i rcon, int rot)
{
    const __m128i word3 = rot ? _mm_set1_epi32(0x0c0f0e0d) : _mm_set1_epi32(0x0f0e0d0c);

    return _mm_aesenclast_si128(_mm_shuffle_epi8(w, word3), rcon);
}

/* AES-128 and AES-256 in registers; AES-192 takes the word loop. rcon doubles in GF(2^8) (x 2, 0x1b after
 * 0x80): as a vector of four equal words, a shift and a fix at 0x1b. */
TGT_NI static void expand_128(acc_aes_key *k, const uint8_t *key)
{
    __m128i r = XLD(key), rcon = _mm_set1_epi32(1);

    XST(k->enc, r);
    for (int i = 1; i <= 10; i++) {
        r = fold(r, assist(r, rcon, 1));
        XST(k->enc + 16 * i, r);
        rcon = i == 8 ? _mm_set1_epi32(0x1b) : _mm_slli_epi32(rcon, 1);
    }
}

TGT_NI static void expand_256(acc_aes_key *k, const uint8_t *key)
{
    __m128i a = XLD(key), b = XLD(key + 16), rcon = _mm_set1_epi32(1);

    XST(k->enc, a);
    XST(k->enc + 16, b);
    for (int i = 2; i <= 14; i += 2) {
        a = fold(a, assist(b, rcon, 1));
        XST(k->enc + 16 * i, a);
        if (i == 14)
            break;
        b = fold(b, assist(a, _mm_setzero_si128(), 0));
        XST(k->enc + 16 * (i + 1), b);
        rcon = _mm_slli_epi32(rcon, 1);
    }
}

TGT_NI static int ni_set_key(acc_aes_key *k, const uint8_t *key, size_t keylen, int enc_only)
{
    if (k == NULL || key == NULL || (keylen != 16 && keylen != 24 && keylen != 32))
        return 0;
    k->keybits = (int)keylen * 8;
    k->rounds = (int)keylen / 4 + 6;
    k->evp = NULL;
    if (keylen == 16)
        expand_128(k, key);
    else if (keylen == 32)
        expand_256(k, key);
    else
        expand_enc(k, key, (int)keylen / 4);
    /* Never leave a previous key's decryption schedule behind. */
    OPENSSL_cleanse(k->dec, sizeof(k->dec));
    k->has_dec = !enc_only;
    if (!enc_only)
        expand_dec(k);
    acc_clear_xmm();
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
    acc_clear_xmm();
    return 1;
}

TGT_NI static int ni_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    x_ecb(k->dec, k->rounds, in, out, n, 1);
    acc_clear_xmm();
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
    acc_clear_xmm();
    return 1;
}

/* CBC decryption and CTR keep the whole schedule in registers and spill some of it (16 xmm):
 * the body runs out of line and its frame is scrubbed after it (accel/wipe.h). */
TGT_NI static __attribute__((noinline)) void cbc_dec_body(const acc_aes_key *k, const uint8_t *in, uint8_t *out,
                                                          size_t n, uint8_t iv[16])
{
    x_cbcdec(k->dec, k->rounds, in, out, n, iv);
}

static int ni_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t iv[16])
{
    cbc_dec_body(k, in, out, n, iv);
    acc_clear_xmm();
    if (n >= 8)                 /* below 8 blocks the tail needs few registers and spills no key */
        acc_stack_scrub_sse();
    return 1;
}

TGT_NI static __attribute__((noinline)) void ctr_body(const acc_aes_key *k, const uint8_t *in, uint8_t *out,
                                                      size_t n, uint8_t ctr[16])
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
}

static int ni_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n, uint8_t ctr[16])
{
    ctr_body(k, in, out, n, ctr);
    acc_clear_xmm();
    if (n >= 8)
        acc_stack_scrub_sse();
    return 1;
}

static const acc_engine ni_engine = {
    .name = "aesni",
    .set_key = ni_set_key,
    .ecb_enc = ni_ecb_enc,
    .ecb_dec = ni_ecb_dec,
    .cbc_enc = ni_cbc_enc,
    .cbc_dec = ni_cbc_dec,
    .ctr = ni_ctr,
    .xts = acc_xts_ni,
    .copy_key = ni_copy_key,
    .free_key = ni_free_key,
    .caps = ACC_CAP_NI_SCHEDULE,
};

static const acc_engine vaes_engine = {
    .name = "aesni-vaes",
    .set_key = ni_set_key,
    .ecb_enc = acc_vaes_ecb_enc,
    .ecb_dec = acc_vaes_ecb_dec,
    .cbc_enc = ni_cbc_enc,
    .cbc_dec = acc_vaes_cbc_dec,
    .ctr = acc_vaes_ctr,
    .xts = acc_xts_vaes,
    .copy_key = ni_copy_key,
    .free_key = ni_free_key,
    .caps = ACC_CAP_NI_SCHEDULE | ACC_CAP_ZMM,
};

/* VAES on ymm, for cores without AVX-512 (vaes_y.c, XTS in xts_y.c). */
static const acc_engine vaesy_engine = {
    .name = "aesni-vaes-ymm",
    .set_key = ni_set_key,
    .ecb_enc = acc_vaesy_ecb_enc,
    .ecb_dec = acc_vaesy_ecb_dec,
    .cbc_enc = ni_cbc_enc,
    .cbc_dec = acc_vaesy_cbc_dec,
    .ctr = acc_vaesy_ctr,
    .xts = acc_xts_vaesy,
    .copy_key = ni_copy_key,
    .free_key = ni_free_key,
    .caps = ACC_CAP_NI_SCHEDULE | ACC_CAP_YMM,
};

/* ------------------------------------------------------------------------------------------
 * Run-time selection
 * ------------------------------------------------------------------------------------------ */

static const acc_engine *aesni_chosen;

static int env_is(const char *name, const char *value)
{
    const char *v = secure_getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

/* zmm where the core has AVX-512, else ymm where it has VAES, else xmm. ACCELAES_NO_VAES=1 keeps
 * the xmm code and ACCELAES_VAES=ymm the ymm code on an AVX-512 core (both read once), so tests
 * cover every tier the machine can run. */
static void aesni_choose(void)
{
    int ymm = acc_cpu_has(ACC_CPU_VAES256);

    if (!acc_cpu_has(ACC_CPU_AESNI))
        aesni_chosen = NULL;
    else if (env_is("ACCELAES_NO_VAES", "1"))
        aesni_chosen = &ni_engine;
    else if (ymm && env_is("ACCELAES_VAES", "ymm"))
        aesni_chosen = &vaesy_engine;
    else if (acc_cpu_has(ACC_CPU_VAES512))
        aesni_chosen = &vaes_engine;
    else
        aesni_chosen = ymm ? &vaesy_engine : &ni_engine;
}

const acc_engine *acc_engine_aesni(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, aesni_choose);
    return aesni_chosen;
}
