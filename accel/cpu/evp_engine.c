/* accel/cpu/evp_engine.c: the fallback engine for CPUs without AES-NI: nested EVP calls into a
 * private library context that holds OpenSSL's default provider (never this provider). */
#include <string.h>
#include <pthread.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "accel/engine.h"

/* Engine functions take a const key and may run on several threads at once (split requests),
 * but an EVP_CIPHER_CTX is not thread-safe. So a key holds a few slots of contexts, each behind
 * its own lock: slot 0 is made at set_key (so no block function ever has to allocate), the
 * others lazily, the first time a second thread finds every made slot busy. */
#define EVP_SLOTS 4
/* Blocks per nested call for CTR and CBC-decrypt, which are built on ECB through a stack buffer. */
#define EVP_CHUNK 64
/* EVP lengths are int; stay far below INT_MAX. */
#define EVP_MAX_BYTES (1u << 30)

typedef struct evp_slot {
    pthread_mutex_t lock;
    EVP_CIPHER_CTX *ecb_enc, *ecb_dec, *cbc_enc;
    int ready;
} evp_slot;

typedef struct evp_keyset {
    uint8_t key[32];              /* to make more slots; cleansed on free */
    size_t keylen;
    int has_dec;
    evp_slot slot[EVP_SLOTS];
} evp_keyset;

/* ------------------------------------------------------------------------------------------
 * The private library context: made once, never freed (contexts made from it may live as long
 * as the process).
 * ------------------------------------------------------------------------------------------ */

static EVP_CIPHER *g_ecb[3], *g_cbc[3];
static int g_ready;

static void evp_lib_init(void)
{
    static const char *const ecb[3] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB" };
    static const char *const cbc[3] = { "AES-128-CBC", "AES-192-CBC", "AES-256-CBC" };
    OSSL_LIB_CTX *lib = OSSL_LIB_CTX_new();

    if (lib == NULL || OSSL_PROVIDER_load(lib, "default") == NULL)
        return;
    for (int i = 0; i < 3; i++) {
        g_ecb[i] = EVP_CIPHER_fetch(lib, ecb[i], "provider=default");
        g_cbc[i] = EVP_CIPHER_fetch(lib, cbc[i], "provider=default");
        if (g_ecb[i] == NULL || g_cbc[i] == NULL)
            return;
    }
    g_ready = 1;
}

static int evp_lib_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, evp_lib_init);
    return g_ready;
}

/* ------------------------------------------------------------------------------------------
 * Slots
 * ------------------------------------------------------------------------------------------ */

static EVP_CIPHER_CTX *ctx_make(const EVP_CIPHER *c, const evp_keyset *ks, int enc)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    if (x == NULL)
        return NULL;
    if (!EVP_CipherInit_ex2(x, c, ks->key, NULL, enc, NULL) || !EVP_CIPHER_CTX_set_padding(x, 0)) {
        EVP_CIPHER_CTX_free(x);
        return NULL;
    }
    return x;
}

static void slot_clear(evp_slot *s)
{
    EVP_CIPHER_CTX_free(s->ecb_enc);
    EVP_CIPHER_CTX_free(s->ecb_dec);
    EVP_CIPHER_CTX_free(s->cbc_enc);
    s->ecb_enc = s->ecb_dec = s->cbc_enc = NULL;
    s->ready = 0;
}

/* Make a slot's contexts from the raw key; all or nothing. */
static int slot_fill(const evp_keyset *ks, evp_slot *s)
{
    int i = (int)ks->keylen / 8 - 2;            /* 16, 24, 32 -> 0, 1, 2 */
    s->ecb_enc = ctx_make(g_ecb[i], ks, 1);
    s->cbc_enc = ctx_make(g_cbc[i], ks, 1);
    s->ecb_dec = ks->has_dec ? ctx_make(g_ecb[i], ks, 0) : NULL;
    s->ready = s->ecb_enc != NULL && s->cbc_enc != NULL && (s->ecb_dec != NULL || !ks->has_dec);
    if (!s->ready)
        slot_clear(s);
    return s->ready;
}

