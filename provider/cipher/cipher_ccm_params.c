/* provider/cipher/cipher_ccm_params.c: AES-CCM's context parameters, as the running release's default
 * provider has them (order, errors, lists), for provider/cipher/cipher_ccm.c. */
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/cipher/aead.h"
#include "provider/cipher/cipher_ccm.h"
#include "provider/base/compat.h"
#include "provider/route/prov.h"

/* ======================== Parameters ======================== */

static const acc_aead_tag_rules ccm_tag = {
    .aead = "CCM", .min = 4, .max = 16, .even = 1, .len_only = 1,
    .bad_len = ACC_PROV_R(PROV_R_INVALID_TAG_LENGTH), .on_enc = ACC_PROV_R(PROV_R_TAG_NOT_NEEDED),
};

static int set_tag(acc_ccm_ctx *c, const OSSL_PARAM *p)
{
    return acc_aead_set_tag(p, &ccm_tag, c->base.enc, c->buf, &c->m, &c->tag_set);
}

/* The nonce of 15 - L bytes: L from 2 to 8 */
static int set_ivlen(acc_ccm_ctx *c, const OSSL_PARAM *p)
{
    size_t ivlen = ivlen_of(c);

    if (!acc_aead_set_ivlen(p, "CCM", 7, 13, &ivlen, &c->iv_state))
        return 0;
    c->l = 15 - ivlen;
    return 1;
}

/* CCM's bad TLS AAD is INVALID_DATA (GCM's INVALID_AAD); the tag is the context's M bytes */
static int set_tls_aad(acc_ccm_ctx *c, const OSSL_PARAM *p)
{
    return acc_aead_set_tls_aad(p, c->buf, c->base.enc, c->m, ACC_PROV_R(PROV_R_INVALID_DATA), &c->tls_aad_len,
                                &c->tls_aad_pad_sz);
}

static int set_iv_fixed(acc_ccm_ctx *c, const OSSL_PARAM *p)
{
    if (p->data_type != OSSL_PARAM_OCTET_STRING)
        return acc_aead_failed_to_get(p);
    if (p->data_size != ACC_AEAD_TLS_FIXED) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "CCM's fixed TLS IV is 4 bytes, not %zu", p->data_size);
        return 0;
    }
    memcpy(c->iv, p->data, ACC_AEAD_TLS_FIXED);
    return 1;
}

static const char *const set_keys[] = { OSSL_CIPHER_PARAM_AEAD_TAG, OSSL_CIPHER_PARAM_AEAD_IVLEN,
                                        OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED,
                                        NULL };
static int (*const set_fns[])(acc_ccm_ctx *, const OSSL_PARAM *) = { set_tag, set_ivlen, set_tls_aad,
                                                                      set_iv_fixed };

int acc_ccm_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;

    if (params == NULL)
        return 1;
    if (!acc_compat_unrepeated_keys(params, set_keys, ACC_DECODER_COMMON))
        return 0;
    for (size_t i = 0; set_keys[i] != NULL; i++)
        if ((p = acc_aead_param_find(params, set_keys[i])) != NULL && !set_fns[i](vctx, p))
            return 0;
    return 1;
}

/* IV and UPDATED_IV: the nonce buffer, as many bytes as asked, up to what the running default gives
 * (compat.c's ccm_iv_room: its nonce buffer, on 3.0 with the next buffer after it). */
static int get_iv(acc_ccm_ctx *c, OSSL_PARAM *p)
{
    uint8_t both[32];
    size_t n, room;
    int ok;

    room = (size_t)acc_compat()->ccm_iv_room[strcmp(p->key, OSSL_CIPHER_PARAM_IV) != 0];
    n = p->data_size < room ? p->data_size : room;
    if (n <= 16 || p->data_type == OSSL_PARAM_OCTET_PTR)   /* a pointer: iv and buf are one struct's */
        return acc_aead_get_iv(p, c->iv, ivlen_of(c), n);
    memcpy(both, c->iv, 16);
    memcpy(both + 16, c->buf, 16);
    ok = acc_aead_get_iv(p, both, ivlen_of(c), n);
    OPENSSL_cleanse(both, sizeof(both));
    return ok;
}

