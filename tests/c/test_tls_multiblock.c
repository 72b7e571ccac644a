/* tests/c/test_tls_multiblock.c: the TLS1_1_MULTIBLOCK write of the four stitched ciphers,
 * accelaes against OpenSSL's default provider, driven through EVP_CIPHER_CTX_ctrl as libssl and
 * `openssl speed -mb` drive it: the same flags, buffer size, interleave and packed length for
 * every header and length, the same refusals, and records that are byte for byte the default's
 * once each is decrypted with its own (random) explicit IV. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

extern OSSL_provider_init_fn OSSL_provider_init;

enum { DEF = 0, ACC = 1 };
static const char *const names[] = { "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA1",
                                     "AES-128-CBC-HMAC-SHA256", "AES-256-CBC-HMAC-SHA256" };
static OSSL_LIB_CTX *lc;
static int passed, failed;
static uint64_t rng = 88172645463325252ULL;

static void check(int cond, const char *what, const char *ciph, size_t len)
{
    if (cond) {
        passed++;
        return;
    }
    if (++failed <= 30)
        fprintf(stderr, "FAIL: %s (%s, %zu bytes)\n", what, ciph, len);
}

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* An encrypting context of cipher c from provider prov, with key and MAC key. */
static EVP_CIPHER_CTX *setup(const char *name, const char *prov, const uint8_t *key, const uint8_t *mac, int enc)
{
    char q[64];
    EVP_CIPHER *c;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();

    snprintf(q, sizeof(q), "provider=%s", prov);
    c = EVP_CIPHER_fetch(lc, name, q);
    if (c == NULL || x == NULL || !EVP_CipherInit_ex2(x, c, key, NULL, enc, NULL)
        || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_MAC_KEY, 20, (void *)mac) <= 0) {
        fprintf(stderr, "FAIL: setting up %s from %s\n", name, prov);
        ERR_print_errors_fp(stderr);
        exit(1);
    }
    EVP_CIPHER_free(c);
    return x;
}

/* The records in buf[0..len): each body decrypted in place with its explicit IV (the IV bytes
 * then zeroed: they are random). Returns the number of records, -1 if malformed. */
static int open_records(const char *name, const uint8_t *key, uint8_t *buf, size_t len, uint8_t ivs[][16])
{
    EVP_CIPHER *cbc = EVP_CIPHER_fetch(lc, strstr(name, "256-") ? "AES-256-CBC" : "AES-128-CBC", "provider=default");
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    size_t at = 0;
    int n = 0, outl;

    while (at + 5 <= len && n < 8) {
        size_t rl = (size_t)buf[at + 3] << 8 | buf[at + 4];

        if (rl < 32 || rl % 16 != 0 || at + 5 + rl > len)
            break;
        memcpy(ivs[n], buf + at + 5, 16);
        if (!EVP_CipherInit_ex2(x, cbc, key, ivs[n], 0, NULL) || !EVP_CIPHER_CTX_set_padding(x, 0)
            || !EVP_CipherUpdate(x, buf + at + 21, &outl, buf + at + 21, (int)rl - 16))
            break;
        memset(buf + at + 5, 0, 16);
        at += 5 + rl;
        n++;
    }
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(cbc);
    return at == len ? n : -1;
}

/* One AAD + encrypt on both providers. aadlen: the AAD's length field (0: libssl's way). */
static void one_write(const char *name, size_t len, unsigned int interleave, unsigned int aadlen, int version)
{
    static uint8_t in[1 << 17], out[2][(1 << 17) + 8 * 96];
    uint8_t key[32], mac[20], aad[13], ivs[2][8][16];
    EVP_CTRL_TLS1_1_MULTIBLOCK_PARAM p;
    int pack[2], enc[2], il[2], nrec[2];

    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)rnd();
    for (size_t i = 0; i < sizeof(mac); i++)
        mac[i] = (uint8_t)rnd();
    for (size_t i = 0; i < len; i++)
        in[i] = (uint8_t)rnd();
    for (int i = 0; i < 8; i++)
        aad[i] = (uint8_t)(i == 7 ? 0xfd : rnd());   /* a carry across records in the sequence */
    aad[8] = 23;
    aad[9] = (uint8_t)(version >> 8);
    aad[10] = (uint8_t)version;
    aad[11] = (uint8_t)(aadlen >> 8);
    aad[12] = (uint8_t)aadlen;
    for (int w = DEF; w <= ACC; w++) {
        EVP_CIPHER_CTX *x = setup(name, w == DEF ? "default" : "accelaes", key, mac, 1);

        memset(&p, 0, sizeof(p));
        p.inp = aad;
        p.len = len;
        p.interleave = interleave;
        pack[w] = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_TLS1_1_MULTIBLOCK_AAD, sizeof(p), &p);
        il[w] = (int)p.interleave;
        enc[w] = 0;
        if (pack[w] > 0 && (size_t)pack[w] <= sizeof(out[w])) {
            p.out = out[w];
            p.inp = in;
            p.len = len;
            enc[w] = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_TLS1_1_MULTIBLOCK_ENCRYPT, sizeof(p), &p);
        }
        ERR_clear_error();
        EVP_CIPHER_CTX_free(x);
    }
    check(pack[DEF] == pack[ACC], "AAD: the packed length or refusal differs", name, len);
    if (pack[DEF] <= 0 || pack[ACC] <= 0)
        return;
    check(il[DEF] == il[ACC], "AAD: the interleave differs", name, len);
    check(enc[DEF] == enc[ACC] && enc[ACC] == pack[ACC], "ENCRYPT: the output length differs", name, len);
    if (enc[ACC] != pack[ACC] || enc[DEF] != enc[ACC])
        return;
    nrec[DEF] = open_records(name, key, out[DEF], (size_t)enc[DEF], ivs[DEF]);
    nrec[ACC] = open_records(name, key, out[ACC], (size_t)enc[ACC], ivs[ACC]);
    check(nrec[ACC] == il[ACC] && nrec[DEF] == nrec[ACC], "records: count or layout differs", name, len);
    check(memcmp(out[DEF], out[ACC], (size_t)enc[ACC]) == 0,
          "records: headers, payloads, MACs or padding differ from the default's", name, len);
    check(memcmp(ivs[ACC][0], ivs[ACC][1], 16) != 0, "explicit IVs: two records share one", name, len);
}

