/* provider/cipher/cipher_xts.c: AES-128-XTS and AES-256-XTS as OpenSSL 3.0's default provider has them:
 * a 32- or 64-byte key (data key, then tweak key), the IV is the tweak, one update is one whole
 * data unit of 16 bytes up to 2^20 blocks (a partial last block steals ciphertext). The core
 * (cipher_core.c) makes, copies and frees the context; init and the data calls are here; the
 * engine's xts function runs the unit. */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/base/compat.h"
#include "provider/cipher/algs.h"
#include "provider/cipher/cipher_block.h"
#include "provider/base/names.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "provider/route/xts_split.h"
#include "provider/route/skey.h"
#include "scheduler/sched.h"

/* The default's limit per data unit (IEEE 1619-2018, SP 800-38E), measured on 3.0.19: 2^20
 * blocks pass, one block more is refused with PROV_R_XTS_DATA_UNIT_IS_TOO_LARGE. */
#define XTS_MAX_BLOCKS ((size_t)1 << 20)

typedef struct acc_xts_ctx {
    acc_cipher_ctx base; /* first; base.ks is the data key's schedule */
    acc_aes_key ks2;     /* the tweak key's (encryption) schedule */
    uint8_t key[64];     /* the whole key, to make a schedule for the other direction */
    int key_dec;         /* base.ks was made for decryption */
    int ks2_dec;         /* ks2 has its decryption schedule too (the split's tweaks need it) */
} acc_xts_ctx;

/* ======================== Life cycle hooks ======================== */

static int xts_on_dup(acc_cipher_ctx *dst, const acc_cipher_ctx *src)
{
    acc_xts_ctx *d = (acc_xts_ctx *)dst;
    const acc_xts_ctx *s = (const acc_xts_ctx *)src;

    return !src->key_set || src->eng->copy_key(&d->ks2, &s->ks2);
}

static void xts_on_free(acc_cipher_ctx *c)
{
    if (c->key_set)
        c->eng->free_key(&((acc_xts_ctx *)c)->ks2);
}

/* ======================== Parameters ======================== */

static const OSSL_PARAM *xts_settable_ctx_params(void *vctx, void *provctx);

/* The key length cannot change: another value is refused with no error, as by the default. A
 * repeated parameter is refused from 4.0 (3.6's XTS set is written by hand: compat.h). */
static int xts_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    acc_cipher_ctx *c = vctx;
    const OSSL_PARAM *p;
    size_t keylen;

    if (!acc_compat_unrepeated(params, xts_settable_ctx_params(vctx, NULL), ACC_DECODER_XTS_SET))
        return 0;
    if (params == NULL || (p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_KEYLEN)) == NULL)
        return 1;
    if (!OSSL_PARAM_get_size_t(p, &keylen)) {
        acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "parameter '%s' is not a size_t", p->key);
        return 0;
    }
    return keylen == c->keylen;
}

static const OSSL_PARAM *xts_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL), OSSL_PARAM_END };
    (void)vctx;
    (void)provctx;
    return known;
}

/* ======================== Init ======================== */

/* Both halves' schedules, the data key's in direction dec. */
static int xts_schedule(acc_xts_ctx *x, int dec)
{
    acc_cipher_ctx *c = &x->base;
    size_t half = c->keylen / 2;

    if (c->key_set) {
        c->eng->free_key(&c->ks);
        c->eng->free_key(&x->ks2);
    }
    c->key_set = 0;
    x->ks2_dec = 0;
    if (!c->eng->set_key(&c->ks, x->key, half, !dec))
        goto fail;
    if (!c->eng->set_key(&x->ks2, x->key + half, half, 1)) {
        c->eng->free_key(&c->ks);
        goto fail;
    }
    x->key_dec = dec;
    c->key_set = 1;
    return 1;
fail:
    acc_raise(ACC_R_ENGINE_FAILURE, "%s engine could not set up the XTS key", c->eng->name);
    return 0;
}

