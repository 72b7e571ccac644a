/* provider/cipher/cipher_gcm_params.c: AES-GCM's context parameters in the default provider's order and
 * with its errors (tag, tag length, IV length, IV, TLS AAD and its padding answer, the TLS fixed
 * IV, the explicit nonce's generation and invocation field), and the TLS 1.2 record: explicit
 * nonce, payload and tag in one buffer (libssl's AES-GCM suites). TLS 1.3 uses the plain calls. */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include "provider/cipher/cipher_gcm.h"
#include "provider/base/compat.h"
#include "provider/route/prov.h"

/* OSSL_CIPHER_PARAM_AEAD_IV_GENERATED, spelt out: headers older than 3.5 lack the name, and what
 * counts is the release that loads accelaes (provider/base/compat.h) */
#define IV_GENERATED "iv-generated"

/* ======================== The TLS IV: fixed part, invocation field ======================== */

/* Encrypting a record: its explicit nonce (the IV's last olen bytes) out, a message opened
 * with the IV, the invocation field moved on for the next record. */
static int getivgen(acc_gcm_ctx *g, unsigned char *out, size_t olen)
{
    if (!g->iv_gen || !g->key_set)
        return 0;
    acc_gcm_open(g);
    if (olen == 0 || olen > g->ivlen)
        olen = g->ivlen;
    memcpy(out, g->iv + g->ivlen - olen, olen);
    acc_aead_ctr64_inc(g->iv + g->ivlen - 8);
    return 1;
}

/* Decrypting a record: its explicit nonce in. Stricter than the default: a nonce longer than
 * the IV is refused, where the default writes before its IV buffer. */
static int setivinv(acc_gcm_ctx *g, const unsigned char *in, size_t inl)
{
    if (!g->iv_gen || !g->key_set || g->base.enc || inl > g->ivlen)
        return 0;
    memcpy(g->iv + g->ivlen - inl, in, inl);
    acc_gcm_open(g);
    return 1;
}

/* The fixed part (at least 4 bytes, leaving at least 8 for the invocation field); an encrypting
 * context draws the rest at random. len (size_t)-1 restores a whole IV. Stricter than the
 * default: a fixed part longer than the IV, or a whole IV under 8 bytes, is refused (the
 * default's unsigned arithmetic lets both through, to write or count outside the IV). */
static int tls_iv_set_fixed(acc_gcm_ctx *g, const unsigned char *iv, size_t len)
{
    if (len == (size_t)-1) {
        if (g->ivlen < ACC_GCM_TLS_EXPLICIT)
            return 0;
        memcpy(g->iv, iv, g->ivlen);
    } else {
        if (len < ACC_GCM_TLS_FIXED || len > g->ivlen || g->ivlen - len < ACC_GCM_TLS_EXPLICIT)
            return 0;
        memcpy(g->iv, iv, len);
        if (g->base.enc && RAND_bytes_ex(g->base.prov->libctx, g->iv + len, g->ivlen - len, 0) <= 0)
            return 0;
    }
    g->iv_gen = 1;
    g->iv_state = ACC_AEAD_IV_BUFFERED;
    return 1;
}

int acc_gcm_tls_cipher(acc_gcm_ctx *g, unsigned char *out, size_t *padlen, const unsigned char *in, size_t len)
{
    const size_t arg = ACC_GCM_TLS_EXPLICIT;
    size_t plen = 0;
    int rv = 0;

    /* in place, and room for the explicit nonce and the tag */
    if (!g->key_set || out != in || len < arg + ACC_GCM_TAG_LEN)
        goto err;
    /* one party fails after 2^64 - 1 records under one key (SP 800-38D), as the default */
    if (g->base.enc && ++g->tls_enc_records == 0) {
        acc_raise(ACC_PROV_R(PROV_R_TOO_MANY_RECORDS), "2^64 TLS records under one key");
        goto err;
    }
    if (!(g->base.enc ? getivgen(g, out, arg) : setivinv(g, out, arg)))
        goto err;
    in += arg;
    out += arg;
    len -= arg + ACC_GCM_TAG_LEN;
    if (!acc_gcm_oneshot(g, g->buf, g->tls_aad_len, in, out, len, g->base.enc ? out + len : (uint8_t *)in + len)) {
        if (!g->base.enc)
            OPENSSL_cleanse(out, len);
        goto err;
    }
    plen = g->base.enc ? len + arg + ACC_GCM_TAG_LEN : len;
    rv = 1;
err:
    g->iv_state = ACC_AEAD_IV_FINISHED;
    g->tls_aad_len = ACC_GCM_UNSET;
    *padlen = plen;
    return rv;
}

/* ======================== get_ctx_params ======================== */

#define failed_to_set acc_aead_failed_to_set
#define failed_to_get acc_aead_failed_to_get

