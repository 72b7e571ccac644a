/* tests/c/test_tls_record.c: TLS CBC record handling through EVP, accelaes against OpenSSL's
 * default provider, driven the way libssl drives it (tls-version, tls-mac-size, tls-mac). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

/* The provider is linked into this test (libaccelaes.a) and registered as a built-in. */
extern OSSL_provider_init_fn OSSL_provider_init;

enum { DEF = 0, ACC = 1 };
static OSSL_LIB_CTX *lc;
static EVP_CIPHER *ciphers[2][3];   /* [provider][AES-128, -192, -256 CBC] */
static int passed, failed;

#define MAXREC (16 + 16384 + 64 + 256 + 16)

static void check(int cond, const char *what, int ver, int ki, size_t ms, size_t len)
{
    if (cond) {
        passed++;
        return;
    }
    if (++failed <= 25 || getenv("TLS_RECORD_VERBOSE") != NULL)
        fprintf(stderr, "FAIL: %s (version 0x%x, AES-%d, mac %zu, record %zu)\n",
                what, ver, 128 + 64 * ki, ms, len);
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        p[i] = (uint8_t)(rng >> 32);
    }
}

static int explicit_iv(int ver)
{
    return ver != 0x0300 && ver != 0x0301;
}

/* A context set up as libssl's tls_provider_set_tls_params does (the version as an int). */
static EVP_CIPHER_CTX *tls_ctx(int prov, int ki, int enc, const uint8_t *key, const uint8_t *iv,
                               int ver, size_t ms)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    OSSL_PARAM p[3];

    p[0] = OSSL_PARAM_construct_int(OSSL_CIPHER_PARAM_TLS_VERSION, &ver);
    p[1] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, &ms);
    p[2] = OSSL_PARAM_construct_end();
    if (c == NULL || !EVP_CipherInit_ex2(c, ciphers[prov][ki], key, iv, enc, NULL)
        || !EVP_CIPHER_CTX_set_params(c, p)) {
        fprintf(stderr, "cannot set up a TLS context (provider %d)\n", prov);
        ERR_print_errors_fp(stderr);
        EVP_CIPHER_CTX_free(c);
        return NULL;
    }
    return c;
}

static const uint8_t *get_mac(EVP_CIPHER_CTX *c, size_t ms)
{
    void *mac = NULL;
    OSSL_PARAM p[2];

    p[0] = OSSL_PARAM_construct_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, &mac, ms);
    p[1] = OSSL_PARAM_construct_end();
    if (!EVP_CIPHER_CTX_get_params(c, p))
        return NULL;
    return mac;
}

/* Several records on one pair of contexts (TLS 1.0 chains the IV from record to record):
 * encrypt with both providers, compare; decrypt both ciphertexts with both, compare, and
 * check payload and MAC come back. */
static void stream(int ki, int ver, size_t ms, const size_t *plens, int n)
{
    uint8_t key[32], iv[16];
    EVP_CIPHER_CTX *e[2], *d[2];
    size_t skip = explicit_iv(ver) ? 16 : 0;

    fill(key, sizeof(key));
    fill(iv, sizeof(iv));
    for (int p = 0; p < 2; p++) {
        e[p] = tls_ctx(p, ki, 1, key, iv, ver, ms);
        d[p] = tls_ctx(p, ki, 0, key, iv, ver, ms);
    }
    if (!e[0] || !e[1] || !d[0] || !d[1]) {
        check(0, "context set-up", ver, ki, ms, 0);
        goto done;
    }
    for (int r = 0; r < n; r++) {
        static uint8_t rec[MAXREC], buf[2][MAXREC], pt[2][MAXREC];
        size_t inl = skip + plens[r] + ms;
        int outl[2], dl[2], ok[2], dok[2];
        const uint8_t *mac[2];

        fill(rec, inl);
        for (int p = 0; p < 2; p++) {
            memcpy(buf[p], rec, inl);
            ok[p] = EVP_CipherUpdate(e[p], buf[p], &outl[p], buf[p], (int)inl);
        }
        check(ok[0] == 1 && ok[1] == 1, "encrypt succeeds", ver, ki, ms, inl);
        check(outl[0] == outl[1] && (size_t)outl[1] % 16 == 0 && (size_t)outl[1] > inl,
              "encrypt: same padded length", ver, ki, ms, inl);
        if (!ok[0] || !ok[1] || outl[0] != outl[1])
            break;
        check(memcmp(buf[0], buf[1], outl[0]) == 0, "encrypt: same ciphertext", ver, ki, ms, inl);

        for (int p = 0; p < 2; p++) {
            memcpy(pt[p], buf[ACC], outl[ACC]);
            dok[p] = EVP_CipherUpdate(d[p], pt[p], &dl[p], pt[p], outl[ACC]);
            mac[p] = ms ? get_mac(d[p], ms) : NULL;
        }
        check(dok[0] == 1 && dok[1] == 1, "decrypt succeeds", ver, ki, ms, inl);
        check(dl[0] == dl[1] && (size_t)dl[1] == plens[r], "decrypt: payload length", ver, ki, ms, inl);
        check(memcmp(pt[ACC] + skip, rec + skip, plens[r]) == 0, "decrypt: payload", ver, ki, ms, inl);
        check(memcmp(pt[DEF] + skip, pt[ACC] + skip, plens[r]) == 0, "decrypt: same payload", ver, ki, ms, inl);
        if (ms) {
            check(mac[ACC] != NULL && memcmp(mac[ACC], rec + skip + plens[r], ms) == 0,
                  "decrypt: the MAC", ver, ki, ms, inl);
            check(mac[DEF] != NULL && mac[ACC] != NULL && memcmp(mac[DEF], mac[ACC], ms) == 0,
                  "decrypt: same MAC", ver, ki, ms, inl);
        }
    }
done:
    for (int p = 0; p < 2; p++) {
        EVP_CIPHER_CTX_free(e[p]);
        EVP_CIPHER_CTX_free(d[p]);
    }
}

