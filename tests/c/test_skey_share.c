/* tests/c/test_skey_share.c: an opaque AES key's schedule is made once and shared: the contexts given one
 * key (skey init, dupctx) read the key's own schedule and hold a reference each; a raw key or the last
 * free lets go; every byte equals the default provider's. Drives the cipher dispatch tables directly, so
 * it runs on any OpenSSL 3 (EVP_SKEY itself, 3.5+, is tests/conformance/test_skey.py's). */
#include <stdio.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "provider/route/cipher_ctx.h"
#include "provider/route/prov.h"
#include "provider/route/skey.h"
#include "tests/c/check.h"

extern OSSL_provider_init_fn OSSL_provider_init;

typedef struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_dupctx_fn *dupctx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    acc_skey_init_fn *skey_einit, *skey_dinit;
    OSSL_FUNC_cipher_update_fn *update;
} fns;

static void *provctx;
static const OSSL_ALGORITHM *algs;
static unsigned char data[4096 + 16], ref[sizeof(data) + 16], dref[sizeof(data) + 16], out[sizeof(data) + 16];

static int find(const char *name, fns *f)
{
    size_t n = strlen(name);

    memset(f, 0, sizeof(*f));
    for (const OSSL_ALGORITHM *a = algs; a->algorithm_names != NULL; a++) {
        if (strncmp(a->algorithm_names, name, n) != 0 || (a->algorithm_names[n] != ':' && a->algorithm_names[n]))
            continue;
        for (const OSSL_DISPATCH *d = a->implementation; d->function_id != 0; d++) {
            switch (d->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: f->newctx = (OSSL_FUNC_cipher_newctx_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_FREECTX: f->freectx = (OSSL_FUNC_cipher_freectx_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_DUPCTX: f->dupctx = (OSSL_FUNC_cipher_dupctx_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_ENCRYPT_INIT: f->einit = (OSSL_FUNC_cipher_encrypt_init_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT: f->skey_einit = (acc_skey_init_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT: f->skey_dinit = (acc_skey_init_fn *)d->function; break;
            case OSSL_FUNC_CIPHER_UPDATE: f->update = (OSSL_FUNC_cipher_update_fn *)d->function; break;
            }
        }
        return f->newctx && f->freectx && f->dupctx && f->einit && f->skey_einit && f->skey_dinit && f->update;
    }
    return 0;
}

/* The default provider's bytes for the whole of data (updates only: the padding block is not compared). */
static size_t reference(const char *name, const unsigned char *key, const unsigned char *iv, int enc,
                        const unsigned char *in, unsigned char *dst)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, "provider=default");
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int n = 0;

    if (c == NULL || x == NULL || !EVP_CipherInit_ex2(x, c, key, iv, enc, NULL)
        || !EVP_CipherUpdate(x, dst, &n, in, sizeof(data)))
        n = -1;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return (size_t)n;
}

static int same(const fns *f, void *ctx, const unsigned char *in, const unsigned char *want, size_t wantlen)
{
    size_t n = 0;

    return f->update(ctx, out, &n, sizeof(out), in, sizeof(data)) && n == wantlen && memcmp(out, want, n) == 0;
}

static void one_cipher(const char *name, size_t keylen, const acc_engine *eng)
{
    unsigned char key[32], iv[16];
    size_t reflen;
    fns f;

    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (unsigned char)(i * 7 + keylen);
    memset(iv, 0x5a, sizeof(iv));
    if (!find(name, &f)) {
        CHECK(0, "%s: no dispatch table with skey inits", name);
        return;
    }
    reflen = reference(name, key, iv, 1, data, ref);
    acc_skey *k = acc_skey_new(eng, key, keylen);
    CHECK(k != NULL && k->refs == 1, "%s: a new key holds one reference", name);
    if (k == NULL)
        return;
    void *c1 = f.newctx(provctx), *c2 = f.newctx(provctx);
    CHECK(f.skey_einit(c1, k, iv, 16, NULL) && f.skey_einit(c2, k, iv, 16, NULL), "%s: skey init", name);
    CHECK(k->refs == 3, "%s: two contexts, three references (got %d)", name, k->refs);
    CHECK(acc_cipher_key(c1) == &k->ks && acc_cipher_key(c2) == &k->ks,
          "%s: the contexts read the key's own schedule", name);
    void *d = f.dupctx(c1);
    CHECK(d != NULL && k->refs == 4 && acc_cipher_key(d) == &k->ks, "%s: a copy shares it too", name);
    CHECK(same(&f, c1, data, ref, reflen) && same(&f, c2, data, ref, reflen) && same(&f, d, data, ref, reflen),
          "%s: every sharing context gives the default's bytes", name);
    CHECK(f.einit(c2, key, keylen, iv, 16, NULL) && k->refs == 3 && acc_cipher_key(c2) != &k->ks,
          "%s: a raw key lets the shared one go (refs %d)", name, k->refs);
    CHECK(same(&f, c2, data, ref, reflen), "%s: and gives the same bytes", name);
    f.freectx(c1);
    f.freectx(d);
    CHECK(k->refs == 1, "%s: freed contexts drop their references (refs %d)", name, k->refs);

    /* decryption reads the key's decryption schedule, made at import: no expansion in the context */
    void *c3 = f.newctx(provctx);
    size_t declen = reference(name, key, iv, 0, ref, dref);
    CHECK(f.skey_dinit(c3, k, iv, 16, NULL) && k->refs == 2 && acc_cipher_key(c3) == &k->ks,
          "%s: decryption shares it", name);
    acc_skey_release(k);   /* EVP_SKEY_free while a context still uses the key */
    CHECK(f.skey_dinit(c3, NULL, iv, 16, NULL) && same(&f, c3, ref, dref, declen),
          "%s: the context outlives the EVP_SKEY and decrypts", name);
    f.freectx(c3);
    f.freectx(c2);
}

int main(void)
{
    OSSL_PROVIDER *def, *acc;
    int nc = 0;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 131 + 1);
    if (!OSSL_PROVIDER_add_builtin(NULL, "accelaes", OSSL_provider_init)
        || (def = OSSL_PROVIDER_load(NULL, "default")) == NULL || (acc = OSSL_PROVIDER_load(NULL, "accelaes")) == NULL
        || (algs = OSSL_PROVIDER_query_operation(acc, OSSL_OP_CIPHER, &nc)) == NULL) {
        fprintf(stderr, "cannot load the providers\n");
        return 2;
    }
    provctx = OSSL_PROVIDER_get0_provider_ctx(acc);
    const acc_engine *eng = ((acc_prov_ctx *)provctx)->eng;
    one_cipher("AES-128-CBC", 16, eng);
    one_cipher("AES-192-ECB", 24, eng);
    one_cipher("AES-256-CTR", 32, eng);
    OSSL_PROVIDER_unquery_operation(acc, OSSL_OP_CIPHER, algs);
    OSSL_PROVIDER_unload(acc);
    OSSL_PROVIDER_unload(def);
    return CHECK_SUMMARY();
}