/* The tag once, after an encryption's data; the message then ends (no tag to get again). */
static int get_tag(acc_ccm_ctx *c, OSSL_PARAM *p)
{
    if (!c->base.enc || !c->tag_set) {
        acc_raise(ACC_PROV_R(PROV_R_TAG_NOT_SET), "the tag is there after an encryption's data");
        return 0;
    }
    if (p->data_type != OSSL_PARAM_OCTET_STRING)
        return acc_aead_failed_to_set(p);
    if (p->data == NULL || !c->ceng->tag(&c->st, p->data, p->data_size))
        return 0;   /* not the message's M bytes: no error, as the default's */
    c->tag_set = c->len_set = 0;
    c->iv_state = ACC_AEAD_IV_FINISHED;
    return 1;
}

static const char *const get_keys[] = { OSSL_CIPHER_PARAM_IVLEN, OSSL_CIPHER_PARAM_AEAD_TAGLEN,
                                        OSSL_CIPHER_PARAM_IV, OSSL_CIPHER_PARAM_UPDATED_IV,
                                        OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD,
                                        OSSL_CIPHER_PARAM_AEAD_TAG, NULL };

static int get_one(acc_ccm_ctx *c, size_t i, OSSL_PARAM *p)
{
    switch (i) {
    case 0:
        return acc_aead_get_size(p, ivlen_of(c));
    case 1:
        return acc_aead_get_size(p, c->m);
    case 2:
    case 3:
        return get_iv(c, p);
    case 4:
        return acc_aead_get_size(p, c->base.keylen);
    case 5:
        return acc_aead_get_size(p, c->tls_aad_pad_sz);
    default:
        return get_tag(c, p);
    }
}

int acc_ccm_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    OSSL_PARAM *p;

    if (params == NULL)
        return 1;
    if (!acc_compat_unrepeated_keys(params, get_keys, ACC_DECODER_COMMON))
        return 0;
    for (size_t i = 0; get_keys[i] != NULL; i++)
        if ((p = (OSSL_PARAM *)acc_aead_param_find(params, get_keys[i])) != NULL && !get_one(vctx, i, p))
            return 0;
    return 1;
}

#define AEAD_GETTABLE                                                                                    \
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL), OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL), \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TAGLEN, NULL),                                          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, NULL, 0),                                          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, NULL, 0),                                  \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, NULL, 0),                                    \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, NULL)

/* Up to 3.5 the default's common AEAD lists (with the IV-generation parameters CCM ignores);
 * 3.6 CCM's own. */
const OSSL_PARAM *acc_ccm_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM common[] = {
        AEAD_GETTABLE, OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_GET_IV_GEN, NULL, 0), OSSL_PARAM_END
    };
    static const OSSL_PARAM common_3_5[] = {
        AEAD_GETTABLE, OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_GET_IV_GEN, NULL, 0),
        OSSL_PARAM_uint("iv-generated", NULL), OSSL_PARAM_END
    };
    static const OSSL_PARAM own[] = { AEAD_GETTABLE, OSSL_PARAM_END };

    (void)vctx;
    (void)provctx;
    /* 3.5's common list ends with GCM's "iv-generated" (provider/base/compat.h), which CCM lists, not answers */
    return own_lists() ? own : acc_compat()->gcm_iv_generated ? common_3_5 : common;
}

const OSSL_PARAM *acc_ccm_settable_ctx_params(void *vctx, void *provctx)
{
#define AEAD_SETTABLE                                                                                           \
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, NULL), OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, NULL, 0), \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, NULL, 0),                                          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, NULL, 0)
    static const OSSL_PARAM common[] = {
        AEAD_SETTABLE, OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV, NULL, 0), OSSL_PARAM_END
    };
    static const OSSL_PARAM own[] = { AEAD_SETTABLE, OSSL_PARAM_END };

    (void)vctx;
    (void)provctx;
    return own_lists() ? own : common;
}