/* A record whose padding we write ourselves (long, short, damaged), encrypted as plain CBC,
 * then opened as a TLS record by both providers. */
static void crafted(int ki, int ver, size_t ms, size_t body, size_t padlen, int damage)
{
    static uint8_t pt[MAXREC], ct[MAXREC], out[2][MAXREC];
    uint8_t key[32], iv[16];
    size_t skip = explicit_iv(ver) ? 16 : 0, len = skip + body;
    EVP_CIPHER_CTX *raw = EVP_CIPHER_CTX_new(), *d[2] = { NULL, NULL };
    int l1 = 0, l2 = 0, ok[2], dl[2];
    const uint8_t *mac[2];

    fill(key, sizeof(key));
    fill(iv, sizeof(iv));
    fill(pt, len);
    for (size_t i = 0; i <= padlen && i < body; i++)
        pt[len - 1 - i] = (uint8_t)padlen;
    if (damage >= 0 && (size_t)damage < body)
        pt[len - 1 - damage] ^= 0x40;
    if (raw == NULL || !EVP_EncryptInit_ex2(raw, ciphers[DEF][ki], key, iv, NULL)
        || !EVP_CIPHER_CTX_set_padding(raw, 0)
        || !EVP_EncryptUpdate(raw, ct, &l1, pt, (int)len) || !EVP_EncryptFinal_ex(raw, ct + l1, &l2)) {
        check(0, "raw CBC encryption", ver, ki, ms, len);
        EVP_CIPHER_CTX_free(raw);
        return;
    }
    EVP_CIPHER_CTX_free(raw);
    for (int p = 0; p < 2; p++) {
        d[p] = tls_ctx(p, ki, 0, key, iv, ver, ms);
        memcpy(out[p], ct, len);
        ok[p] = d[p] != NULL && EVP_CipherUpdate(d[p], out[p], &dl[p], out[p], (int)len);
        mac[p] = (ok[p] && ms) ? get_mac(d[p], ms) : NULL;
    }
    check(ok[0] == ok[1], "crafted record: same verdict", ver, ki, ms, len);
    if (ok[0] && ok[1]) {
        int good = ms == 0 || (mac[DEF] && mac[ACC] && memcmp(mac[DEF], mac[ACC], ms) == 0);

        check(dl[0] == dl[1], "crafted record: same length", ver, ki, ms, len);
        check(memcmp(out[0] + skip, out[1] + skip, dl[1]) == 0, "crafted record: same payload", ver, ki, ms, len);
        /* SSL 3.0 padding must also be shorter than a block */
        if (ms && damage < 0 && padlen + 1 + ms <= body && (ver != 0x0300 || padlen < 16))
            check(good, "crafted record, good padding: same MAC", ver, ki, ms, len);
        if (ms && !good) {
            /* bad padding: both emit random MACs, neither the record's bytes */
            check(mac[ACC] != NULL && memcmp(mac[ACC], pt + len - ms, ms) != 0,
                  "crafted record, bad padding: the MAC is not the record's", ver, ki, ms, len);
        }
        if (ms) {
            /* A copy of the context (dupctx) keeps its own MAC after the original is gone. */
            EVP_CIPHER_CTX *cp = EVP_CIPHER_CTX_new();
            uint8_t keep[64];
            const uint8_t *m2;

            memcpy(keep, mac[ACC], ms);
            check(cp != NULL && EVP_CIPHER_CTX_copy(cp, d[ACC]), "context copy", ver, ki, ms, len);
            EVP_CIPHER_CTX_free(d[ACC]);
            d[ACC] = NULL;
            m2 = get_mac(cp, ms);
            check(m2 != NULL && memcmp(m2, keep, ms) == 0, "copied context: same MAC", ver, ki, ms, len);
            EVP_CIPHER_CTX_free(cp);
        }
    }
    EVP_CIPHER_CTX_free(d[0]);
    EVP_CIPHER_CTX_free(d[1]);
}

