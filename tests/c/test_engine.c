/* tests/c/test_engine.c: the inline AES engines (accel/cpu/aesni.c with and without VAES, and
 * accel/cpu/evp_engine.c): published vectors, then randomized comparison with OpenSSL's default
 * provider, CTR carries, chained calls, the interface's other promises, and each engine's XTS
 * function (one data unit, ciphertext stealing) against the default provider's AES-XTS. Shared keys across
 * threads and fork are tests/c/test_engine_threads.c; the driver (every engine, the xmm re-run with
 * ACCELAES_NO_VAES=1, ACCELAES_TEST_SEED=N to replay) is tests/c/test_engine_common.h. */
#include "tests/c/test_engine_common.h"

static size_t unhex(const char *s, uint8_t *out)
{
    size_t n = 0;
    for (; s[0] && s[1]; s += 2)
        sscanf(s, "%2hhx", &out[n++]);
    return n;
}

/* The IV/counter an engine must leave behind, worked out without the engine. */
static void expected_iv(int mode, const uint8_t *in, const uint8_t *out, size_t n, uint8_t iv[16])
{
    if (n == 0)
        return;
    if (mode == CBC_ENC)
        memcpy(iv, out + 16 * (n - 1), 16);
    else if (mode == CBC_DEC)
        memcpy(iv, in + 16 * (n - 1), 16);
    else if (mode == CTR)
        for (size_t i = 0; i < n; i++)
            ctr_inc(iv);
}

/* ---- published vectors: FIPS-197 appendix C, SP 800-38A F.1, F.2, F.5 ---- */

static const char *const kat_keys[3] = {
    "2b7e151628aed2a6abf7158809cf4f3c",
    "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
    "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4" };
static const char *const kat_pt =
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
static const char *const kat_ct[3][3] = {    /* [mode: ECB, CBC, CTR][key size] */
    { "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"
      "43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4",
      "bd334f1d6e45f25ff712a214571fa5cc974104846d0ad3ad7734ecb3ecee4eef"
      "ef7afd2270e2e60adce0ba2face6444e9a4b41ba738d6c72fb16691603c18e0e",
      "f3eed1bdb5d2a03c064b5a7e3db181f8591ccb10d410ed26dc5ba74a31362870"
      "b6ed21b99ca6f4f9f153e7b1beafed1d23304b7a39f9f3ff067d8d8f9e24ecc7" },
    { "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
      "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7",
      "4f021db243bc633d7178183a9fa071e8b4d9ada9ad7dedf4e5e738763f69145a"
      "571b242012fb7ae07fa9baac3df102e008b0e27988598881d920a9e64f5615cd",
      "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d"
      "39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b" },
    { "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
      "5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee",
      "1abc932417521ca24f2b0459fe7e6e0b090339ec0aa6faefd5ccc2c6f4ce8e94"
      "1e36b26bd1ebc670d1bd1d665620abf74f78a7f6d29809585a97daec58c6b050",
      "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
      "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6" } };
static const char *const fips197_ct[3] = {
    "69c4e0d86a7b0430d8cdb78070b4c55a", "dda97ca4864cdfe06eaf70a0ec0d7191",
    "8ea2b7ca516745bfeafc49904b496089" };

/* Encrypt and decrypt one vector, out of place and in place. */
static void kat_one(const acc_engine *e, int mi, int ki, const uint8_t *key, const uint8_t *iv0,
                    const uint8_t *pt, const uint8_t *ct, size_t n)
{
    acc_aes_key k;
    uint8_t out[64], iv[16];
    int enc = mi == 0 ? ECB_ENC : mi == 1 ? CBC_ENC : CTR, dec = mi == 0 ? ECB_DEC : mi == 1 ? CBC_DEC : CTR;

    memset(&k, 0, sizeof(k));
    check(e->set_key(&k, key, 16 + 8 * (size_t)ki, 0), e, "set_key %d", 128 + 64 * ki);
    for (int inplace = 0; inplace < 2; inplace++) {
        memcpy(iv, iv0, 16);
        if (inplace)
            memcpy(out, pt, 16 * n);
        eng_run(e, &k, enc, inplace ? out : pt, out, n, iv);
        check(memcmp(out, ct, 16 * n) == 0, e, "KAT %s-%d %s", mode_name[enc], 128 + 64 * ki,
              inplace ? "in place" : "");
        memcpy(iv, iv0, 16);
        if (inplace)
            memcpy(out, ct, 16 * n);
        eng_run(e, &k, dec, inplace ? out : ct, out, n, iv);
        check(memcmp(out, pt, 16 * n) == 0, e, "KAT %s-%d %s", mode_name[dec], 128 + 64 * ki,
              inplace ? "in place" : "");
    }
    e->free_key(&k);
}

