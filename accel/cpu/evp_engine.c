/* accel/cpu/evp_engine.c: the fallback engine for CPUs without AES-NI: nested EVP calls into a
 * private library context that holds OpenSSL's default provider (never this provider). */
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "accel/engine.h"
#include "accel/gcm.h"
#include "scheduler/forksafe.h"

/* Engine functions take a const key and may run on several threads at once (split requests),
 * but an EVP_CIPHER_CTX is not thread-safe. So a key holds a few slots of contexts, each taken
 * by one thread at a time: slot 0 is made at set_key (so no block function ever has to
 * allocate), the others lazily, the first time a thread finds every made slot busy.
 * Each mode has its own native context (OpenSSL's CBC-decrypt and CTR are faster than ECB plus
 * XOR around it, notably with vpaes on CPUs without AES-NI, where this engine is used). */
#define EVP_SLOTS 4
/* EVP lengths are int; stay far below INT_MAX. */
#define EVP_MAX_BYTES (1u << 30)

/* One native context per operation, indexed by acc_op (accel/engine.h; index 0 unused). */
#define C_N ACC_OP_COUNT

typedef struct evp_slot {
    int busy;                     /* 0 free, else the fork generation of the thread holding it */
    int ready;                    /* contexts made */
    EVP_CIPHER_CTX *c[C_N];
    /* The IV each context continues with, so a chained call skips re-initialising it. */
    uint8_t next_iv[C_N][16];
    int have_iv[C_N];
    /* XTS, made at first use: [0] encrypts, [1] decrypts; each keyed with this key and the tweak
     * key copied beside it (an XTS key is the pair, and the pair is only known at the call). */
    EVP_CIPHER_CTX *xts[2];
    uint8_t xts_k2[2][32];
} evp_slot;

typedef struct acc_evp_keyset {
    uint8_t key[32];              /* to make more slots; cleansed on free */
    size_t keylen;
    int has_dec;
    evp_slot slot[EVP_SLOTS];
} evp_keyset;

/* ------------------------------------------------------------------------------------------
 * The private library context: made once, never freed (contexts made from it may live as long
 * as the process). A failed attempt (an allocation failing once) frees what it made and the
 * next use tries again, so that it cannot disable the engine for the life of the process.
 * ------------------------------------------------------------------------------------------ */

static EVP_CIPHER *g_ciph[3][3];  /* [ECB, CBC, CTR][128, 192, 256] */
static OSSL_LIB_CTX *g_lib;       /* the private context itself, for the GCM fallback (gcm_evp.c) */
static EVP_CIPHER *g_xts[2];      /* AES-128-XTS, AES-256-XTS */
static int g_ready;
static int g_atfork;
static pthread_mutex_t g_lib_lock = PTHREAD_MUTEX_INITIALIZER;
/* Re-initialised in a child (a half-made context another thread was building is abandoned). */
ACC_FORK_SAFE(&g_lib_lock, 1, "evp engine", ACC_RANK_EVP_ENGINE, ACC_FORK_RESET);
/* Bumped in a fork child: a slot some parent thread held at the fork is free in the child. */
static int g_gen = 1;

static void evp_atfork_child(void)
{
    __atomic_add_fetch(&g_gen, 1, __ATOMIC_RELAXED);
}