/* Publicly invalid requests fail, with an error on the queue. */
static void refused(int ki)
{
    uint8_t key[32] = { 0 }, iv[16] = { 0 }, buf[128] = { 0 }, other[128];
    int outl, ver = 0x0303;
    EVP_CIPHER_CTX *c = tls_ctx(ACC, ki, 0, key, iv, ver, 20);
    size_t big = 65;
    OSSL_PARAM p[2];

    if (c == NULL) {
        check(0, "context set-up", ver, ki, 20, 0);
        return;
    }
    ERR_clear_error();
    check(!EVP_CipherUpdate(c, buf, &outl, buf, 40) && ERR_peek_error() != 0,
          "a partial block is refused with an error", ver, ki, 20, 40);
    ERR_clear_error();
    check(!EVP_CipherUpdate(c, buf, &outl, buf, 32) && ERR_peek_error() != 0,
          "a record too short for IV, padding and MAC is refused", ver, ki, 20, 32);
    ERR_clear_error();
    check(!EVP_CipherUpdate(c, other, &outl, buf, 64) && ERR_peek_error() != 0,
          "out of place is refused", ver, ki, 20, 64);
    ERR_clear_error();
    p[0] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, &big);
    p[1] = OSSL_PARAM_construct_end();
    check(!EVP_CIPHER_CTX_set_params(c, p), "a MAC size above 64 is refused", ver, ki, 65, 0);
    ERR_clear_error();
    EVP_CIPHER_CTX_free(c);
}

int main(void)
{
    static const int versions[] = { 0x0300, 0x0301, 0x0302, 0x0303, 0xFEFF, 0xFEFD };
    static const size_t macs[] = { 0, 20, 32, 48 };
    static const size_t plens[] = { 0, 1, 15, 16, 17, 100, 1000, 4095, 16384, 12, 31, 5000 };
    static const char *names[3] = { "AES-128-CBC", "AES-192-CBC", "AES-256-CBC" };
    OSSL_PROVIDER *pd, *pa;

    lc = OSSL_LIB_CTX_new();
    if (lc == NULL || !OSSL_PROVIDER_add_builtin(lc, "accelaes", OSSL_provider_init)
        || (pd = OSSL_PROVIDER_load(lc, "default")) == NULL
        || (pa = OSSL_PROVIDER_load(lc, "accelaes")) == NULL) {
        fprintf(stderr, "FAIL: cannot load the providers\n");
        ERR_print_errors_fp(stderr);
        return 1;
    }
    for (int k = 0; k < 3; k++) {
        ciphers[DEF][k] = EVP_CIPHER_fetch(lc, names[k], "provider=default");
        ciphers[ACC][k] = EVP_CIPHER_fetch(lc, names[k], "provider=accelaes");
        if (ciphers[DEF][k] == NULL || ciphers[ACC][k] == NULL) {
            fprintf(stderr, "FAIL: cannot fetch %s\n", names[k]);
            ERR_print_errors_fp(stderr);
            return 1;
        }
    }
    for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++)
        for (size_t m = 0; m < sizeof(macs) / sizeof(macs[0]); m++)
            for (int k = 0; k < 3; k++) {
                int ver = versions[v];
                size_t ms = macs[m];

                stream(k, ver, ms, plens, (int)(sizeof(plens) / sizeof(plens[0])));
                for (size_t body = 16; body <= 400; body += 64 + 16 * k) {
                    for (size_t pl = 0; pl <= 255; pl += 17) {
                        crafted(k, ver, ms, body, pl, -1);
                        crafted(k, ver, ms, body, pl, (int)(pl / 3));
                    }
                    crafted(k, ver, ms, body, 255, -1);
                }
            }
    for (int k = 0; k < 3; k++)
        refused(k);

    for (int k = 0; k < 3; k++) {
        EVP_CIPHER_free(ciphers[DEF][k]);
        EVP_CIPHER_free(ciphers[ACC][k]);
    }
    OSSL_PROVIDER_unload(pa);
    OSSL_PROVIDER_unload(pd);
    OSSL_LIB_CTX_free(lc);
    printf("test_tls_record: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