static void test_kat(const acc_engine *e)
{
    uint8_t key[32], pt[64], ct[64], iv[16];
    for (int ki = 0; ki < 3; ki++) {
        unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", key);
        unhex("00112233445566778899aabbccddeeff", pt);
        unhex(fips197_ct[ki], ct);
        kat_one(e, 0, ki, key, iv, pt, ct, 1);                    /* FIPS-197 C.1-C.3 */
        unhex(kat_keys[ki], key);
        unhex(kat_pt, pt);
        for (int mi = 0; mi < 3; mi++) {
            unhex(mi == 2 ? "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" : "000102030405060708090a0b0c0d0e0f", iv);
            unhex(kat_ct[mi][ki], ct);
            kat_one(e, mi, ki, key, iv, pt, ct, 4);
        }
    }
}

/* ---- randomized comparison with the default provider ---- */

#define MAXBLOCKS 4099
static uint8_t g_in[16 * MAXBLOCKS + 64], g_out[16 * MAXBLOCKS + 64], g_ref[16 * MAXBLOCKS + 64];

/* One call on random key, IV and data; buffers misaligned by random offsets. */
static void compare_one(const acc_engine *e, int mode, int keybits, size_t n, int inplace)
{
    acc_aes_key k;
    uint8_t key[32], iv[16], iv0[16], want_iv[16];
    uint8_t *in = g_in + rnd() % 16, *out = inplace ? in : g_out + rnd() % 16, *ref = g_ref + 1;
    int enc_only = mode != ECB_DEC && mode != CBC_DEC;

    rnd_bytes(key, sizeof(key));
    rnd_bytes(iv0, 16);
    if (mode == CTR && rnd() % 4 == 0) {         /* now and then a counter about to carry */
        size_t from = 8 + rnd() % 8;
        memset(iv0 + from, 0xff, 16 - from);
    }
    rnd_bytes(in, 16 * n);
    memset(&k, 0, sizeof(k));
    if (!reference(mode, key, keybits, iv0, in, ref, n) || !e->set_key(&k, key, (size_t)keybits / 8, enc_only)) {
        check(0, e, "set-up %s-%d n=%zu", mode_name[mode], keybits, n);
        return;
    }
    memcpy(want_iv, iv0, 16);
    expected_iv(mode, in, ref, n, want_iv);
    memcpy(iv, iv0, 16);
    eng_run(e, &k, mode, in, out, n, iv);
    check(memcmp(out, ref, 16 * n) == 0 && memcmp(iv, want_iv, 16) == 0, e,
          "%s-%d n=%zu %s: output or IV differs from the default provider", mode_name[mode],
          keybits, n, inplace ? "in place" : "out of place");
    e->free_key(&k);
}

static void test_random(const acc_engine *e)
{
    static const size_t big[] = { 127, 128, 129, 1000, 4099 };
    for (int mode = 0; mode < NMODES; mode++)
        for (int keybits = 128; keybits <= 256; keybits += 64)
            for (int inplace = 0; inplace < 2; inplace++) {
                for (size_t n = 0; n <= 70; n++)
                    compare_one(e, mode, keybits, n, inplace);
                for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
                    compare_one(e, mode, keybits, big[i], inplace);
            }
}

/* ---- CTR at the 2^32, 2^64 and 2^128 boundaries: reference = ECB of our own counters ---- */

static void ctr_edge(const acc_engine *e, int keybits, const uint8_t iv0[16], size_t n)
{
    acc_aes_key k;
    uint8_t key[32], c[16], iv[16], ks[16 * 80], pt[16 * 80], want[16 * 80], got[16 * 80];

    rnd_bytes(key, sizeof(key));
    rnd_bytes(pt, 16 * n);
    memcpy(c, iv0, 16);
    for (size_t i = 0; i < n; i++, ctr_inc(c))
        memcpy(ks + 16 * i, c, 16);
    memset(&k, 0, sizeof(k));
    if (!reference(ECB_ENC, key, keybits, NULL, ks, ks, n) || !e->set_key(&k, key, (size_t)keybits / 8, 1)) {
        check(0, e, "ctr edge set-up");
        return;
    }
    for (size_t i = 0; i < 16 * n; i++)
        want[i] = pt[i] ^ ks[i];
    memcpy(iv, iv0, 16);
    check(e->ctr(&k, pt, got, n, iv) == 1, e, "ctr-%d across a carry returns 1", keybits);
    check(memcmp(got, want, 16 * n) == 0 && memcmp(iv, c, 16) == 0, e,
          "ctr-%d across a carry: iv %02x..%02x%02x n=%zu", keybits, iv0[0], iv0[14], iv0[15], n);
    e->free_key(&k);
}

