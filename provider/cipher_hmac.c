/* provider/cipher_hmac.c: the stitched TLS ciphers AES-{128,256}-CBC-HMAC-SHA{1,256} that libssl
 * fetches for MAC-then-encrypt CBC suites (TLS 1.0-1.2 without encrypt-then-MAC): dispatch
 * tables, parameters and EVP semantics as the default provider's; the records themselves are
 * done in cipher_hmac_record.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/batch.h"
#include "provider/cipher.h"
#include "provider/cipher_hmac.h"
#include "provider/names.h"
#include "provider/prov.h"

#define BLK ACC_AES_BLOCK
#define V_SSL3 0x0300
#define V_TLS1 0x0301

/* ======================== Context life cycle ======================== */

static OSSL_FUNC_cipher_freectx_fn hmac_freectx;
static OSSL_FUNC_cipher_dupctx_fn hmac_dupctx;
static OSSL_FUNC_cipher_encrypt_init_fn hmac_einit;
static OSSL_FUNC_cipher_decrypt_init_fn hmac_dinit;
static OSSL_FUNC_cipher_update_fn hmac_update;
static OSSL_FUNC_cipher_final_fn hmac_final;
static OSSL_FUNC_cipher_cipher_fn hmac_oneshot;
static OSSL_FUNC_cipher_get_ctx_params_fn hmac_get_ctx_params;
static OSSL_FUNC_cipher_set_ctx_params_fn hmac_set_ctx_params;
static OSSL_FUNC_cipher_gettable_ctx_params_fn hmac_gettable_ctx_params;
static OSSL_FUNC_cipher_settable_ctx_params_fn hmac_settable_ctx_params;

static void *hmac_newctx(void *provctx, size_t keylen, const acc_sha_kind *sha)
{
    acc_prov_ctx *prov = provctx;
    acc_hmac_ctx *h = NULL;

    /* No error of ours: the default's raises none, and EVP raises its initialization error. */
    if ((h = acc_ctx_alloc(sizeof(*h))) == NULL)
        return NULL;
    memset(h, 0, sizeof(*h));
    h->aes.prov = prov;
    h->aes.eng = prov->eng;
    h->aes.mode = ACC_MODE_CBC;
    h->aes.keylen = keylen;
    h->sha = sha;
    h->payload_len = ACC_HMAC_NO_PAYLOAD;
    sha->init(&h->head);
    h->tail = h->head;
    h->md = h->head;
    return h;
}

static void hmac_freectx(void *vctx)
{
    acc_hmac_ctx *h = vctx;

    if (h == NULL)
        return;
    acc_batch_cancel(&h->aes);
    if (h->aes.key_set)
        h->aes.eng->free_key(&h->aes.ks);
    OPENSSL_cleanse(h, sizeof(*h));
    acc_ctx_free(h);
}

static void *hmac_dupctx(void *vctx)
{
    acc_hmac_ctx *s = vctx, *d = NULL;

    /* No error of ours on failure: the default's (OPENSSL_memdup) raises none, and
     * EVP_CIPHER_CTX_copy raises its not-able-to-copy error. */
    if ((d = acc_ctx_alloc(sizeof(*d))) == NULL)
        return NULL;
    memcpy(d, s, sizeof(*d));
    d->aes.batch_q = NULL;   /* a waiting request stays the original's */
    if (s->aes.key_set && !s->aes.eng->copy_key(&d->aes.ks, &s->aes.ks)) {
        OPENSSL_cleanse(d, sizeof(*d));
        acc_ctx_free(d);
        return NULL;
    }
    return d;
}

/* ======================== Parameters ======================== */

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

static int set_iv_param(OSSL_PARAM *p, const uint8_t *iv)
{
    return OSSL_PARAM_set_octet_ptr(p, iv, BLK) || OSSL_PARAM_set_octet_string(p, iv, BLK);
}

static int hmac_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    acc_hmac_ctx *h = vctx;
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_BUFSIZE)) != NULL
        && h->mb_max_frag == 0) {
        /* the default aborts the process here: refused, with our own reason */
        acc_raise(ACC_R_INVALID_PARAMETER, "'%s' before the maximum send fragment was set", p->key);
        return 0;
    }
    if (p != NULL && !OSSL_PARAM_set_size_t(p, acc_hmac_mb_bufsize(h)))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE)) != NULL
        && !OSSL_PARAM_set_uint(p, h->mb_interleave))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD_PACKLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, h->mb_packlen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_LEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, h->mb_enc_len))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD)) != NULL
        && !OSSL_PARAM_set_size_t(p, h->aad_pad))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, h->aes.keylen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL && !OSSL_PARAM_set_size_t(p, BLK))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IV)) != NULL && !set_iv_param(p, h->aes.oiv))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_UPDATED_IV)) != NULL && !set_iv_param(p, h->aes.iv))
        goto bad;
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s'", p->key);
    return 0;
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

static const OSSL_PARAM *hmac_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_MAC_KEY, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, NULL, 0),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_SEND_FRAGMENT, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD, NULL, 0),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_ENC_IN, NULL, 0),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS_VERSION, NULL),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

/* get_params: as cipher_aes.c's, but with the AEAD and TLS1 multiblock flags the default reports
 * (libssl keys its record handling on the one and its 4- or 8-record writes on the other). */
