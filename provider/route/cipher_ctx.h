/* provider/route/cipher_ctx.h: the cipher context every AES cipher here shares, and the cipher core
 * (provider/cipher/cipher_core.c) that creates, copies, frees and initialises it for all of them. A
 * cipher describes itself in an acc_cipher_kind; one with more state (the stitched ciphers)
 * puts an acc_cipher_ctx first in its own context and adds hooks. */
#ifndef ACCELAES_CIPHER_CTX_H
#define ACCELAES_CIPHER_CTX_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include "accel/engine.h"
#include "provider/route/skey.h"

struct acc_prov_ctx;
struct acc_cipher_ctx;

/* = EVP_CIPH_*_MODE */
typedef enum { ACC_MODE_ECB = 1, ACC_MODE_CBC = 2, ACC_MODE_CTR = 5, ACC_MODE_GCM = 6, ACC_MODE_CCM = 7, ACC_MODE_XTS = 0x10001 } acc_mode;

/* What a cipher is, and what it does beyond the core. Hooks may be NULL. */
typedef struct acc_cipher_kind {
    acc_mode mode;
    size_t keylen;              /* bytes: 16, 24, 32 */
    size_t ctx_size;            /* the context to allocate, an acc_cipher_ctx first */
    int aead, tls1_multiblock;  /* the flags get_params reports */
    int custom_iv;              /* likewise: the cipher handles its IV itself (GCM) */
    int dup_raises;             /* a failed dupctx raises a malloc error (the default's plain AES does) */
    int iv_string_first;        /* get iv / updated-iv tries the octet string before the pointer
                                   (the default's stitched ciphers do; cipher_core.c) */
    int param_decoder;          /* whose get/set decoder the default's is (enum acc_param_decoder, compat.h) */
    void (*on_new)(struct acc_cipher_ctx *c);
    /* a new key was given: state that goes with the old key goes (before the schedule is made) */
    void (*on_key)(struct acc_cipher_ctx *c);
    /* dst is a byte copy of src: make it own copies of what src owns; 0 on failure */
    int (*on_dup)(struct acc_cipher_ctx *dst, const struct acc_cipher_ctx *src);
    void (*on_free)(struct acc_cipher_ctx *c);
    /* the cipher's set_ctx_params, run at the end of every init */
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
} acc_cipher_kind;

typedef struct acc_cipher_ctx {
    acc_aes_key ks;               /* first: 64-byte aligned; cleansed on free and on re-key */
    /* An opaque key given by an skey init (provider/route/skey.h), whose schedule the context reads
     * instead of ks and whose reference it holds; NULL: ks is the context's own. */
    acc_skey *skey;
    const acc_cipher_kind *kind;
    struct acc_prov_ctx *prov;
    const acc_engine *eng;
    uint8_t rawkey[32];           /* the key itself, for the GPU plugin (cleansed likewise) */
    size_t keylen;                /* bytes: 16, 24, 32 */
    acc_mode mode;
    acc_op op;                    /* mode and direction as one operation (set by init) */
    int enc;                      /* 1 encrypt, 0 decrypt */
    int key_set, iv_set;
    int pad;                      /* PKCS#7 padding (ECB/CBC) */
    int updated;                  /* an update has run since init (for final checks) */
    /* 16-byte aligned: the engines load and store the IV / counter as one vector on every call. */
    uint8_t oiv[16] __attribute__((aligned(16))); /* the IV given at init */
    uint8_t iv[16] __attribute__((aligned(16)));  /* current IV (CBC) or counter block (CTR) */
    uint8_t buf[16] __attribute__((aligned(16))); /* ECB/CBC: held-back partial block; CTR: keystream */
    size_t bufsz;                 /* ECB/CBC: bytes in buf */
    unsigned int num;             /* CTR: bytes of the keystream block in buf already used (0..15) */
    /* Inline bytes and requests not yet published to the scheduler's counters: small calls
     * add here (no thread-local lookup on the hot path) and publish every ACC_ACCT_FLUSH bytes
     * and when the context is freed. */
    uint64_t acct_bytes, acct_reqs;
    /* The thread queue (provider/route/batch.c) this context's request waits in while its async job
     * is paused, or NULL: freeing or re-initialising the context takes the request out. */
    void *batch_q;
    size_t inline_below;          /* the policy's inline_below for this op (provider/route/policy.h) */
    /* TLS 1.0-1.2 CBC record handling (provider/cipher/tls.c) */
    unsigned int tlsversion;      /* 0: not a TLS record context */
    size_t tlsmacsize;
    unsigned char *tlsmac;        /* MAC extracted from the last decrypted record */
    int tlsmac_alloced;
} acc_cipher_ctx;

/* The schedule the data calls read: the shared one of an opaque key, or the context's own. */
static inline const acc_aes_key *acc_cipher_key(const acc_cipher_ctx *c)
{
    return c->skey != NULL ? &c->skey->ks : &c->ks;
}

#define ACC_ACCT_FLUSH (64u * 1024u)

/* XTS is no block operation of its own here (engine.h's xts runs a whole unit); its data key
 * needs the schedules of ECB in the same direction. */
static inline acc_op acc_op_of(acc_mode mode, int enc)
{
    /* GCM and CCM run on their own engines (accel/gcm.h, ccm.h), never as an acc_req: CTR names their counters */
    if (mode == ACC_MODE_CTR || mode == ACC_MODE_GCM || mode == ACC_MODE_CCM)
        return ACC_OP_CTR;
    if (mode == ACC_MODE_CBC)
        return enc ? ACC_OP_CBC_ENC : ACC_OP_CBC_DEC;
    return enc ? ACC_OP_ECB_ENC : ACC_OP_ECB_DEC;
}