static void test_ctr_edges(const acc_engine *e)
{
    uint8_t iv[16];
    for (int keybits = 128; keybits <= 256; keybits += 64) {
        for (int width = 4; width <= 16; width += 4) {        /* low 32, 64, 96 bits, all 128 */
            rnd_bytes(iv, 16);
            memset(iv + 16 - width, 0xff, (size_t)width);
            iv[15] = 0xf0;
            ctr_edge(e, keybits, iv, 40);
        }
        for (int back = 1; back <= 40; back++) {              /* the carry at every position */
            rnd_bytes(iv, 8);
            memset(iv + 8, 0xff, 8);
            iv[15] = (uint8_t)(0x100 - back);
            ctr_edge(e, keybits, iv, 70);
            memset(iv, 0xff, 16);                             /* and the wrap to zero */
            iv[15] = (uint8_t)(0x100 - back);
            ctr_edge(e, keybits, iv, 1 + rnd() % 70);
        }
    }
}

/* ---- chained calls: the IV/counter carried across calls equals one call ---- */

static void test_chain(const acc_engine *e)
{
    enum { N = 300 };
    static uint8_t in[16 * N], one[16 * N], many[16 * N];
    uint8_t key[32], iv0[16], iv1[16], iv2[16];
    acc_aes_key k;

    for (int mode = 0; mode < NMODES; mode++)
        for (int keybits = 128; keybits <= 256; keybits += 64) {
            rnd_bytes(key, sizeof(key));
            rnd_bytes(in, sizeof(in));
            rnd_bytes(iv0, 16);
            if (mode == CTR)
                memset(iv0 + 8, 0xff, 7);             /* the low half wraps mid-stream */
            memset(&k, 0, sizeof(k));
            if (!e->set_key(&k, key, (size_t)keybits / 8, 0)) {
                check(0, e, "chain set_key");
                continue;
            }
            memcpy(iv1, iv0, 16);
            eng_run(e, &k, mode, in, one, N, iv1);
            memcpy(iv2, iv0, 16);
            memcpy(many, in, sizeof(in));
            for (size_t at = 0, m; at < N; at += m) {   /* in place, pieces of 0..40 blocks */
                m = rnd() % 41;
                m = m > N - at ? N - at : m;
                eng_run(e, &k, mode, many + 16 * at, many + 16 * at, m, iv2);
            }
            check(memcmp(one, many, sizeof(one)) == 0 && memcmp(iv1, iv2, 16) == 0, e,
                  "%s-%d: chained calls differ from one call", mode_name[mode], keybits);
            e->free_key(&k);
        }
}

/* ---- XTS: the engine's xts against the default provider's AES-XTS through EVP ---- */

static int xts_reference(int keybits, const uint8_t *key, const uint8_t tweak[16], const uint8_t *in, uint8_t *out,
                         size_t len, int dec)
{
    static EVP_CIPHER *cache[2];
    int ki = keybits == 256, ol = 0, ok;

    if (cache[ki] == NULL)
        cache[ki] = EVP_CIPHER_fetch(NULL, ki ? "AES-256-XTS" : "AES-128-XTS", "provider=default");
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    ok = c != NULL && cache[ki] != NULL && EVP_CipherInit_ex2(c, cache[ki], key, tweak, !dec, NULL)
        && EVP_CipherUpdate(c, out, &ol, in, (int)len) && (size_t)ol == len;
    EVP_CIPHER_CTX_free(c);
    return ok;
}

/* One unit on a random key pair (distinct halves) and tweak, as the provider calls the engine: the
 * data key with its decryption schedule when dec, the tweak key encryption only. Buffers misaligned. */