/* IV and UPDATED_IV are the same bytes for GCM (the default answers both with its IV buffer). */
static int get_iv(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    /* no error raised, as the default; 4.0's makes an encryption's random IV here (compat.h) */
    if (g->iv_state == ACC_AEAD_IV_UNSET
        && (!acc_compat()->gcm_get_iv_generates || g->tls_aad_len != ACC_GCM_UNSET || !g->base.enc
            || !acc_gcm_iv_generate(g)))
        return 0;
    return acc_aead_get_iv(p, g->iv, g->ivlen, g->ivlen);
}

static int get_tag(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    size_t sz = p->data_size;

    if (sz == 0 || sz > ACC_GCM_TAG_LEN || !g->base.enc || g->taglen == ACC_GCM_UNSET) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_TAG), "the tag is there after an encryption's final, 1..16 bytes");
        return 0;
    }
    if (!OSSL_PARAM_set_octet_string(p, g->buf, sz))
        return failed_to_set(p);
    return 1;
}

static int get_ivlen(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    return acc_aead_get_size(p, g->ivlen);
}

static int get_keylen(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    return acc_aead_get_size(p, g->base.keylen);
}

static int get_taglen(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    return acc_aead_get_size(p, g->taglen != ACC_GCM_UNSET ? g->taglen : ACC_GCM_TAG_LEN);
}

static int get_aad_pad(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    return acc_aead_get_size(p, g->tls_aad_pad_sz);
}

static int get_ivgen(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    /* no error raised, as the default */
    return p->data != NULL && p->data_type == OSSL_PARAM_OCTET_STRING && getivgen(g, p->data, p->data_size);
}

/* 3.5's "iv-generated" (provider/base/compat.h): no PROV error either, only libcrypto's where the
 * parameter's type does not fit; before 3.5 the name is not known, and ignored. */
static int get_iv_generated(acc_gcm_ctx *g, OSSL_PARAM *p)
{
    return !acc_compat()->gcm_iv_generated || OSSL_PARAM_set_uint(p, (unsigned int)g->iv_gen_rand);
}

/* In the default's order, so that a call with several bad parameters fails on the same one. */
static const struct {
    const char *key;
    int (*get)(acc_gcm_ctx *g, OSSL_PARAM *p);
} gets[] = {
    { OSSL_CIPHER_PARAM_IVLEN, get_ivlen },
    { OSSL_CIPHER_PARAM_KEYLEN, get_keylen },
    { OSSL_CIPHER_PARAM_AEAD_TAGLEN, get_taglen },
    { OSSL_CIPHER_PARAM_IV, get_iv },
    { OSSL_CIPHER_PARAM_UPDATED_IV, get_iv },
    { OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, get_aad_pad },
    { OSSL_CIPHER_PARAM_AEAD_TAG, get_tag },
    { OSSL_CIPHER_PARAM_AEAD_TLS1_GET_IV_GEN, get_ivgen },
    { IV_GENERATED, get_iv_generated },
};

#define NGETS (sizeof(gets) / sizeof(gets[0]))

/* The entry of a parameter's name, NGETS for none: the first two bytes sift before strcmp. */
static size_t get_find(const char *key)
{
    for (size_t i = 0; i < NGETS; i++)
        if (key[0] == gets[i].key[0] && key[1] == gets[i].key[1] && strcmp(key, gets[i].key) == 0)
            return i;
    return NGETS;
}

int acc_gcm_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    acc_gcm_ctx *g = vctx;
    OSSL_PARAM *p;
    size_t i;

    if (params == NULL)
        return 1;
    /* One parameter, as each EVP ctrl asks (the tag, once per record): straight to its entry, where
     * eight OSSL_PARAM_locate scans cost more than a 16-byte record's AES and GHASH. The order
     * matters only between several. */
    if (params[0].key != NULL && params[1].key == NULL) {
        if (strcmp(params[0].key, OSSL_CIPHER_PARAM_AEAD_TAG) == 0)  /* the common one, compared inline */
            return get_tag(g, params);
        if (g->pipe != NULL && strcmp(params[0].key, OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG) == 0)
            return acc_gcm_pipe_get_tag(g, params);
        return (i = get_find(params[0].key)) == NGETS || gets[i].get(g, params);
    }
    if (!acc_compat_unrepeated(params, acc_gcm_gettable_ctx_params(vctx, NULL), ACC_DECODER_COMMON))
        return 0;
    /* only after a pipeline init: elsewhere an unknown name, passed over as by the default */
    if (g->pipe != NULL && (p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG)) != NULL
        && !acc_gcm_pipe_get_tag(g, p))
        return 0;
    if (acc_compat()->gcm_get_walks_request) {   /* 3.5: in the request's order, every occurrence */
        for (p = params; p->key != NULL; p++)
            if ((i = get_find(p->key)) != NGETS && !gets[i].get(g, p))
                return 0;
        return 1;
    }
    for (i = 0; i < NGETS; i++)
        if ((p = OSSL_PARAM_locate(params, gets[i].key)) != NULL && !gets[i].get(g, p))
            return 0;
    return 1;
}