/* Called with g_lib_lock held. */
static int evp_lib_init(void)
{
    static const char *const mode[3] = { "ECB", "CBC", "CTR" };
    EVP_CIPHER *c[3][3] = { { NULL } }, *x[2] = { NULL, NULL };
    OSSL_PROVIDER *prov = NULL;
    OSSL_LIB_CTX *lib;
    char name[32];
    int ok;

    acc_fork_install();
    if (!g_atfork && pthread_atfork(NULL, NULL, evp_atfork_child) != 0)
        return 0;
    g_atfork = 1;
    lib = OSSL_LIB_CTX_new();
    ok = lib != NULL && (prov = OSSL_PROVIDER_load(lib, "default")) != NULL;
    for (int m = 0; m < 3 && ok; m++)
        for (int i = 0; i < 3 && ok; i++) {
            snprintf(name, sizeof(name), "AES-%d-%s", 128 + 64 * i, mode[m]);
            ok = (c[m][i] = EVP_CIPHER_fetch(lib, name, "provider=default")) != NULL;
        }
    for (int i = 0; i < 2 && ok; i++)
        ok = (x[i] = EVP_CIPHER_fetch(lib, i ? "AES-256-XTS" : "AES-128-XTS", "provider=default")) != NULL;
    if (!ok) {
        EVP_CIPHER_free(x[0]);
        EVP_CIPHER_free(x[1]);
        for (int m = 0; m < 3; m++)
            for (int i = 0; i < 3; i++)
                EVP_CIPHER_free(c[m][i]);
        if (prov != NULL)
            OSSL_PROVIDER_unload(prov);
        OSSL_LIB_CTX_free(lib);
        return 0;
    }
    memcpy(g_ciph, c, sizeof(g_ciph));
    g_lib = lib;
    memcpy(g_xts, x, sizeof(g_xts));
    return 1;
}

static int evp_lib_ready(void)
{
    int ready;

    if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))
        return 1;
    pthread_mutex_lock(&g_lib_lock);
    ready = g_ready || evp_lib_init();
    __atomic_store_n(&g_ready, ready, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lib_lock);
    return ready;
}

OSSL_LIB_CTX *acc_evp_engine_libctx(void)
{
    return evp_lib_ready() ? g_lib : NULL;
}

/* ------------------------------------------------------------------------------------------
 * Slots
 * ------------------------------------------------------------------------------------------ */

static EVP_CIPHER_CTX *ctx_make(const evp_keyset *ks, acc_op which)
{
    static const int mode[C_N] = { [ACC_OP_ECB_ENC] = 0, [ACC_OP_ECB_DEC] = 0, [ACC_OP_CBC_ENC] = 1,
                                   [ACC_OP_CBC_DEC] = 1, [ACC_OP_CTR] = 2 };
    int enc = !acc_op_needs_dec(which);
    EVP_CIPHER_CTX *x;

    if (!enc && !ks->has_dec)
        return NULL;
    if ((x = EVP_CIPHER_CTX_new()) == NULL)
        return NULL;
    if (!EVP_CipherInit_ex2(x, g_ciph[mode[which]][ks->keylen / 8 - 2], ks->key, NULL, enc, NULL)
        || !EVP_CIPHER_CTX_set_padding(x, 0)) {
        EVP_CIPHER_CTX_free(x);
        return NULL;
    }
    return x;
}

static void slot_clear(evp_slot *s)
{
    for (int i = 0; i < C_N; i++) {
        EVP_CIPHER_CTX_free(s->c[i]);
        s->c[i] = NULL;
        s->have_iv[i] = 0;
    }
    for (int i = 0; i < 2; i++) {
        EVP_CIPHER_CTX_free(s->xts[i]);
        s->xts[i] = NULL;
    }
    OPENSSL_cleanse(s->xts_k2, sizeof(s->xts_k2));
    s->ready = 0;
}

/* Make a slot's contexts from the raw key; all or nothing. */
static int slot_fill(const evp_keyset *ks, evp_slot *s)
{
    s->ready = 1;
    for (int i = ACC_OP_ECB_ENC; i < C_N; i++) {
        s->c[i] = ctx_make(ks, (acc_op)i);
        if (s->c[i] == NULL && (ks->has_dec || !acc_op_needs_dec((acc_op)i)))
            s->ready = 0;
    }
    if (!s->ready)
        slot_clear(s);
    return s->ready;
}

/* A free slot (made if need be). An atomic flag rather than a mutex: this is on the path of
 * every call, mostly uncontended; when all slots are busy the thread yields and tries again
 * (the scheduler keeps crypto threads to the number of units, so this is rare). */