/* As the default: the IV, then the key with the duplicate-key check (encryption only in 3.0's
 * default provider, whose decryption takes equal halves), then the parameters. A direction change
 * without a key keeps the schedule of the key's direction, as the default's AES-NI code does. */
static int xts_init(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                    const OSSL_PARAM params[], int enc)
{
    acc_xts_ctx *x = vctx;
    acc_cipher_ctx *c = &x->base;

    c->enc = enc;
    if (iv != NULL && !acc_cipher_take_iv(c, iv, ivlen))
        return 0;
    if (key != NULL) {
        if (keylen != c->keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen, c->keylen);
            return 0;
        }
        if (enc && CRYPTO_memcmp(key, key + keylen / 2, keylen / 2) == 0) {
            acc_raise(ACC_PROV_R(PROV_R_XTS_DUPLICATED_KEYS), "the data and tweak keys are equal");
            return 0;
        }
        memcpy(x->key, key, keylen);
        if (!xts_schedule(x, !enc))
            return 0;
    }
    return xts_set_ctx_params(c, params);
}

static int xts_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return xts_init(vctx, key, keylen, iv, ivlen, params, 1);
}

static int xts_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return xts_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* Opaque keys (3.5+): this cipher keeps its own key state, so it takes the key's bytes as its
 * raw-key init does (as 3.5's default, which has no skey init here, takes them through EVP). */
static int xts_skey_einit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(xts_einit, vctx, skey, iv, ivlen, params);
}

static int xts_skey_dinit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(xts_dinit, vctx, skey, iv, ivlen, params);
}

/* ======================== Data ======================== */

/* One unit or split piece on the engine (acc_xts_unit_fn); pool threads only read the context. */
static int xts_piece(void *arg, const uint8_t iv[16], const uint8_t *in, uint8_t *out, size_t len)
{
    acc_xts_ctx *x = arg;
    acc_cipher_ctx *c = &x->base;

    return c->eng->xts(&c->ks, &x->ks2, iv, in, out, len, x->key_dec);
}

/* A large unit as ranges on the backends that take XTS ranges (policy.c's acc_policy_ranges: the
 * pool), else whole on the engine; the ranges' tweaks need ks2's decryption schedule, made at the
 * first such unit. */
static int xts_run(acc_xts_ctx *x, const uint8_t *in, uint8_t *out, size_t len)
{
    acc_cipher_ctx *c = &x->base;
    size_t half = c->keylen / 2;

    /* the policy's threshold read first: a short unit does not pay for the call */
    if (len >= c->prov->policy.ranges_from[ACC_RANGES_XTS]) {
        int r;

        if (!x->ks2_dec) {
            c->eng->free_key(&x->ks2);
            if (!c->eng->set_key(&x->ks2, x->key + half, half, 0)) {
                c->key_set = 0; /* no tweak key left: the context needs a new init */
                c->eng->free_key(&c->ks);
                return 0;
            }
            x->ks2_dec = 1;
        }
        if ((r = acc_xts_split(&c->prov->policy, c->eng, &x->ks2, c->iv, in, out, len, xts_piece, x)) >= 0)
            return r;
    }
    if (!xts_piece(x, c->iv, in, out, len))
        return 0;
    acc_cipher_count(c, len, 1); /* the split counts its own */
    return 1;
}

/* EVP_Cipher: one data unit. Failing, as the default, with no error of its own, except the unit
 * that is too large and an engine failure. */
static int xts_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in, size_t inl)
{
    acc_xts_ctx *x = vctx;
    acc_cipher_ctx *c = &x->base;

    (void)outsize;
    if (!c->key_set || !c->iv_set || out == NULL || in == NULL || inl < ACC_AES_BLOCK)
        return 0;
    if (inl > XTS_MAX_BLOCKS * ACC_AES_BLOCK) {
        acc_raise(ACC_PROV_R(PROV_R_XTS_DATA_UNIT_IS_TOO_LARGE), "%zu bytes: a data unit is at most 2^20 blocks", inl);
        return 0;
    }
    if (!xts_run(x, in, out, inl))
        return acc_engine_fail(c, inl);
    *outl = inl;
    return 1;
}