/* ======================== set_ctx_params ======================== */

static const acc_aead_tag_rules gcm_tag = {
    .aead = "GCM", .min = 1, .max = ACC_GCM_TAG_LEN, .copy_first = 1,
    .bad_len = ACC_PROV_R(PROV_R_INVALID_TAG), .on_enc = ACC_PROV_R(PROV_R_INVALID_TAG),
};

static int set_tag(acc_gcm_ctx *g, const OSSL_PARAM *p)
{
    return acc_aead_set_tag(p, &gcm_tag, g->base.enc, g->buf, &g->taglen, NULL);
}

static int set_ivlen(acc_gcm_ctx *g, const OSSL_PARAM *p)
{
    return acc_aead_set_ivlen(p, "GCM", 1, ACC_GCM_IV_MAX, &g->ivlen, &g->iv_state);
}

/* GCM's bad TLS AAD is INVALID_AAD (CCM's INVALID_DATA); the tag is always 16 bytes */
static int set_tls_aad(acc_gcm_ctx *g, const OSSL_PARAM *p)
{
    return acc_aead_set_tls_aad(p, g->buf, g->base.enc, ACC_GCM_TAG_LEN, ACC_PROV_R(PROV_R_INVALID_AAD),
                                &g->tls_aad_len, &g->tls_aad_pad_sz);
}

static int set_iv_fixed(acc_gcm_ctx *g, const OSSL_PARAM *p)
{
    if (p->data_type != OSSL_PARAM_OCTET_STRING || !tls_iv_set_fixed(g, p->data, p->data_size))
        return failed_to_get(p);
    return 1;
}

static int set_iv_inv(acc_gcm_ctx *g, const OSSL_PARAM *p)
{
    /* no error raised, as the default */
    return p->data != NULL && p->data_type == OSSL_PARAM_OCTET_STRING && setivinv(g, p->data, p->data_size);
}

/* In the default's order, as gets[]. */
static const struct {
    const char *key;
    int (*set)(acc_gcm_ctx *g, const OSSL_PARAM *p);
} sets[] = {
    { OSSL_CIPHER_PARAM_AEAD_TAG, set_tag },
    { OSSL_CIPHER_PARAM_AEAD_IVLEN, set_ivlen },
    { OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, set_tls_aad },
    { OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, set_iv_fixed },
    { OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV, set_iv_inv },
};

#define NSETS (sizeof(sets) / sizeof(sets[0]))

int acc_gcm_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    acc_gcm_ctx *g = vctx;
    const OSSL_PARAM *p;
    size_t i;

    if (params == NULL)
        return 1;
    /* One parameter (a decryption's tag, once per record): straight to its entry, as get */
    if (params[0].key != NULL && params[1].key == NULL) {
        if (strcmp(params[0].key, OSSL_CIPHER_PARAM_AEAD_TAG) == 0)
            return set_tag(g, params);
        for (i = 0; i < NSETS; i++)
            if (params[0].key[0] == sets[i].key[0] && strcmp(params[0].key, sets[i].key) == 0)
                return sets[i].set(g, params);
        if (g->pipe != NULL && strcmp(params[0].key, OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG) == 0)
            return acc_gcm_pipe_set_tag(g, params);
        return 1;
    }
    if (!acc_compat_unrepeated(params, acc_gcm_settable_ctx_params(vctx, NULL), ACC_DECODER_COMMON))
        return 0;
    if (g->pipe != NULL && (p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_PIPELINE_AEAD_TAG)) != NULL
        && !acc_gcm_pipe_set_tag(g, p))
        return 0;
    for (i = 0; i < NSETS; i++)
        if ((p = OSSL_PARAM_locate_const(params, sets[i].key)) != NULL && !sets[i].set(g, p))
            return 0;
    return 1;
}

/* ======================== Tables (the default's AEAD tables) ======================== */

#define GCM_GETTABLE                                                                                     \
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL), OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL), \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TAGLEN, NULL),                                          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, NULL, 0),                                          \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, NULL, 0),                                  \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, NULL, 0),                                    \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, NULL),                                    \
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_GET_IV_GEN, NULL, 0)

/* The running release's table (provider/base/compat.h): 3.5 adds "iv-generated" at the end. */
const OSSL_PARAM *acc_gcm_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known_3_0[] = { GCM_GETTABLE, OSSL_PARAM_END };
    static const OSSL_PARAM known_3_5[] = { GCM_GETTABLE, OSSL_PARAM_uint(IV_GENERATED, NULL), OSSL_PARAM_END };

    (void)vctx;
    (void)provctx;
    return acc_compat()->gcm_iv_generated ? known_3_5 : known_3_0;
}

const OSSL_PARAM *acc_gcm_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV, NULL, 0),
        OSSL_PARAM_END
    };
    (void)vctx;
    (void)provctx;
    return known;
}