static int hmac_get_params(OSSL_PARAM params[], size_t keylen)
{
    OSSL_PARAM *p;

    if (!acc_cipher_get_params(params, ACC_MODE_CBC, keylen, 1))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK)) != NULL && !OSSL_PARAM_set_int(p, 1)) {
        acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s'", p->key);
        return 0;
    }
    return 1;
}

/* ======================== Init ======================== */

static int hmac_init(acc_hmac_ctx *h, const unsigned char *key, size_t keylen, const unsigned char *iv,
                     size_t ivlen, const OSSL_PARAM params[], int enc)
{
    acc_cipher_ctx *c = &h->aes;

    acc_batch_cancel(c);   /* a request still waiting would run with the new key and IV */
    c->enc = enc;
    if (iv != NULL) {
        if (ivlen != BLK) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "iv length %zu, expected 16", ivlen);
            return 0;
        }
        memcpy(c->oiv, iv, BLK);
        memcpy(c->iv, iv, BLK);
        c->iv_set = 1;
    } else if (c->iv_set) {
        memcpy(c->iv, c->oiv, BLK);     /* re-init with the same IV starts the stream again */
    }
    if (key != NULL) {
        if (keylen != c->keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen, c->keylen);
            return 0;
        }
        memcpy(c->rawkey, key, keylen);
        /* As the default's key set-up: the MAC key and any pending AAD go with the old key. */
        h->sha->init(&h->head);
        h->tail = h->head;
        h->md = h->head;
        h->head_len = 0;
        h->payload_len = ACC_HMAC_NO_PAYLOAD;
        h->strip_fixed = h->sha->md_size + BLK;
        h->mb_aad_set = 0;
    }
    /* a new key, or a turn to decryption on a key set up for encryption only */
    if (key != NULL || (c->key_set && !enc && !c->ks.has_dec)) {
        if (c->key_set)
            c->eng->free_key(&c->ks);
        c->key_set = 0;
        if (!c->eng->set_key(&c->ks, c->rawkey, c->keylen, enc)) {
            acc_raise(ACC_R_ENGINE_FAILURE, "%s engine could not set up the key", c->eng->name);
            return 0;
        }
        c->key_set = 1;
    }
    return hmac_set_ctx_params(h, params);
}

static int hmac_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv,
                      size_t ivlen, const OSSL_PARAM params[])
{
    return hmac_init(vctx, key, keylen, iv, ivlen, params, 1);
}

static int hmac_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv,
                      size_t ivlen, const OSSL_PARAM params[])
{
    return hmac_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* ======================== Update and final ======================== */

static int check_call(const acc_hmac_ctx *h, const unsigned char *out, size_t outsize,
                      const unsigned char *in, size_t inl)
{
    if (!h->aes.key_set) {
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
        return 0;
    }
    /* EVP hands a negative int length down as SIZE_MAX - k, with an output size that can wrap
     * past it: no record comes near INT_MAX */
    if (inl > (size_t)INT_MAX) {
        acc_raise(ACC_R_LENGTH_TOO_LARGE, "TLS record of %zu bytes", inl);
        return 0;
    }
    if (outsize < inl) {
        acc_raise(ACC_PROV_R(PROV_R_OUTPUT_BUFFER_TOO_SMALL), "need %zu bytes of output, have %zu", inl, outsize);
        return 0;
    }
    if (inl > 0 && (in == NULL || out == NULL)) {
        acc_raise(ACC_R_NULL_POINTER, "NULL buffer with a length of %zu", inl);
        return 0;
    }
    return 1;
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
    if (!h->aes.key_set) {   /* as the default's stream final */
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
        return 0;
    }
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

#define ACC_HMAC_FUNCTIONS(kbits, sha)                                                         \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##_##sha##_newctx;                              \
    static void *aes##kbits##_##sha##_newctx(void *provctx)                                     \
    {                                                                                           \
        return hmac_newctx(provctx, (kbits) / 8, &acc_hmac_##sha);                                  \
    }                                                                                           \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##_##sha##_get_params;                      \
    static int aes##kbits##_##sha##_get_params(OSSL_PARAM params[])                             \
    {                                                                                           \
        return hmac_get_params(params, (kbits) / 8);                                            \
    }                                                                                           \
    static const OSSL_DISPATCH aes##kbits##cbc_hmac_##sha##_functions[] = {                     \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##_##sha##_newctx },               \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))hmac_freectx },                             \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))hmac_dupctx },                               \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))hmac_einit },                          \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))hmac_dinit },                          \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))hmac_update },                               \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))hmac_final },                                 \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))hmac_oneshot },                              \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##_##sha##_get_params },       \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },       \
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

/* The names as the default provider spells them (it gives them no aliases or OIDs). */
const OSSL_ALGORITHM acc_hmac_cipher_algorithms[] = {
    { "AES-128-CBC-HMAC-SHA1", ACC_PROPS, aes128cbc_hmac_sha1_functions, NULL },
    { "AES-256-CBC-HMAC-SHA1", ACC_PROPS, aes256cbc_hmac_sha1_functions, NULL },
    { "AES-128-CBC-HMAC-SHA256", ACC_PROPS, aes128cbc_hmac_sha256_functions, NULL },
    { "AES-256-CBC-HMAC-SHA256", ACC_PROPS, aes256cbc_hmac_sha256_functions, NULL },
    { NULL, NULL, NULL, NULL }
};