/* A free slot if there is one (making it if needed); otherwise wait for slot 0, which is always
 * ready, so this never fails. */
static evp_slot *slot_take(evp_keyset *ks)
{
    for (int i = 0; i < EVP_SLOTS; i++) {
        evp_slot *s = &ks->slot[i];
        if (pthread_mutex_trylock(&s->lock) != 0)
            continue;
        if (s->ready || slot_fill(ks, s))
            return s;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&ks->slot[0].lock);
    return &ks->slot[0];
}

static void slot_give(evp_slot *s)
{
    pthread_mutex_unlock(&s->lock);
}

static evp_keyset *keyset_new(void)
{
    evp_keyset *ks = OPENSSL_zalloc(sizeof(*ks));
    if (ks == NULL)
        return NULL;
    for (int i = 0; i < EVP_SLOTS; i++)
        pthread_mutex_init(&ks->slot[i].lock, NULL);
    return ks;
}

static void keyset_free(evp_keyset *ks)
{
    if (ks == NULL)
        return;
    for (int i = 0; i < EVP_SLOTS; i++) {
        slot_clear(&ks->slot[i]);
        pthread_mutex_destroy(&ks->slot[i].lock);
    }
    OPENSSL_clear_free(ks, sizeof(*ks));
}

/* ------------------------------------------------------------------------------------------
 * Block functions
 * ------------------------------------------------------------------------------------------ */

/* One nested update over whole blocks. On failure the output is wiped rather than left holding
 * plaintext (in place) or stale data: the engine interface has no error return. */
static void evp_run(EVP_CIPHER_CTX *c, const uint8_t *in, uint8_t *out, size_t len)
{
    while (len) {
        int chunk = (int)(len < EVP_MAX_BYTES ? len : EVP_MAX_BYTES), outl = 0;
        if (c == NULL || !EVP_CipherUpdate(c, out, &outl, in, chunk) || outl != chunk) {
            OPENSSL_cleanse(out, len);
            return;
        }
        in += chunk, out += chunk, len -= (size_t)chunk;
    }
}

static void xor_blocks(uint8_t *out, const uint8_t *a, const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        memcpy(out + i, &x, 8);
    }
}

static void evp_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    evp_slot *s = slot_take(k->evp);
    evp_run(s->ecb_enc, in, out, n * 16);
    slot_give(s);
}

static void evp_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    evp_slot *s = slot_take(k->evp);
    evp_run(s->ecb_dec, in, out, n * 16);
    slot_give(s);
}

/* Serial, so a CBC context does it, its IV re-set on every call (this also drops any state a
 * previous caller left). The last ciphertext block is the IV to continue with. */
static void evp_cbc_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                        uint8_t iv[16])
{
    if (n == 0)
        return;
    evp_slot *s = slot_take(k->evp);
    if (EVP_CipherInit_ex2(s->cbc_enc, NULL, NULL, iv, 1, NULL))
        evp_run(s->cbc_enc, in, out, n * 16);
    else
        OPENSSL_cleanse(out, n * 16);
    slot_give(s);
    memcpy(iv, out + 16 * (n - 1), 16);
}

/* ECB-decrypt, then XOR each block with the ciphertext before it; the ciphertext is saved first
 * because in == out overwrites it. */
static void evp_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                        uint8_t iv[16])
{
    uint8_t save[16 + EVP_CHUNK * 16];
    evp_slot *s = slot_take(k->evp);

    memcpy(save, iv, 16);
    while (n) {
        size_t m = n < EVP_CHUNK ? n : EVP_CHUNK;
        memcpy(save + 16, in, 16 * m);
        evp_run(s->ecb_dec, in, out, 16 * m);
        xor_blocks(out, out, save, 16 * m);
        memcpy(save, save + 16 * m, 16);
        in += 16 * m, out += 16 * m, n -= m;
    }
    slot_give(s);
    memcpy(iv, save, 16);
    OPENSSL_cleanse(save, sizeof(save));
}