static int xts_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in, size_t inl)
{
    acc_xts_ctx *x = vctx;
    acc_cipher_ctx *c = &x->base;

    /* The common unit, straight to the engine: a short unit is bound by the latency of the tweak
     * encryption and the data rounds, and fewer instructions per call let the next call's tweak
     * start while this call's rounds still run (openssl speed re-encrypts one buffer in place). */
    if ((c->key_set & c->iv_set) && inl >= ACC_AES_BLOCK && inl < c->prov->policy.ranges_from[ACC_RANGES_XTS] && outsize >= inl
        && in != NULL && out != NULL && inl <= XTS_MAX_BLOCKS * ACC_AES_BLOCK) {
        if (!c->eng->xts(&c->ks, &x->ks2, c->iv, in, out, inl, x->key_dec)) {
            acc_engine_fail(c, inl);
            goto failed;
        }
        acc_cipher_count(c, inl, 1);
        *outl = inl;
        return 1;
    }
    if (outsize < inl) {
        acc_raise(ACC_PROV_R(PROV_R_OUTPUT_BUFFER_TOO_SMALL), "need %zu bytes of output, have %zu", inl, outsize);
        return 0;
    }
    if (!xts_cipher(vctx, out, outl, outsize, in, inl)) {
    failed:
        acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED),
                  "an XTS update is one data unit of 16 bytes or more, with a key and an IV set");
        return 0;
    }
    return 1;
}

/* Every unit was finished by its update; the default checks nothing here, not even the key. */
static int xts_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    (void)vctx;
    (void)out;
    (void)outsize;
    *outl = 0;
    return 1;
}

/* ======================== Dispatch tables ======================== */

#define ACC_XTS_FUNCTIONS(kbits)                                                                  \
    static const acc_cipher_kind aes##kbits##xts_kind = { .mode = ACC_MODE_XTS,                   \
                                                          .keylen = 2 * (kbits) / 8,              \
                                                          .ctx_size = sizeof(acc_xts_ctx),        \
                                                          .custom_iv = 1,                         \
                                                          .dup_raises = 1,                        \
                                                          .on_dup = xts_on_dup,                   \
                                                          .on_free = xts_on_free,                 \
                                                          .set_ctx_params = xts_set_ctx_params }; \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##xts_newctx;                                     \
    static void *aes##kbits##xts_newctx(void *provctx)                                            \
    {                                                                                             \
        return acc_cipher_newctx(provctx, &aes##kbits##xts_kind);                                 \
    }                                                                                             \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##xts_get_params;                             \
    static int aes##kbits##xts_get_params(OSSL_PARAM params[])                                    \
    {                                                                                             \
        return acc_cipher_get_params(params, &aes##kbits##xts_kind);                              \
    }                                                                                             \
    const OSSL_DISPATCH acc_aes##kbits##xts_functions[] = {                                       \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##xts_newctx },                      \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))xts_einit },                             \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))xts_dinit },                             \
        { OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT, (void (*)(void))xts_skey_einit },                   \
        { OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT, (void (*)(void))xts_skey_dinit },                   \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))xts_update },                                  \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))xts_final },                                    \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))xts_cipher },                                  \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))acc_cipher_freectx },                         \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))acc_cipher_dupctx },                           \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##xts_get_params },              \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },         \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))acc_block_get_ctx_params },            \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))acc_block_gettable_ctx_params },  \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))xts_set_ctx_params },                  \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))xts_settable_ctx_params },        \
        { 0, NULL }                                                                               \
    }

ACC_XTS_FUNCTIONS(256);
ACC_XTS_FUNCTIONS(128);
