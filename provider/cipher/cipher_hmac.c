/* provider/cipher/cipher_hmac.c: the stitched TLS ciphers AES-{128,256}-CBC-HMAC-SHA{1,256} that libssl
 * fetches for MAC-then-encrypt CBC suites (TLS 1.0-1.2 without encrypt-then-MAC): their kinds and
 * dispatch tables, and what they do beyond the cipher core (cipher_core.c makes, copies and
 * initialises their contexts): the MAC state, their parameters, update and final as the default
 * provider's. The records themselves are done in cipher_hmac_record.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/cipher/algs.h"
#include "provider/route/batch.h"
#include "provider/cipher/cipher_hmac.h"
#include "provider/base/compat.h"
#include "provider/base/names.h"
#include "provider/route/skey.h"
#include "provider/route/prov.h"

#define BLK ACC_AES_BLOCK
#define V_SSL3 0x0300
#define V_TLS1 0x0301
#define MAX_PLAIN 16384 /* SSL3_RT_MAX_PLAIN_LENGTH: one record's plaintext */

/* ======================== Kind hooks (the core does the rest) ======================== */

static OSSL_FUNC_cipher_update_fn hmac_update;
static OSSL_FUNC_cipher_final_fn hmac_final;
static OSSL_FUNC_cipher_cipher_fn hmac_oneshot;
static OSSL_FUNC_cipher_get_ctx_params_fn hmac_get_ctx_params;
static OSSL_FUNC_cipher_set_ctx_params_fn hmac_set_ctx_params;
static OSSL_FUNC_cipher_gettable_ctx_params_fn hmac_gettable_ctx_params;
static OSSL_FUNC_cipher_settable_ctx_params_fn hmac_settable_ctx_params;

typedef struct acc_hmac_kind {
    acc_cipher_kind base;       /* first: the core sees only this */
    const acc_sha_kind *sha;
} acc_hmac_kind;

/* The MAC state without a MAC key, and nothing pending. */
static void mac_reset(acc_hmac_ctx *h)
{
    h->sha->init(&h->head);
    h->tail = h->head;
    h->md = h->head;
    h->head_len = 0;
    h->payload_len = ACC_HMAC_NO_PAYLOAD;
}

static void hmac_on_new(acc_cipher_ctx *c)
{
    acc_hmac_ctx *h = (acc_hmac_ctx *)c;

    h->sha = ((const acc_hmac_kind *)c->kind)->sha;
    mac_reset(h);
}

/* As the default's key set-up: the MAC key and any pending AAD go with the old key. */
static void hmac_on_key(acc_cipher_ctx *c)
{
    acc_hmac_ctx *h = (acc_hmac_ctx *)c;

    mac_reset(h);
    h->strip_fixed = h->sha->md_size + BLK;
    h->mb_aad_set = 0;
}

/* ======================== Parameters ======================== */

/* The checks OpenSSL 3.5.9's default makes of a multiblock AAD before anything else
 * (provider/base/compat.h): 4 or 8 records, each of at most one record's plaintext. */
static int mb_aad_fits(const unsigned char *aad, size_t len, unsigned int interleave)
{
    if ((interleave != 4 && interleave != 8) || len < ACC_HMAC_AAD_LEN || len > (size_t)interleave * MAX_PLAIN)
        return 0;
    return ((size_t)aad[11] << 8 | aad[12]) <= MAX_PLAIN;
}

/* OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_*: the write of 4 or 8 records at once (cipher_hmac_multi.c).
 * A refused AAD or write fails with no error raised, as the default's does: libssl then writes
 * one record at a time. */
static int set_multiblock(acc_hmac_ctx *h, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p, *pi = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE);
    unsigned int interleave = 0;

    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_SEND_FRAGMENT)) != NULL
        && !OSSL_PARAM_get_size_t(p, &h->mb_max_frag))
        goto bad;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD)) != NULL) {
        if (p->data_type != OSSL_PARAM_OCTET_STRING || p->data == NULL || pi == NULL
            || !OSSL_PARAM_get_uint(pi, &interleave))
            goto bad;
        /* data_size is the write's length, not the 13 bytes of header data points at */
        if (acc_compat()->mb_aad_checked && !mb_aad_fits(p->data, p->data_size, interleave))
            goto bad;
        if (!acc_hmac_mb_aad(h, p->data, p->data_size, interleave))
            return 0;
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC)) != NULL) {
        const OSSL_PARAM *pin = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_IN);

        if (p->data_type != OSSL_PARAM_OCTET_STRING || pin == NULL || pin->data_type != OSSL_PARAM_OCTET_STRING
            || pi == NULL || !OSSL_PARAM_get_uint(pi, &interleave))
            goto bad;
        h->mb_enc_len = acc_hmac_mb_encrypt(h, p->data, pin->data, pin->data_size, interleave);
        if (h->mb_enc_len == 0)
            return 0;
    }
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "cannot read parameter '%s'", p->key);
    return 0;
}

