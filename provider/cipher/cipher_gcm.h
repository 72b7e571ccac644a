/* provider/cipher/cipher_gcm.h: the AES-GCM context and what cipher_gcm.c (life, init, data) shares
 * with cipher_gcm_params.c (parameters, the TLS 1.2 record mode). The semantics are the
 * default provider's (OpenSSL 3.0 ciphercommon_gcm.c): IV states, AAD before data, the tag. */
#ifndef ACCELAES_CIPHER_GCM_H
#define ACCELAES_CIPHER_GCM_H

#include <openssl/core_dispatch.h>
#include "accel/gcm.h"
#include "provider/cipher/aead.h"
#include "provider/route/cipher_ctx.h"

#define ACC_GCM_IV_MAX 128          /* the default's GCM_IV_MAX_SIZE (1024 bits) */
#define ACC_GCM_IV_DEFAULT 12
#define ACC_GCM_UNSET ACC_AEAD_UNSET
#define ACC_GCM_TLS_FIXED ACC_AEAD_TLS_FIXED
#define ACC_GCM_TLS_EXPLICIT ACC_AEAD_TLS_EXPLICIT

/* OpenSSL 3.5's pipeline API (provider/cipher/cipher_gcm_pipe.c), named here so that the module builds on
 * 3.0's headers; offered only where the running libcrypto has it (acc_aes*gcm_functions_35, chosen
 * at run time by provider/cipher/ciphers.c). */
#ifndef OSSL_FUNC_CIPHER_PIPELINE_ENCRYPT_INIT
#define OSSL_FUNC_CIPHER_PIPELINE_ENCRYPT_INIT 15
#define OSSL_FUNC_CIPHER_PIPELINE_DECRYPT_INIT 16
#define OSSL_FUNC_CIPHER_PIPELINE_UPDATE 17
#define OSSL_FUNC_CIPHER_PIPELINE_FINAL 18
#endif
#ifndef OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG
#define OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG "pipeline-tag"
#endif

typedef struct acc_gcm_pipe acc_gcm_pipe;

typedef struct acc_gcm_ctx {
    acc_cipher_ctx base;        /* first; the key lives in the GCM engine; base.ks / base.key_set:
                                   the split's CTR key schedule, made at its first split */
    acc_gcm_state st;           /* the engine's key data and message (64-byte aligned) */
    const acc_gcm_engine *geng;
    int key_set;
    int iv_state;               /* ACC_AEAD_IV_* (provider/cipher/aead.h) */
    int iv_gen;                 /* TLS: a fixed IV part was set, the invocation field counts */
    int iv_gen_rand;            /* this init's IV is a random one made here ("iv-generated") */
    int started;                /* the engine's message has begun: the AAD is closed */
    int zero_restart;           /* a key came while a message was open: it goes on from the
                                   default's wiped state (the engine's restart_zero) */
    int eng_failed;             /* the engine failed in this call, its error raised: callers add none */
    size_t ivlen;
    size_t msg_ivlen;
    size_t taglen;              /* ACC_GCM_UNSET until set (decrypt) or made (encrypt final) */
    uint64_t msglen;            /* data bytes in this message (GCM allows 2^36 - 32) */
    uint64_t tls_enc_records;
    size_t tls_aad_len;         /* ACC_GCM_UNSET: not a TLS record */
    size_t tls_aad_pad_sz;
    acc_aead_aad aad;           /* AAD gathered until the message starts (ipsec-mb's init takes it whole) */
    uint8_t iv[ACC_GCM_IV_MAX];
    uint8_t msg_iv[ACC_GCM_IV_MAX];  /* the IV the open message started with (TLS moves iv on) */
    uint8_t buf[16];            /* the tag (given, or made), or the TLS AAD, as the default's buf */
    acc_gcm_pipe *pipe;         /* the pipelines' messages, from the first pipeline init (NULL before) */
} acc_gcm_ctx;

/* cipher_gcm.c */
/* The key into the context's engine state (the same key again keeps it); 1, or 0 with an error. */
int acc_gcm_set_key(acc_gcm_ctx *g, const unsigned char *key, size_t keylen);
/* Open a message with the current IV (the default's hw->setiv): no AAD, no data yet. */
void acc_gcm_open(acc_gcm_ctx *g);
/* A random IV for an encryption that was given none (1), as the default's; 0 if it cannot. */
int acc_gcm_iv_generate(acc_gcm_ctx *g);
/* A whole message in one go (the TLS record): AAD, data, then the tag written (encrypt) or
 * checked (decrypt, taglen 16). 1 done, 0 failed or the tag did not match. */
int acc_gcm_oneshot(acc_gcm_ctx *g, const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out,
                    size_t len, uint8_t *tag);

/* gcm_split.c: nblocks whole blocks of the open message's data, at a block boundary of it, split
 * over the pool (policy.c decides when). 1 done (counted), -1 declined (nothing done: no idle
 * unit to ask, no split hooks, not at a block boundary), 0 failed (the output is wiped). */
int acc_gcm_split(acc_gcm_ctx *g, const uint8_t *in, uint8_t *out, size_t nblocks);

/* cipher_gcm_pipe.c: the pipeline functions (as 3.5's OSSL_FUNC_cipher_pipeline_*_fn), the
 * pipes' life (freed and copied with the context) and "pipeline-tag" (an array of tag buffers). */
int acc_gcm_pipe_einit(void *vctx, const unsigned char *key, size_t keylen, size_t numpipes, const unsigned char **iv,
                       size_t ivlen, const OSSL_PARAM params[]);
int acc_gcm_pipe_dinit(void *vctx, const unsigned char *key, size_t keylen, size_t numpipes, const unsigned char **iv,
                       size_t ivlen, const OSSL_PARAM params[]);
int acc_gcm_pipe_update(void *vctx, size_t numpipes, unsigned char **out, size_t *outl, const size_t *outsize,
                        const unsigned char **in, const size_t *inl);
int acc_gcm_pipe_final(void *vctx, size_t numpipes, unsigned char **out, size_t *outl, const size_t *outsize);
void acc_gcm_pipe_free(acc_gcm_ctx *g);
int acc_gcm_pipe_dup(acc_gcm_ctx *d, const acc_gcm_ctx *s);
int acc_gcm_pipe_get_tag(acc_gcm_ctx *g, OSSL_PARAM *p);
int acc_gcm_pipe_set_tag(acc_gcm_ctx *g, const OSSL_PARAM *p);

/* cipher_gcm_params.c */
OSSL_FUNC_cipher_get_ctx_params_fn acc_gcm_get_ctx_params;
OSSL_FUNC_cipher_set_ctx_params_fn acc_gcm_set_ctx_params;
OSSL_FUNC_cipher_gettable_ctx_params_fn acc_gcm_gettable_ctx_params;
OSSL_FUNC_cipher_settable_ctx_params_fn acc_gcm_settable_ctx_params;
/* The TLS 1.2 record (explicit nonce, payload, tag) in place; *padlen as the default's. */
int acc_gcm_tls_cipher(acc_gcm_ctx *g, unsigned char *out, size_t *padlen, const unsigned char *in, size_t len);

#endif
