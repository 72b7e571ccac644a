/* provider/cipher/cipher_core.c: the cipher core every AES cipher here shares (plain and stitched, and
 * the modes to come): the context's life (new, dup, free), init (IV, key, schedule, direction),
 * the checks of a data call, and the parameters whose meaning is the same for every cipher.
 * A cipher's own behaviour comes in through its acc_cipher_kind (provider/route/cipher_ctx.h). */
#include <limits.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/route/batch.h"
#include "provider/base/compat.h"
#include "provider/route/cipher_ctx.h"
#include "provider/base/ctx_alloc.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "provider/route/skey.h"
#include "scheduler/sched.h"

/* ======================== Context life cycle ======================== */

/* Lets go of the key: the own schedule cleansed, or the shared one's reference dropped. */
static void drop_key(acc_cipher_ctx *c)
{
    if (c->skey != NULL)
        acc_skey_release(c->skey);
    else if (c->key_set)
        c->eng->free_key(&c->ks);
    c->skey = NULL;
    c->key_set = 0;
}

void *acc_cipher_newctx(void *provctx, const acc_cipher_kind *kind)
{
    acc_prov_ctx *prov = provctx;
    acc_cipher_ctx *c = NULL;

    /* Failing, no error: the default provider raises none here, and EVP raises its
     * initialization error. */
    if ((c = acc_ctx_alloc(kind->ctx_size)) == NULL)
        return NULL;
    memset(c, 0, kind->ctx_size);
    c->kind = kind;
    c->prov = prov;
    c->eng = prov->eng;
    c->mode = kind->mode;
    c->keylen = kind->keylen;
    c->op = acc_op_of(kind->mode, 1);
    c->pad = 1;
    if (kind->on_new != NULL)
        kind->on_new(c);
    return c;
}

void acc_cipher_publish(acc_cipher_ctx *c)
{
    if (c->acct_bytes > 0 || c->acct_reqs > 0)
        acc_sched_count(ACC_PATH_INLINE, c->acct_bytes, c->acct_reqs);
    c->acct_bytes = c->acct_reqs = 0;
}

void acc_cipher_freectx(void *vctx)
{
    acc_cipher_ctx *c = vctx;

    if (c == NULL)
        return;
    acc_batch_cancel(c);
    acc_cipher_publish(c);
    /* first: a cipher's own key state goes by key_set (XTS's tweak key), which drop_key clears */
    if (c->kind->on_free != NULL)
        c->kind->on_free(c);
    drop_key(c);
    OPENSSL_cleanse(c, c->kind->ctx_size);
    acc_ctx_free(c);
}

void *acc_cipher_dupctx(void *vctx)
{
    acc_cipher_ctx *s = vctx, *d = NULL;
    const acc_cipher_kind *kind = s->kind;

    if ((d = acc_ctx_alloc(kind->ctx_size)) == NULL)
        goto fail;
    memcpy(d, s, kind->ctx_size);
    d->acct_bytes = d->acct_reqs = 0;   /* the original publishes what it did */
    d->batch_q = NULL;                  /* a waiting request stays the original's */
    if (s->skey != NULL ? !acc_skey_ref(s->skey) : s->key_set && !s->eng->copy_key(&d->ks, &s->ks)) {
        OPENSSL_cleanse(d, kind->ctx_size);
        acc_ctx_free(d);
        goto fail;
    }
    if (kind->on_dup != NULL && !kind->on_dup(d, s)) {
        drop_key(d);
        OPENSSL_cleanse(d, kind->ctx_size);
        acc_ctx_free(d);
        goto fail;
    }
    return d;
fail:
    /* The default's plain AES raises a malloc error here; its stitched ciphers (OPENSSL_memdup)
     * raise none, and EVP_CIPHER_CTX_copy raises its not-able-to-copy error. */
    if (kind->dup_raises)
        acc_raise(ACC_PROV_R(ERR_R_MALLOC_FAILURE), "copying a cipher context");
    return NULL;
}