static int hmac_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    acc_hmac_ctx *h = vctx;
    const OSSL_PARAM *p;

    if (params == NULL)
        return 1;
    if (!acc_compat_unrepeated(params, hmac_settable_ctx_params(vctx, NULL), ACC_DECODER_STITCHED))
        return 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_MAC_KEY)) != NULL) {
        if (p->data_type != OSSL_PARAM_OCTET_STRING) {
            acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "%s must be an octet string", p->key);
            return 0;
        }
        acc_hmac_set_mac_key(h, p->data, p->data_size);
    }
    if (!set_multiblock(h, params))
        return 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD)) != NULL) {
        if (p->data_type != OSSL_PARAM_OCTET_STRING) {
            acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "%s must be an octet string", p->key);
            return 0;
        }
        if (!acc_hmac_set_aad(h, p->data, p->data_size))   /* no error: the default raises none */
            return 0;
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL) {
        size_t kl;

        if (!OSSL_PARAM_get_size_t(p, &kl)) {
            acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "%s is not a size", p->key);
            return 0;
        }
        if (kl != h->aes.keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", kl, h->aes.keylen);
            return 0;
        }
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION)) != NULL) {
        if (!OSSL_PARAM_get_uint(p, &h->tlsversion)) {
            acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "%s is not an unsigned integer", p->key);
            return 0;
        }
        /* No explicit IV to strip in SSL 3.0 / TLS 1.0 (as the default, once per key set-up). */
        if (h->tlsversion == V_SSL3 || h->tlsversion == V_TLS1) {
            if (h->strip_fixed < BLK) {
                /* the default's assertion fails here: ERR_R_INTERNAL_ERROR under ERR_LIB_PROV */
                acc_raise(ACC_PROV_R(ERR_R_INTERNAL_ERROR), "%s set before a key", p->key);
                return 0;
            }
            h->strip_fixed -= BLK;
        }
    }
    /* OSSL_CIPHER_PARAM_TLS_MAC_SIZE: libssl passes 0 for these ciphers (the MAC is inside):
     * accepted and ignored, as the default provider does. */
    return 1;
}

/* The stitched ciphers' own parameters: 1 set, 0 could not be set, -1 refused (raised). */
static int own_param(acc_cipher_ctx *c, OSSL_PARAM *p)
{
    acc_hmac_ctx *h = (acc_hmac_ctx *)c;

    if (strcmp(p->key, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_BUFSIZE) == 0) {
        if (h->mb_max_frag == 0) {
            /* the default aborts the process here: refused, with our own reason */
            acc_raise(ACC_R_INVALID_PARAMETER, "'%s' before the maximum send fragment was set", p->key);
            return -1;
        }
        return OSSL_PARAM_set_size_t(p, acc_hmac_mb_bufsize(h));
    }
    if (strcmp(p->key, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE) == 0)
        return OSSL_PARAM_set_uint(p, h->mb_interleave);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD_PACKLEN) == 0)
        return OSSL_PARAM_set_size_t(p, h->mb_packlen);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_LEN) == 0)
        return OSSL_PARAM_set_size_t(p, h->mb_enc_len);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD) == 0)
        return OSSL_PARAM_set_size_t(p, h->aad_pad);
    return 0;
}

/* In the default provider's order; no padding or num, which its stitched ciphers do not answer. */
static int hmac_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    static const char *const order[] = {
        OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_BUFSIZE, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE,
        OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD_PACKLEN, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_LEN,
        OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_IVLEN,
        OSSL_CIPHER_PARAM_IV, OSSL_CIPHER_PARAM_UPDATED_IV, NULL
    };

    return acc_cipher_get_ctx_params(vctx, params, order, own_param);
}

static const OSSL_PARAM *hmac_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_BUFSIZE, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD_PACKLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_LEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, NULL, 0),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

#define HMAC_SETTABLE                                                                 \
    OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_MAC_KEY, NULL, 0),                 \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, NULL, 0),            \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_SEND_FRAGMENT, NULL), \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD, NULL, 0),      \
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE, NULL),          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC, NULL, 0),      \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_IN, NULL, 0),   \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL)

/* The running release's list (provider/base/compat.h): OpenSSL 3.6's leaves out tls-version, which
 * it (and accelaes) still takes; 4.0's lists the multiblock parameters first. */
