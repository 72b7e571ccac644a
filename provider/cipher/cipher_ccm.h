/* provider/cipher/cipher_ccm.h: AES-CCM's context, shared by the cipher (cipher_ccm.c) and its
 * parameters (cipher_ccm_params.c). */
#ifndef ACCELAES_CIPHER_CCM_H
#define ACCELAES_CIPHER_CCM_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include "accel/ccm.h"
#include "provider/cipher/aead.h"
#include "provider/base/compat.h"
#include "provider/route/cipher_ctx.h"

typedef struct acc_ccm_ctx {
    acc_cipher_ctx base;        /* first */
    acc_ccm_state st;           /* the engine's key and message (64-byte aligned) */
    const acc_ccm_engine *ceng;
    int key_set, tag_set, len_set;
    int iv_state;               /* ACC_AEAD_IV_* (provider/cipher/aead.h): given (BUFFERED), its one message done */
    int key_enc;                /* the direction the key was set up in (compat.h ccm_blocks_dir_at_key) */
    int eng_failed;             /* the engine failed in this call, its error raised: callers add none */
    size_t l, m;                /* the length field's bytes (2..8) and the tag's (4..16, even) */
    size_t tls_aad_len;         /* ACC_AEAD_UNSET: not a TLS record; once set, every call is one */
    size_t tls_aad_pad_sz;
    uint8_t iv[16];             /* the nonce (15 - l bytes), as the default's 16-byte buffer */
    uint8_t buf[16];            /* the tag given (decrypt), or the TLS AAD */
} acc_ccm_ctx;

/* 3.6 generated CCM's parameter decoders: its own lists (no IV generation parameters) and a
 * repeated parameter refused, as the plain modes' and GCM's of the same release. */
static inline int own_lists(void)
{
    return acc_compat()->repeated_param_refused[ACC_DECODER_COMMON];
}

static inline size_t ivlen_of(const acc_ccm_ctx *c)
{
    return 15 - c->l;
}

OSSL_FUNC_cipher_set_ctx_params_fn acc_ccm_set_ctx_params;
OSSL_FUNC_cipher_get_ctx_params_fn acc_ccm_get_ctx_params;
OSSL_FUNC_cipher_gettable_ctx_params_fn acc_ccm_gettable_ctx_params;
OSSL_FUNC_cipher_settable_ctx_params_fn acc_ccm_settable_ctx_params;

#endif