static evp_slot *slot_take(evp_keyset *ks)
{
    for (;;) {
        int gen = __atomic_load_n(&g_gen, __ATOMIC_RELAXED);
        for (int i = 0; i < EVP_SLOTS; i++) {
            evp_slot *s = &ks->slot[i];
            int old = __atomic_exchange_n(&s->busy, gen, __ATOMIC_ACQUIRE);
            if (old == gen)
                continue;
            if (old != 0)                   /* held across a fork: its IV state is not trusted */
                memset(s->have_iv, 0, sizeof(s->have_iv));
            if (s->ready || slot_fill(ks, s))
                return s;
            __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
        }
        sched_yield();
    }
}

static void slot_give(evp_slot *s)
{
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

static void keyset_free(evp_keyset *ks)
{
    if (ks == NULL)
        return;
    for (int i = 0; i < EVP_SLOTS; i++)
        slot_clear(&ks->slot[i]);
    OPENSSL_clear_free(ks, sizeof(*ks));
}

/* ------------------------------------------------------------------------------------------
 * Block functions
 * ------------------------------------------------------------------------------------------ */

static int evp_update(EVP_CIPHER_CTX *c, const uint8_t *in, uint8_t *out, size_t len)
{
    while (len) {
        int chunk = (int)(len < EVP_MAX_BYTES ? len : EVP_MAX_BYTES), outl = 0;
        if (!EVP_CipherUpdate(c, out, &outl, in, chunk) || outl != chunk)
            return 0;
        in += chunk, out += chunk, len -= (size_t)chunk;
    }
    return 1;
}

/* n blocks through context `which` of a free slot. iv (NULL for ECB) is the IV or counter to
 * start from and becomes the one to continue with; the context is re-initialised only when it
 * does not already stand there. On failure (accel/engine.h) the output is wiped rather than
 * left holding plaintext (in place) or stale data, iv is left as it was, and the context is
 * marked as standing nowhere, so that the next call re-initialises it. */
static int evp_blocks(const acc_aes_key *k, acc_op which, const uint8_t *in, uint8_t *out,
                      size_t n, uint8_t iv[16])
{
    uint8_t next[16];
    if (n == 0)
        return 1;
    if (which == ACC_OP_CBC_DEC)            /* before in == out overwrites it */
        acc_iv_at_block(which, iv, in, out, n, next);

    evp_slot *s = slot_take(k->evp);
    EVP_CIPHER_CTX *c = s->c[which];
    int ok = c != NULL;
    if (ok && iv != NULL && !(s->have_iv[which] && memcmp(s->next_iv[which], iv, 16) == 0))
        ok = EVP_CipherInit_ex2(c, NULL, NULL, iv, -1, NULL);
    ok = ok && evp_update(c, in, out, 16 * n);
    if (!ok) {
        OPENSSL_cleanse(out, 16 * n);
        s->have_iv[which] = 0;
    } else if (iv != NULL) {
        if (which != ACC_OP_CBC_DEC)
            acc_iv_at_block(which, iv, in, out, n, next);
        memcpy(iv, next, 16);
        memcpy(s->next_iv[which], next, 16);
        s->have_iv[which] = 1;
    }
    slot_give(s);
    return ok;
}

static int evp_ecb_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    return evp_blocks(k, ACC_OP_ECB_ENC, in, out, n, NULL);
}

static int evp_ecb_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    return evp_blocks(k, ACC_OP_ECB_DEC, in, out, n, NULL);
}

static int evp_cbc_enc(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                       uint8_t iv[16])
{
    return evp_blocks(k, ACC_OP_CBC_ENC, in, out, n, iv);
}

static int evp_cbc_dec(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                       uint8_t iv[16])
{
    return evp_blocks(k, ACC_OP_CBC_DEC, in, out, n, iv);
}

/* OpenSSL's CTR carries all 128 bits too (ctr128_inc, or ctr32 plus ctr96_inc). */
static int evp_ctr(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t n,
                   uint8_t ctr[16])
{
    return evp_blocks(k, ACC_OP_CTR, in, out, n, ctr);
}

/* The slot's XTS context for the pair (k1's keyset, k2) in direction dec, made or re-keyed if it
 * stands on another tweak key, and set to the tweak. NULL on failure. */