/* Whole blocks of the context's op on the calling thread with its engine; iv is the CBC IV or
 * CTR counter to use and advance. Returns the engine's 1 or 0 and raises nothing: it may run on
 * a pool thread, whose error queue nobody reads; see acc_engine_fail (provider/route/policy.h). */
static inline int acc_ctx_run(const acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t nblocks,
                              uint8_t iv[16])
{
    acc_req r = { c->op, acc_cipher_key(c), iv, in, out, nblocks };

    return acc_engine_run(c->eng, &r);
}

/* ---- The cipher core (provider/cipher/cipher_core.c) ---- */
void *acc_cipher_newctx(void *provctx, const acc_cipher_kind *kind);
OSSL_FUNC_cipher_freectx_fn acc_cipher_freectx;
OSSL_FUNC_cipher_dupctx_fn acc_cipher_dupctx;
OSSL_FUNC_cipher_encrypt_init_fn acc_cipher_einit;
OSSL_FUNC_cipher_decrypt_init_fn acc_cipher_dinit;
/* The skey inits (OpenSSL 3.5+, provider/route/skey.h's acc_skey_init_fn): the context shares the key's schedule. */
int acc_cipher_skey_einit(void *vctx, void *skeydata, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[]);
int acc_cipher_skey_dinit(void *vctx, void *skeydata, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[]);
/* Publish the context's inline bytes to the scheduler's counters now. */
void acc_cipher_publish(acc_cipher_ctx *c);
/* Bytes and requests done inline, counted in the context (no thread-local lookup on the hot path)
 * and published every ACC_ACCT_FLUSH bytes. */
static inline void acc_cipher_count(acc_cipher_ctx *c, size_t bytes, uint64_t reqs)
{
    c->acct_bytes += bytes;
    c->acct_reqs += reqs;
    if (c->acct_bytes >= ACC_ACCT_FLUSH)
        acc_cipher_publish(c);
}
/* A 16-byte IV into oiv and iv (INVALID_IV_LENGTH for another length). */
int acc_cipher_take_iv(acc_cipher_ctx *c, const unsigned char *iv, size_t ivlen);

/* The checks of a data call, each raising the default provider's reason where it has the
 * condition: a key (NO_KEY_SET), then room for produce bytes, sane pointers and an int-sized
 * result (EVP reports lengths as int). 1 to go on, 0 refused. */
int acc_cipher_check_key(const acc_cipher_ctx *c);
/* A TLS record's length: refused past INT_MAX (LENGTH_TOO_LARGE). */
int acc_cipher_check_record_len(size_t inl);
int acc_cipher_refuse_call(const acc_cipher_ctx *c, const unsigned char *out, size_t produce, size_t outsize,
                           const unsigned char *in, size_t inl);
/* Inline: it is on every update's path, and only a refusal needs the call. */
static inline int acc_cipher_check_call(const acc_cipher_ctx *c, const unsigned char *out, size_t produce,
                                        size_t outsize, const unsigned char *in, size_t inl)
{
    if (c->key_set && produce <= outsize && (inl == 0 || in != NULL) && produce <= (size_t)INT_MAX
        && (produce == 0 || out != NULL))
        return 1;
    return acc_cipher_refuse_call(c, out, produce, outsize, in, inl);
}

/* get_params of every cipher here: one table, one body, the flags from the kind. */
OSSL_FUNC_cipher_gettable_params_fn acc_cipher_gettable_params;
int acc_cipher_get_params(OSSL_PARAM params[], const acc_cipher_kind *kind);

/* A kind's newctx and get_params (name##_newctx, name##_get_params), and the dispatch entries every
 * cipher on the core shares: its context's life, the key inits and get_params. Written once for
 * every mode's dispatch table (cipher_aes.c, cipher_hmac.c). */
#define ACC_KIND_FUNCTIONS(name, kindp)                                                         \
    static OSSL_FUNC_cipher_newctx_fn name##_newctx;                                            \
    static void *name##_newctx(void *provctx)                                                   \
    {                                                                                           \
        return acc_cipher_newctx(provctx, (kindp));                                             \
    }                                                                                           \
    static OSSL_FUNC_cipher_get_params_fn name##_get_params;                                    \
    static int name##_get_params(OSSL_PARAM params[])                                           \
    {                                                                                           \
        return acc_cipher_get_params(params, (kindp));                                          \
    }
#define ACC_CORE_ENTRIES(name)                                                                  \
    { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))name##_newctx },                                 \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))acc_cipher_freectx },                       \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))acc_cipher_dupctx },                         \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))acc_cipher_einit },                    \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))acc_cipher_dinit },                    \
        { OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT, (void (*)(void))acc_cipher_skey_einit },          \
        { OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT, (void (*)(void))acc_cipher_skey_dinit },          \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))name##_get_params },                     \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params }

/* get_ctx_params: the keys of `order` (the default provider's order for the cipher, so that a
 * call with several unanswerable parameters fails on the same one), each answered by the core
 * (key and IV lengths, IV, updated IV, padding, num) or, for the cipher's own keys, by own:
 * 1 set, 0 could not be set (the core raises), -1 refused with its own error raised. */
typedef int acc_own_param_fn(acc_cipher_ctx *c, OSSL_PARAM *p);
int acc_cipher_get_ctx_params(acc_cipher_ctx *c, OSSL_PARAM params[], const char *const order[],
                              acc_own_param_fn *own);

#endif