/* ======================== Init ======================== */

int acc_cipher_take_iv(acc_cipher_ctx *c, const unsigned char *iv, size_t ivlen)
{
    if (ivlen != ACC_AES_BLOCK) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "iv length %zu, expected 16", ivlen);
        return 0;
    }
    memcpy(c->oiv, iv, ACC_AES_BLOCK);
    memcpy(c->iv, iv, ACC_AES_BLOCK);
    c->iv_set = 1;
    return 1;
}

static int set_iv(acc_cipher_ctx *c, const unsigned char *iv, size_t ivlen)
{
    if (iv != NULL && c->mode != ACC_MODE_ECB) {
        if (!acc_cipher_take_iv(c, iv, ivlen))
            return 0;
    } else if (iv == NULL && c->iv_set && c->mode == ACC_MODE_CBC) {
        /* re-init with the same key and IV starts the stream again */
        memcpy(c->iv, c->oiv, ACC_AES_BLOCK);
    }
    return 1;
}

/* A new key, or a direction change on the same key that needs the decryption schedule. */
static int set_key(acc_cipher_ctx *c, const unsigned char *key, size_t keylen)
{
    int need_dec = acc_op_needs_dec(c->op);

    if (key != NULL) {
        if (keylen != c->keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen, c->keylen);
            return 0;
        }
        memcpy(c->rawkey, key, keylen);
        if (c->kind->on_key != NULL)
            c->kind->on_key(c);
    }
    if (key != NULL || (c->key_set && need_dec && !acc_cipher_key(c)->has_dec)) {
        drop_key(c);
        if (!c->eng->set_key(&c->ks, c->rawkey, c->keylen, !need_dec)) {
            acc_raise(ACC_R_ENGINE_FAILURE, "%s engine could not set up the key", c->eng->name);
            return 0;
        }
        c->key_set = 1;
    }
    return 1;
}

/* An opaque key: its schedule (both directions) shared, no expansion here. The length is checked
 * as a raw key's would be (3.5's default hands the key's bytes to its raw-key init). */
static int share_key(acc_cipher_ctx *c, acc_skey *k)
{
    if (k->keylen != c->keylen) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", k->keylen, c->keylen);
        return 0;
    }
    if (k->eng != c->eng)   /* not this load's engine (never from EVP): a schedule of its own */
        return set_key(c, k->raw, k->keylen);
    memcpy(c->rawkey, k->raw, k->keylen);
    if (c->kind->on_key != NULL)
        c->kind->on_key(c);
    drop_key(c);
    if (!acc_skey_ref(k)) {
        acc_raise(ACC_R_ENGINE_FAILURE, "cannot take a reference to the opaque key");
        return 0;
    }
    c->skey = k;   /* a copy of the context (dupctx) shares it too */
    c->key_set = 1;
    return 1;
}

static int cipher_init(acc_cipher_ctx *c, const unsigned char *key, size_t keylen, acc_skey *skey,
                       const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    acc_batch_cancel(c);   /* a request still waiting would run with the new key and IV */
    c->num = 0;
    c->bufsz = 0;
    c->updated = 0;
    c->enc = enc;
    c->op = acc_op_of(c->mode, enc);
    c->inline_below = c->prov->policy.inline_below[c->op];
    if (!set_iv(c, iv, ivlen) || !(skey != NULL ? share_key(c, skey) : set_key(c, key, keylen)))
        return 0;
    return c->kind->set_ctx_params == NULL || c->kind->set_ctx_params(c, params);
}

int acc_cipher_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return cipher_init(vctx, key, keylen, NULL, iv, ivlen, params, 1);
}

int acc_cipher_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return cipher_init(vctx, key, keylen, NULL, iv, ivlen, params, 0);
}

int acc_cipher_skey_einit(void *vctx, void *skeydata, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return cipher_init(vctx, NULL, 0, skeydata, iv, ivlen, params, 1);
}

