/* accel/cpu/gcm_evp.c: the GCM fallback engine, for builds without intel-ipsec-mb and CPUs
 * without AES-NI: nested EVP calls into the private library context of evp_engine.c, which
 * holds OpenSSL's default provider (never this one). */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "accel/gcm.h"

typedef struct evp_gcm {
    EVP_CIPHER_CTX *x;     /* owns the key and the running message */
    int enc;
} evp_gcm;

_Static_assert(sizeof(evp_gcm) <= sizeof(acc_gcm_state), "evp_gcm does not fit ACC_GCM_STATE_SIZE");

/* The default's three GCM ciphers, fetched once (a racing fetch loses and frees its own). */
static EVP_CIPHER *g_gcm[3];

static const EVP_CIPHER *gcm_cipher(size_t keylen)
{
    static const char *const names[3] = { "AES-128-GCM", "AES-192-GCM", "AES-256-GCM" };
    int i = keylen == 16 ? 0 : keylen == 24 ? 1 : keylen == 32 ? 2 : -1;
    EVP_CIPHER *c, *expected = NULL;
    OSSL_LIB_CTX *lib;

    if (i < 0)
        return NULL;
    if ((c = __atomic_load_n(&g_gcm[i], __ATOMIC_ACQUIRE)) != NULL)
        return c;
    if ((lib = acc_evp_engine_libctx()) == NULL
        || (c = EVP_CIPHER_fetch(lib, names[i], "provider=default")) == NULL)
        return NULL;
    if (!__atomic_compare_exchange_n(&g_gcm[i], &expected, c, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        EVP_CIPHER_free(c);
        c = expected;
    }
    return c;
}

static void evp_cleanse(acc_gcm_state *s)
{
    evp_gcm *g = (evp_gcm *)s;

    EVP_CIPHER_CTX_free(g->x);
    OPENSSL_cleanse(s, sizeof(*s));
}

static int evp_set_key(acc_gcm_state *s, const uint8_t *key, size_t keylen)
{
    evp_gcm *g = (evp_gcm *)s;
    const EVP_CIPHER *c = gcm_cipher(keylen);

    if (c == NULL)
        return 0;
    if (g->x == NULL && (g->x = EVP_CIPHER_CTX_new()) == NULL)
        return 0;
    return EVP_CipherInit_ex2(g->x, c, key, NULL, 1, NULL);
}

static int evp_copy(acc_gcm_state *dst, const acc_gcm_state *src)
{
    evp_gcm *d = (evp_gcm *)dst;
    const evp_gcm *s = (const evp_gcm *)src;

    d->x = NULL;
    if (s->x == NULL)
        return 1;
    if ((d->x = EVP_CIPHER_CTX_new()) == NULL)
        return 0;
    if (!EVP_CIPHER_CTX_copy(d->x, s->x)) {
        EVP_CIPHER_CTX_free(d->x);
        d->x = NULL;
        return 0;
    }
    return 1;
}

static int evp_aad(evp_gcm *g, const uint8_t *aad, size_t aadlen)
{
    int outl;

    for (size_t off = 0; off < aadlen;) {
        int n = aadlen - off > (1u << 30) ? (1 << 30) : (int)(aadlen - off);

        if (!EVP_CipherUpdate(g->x, NULL, &outl, aad + off, n))
            return 0;
        off += (size_t)n;
    }
    return 1;
}

static int evp_start(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen)
{
    evp_gcm *g = (evp_gcm *)s;
    OSSL_PARAM p[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_END };

    g->enc = enc;
    /* the IV length first: init reads the IV with the length the context has */
    if (g->x == NULL || !EVP_CIPHER_CTX_set_params(g->x, p) || !EVP_CipherInit_ex2(g->x, NULL, NULL, iv, enc, NULL))
        return 0;
    return evp_aad(g, aad, aadlen);
}

/* The nested default brought into that state itself: a message opened (one byte of AAD), then
 * the key given again, then the AAD. */
static int evp_restart_zero(acc_gcm_state *s, int enc, const uint8_t *key, size_t keylen, const uint8_t *aad,
                            size_t aadlen)
{
    evp_gcm *g = (evp_gcm *)s;
    static const uint8_t iv[12], one[1];

    (void)keylen;
    return evp_start(s, enc, iv, sizeof(iv), one, 1) && EVP_CipherInit_ex2(g->x, NULL, key, NULL, enc, NULL)
        && evp_aad(g, aad, aadlen);
}

static int evp_update(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len)
{
    evp_gcm *g = (evp_gcm *)s;
    int outl;

    /* EVP lengths are int */
    for (size_t off = 0; off < len;) {
        int n = len - off > (1u << 30) ? (1 << 30) : (int)(len - off);

        if (!EVP_CipherUpdate(g->x, out + off, &outl, in + off, n) || outl != n) {
            OPENSSL_cleanse(out, len); /* nothing of a failed update is handed out */
            return 0;
        }
        off += (size_t)n;
    }
    return 1;
}

static int evp_finish(acc_gcm_state *s, uint8_t *tag, size_t taglen)
{
    evp_gcm *g = (evp_gcm *)s;
    OSSL_PARAM p[2] = { OSSL_PARAM_END, OSSL_PARAM_END };
    uint8_t none[1];
    int outl;

    if (g->enc) {
        p[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, ACC_GCM_TAG_LEN);
        return EVP_EncryptFinal_ex(g->x, none, &outl) && EVP_CIPHER_CTX_get_params(g->x, p);
    }
    /* the default provider compares the tag (CRYPTO_memcmp) */
    p[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, taglen);
    return EVP_CIPHER_CTX_set_params(g->x, p) && EVP_DecryptFinal_ex(g->x, none, &outl) > 0;
}

/* The nested default told the new direction as the caller told this context (no key, no IV). */
static int evp_set_dir(acc_gcm_state *s, int enc)
{
    evp_gcm *g = (evp_gcm *)s;

    g->enc = enc;
    return g->x != NULL && EVP_CipherInit_ex2(g->x, NULL, NULL, NULL, enc, NULL);
}

/* No split hooks: the default's GCM state is not ours to continue. */
static const acc_gcm_engine evp_gcm_engine = {
    .name = "nested EVP (default provider)",
    .set_key = evp_set_key,
    .copy = evp_copy,
    .cleanse = evp_cleanse,
    .start = evp_start,
    .update = evp_update,
    .finish = evp_finish,
    .restart_zero = evp_restart_zero,
    .set_dir = evp_set_dir,
};

const acc_gcm_engine *acc_gcm_engine_evp(void)
{
    return &evp_gcm_engine;
}