/* Counter blocks made here with acc_ctr_add (full 128-bit carry), encrypted by ECB in one call. */
static void evp_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                    uint8_t ctr[16])
{
    uint8_t ks[EVP_CHUNK * 16];
    evp_slot *s = slot_take(k->evp);

    while (n) {
        size_t m = n < EVP_CHUNK ? n : EVP_CHUNK;
        for (size_t i = 0; i < m; i++) {
            memcpy(ks + 16 * i, ctr, 16);
            acc_ctr_add(ctr, 1);
        }
        evp_run(s->ecb_enc, ks, ks, 16 * m);
        xor_blocks(out, in, ks, 16 * m);
        in += 16 * m, out += 16 * m, n -= m;
    }
    slot_give(s);
    OPENSSL_cleanse(ks, sizeof(ks));
}

/* ------------------------------------------------------------------------------------------
 * Key management
 * ------------------------------------------------------------------------------------------ */

static void evp_free_key(acc_aes_key *k)
{
    if (k == NULL)
        return;
    keyset_free(k->evp);
    OPENSSL_cleanse(k, sizeof(*k));
}

/* k must be zeroed or hold a key set by an engine (its evp is freed first). The round-key arrays
 * stay empty: the nested contexts hold the schedule. */
static int evp_set_key(acc_aes_key *k, const uint8_t *key, size_t keylen, int enc_only)
{
    if (k == NULL || key == NULL || (keylen != 16 && keylen != 24 && keylen != 32))
        return 0;
    evp_free_key(k);
    if (!evp_lib_ready())
        return 0;
    evp_keyset *ks = keyset_new();
    if (ks == NULL)
        return 0;
    memcpy(ks->key, key, keylen);
    ks->keylen = keylen;
    ks->has_dec = !enc_only;
    if (!slot_fill(ks, &ks->slot[0])) {
        keyset_free(ks);
        return 0;
    }
    k->evp = ks;
    k->keybits = (int)keylen * 8;
    k->rounds = (int)keylen / 4 + 6;
    k->has_dec = !enc_only;
    return 1;
}

/* Deep copy: slot 0's contexts are duplicated (under src's lock, as another thread may be using
 * them); the other slots are made again on demand. */
static int evp_copy_key(acc_aes_key *dst, const acc_aes_key *src)
{
    evp_keyset *from, *ks;
    int ok;

    if (dst == NULL || src == NULL)
        return 0;
    memcpy(dst, src, sizeof(*dst));
    dst->evp = NULL;
    if ((from = src->evp) == NULL)
        return 1;
    if ((ks = keyset_new()) == NULL)
        return 0;
    memcpy(ks->key, from->key, sizeof(ks->key));
    ks->keylen = from->keylen;
    ks->has_dec = from->has_dec;

    evp_slot *s = &from->slot[0], *d = &ks->slot[0];
    pthread_mutex_lock(&s->lock);
    d->ecb_enc = EVP_CIPHER_CTX_new();
    d->cbc_enc = EVP_CIPHER_CTX_new();
    d->ecb_dec = s->ecb_dec != NULL ? EVP_CIPHER_CTX_new() : NULL;
    ok = d->ecb_enc != NULL && EVP_CIPHER_CTX_copy(d->ecb_enc, s->ecb_enc)
         && d->cbc_enc != NULL && EVP_CIPHER_CTX_copy(d->cbc_enc, s->cbc_enc)
         && (s->ecb_dec == NULL || (d->ecb_dec != NULL && EVP_CIPHER_CTX_copy(d->ecb_dec, s->ecb_dec)));
    pthread_mutex_unlock(&s->lock);
    d->ready = ok;
    if (!ok) {
        keyset_free(ks);
        return 0;
    }
    dst->evp = ks;
    return 1;
}

static const acc_engine evp_engine = {
    "evp", evp_set_key, evp_ecb_enc, evp_ecb_dec, evp_cbc_enc, evp_cbc_dec, evp_ctr,
    evp_copy_key, evp_free_key
};

const acc_engine *acc_engine_evp(void)
{
    return &evp_engine;
}