static const OSSL_PARAM *hmac_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = { HMAC_SETTABLE, OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS_VERSION, NULL),
                                        OSSL_PARAM_END };
    static const OSSL_PARAM known_3_6[] = { HMAC_SETTABLE, OSSL_PARAM_END };
    static const OSSL_PARAM known_4_0[] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_SEND_FRAGMENT, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD, NULL, 0),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_IN, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_MAC_KEY, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, NULL, 0),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS_VERSION, NULL),
        OSSL_PARAM_END
    };

    (void)vctx; (void)provctx;
    if (acc_compat()->stitched_settable_multiblock_first)
        return known_4_0;
    return acc_compat()->stitched_lists_tls_version ? known : known_3_6;
}

/* ======================== Update and final ======================== */

/* The core's checks, with one of its own first: no record comes near INT_MAX. */
static int check_call(const acc_hmac_ctx *h, const unsigned char *out, size_t outsize,
                      const unsigned char *in, size_t inl)
{
    return acc_cipher_check_key(&h->aes) && acc_cipher_check_record_len(inl)
           && acc_cipher_check_call(&h->aes, out, inl, outsize, in, inl);
}

static int run_cipher(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t inl)
{
    int r = acc_hmac_cipher(h, out, in, inl);

    if (r < 0)   /* the default's record check fails the call with this one reason */
        acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED), "TLS record: bad record MAC or padding");
    return r > 0;
}

static int hmac_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                       const unsigned char *in, size_t inl)
{
    acc_hmac_ctx *h = vctx;

    if (!check_call(h, out, outsize, in, inl))
        return 0;
    if (inl == 0) {
        *outl = 0;
        return 1;
    }
    if (!run_cipher(h, out, in, inl))
        return 0;
    *outl = inl;
    /* Decrypting for libssl: the length it gets is the payload's alone (the padding, MAC and
     * explicit IV stay in the buffer), as the default provider reports it. */
    if (!h->aes.enc && h->tlsversion > 0) {
        size_t strip = (size_t)out[inl - 1] + 1 + h->strip_fixed;

        if (inl < strip)
            return 0;       /* as the default's (an ossl_assert): refused, no error raised */
        *outl = inl - strip;
    }
    return 1;
}

static int hmac_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    const acc_hmac_ctx *h = vctx;

    (void)out; (void)outsize;
    if (!acc_cipher_check_key(&h->aes))   /* as the default's stream final */
        return 0;
    *outl = 0;
    return 1;
}

/* EVP_Cipher: the record or blocks as they are, the length unchanged. */
static int hmac_oneshot(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                        const unsigned char *in, size_t inl)
{
    acc_hmac_ctx *h = vctx;

    if (!check_call(h, out, outsize, in, inl) || !run_cipher(h, out, in, inl))
        return 0;
    *outl = inl;
    return 1;
}

/* ======================== Dispatch tables ======================== */

/* The AEAD and TLS1 multiblock flags are the default's: libssl keys its record handling on the
 * one and its 4- or 8-record writes on the other. */
#define ACC_HMAC_FUNCTIONS(kbits, sha)                                                         \
    static const acc_hmac_kind aes##kbits##_##sha##_kind = {                                    \
        { .mode = ACC_MODE_CBC, .keylen = (kbits) / 8, .ctx_size = sizeof(acc_hmac_ctx),         \
          .aead = 1, .tls1_multiblock = 1, .iv_string_first = 1, .param_decoder = ACC_DECODER_STITCHED, .on_new = hmac_on_new, .on_key = hmac_on_key,         \
          .set_ctx_params = hmac_set_ctx_params },                                               \
        &acc_hmac_##sha                                                                          \
    };                                                                                          \
    ACC_KIND_FUNCTIONS(aes##kbits##_##sha, &aes##kbits##_##sha##_kind.base)                     \
    const OSSL_DISPATCH acc_aes##kbits##cbc_hmac_##sha##_functions[] = {                        \
        ACC_CORE_ENTRIES(aes##kbits##_##sha),                                                   \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))hmac_update },                               \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))hmac_final },                                 \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))hmac_oneshot },                              \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))hmac_get_ctx_params },               \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))hmac_set_ctx_params },               \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))hmac_gettable_ctx_params },     \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))hmac_settable_ctx_params },     \
        { 0, NULL }                                                                             \
    }

ACC_HMAC_FUNCTIONS(128, sha1);
ACC_HMAC_FUNCTIONS(256, sha1);
ACC_HMAC_FUNCTIONS(128, sha256);
ACC_HMAC_FUNCTIONS(256, sha256);