/* The fragment size, as libssl asks for it, and its refusal before any is set. */
static void bufsize(const char *name)
{
    static const uint8_t key[32], mac[20];
    int got[2], unset;

    for (int w = DEF; w <= ACC; w++) {
        EVP_CIPHER_CTX *x = setup(name, w == DEF ? "default" : "accelaes", key, mac, 1);

        got[w] = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_TLS1_1_MULTIBLOCK_MAX_BUFSIZE, 15872, NULL);
        EVP_CIPHER_CTX_free(x);
    }
    check(got[DEF] == got[ACC] && got[ACC] > 15872, "MAX_BUFSIZE differs", name, 15872);
    {
        /* the default aborts here (an assertion): accelaes refuses */
        EVP_CIPHER_CTX *x = setup(name, "accelaes", key, mac, 1);
        size_t sz = 0;
        OSSL_PARAM prm[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_BUFSIZE, &sz), OSSL_PARAM_END };

        unset = EVP_CIPHER_CTX_get_params(x, prm);
        EVP_CIPHER_CTX_free(x);
        ERR_clear_error();
    }
    check(unset == 0, "MAX_BUFSIZE without a fragment size is refused", name, 0);
}

static void cipher_checks(const char *name)
{
    static const size_t lens[] = { 4 * 15872, 8 * 15872, 4 * 16384, 4096 * 4 + 3, 8 * 1024 + 7, 65536 + 13 };
    unsigned long f[2];

    for (int w = DEF; w <= ACC; w++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(lc, name, w == DEF ? "provider=default" : "provider=accelaes");

        f[w] = c != NULL ? EVP_CIPHER_get_flags(c) : 0;
        EVP_CIPHER_free(c);
    }
    check(f[ACC] == f[DEF] && (f[ACC] & EVP_CIPH_FLAG_TLS1_1_MULTIBLOCK), "flags differ from the default's", name, 0);
    bufsize(name);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (unsigned int il = 4; il <= 8; il += 4)
            if (lens[i] >= 4 * il)
                one_write(name, lens[i], il, 0, 0x0303);
    for (int k = 0; k < 12; k++)
        one_write(name, 4 * 4096 + rnd() % (8 * 16384 - 4 * 4096), rnd() % 2 ? 4 : 8, 0, 0x0303);
    /* speed -mb's way: the length in the AAD (8 records from 8 KiB), and the refusals */
    one_write(name, 8192, 8, 8192, 0x0303);
    one_write(name, 16384, 8, 16384, 0x0302);
    one_write(name, 6000, 8, 6000, 0x0303);
    one_write(name, 4000, 8, 4000, 0x0303);      /* too short: refused by both */
    one_write(name, 4 * 16384, 4, 0, 0x0301);    /* TLS 1.0: no explicit IV, refused */
    one_write(name, 4 * 16384, 6, 0, 0x0303);    /* interleave 6: taken as 4 */
    one_write(name, 4 * 16384, 3, 0, 0x0303);    /* interleave 3: refused */
    one_write(name, 4 * 16384, 12, 0, 0x0303);   /* interleave 12: refused */
}

int main(void)
{
    OSSL_PROVIDER *pd, *pa;

    lc = OSSL_LIB_CTX_new();
    if (lc == NULL || !OSSL_PROVIDER_add_builtin(lc, "accelaes", OSSL_provider_init)
        || (pd = OSSL_PROVIDER_load(lc, "default")) == NULL || (pa = OSSL_PROVIDER_load(lc, "accelaes")) == NULL) {
        fprintf(stderr, "FAIL: cannot load the providers\n");
        ERR_print_errors_fp(stderr);
        return 1;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cipher_checks(names[i]);
    OSSL_PROVIDER_unload(pa);
    OSSL_PROVIDER_unload(pd);
    OSSL_LIB_CTX_free(lc);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
