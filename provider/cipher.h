/* provider/cipher.h: the AES cipher context shared by the EVP semantics (cipher_aes.c),
 * the offload policy (policy.c), TLS record handling (tls.c) and async batching (batch.c). */
#ifndef ACCELAES_CIPHER_H
#define ACCELAES_CIPHER_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/crypto.h>
#include "accel/engine.h"
#include "provider/settings.h"

struct acc_prov_ctx;

typedef enum { ACC_MODE_ECB = 1, ACC_MODE_CBC = 2, ACC_MODE_CTR = 5 } acc_mode;  /* = EVP_CIPH_*_MODE */

typedef struct acc_cipher_ctx {
    struct acc_prov_ctx *prov;
    const acc_engine *eng;
    acc_aes_key ks;               /* key schedule (cleansed on free and on re-key) */
    uint8_t rawkey[32];           /* the key itself, for the GPU plugin (cleansed likewise) */
    size_t keylen;                /* bytes: 16, 24, 32 */
    acc_mode mode;
    int enc;                      /* 1 encrypt, 0 decrypt */
    int key_set, iv_set;
    int pad;                      /* PKCS#7 padding (ECB/CBC) */
    int updated;                  /* an update has run since init (for final checks) */
    uint8_t oiv[16];              /* the IV given at init */
    uint8_t iv[16];               /* current IV (CBC) or counter block (CTR) */
    uint8_t buf[16];              /* ECB/CBC: partial block held back; CTR: current keystream block */
    size_t bufsz;                 /* ECB/CBC: bytes in buf */
    unsigned int num;             /* CTR: bytes of the keystream block in buf already used (0..15) */
    /* Inline bytes and requests not yet published to the scheduler's counters: small calls
     * add here (no thread-local lookup on the hot path) and publish every ACC_ACCT_FLUSH bytes
     * and when the context is freed. */
    uint64_t acct_bytes, acct_reqs;
    /* The thread queue (provider/batch.c) this context's request waits in while its async job
     * is paused, or NULL: freeing or re-initialising the context takes the request out. */
    void *batch_q;
    size_t inline_below;          /* acc_policy_inline_below() for this mode and direction */
    /* TLS 1.0-1.2 CBC record handling (provider/tls.c) */
    unsigned int tlsversion;      /* 0: not a TLS record context */
    size_t tlsmacsize;
    unsigned char *tlsmac;        /* MAC extracted from the last decrypted record */
    int tlsmac_alloced;
} acc_cipher_ctx;

#define ACC_ACCT_FLUSH (64u * 1024u)

/* Cipher contexts hold key schedules that the vector engines want 64-byte aligned. OpenSSL 3.0
 * has no aligned allocator, and posix_memalign would bypass CRYPTO_set_mem_functions (an
 * application's allocator; the failure injection of tests/c/test_alloc_fail.c): so the block
 * comes from OPENSSL_malloc, over-allocated, with its start kept just below the aligned pointer. */
static inline void *acc_ctx_alloc(size_t size)
{
    unsigned char *raw = OPENSSL_malloc(size + 64 + sizeof(void *));
    uintptr_t p;

    if (raw == NULL)
        return NULL;
    p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

/* Frees what acc_ctx_alloc returned (the caller cleanses it first). */
static inline void acc_ctx_free(void *p)
{
    if (p != NULL)
        OPENSSL_free(((void **)p)[-1]);
}

/* Whole blocks on the calling thread with the context's engine; iv is the CBC IV or the CTR
 * counter to use and advance. Returns the engine's 1 or 0 (accel/engine.h) and raises nothing:
 * it may run on a pool thread, whose error queue nobody reads; see acc_engine_fail. */
static inline int acc_run_engine(const acc_cipher_ctx *c, const uint8_t *in, uint8_t *out,
                                 size_t nblocks, uint8_t iv[16])
{
    const acc_engine *e = c->eng;

    switch (c->mode) {
    case ACC_MODE_ECB:
        return (c->enc ? e->ecb_enc : e->ecb_dec)(&c->ks, in, out, nblocks);
    case ACC_MODE_CBC:
        return (c->enc ? e->cbc_enc : e->cbc_dec)(&c->ks, in, out, nblocks, iv);
    default:
        return e->ctr(&c->ks, in, out, nblocks, iv);
    }
}

/* Raise ACC_R_ENGINE_FAILURE for a block function of c's engine that failed on len bytes, on
 * the thread whose EVP call fails (provider/policy.c). Returns 0, for `return acc_engine_fail()`. */
int acc_engine_fail(const acc_cipher_ctx *c, size_t len);

/* Run whole blocks through the offload policy (inline / split / batch / GPU), updating ctx->iv.
 * len is a multiple of 16. in == out is legal. Returns 1 on success, 0 on failure, when it has
 * raised the error itself (callers must not raise a second one). */
int acc_policy_blocks(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len);
/* The size below which nothing but the inline path can take a request of this mode and
 * direction, for these settings. */
size_t acc_policy_inline_below(const acc_settings *s, acc_mode mode, int enc);

/* ---- Cipher parameters (provider/cipher_aes.c), shared with the stitched ciphers ---- */
/* The gettable table and the get_params body of an AES cipher of this mode and key length
 * (bytes); aead is the AEAD flag it reports (1: the stitched ciphers of cipher_hmac.c). */
const OSSL_PARAM *acc_cipher_gettable_params(void *provctx);
int  acc_cipher_get_params(OSSL_PARAM params[], acc_mode mode, size_t keylen, int aead);

/* ---- Constant-time masks (TLS records: tls.c, cipher_hmac_record.c) ----
 * All ones or zero. Where a padding length, and so a MAC position, is secret (Lucky 13, padding
 * oracles), every decision that depends on it is one of these masks, never a branch or a memory
 * index. They are defined here, inline, rather than called out of line from tls.c: they sit in
 * per-byte loops. Arguments stay below 2^63 (record lengths always do). */

/* Hide a mask from the optimiser: knowing a value is 0 or all ones, gcc turns a masked loop
 * into an early exit or a select into a branch (test_tls_ct caught it doing so). */
static inline size_t acc_ct_barrier(size_t m)
{
    __asm__("" : "+r"(m));
    return m;
}

/* all ones if a < b, else 0 */
static inline size_t acc_ct_lt(size_t a, size_t b)
{
    return acc_ct_barrier((size_t)0 - ((a - b) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t acc_ct_ge(size_t a, size_t b)
{
    return ~acc_ct_lt(a, b);
}

static inline size_t acc_ct_is_zero(size_t a)
{
    return acc_ct_barrier((size_t)0 - ((~a & (a - 1)) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t acc_ct_eq(size_t a, size_t b)
{
    return acc_ct_is_zero(a ^ b);
}

/* ---- TLS (provider/tls.c) ---- */
int  acc_tls_update(acc_cipher_ctx *ctx, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl);
int  acc_tls_set_ctx_params(acc_cipher_ctx *ctx, const OSSL_PARAM params[]);
int  acc_tls_get_ctx_params(acc_cipher_ctx *ctx, OSSL_PARAM params[]);
int  acc_tls_dup(acc_cipher_ctx *dst, const acc_cipher_ctx *src);
void acc_tls_cleanup(acc_cipher_ctx *ctx);

#endif