static EVP_CIPHER_CTX *xts_ctx(const evp_keyset *ks1, const evp_keyset *ks2, evp_slot *s, int dec, const uint8_t iv[16])
{
    size_t kl = ks1->keylen;
    uint8_t key[64];
    int ok;

    if (s->xts[dec] != NULL && CRYPTO_memcmp(s->xts_k2[dec], ks2->key, kl) == 0)
        return EVP_CipherInit_ex2(s->xts[dec], NULL, NULL, iv, -1, NULL) ? s->xts[dec] : NULL;
    EVP_CIPHER_CTX_free(s->xts[dec]);
    if ((s->xts[dec] = EVP_CIPHER_CTX_new()) == NULL)
        return NULL;
    memcpy(key, ks1->key, kl);
    memcpy(key + kl, ks2->key, kl);
    ok = EVP_CipherInit_ex2(s->xts[dec], g_xts[kl == 32], key, iv, !dec, NULL);
    OPENSSL_cleanse(key, sizeof(key));
    if (!ok) {
        EVP_CIPHER_CTX_free(s->xts[dec]);
        s->xts[dec] = NULL;
        return NULL;
    }
    memcpy(s->xts_k2[dec], ks2->key, kl);
    return s->xts[dec];
}

/* One data unit through the default provider's AES-XTS. */
static int evp_xts(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                   size_t len, int dec)
{
    const evp_keyset *ks1 = k1->evp, *ks2 = k2->evp;
    EVP_CIPHER_CTX *x;
    int ok, outl = 0;

    if (ks1 == NULL || ks2 == NULL || ks1->keylen != ks2->keylen || ks1->keylen == 24 || len > EVP_MAX_BYTES
        || len < 16)
        return 0;
    evp_slot *s = slot_take(k1->evp);
    dec = dec != 0;
    x = xts_ctx(ks1, ks2, s, dec, iv);
    ok = x != NULL && EVP_CipherUpdate(x, out, &outl, in, (int)len) && outl == (int)len;
    if (!ok) {
        OPENSSL_cleanse(out, len);
        EVP_CIPHER_CTX_free(s->xts[dec]); /* made again next time */
        s->xts[dec] = NULL;
    }
    slot_give(s);
    return ok;
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
    evp_keyset *ks = OPENSSL_zalloc(sizeof(*ks));
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

/* Deep copy: slot 0's contexts are duplicated (taking the slot, as another thread may be using
 * them); the other slots are made again on demand. */
static int evp_copy_key(acc_aes_key *dst, const acc_aes_key *src)
{
    evp_keyset *from, *ks;
    int ok = 1;

    if (dst == NULL || src == NULL)
        return 0;
    memcpy(dst, src, sizeof(*dst));
    dst->evp = NULL;
    if ((from = src->evp) == NULL)
        return 1;
    if ((ks = OPENSSL_zalloc(sizeof(*ks))) == NULL)
        return 0;
    memcpy(ks->key, from->key, sizeof(ks->key));
    ks->keylen = from->keylen;
    ks->has_dec = from->has_dec;

    evp_slot *s = slot_take(from), *d = &ks->slot[0];
    for (int i = 0; i < C_N && ok; i++) {
        if (s->c[i] == NULL)
            continue;
        d->c[i] = EVP_CIPHER_CTX_new();
        ok = d->c[i] != NULL && EVP_CIPHER_CTX_copy(d->c[i], s->c[i]);
        memcpy(d->next_iv[i], s->next_iv[i], 16);
        d->have_iv[i] = s->have_iv[i];
    }
    slot_give(s);
    d->ready = ok;
    if (!ok) {
        keyset_free(ks);
        return 0;
    }
    dst->evp = ks;
    return 1;
}

static const acc_engine evp_engine = {
    .name = "evp",
    .set_key = evp_set_key,
    .ecb_enc = evp_ecb_enc,
    .ecb_dec = evp_ecb_dec,
    .cbc_enc = evp_cbc_enc,
    .cbc_dec = evp_cbc_dec,
    .ctr = evp_ctr,
    .xts = evp_xts,
    .copy_key = evp_copy_key,
    .free_key = evp_free_key,
    .caps = ACC_CAP_MAY_FAIL,
};

const acc_engine *acc_engine_evp(void)
{
    return &evp_engine;
}
