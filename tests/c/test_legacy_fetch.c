/* tests/c/test_legacy_fetch.c: a program written for OpenSSL 1.1 (EVP_aes_128_cbc() and friends,
 * no fetch, no provider named) gets accelaes from OPENSSL_CONF=conf/accelaes.cnf alone: the nine
 * ECB/CBC/CTR ciphers, AES-GCM (ciphertext and tag) and AES-XTS; AES-OCB, which accelaes does not
 * offer, still comes from the default provider. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/provider.h>

/* NIST SP 800-38A, first block of F.1 (ECB), F.2 (CBC) and F.5 (CTR). */
static const char *const KEYS[3] = {
    "2b7e151628aed2a6abf7158809cf4f3c",
    "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
    "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
};
static const char *const PT = "6bc1bee22e409f96e93d7e117393172a";

static const struct {
    const EVP_CIPHER *(*legacy)(void);
    const char *name;
    int key;
    const char *iv;
    const char *ct;
} CASES[] = {
    { EVP_aes_128_ecb, "AES-128-ECB", 0, NULL, "3ad77bb40d7a3660a89ecaf32466ef97" },
    { EVP_aes_192_ecb, "AES-192-ECB", 1, NULL, "bd334f1d6e45f25ff712a214571fa5cc" },
    { EVP_aes_256_ecb, "AES-256-ECB", 2, NULL, "f3eed1bdb5d2a03c064b5a7e3db181f8" },
    { EVP_aes_128_cbc, "AES-128-CBC", 0, "000102030405060708090a0b0c0d0e0f", "7649abac8119b246cee98e9b12e9197d" },
    { EVP_aes_192_cbc, "AES-192-CBC", 1, "000102030405060708090a0b0c0d0e0f", "4f021db243bc633d7178183a9fa071e8" },
    { EVP_aes_256_cbc, "AES-256-CBC", 2, "000102030405060708090a0b0c0d0e0f", "f58c4c04d6e5f1ba779eabfb5f7bfbd6" },
    { EVP_aes_128_ctr, "AES-128-CTR", 0, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", "874d6191b620e3261bef6864990db6ce" },
    { EVP_aes_192_ctr, "AES-192-CTR", 1, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", "1abc932417521ca24f2b0459fe7e6e0b" },
    { EVP_aes_256_ctr, "AES-256-CTR", 2, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", "601ec313775789a5b7a7f504bbf3d228" },
};

/* GCM: McGrew-Viega test cases 2, 8 and 14 (zero key, 12-byte zero IV, one zero block): ciphertext
 * then tag. XTS: IEEE 1619 vector 2 (key 11..11 22..22, tweak 3333333333, 32 bytes of 44) for
 * AES-128-XTS, the same pattern at 64 bytes of key for AES-256-XTS (pyca/cryptography's answer). */
static const struct {
    const EVP_CIPHER *(*legacy)(void);
    const char *name;
    int keylen, ptlen;
    const char *out;
} MORE[] = {
    { EVP_aes_128_gcm, "AES-128-GCM", 16, 16, "0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf" },
    { EVP_aes_192_gcm, "AES-192-GCM", 24, 16, "98e7247c07f0fe411c267e4384b0f6002ff58d80033927ab8ef4d4587514f0fb" },
    { EVP_aes_256_gcm, "AES-256-GCM", 32, 16, "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919" },
    { EVP_aes_128_xts, "AES-128-XTS", 32, 32, "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0" },
    { EVP_aes_256_xts, "AES-256-XTS", 64, 32, "e622334f184bbce129a25b2ac76b3d92abf98e22df5bdd15af471f3db8946a85" },
};

static size_t unhex(const char *h, unsigned char *out)
{
    size_t n = strlen(h) / 2;

    for (size_t i = 0; i < n; i++)
        sscanf(h + 2 * i, "%2hhx", &out[i]);
    return n;
}

static const char *provider_of(const EVP_CIPHER_CTX *ctx)
{
    const EVP_CIPHER *c = EVP_CIPHER_CTX_get0_cipher(ctx);
    const OSSL_PROVIDER *p = c != NULL ? EVP_CIPHER_get0_provider(c) : NULL;

    return p != NULL ? OSSL_PROVIDER_get0_name(p) : "(none)";
}

int main(void)
{
    int failed = 0;

    if (getenv("OPENSSL_CONF") == NULL) {
        printf("SKIP: run under OPENSSL_CONF=conf/accelaes.cnf OPENSSL_MODULES=build "
               "(tests/system/test_conf.py does)\n");
        return 77;
    }
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        unsigned char key[32], iv[16] = { 0 }, pt[16], ct[16], out[32];
        int l1 = 0, l2 = 0, ok;
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        const char *prov;

        unhex(KEYS[CASES[i].key], key);
        if (CASES[i].iv != NULL)
            unhex(CASES[i].iv, iv);
        unhex(PT, pt);
        unhex(CASES[i].ct, ct);
        ok = ctx != NULL && EVP_EncryptInit_ex(ctx, CASES[i].legacy(), NULL, key, iv)
             && EVP_CIPHER_CTX_set_padding(ctx, 0)
             && EVP_EncryptUpdate(ctx, out, &l1, pt, 16) && EVP_EncryptFinal_ex(ctx, out + l1, &l2);
        prov = ctx != NULL ? provider_of(ctx) : "(none)";
        printf("%s %s %s\n", CASES[i].name, prov,
               !ok ? "encrypt-failed" : (l1 + l2 == 16 && memcmp(out, ct, 16) == 0) ? "vector-ok" : "vector-wrong");
        if (!ok || strcmp(prov, "accelaes") != 0 || l1 + l2 != 16 || memcmp(out, ct, 16) != 0) {
            ERR_print_errors_fp(stderr);
            failed++;
        }
        EVP_CIPHER_CTX_free(ctx);
    }
    for (size_t i = 0; i < sizeof(MORE) / sizeof(MORE[0]); i++) {
        unsigned char key[64], iv[16] = { 0 }, pt[32], out[64], want[64];
        int l1 = 0, l2 = 0, gcm = strstr(MORE[i].name, "GCM") != NULL, ok;
        size_t n = unhex(MORE[i].out, want);
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        const char *prov;

        memset(key, 0, sizeof(key));
        if (!gcm) {
            memset(key, 0x11, (size_t)MORE[i].keylen / 2);
            memset(key + MORE[i].keylen / 2, 0x22, (size_t)MORE[i].keylen / 2);
            memset(iv, 0x33, 5);
        }
        memset(pt, gcm ? 0 : 0x44, sizeof(pt));
        ok = ctx != NULL && EVP_EncryptInit_ex(ctx, MORE[i].legacy(), NULL, key, iv)
            && EVP_EncryptUpdate(ctx, out, &l1, pt, MORE[i].ptlen) && EVP_EncryptFinal_ex(ctx, out + l1, &l2)
            && (!gcm || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, out + l1 + l2));
        prov = ctx != NULL ? provider_of(ctx) : "(none)";
        ok = ok && (size_t)(l1 + l2 + (gcm ? 16 : 0)) == n && memcmp(out, want, n) == 0;
        printf("%s %s %s\n", MORE[i].name, prov, ok ? "vector-ok" : "vector-wrong");
        if (!ok || strcmp(prov, "accelaes") != 0) {
            ERR_print_errors_fp(stderr);
            failed++;
        }
        EVP_CIPHER_CTX_free(ctx);
    }
    /* What accelaes does not serve still works: from the default provider ("?" is a preference), or,
     * where libcrypto has EVP_SKEY (3.5+), from accelaes's delegate to it (provider/cipher/cipher_delegate.c). */
    {
        unsigned char key[16] = { 0 }, iv[12] = { 0 };
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int ok = ctx != NULL && EVP_EncryptInit_ex(ctx, EVP_aes_128_ocb(), NULL, key, iv);
        const char *prov = ok ? provider_of(ctx) : "(none)";
        const char *want = OpenSSL_version_num() >= 0x30500000UL ? "accelaes" : "default";

        printf("AES-128-OCB %s %s\n", prov, ok ? "init-ok" : "init-failed");
        if (!ok || strcmp(prov, want) != 0)
            failed++;
        EVP_CIPHER_CTX_free(ctx);
    }
    printf("test_legacy_fetch: %s\n", failed ? "FAILED" : "all legacy ciphers came from accelaes");
    return failed ? 1 : 0;
}