static void xts_one(const acc_engine *e, int keybits, size_t len, int dec, int inplace)
{
    acc_aes_key k1, k2;
    uint8_t key[64], tweak[16], tweak0[16];
    uint8_t *in = g_in + rnd() % 16, *out = inplace ? in : g_out + rnd() % 16, *ref = g_ref + 3;
    size_t half = (size_t)keybits / 8;
    int ok;

    rnd_bytes(key, sizeof(key));
    key[half] = (uint8_t)~key[0]; /* the halves differ */
    rnd_bytes(tweak0, 16);
    rnd_bytes(in, len);
    memcpy(tweak, tweak0, 16);
    memset(&k1, 0, sizeof(k1));
    memset(&k2, 0, sizeof(k2));
    if (!xts_reference(keybits, key, tweak0, in, ref, len, dec) || !e->set_key(&k1, key, half, !dec)
        || !e->set_key(&k2, key + half, half, 1)) {
        check(0, e, "xts set-up %d len=%zu", keybits, len);
        e->free_key(&k1);
        e->free_key(&k2);
        return;
    }
    ok = e->xts(&k1, &k2, tweak, in, out, len, dec);
    if (ok != 1)
        __atomic_add_fetch(&eng_failures, 1, __ATOMIC_RELAXED);
    check(ok == 1 && memcmp(out, ref, len) == 0 && memcmp(tweak, tweak0, 16) == 0, e,
          "xts-%d %s len=%zu %s: output or tweak differs from the default provider", keybits, dec ? "dec" : "enc", len,
          inplace ? "in place" : "out of place");
    e->free_key(&k1);
    e->free_key(&k2);
}

/* Every length 16..100 (ciphertext stealing for each partial last block), the 4-block and 8-block
 * group edges, and large units; both directions, both key sizes, in place and not. */
static void test_xts(const acc_engine *e)
{
    static const size_t big[] = { 127, 128, 129, 255, 256, 257, 511, 1000, 4096, 4096 + 13, 16 * MAXBLOCKS };
    check(e->xts != NULL, e, "the engine has no xts function");
    if (e->xts == NULL)
        return;
    for (int keybits = 128; keybits <= 256; keybits += 128)
        for (int dec = 0; dec < 2; dec++)
            for (int inplace = 0; inplace < 2; inplace++) {
                for (size_t len = 16; len <= 100; len++)
                    xts_one(e, keybits, len, dec, inplace);
                for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
                    xts_one(e, keybits, big[i] - (i % 3 == 2 ? rnd() % 16 : 0), dec, inplace);
            }
}

/* ---- the interface's other promises ---- */

static int all_zero(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static void test_api(const acc_engine *e)
{
    static const size_t bad[] = { 0, 8, 15, 17, 20, 31, 33, 64 };
    uint8_t key[32], pt[16 * 37], ref[16 * 37], out[16 * 37], iv[16], iv0[16];
    acc_aes_key k, copy;

    rnd_bytes(key, sizeof(key));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&k, 0, sizeof(k));
        check(!e->set_key(&k, key, bad[i], 0), e, "set_key accepted a %zu-byte key", bad[i]);
        e->free_key(&k);
    }
    memset(&k, 0, sizeof(k));
    check(!e->set_key(&k, NULL, 16, 0), e, "set_key accepted a NULL key");

    /* A copy outlives its original and gives the same results. */
    rnd_bytes(pt, sizeof(pt));
    rnd_bytes(iv0, 16);
    memset(&copy, 0, sizeof(copy));
    check(e->set_key(&k, key, 24, 0) && e->copy_key(&copy, &k), e, "set_key/copy_key");
    e->free_key(&k);
    check(all_zero(&k, sizeof(k)), e, "free_key left bytes of the key struct behind");
    for (int mode = 0; mode < NMODES; mode++) {
        memcpy(iv, iv0, 16);
        eng_run(e, &copy, mode, pt, out, 37, iv);
        check(reference(mode, key, 192, iv0, pt, ref, 37) && memcmp(out, ref, sizeof(out)) == 0, e,
              "%s with a copied key", mode_name[mode]);
    }
    /* Zero blocks: nothing written, IV untouched. */
    for (int mode = 0; mode < NMODES; mode++) {
        memset(out, 0xa5, sizeof(out));
        memcpy(iv, iv0, 16);
        eng_run(e, &copy, mode, pt, out, 0, iv);
        check(out[0] == 0xa5 && memcmp(iv, iv0, 16) == 0, e, "%s with 0 blocks", mode_name[mode]);
    }
    /* Re-keying a key struct in use (after free_key, as the provider does) takes the new key. */
    e->free_key(&copy);
    key[0] ^= 1;
    check(e->set_key(&copy, key, 32, 1), e, "re-key");
    check(e->ecb_enc(&copy, pt, out, 37) == 1, e, "ecb-enc after re-key returns 1");
    check(reference(ECB_ENC, key, 256, NULL, pt, ref, 37) && memcmp(out, ref, sizeof(out)) == 0, e,
          "ecb-enc after re-key");
    e->free_key(&copy);
}

static void test_engine(const acc_engine *e)
{
    test_kat(e);
    test_random(e);
    test_ctr_edges(e);
    test_chain(e);
    test_api(e);
    test_xts(e);
}

int main(int argc, char **argv)
{
    return engine_test_main(argc, argv, "test_engine", test_engine);
}