int acc_cipher_skey_dinit(void *vctx, void *skeydata, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return cipher_init(vctx, NULL, 0, skeydata, iv, ivlen, params, 0);
}

/* ======================== Checks ======================== */

int acc_cipher_check_key(const acc_cipher_ctx *c)
{
    if (c->key_set)
        return 1;
    acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
    return 0;
}

/* EVP hands a negative int length down as SIZE_MAX - k, with an output size that can wrap past
 * it: no TLS record comes near INT_MAX, and the default goes on with such a length; not here. */
int acc_cipher_check_record_len(size_t inl)
{
    if (inl <= (size_t)INT_MAX)
        return 1;
    acc_raise(ACC_R_LENGTH_TOO_LARGE, "TLS record of %zu bytes", inl);
    return 0;
}

/* The default provider checks the key and the room first, with its reasons (a negative int
 * length reaches it as SIZE_MAX - k, with an output size that wraps below it: too small); it
 * trusts the pointers and the length, and crashes or writes past the buffer where the rest
 * refuse with our own reasons. */
int acc_cipher_refuse_call(const acc_cipher_ctx *c, const unsigned char *out, size_t produce, size_t outsize,
                           const unsigned char *in, size_t inl)
{
    if (!acc_cipher_check_key(c))
        return 0;
    if (produce > outsize) {
        acc_raise(ACC_PROV_R(PROV_R_OUTPUT_BUFFER_TOO_SMALL), "need %zu bytes of output, have %zu",
                  produce, outsize);
        return 0;
    }
    if (inl > 0 && in == NULL) {
        acc_raise(ACC_R_NULL_POINTER, "input is NULL with a length of %zu", inl);
        return 0;
    }
    if (produce > (size_t)INT_MAX) {
        acc_raise(ACC_R_LENGTH_TOO_LARGE, "output of %zu bytes is more than an int can report", produce);
        return 0;
    }
    if (produce > 0 && out == NULL) {
        acc_raise(ACC_R_NULL_POINTER, "output is NULL but %zu bytes are due", produce);
        return 0;
    }
    return 1;   /* not reached from acc_cipher_check_call: something above failed */
}

/* ======================== Parameters ======================== */

/* OSSL_CIPHER_PARAM_ENCRYPT_THEN_MAC, spelt out: headers before 3.6 lack the name, and what counts
 * is the release that loads accelaes (provider/base/compat.h) */
#define ENCRYPT_THEN_MAC "encrypt-then-mac"

#define ALG_GETTABLE                                                                                             \
    OSSL_PARAM_uint(OSSL_CIPHER_PARAM_MODE, NULL), OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),            \
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL), OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_BLOCK_SIZE, NULL), \
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_AEAD, NULL), OSSL_PARAM_int(OSSL_CIPHER_PARAM_CUSTOM_IV, NULL),         \
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_CTS, NULL), OSSL_PARAM_int(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, NULL),    \
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_HAS_RAND_KEY, NULL)

/* The running release's table (provider/base/compat.h): 3.6 adds "encrypt-then-mac" at the end. */
const OSSL_PARAM *acc_cipher_gettable_params(void *provctx)
{
    static const OSSL_PARAM known[] = { ALG_GETTABLE, OSSL_PARAM_END };
    static const OSSL_PARAM known_3_6[] = { ALG_GETTABLE, OSSL_PARAM_int(ENCRYPT_THEN_MAC, NULL), OSSL_PARAM_END };

    (void)provctx;
    return acc_compat()->alg_encrypt_then_mac ? known_3_6 : known;
}

static size_t ivlen_of(acc_mode mode)
{
    if (mode == ACC_MODE_GCM || mode == ACC_MODE_CCM)
        return 12;   /* the AEADs' IV length as the default's cipher reports it (settable per context) */
    return mode == ACC_MODE_ECB ? 0 : ACC_AES_BLOCK;
}

/* In the default provider's order: mode, the flags, keylen, blocksize, ivlen. */
int acc_cipher_get_params(OSSL_PARAM params[], const acc_cipher_kind *kind)
{
    const struct { const char *key; int v; } flags[] = {
        { OSSL_CIPHER_PARAM_AEAD, kind->aead }, { OSSL_CIPHER_PARAM_CUSTOM_IV, kind->custom_iv }, { OSSL_CIPHER_PARAM_CTS, 0 },
        { OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, kind->tls1_multiblock }, { OSSL_CIPHER_PARAM_HAS_RAND_KEY, 0 }
    };
    /* the stream-like modes report a block size of 1, as the default's do */
    size_t blksz = kind->mode == ACC_MODE_CTR || kind->mode == ACC_MODE_GCM || kind->mode == ACC_MODE_CCM
                           || kind->mode == ACC_MODE_XTS
                       ? 1
                       : ACC_AES_BLOCK;
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_MODE)) != NULL && !OSSL_PARAM_set_uint(p, kind->mode))
        goto bad;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if ((p = OSSL_PARAM_locate(params, flags[i].key)) != NULL && !OSSL_PARAM_set_int(p, flags[i].v))
            goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL && !OSSL_PARAM_set_size_t(p, kind->keylen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_BLOCK_SIZE)) != NULL && !OSSL_PARAM_set_size_t(p, blksz))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, ivlen_of(kind->mode)))
        goto bad;
    /* none of these is an encrypt-then-MAC cipher (the -ETM ones are not served here) */
    if ((p = OSSL_PARAM_locate(params, ENCRYPT_THEN_MAC)) != NULL && acc_compat()->alg_encrypt_then_mac
        && !OSSL_PARAM_set_int(p, 0))
        goto bad;
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s'", p->key);
    return 0;
}

/* Either form the caller asked for. The order shows where libcrypto raises on the form that
 * does not fit (OpenSSL 3.2 and later: an 8-byte buffer gets "too small buffer" and "param of
 * incompatible type" in the order tried): the default's plain AES tries the pointer first, its
 * stitched ciphers the string. */
static int set_iv_param(const acc_cipher_ctx *c, OSSL_PARAM *p, const uint8_t *iv, size_t ivlen)
{
    return acc_compat_set_iv(p, iv, ivlen, c->kind->iv_string_first);
}

/* A parameter whose meaning is the core's: 1 set, 0 could not be set, -1 not the core's. */
static int core_param(const acc_cipher_ctx *c, OSSL_PARAM *p)
{
    size_t ivlen = ivlen_of(c->mode);

    if (strcmp(p->key, OSSL_CIPHER_PARAM_IVLEN) == 0)
        return OSSL_PARAM_set_size_t(p, ivlen);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_KEYLEN) == 0)
        return OSSL_PARAM_set_size_t(p, c->keylen);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_IV) == 0)
        return set_iv_param(c, p, c->oiv, ivlen);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_UPDATED_IV) == 0)
        return set_iv_param(c, p, c->iv, ivlen);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_PADDING) == 0)
        return OSSL_PARAM_set_uint(p, c->pad);
    if (strcmp(p->key, OSSL_CIPHER_PARAM_NUM) == 0)
        return OSSL_PARAM_set_uint(p, c->num);
    return -1;
}

int acc_cipher_get_ctx_params(acc_cipher_ctx *c, OSSL_PARAM params[], const char *const order[],
                              acc_own_param_fn *own)
{
    OSSL_PARAM *p;
    int r;

    if (params == NULL)
        return 1;
    if (!acc_compat_unrepeated_keys(params, order, c->kind->param_decoder))
        return 0;
    for (size_t i = 0; order[i] != NULL; i++) {
        if ((p = OSSL_PARAM_locate(params, order[i])) == NULL)
            continue;
        if ((r = core_param(c, p)) < 0)
            r = own != NULL ? own(c, p) : 0;
        if (r < 0)
            return 0;
        if (r == 0) {
            acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s' (%zu bytes of type %u)",
                      p->key, p->data_size, p->data_type);
            return 0;
        }
    }
    return 1;
}
