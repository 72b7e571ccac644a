/* provider/cipher_aes.c: the nine AES ciphers — dispatch tables (one macro per shape), parameters
 * and the EVP semantics written once: init/re-init, update with the held-back block, PKCS#7
 * padding, final, CTR num, the one-shot cipher, dupctx. Whole blocks go to policy.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "provider/algs.h"
#include "provider/batch.h"
#include "provider/cipher.h"
#include "provider/names.h"
#include "scheduler/sched.h"

static OSSL_FUNC_cipher_freectx_fn aes_freectx;
static OSSL_FUNC_cipher_dupctx_fn aes_dupctx;
static OSSL_FUNC_cipher_encrypt_init_fn aes_einit;
static OSSL_FUNC_cipher_decrypt_init_fn aes_dinit;
static OSSL_FUNC_cipher_update_fn aes_block_update;
static OSSL_FUNC_cipher_final_fn aes_block_final;
static OSSL_FUNC_cipher_update_fn aes_stream_update;
static OSSL_FUNC_cipher_final_fn aes_stream_final;
static OSSL_FUNC_cipher_cipher_fn aes_cipher;
static OSSL_FUNC_cipher_get_ctx_params_fn aes_get_ctx_params;
static OSSL_FUNC_cipher_set_ctx_params_fn aes_set_ctx_params;
static OSSL_FUNC_cipher_gettable_ctx_params_fn aes_gettable_ctx_params;
static OSSL_FUNC_cipher_settable_ctx_params_fn aes_settable_ctx_params;

/* ======================== Context life cycle ======================== */

static void *aes_newctx(void *provctx, acc_mode mode, size_t keylen)
{
    acc_prov_ctx *prov = provctx;
    acc_cipher_ctx *c = NULL;

    /* the key schedules inside are 64-byte aligned for the vector engines. Failing, no error:
     * the default provider raises none here, and EVP raises its initialization error. */
    if ((c = acc_ctx_alloc(sizeof(*c))) == NULL)
        return NULL;
    memset(c, 0, sizeof(*c));
    c->prov = prov;
    c->eng = prov->eng;
    c->mode = mode;
    c->keylen = keylen;
    c->pad = 1;
    return c;
}

static void acct_publish(acc_cipher_ctx *c)
{
    if (c->acct_bytes > 0 || c->acct_reqs > 0)
        acc_sched_count(ACC_PATH_INLINE, c->acct_bytes, c->acct_reqs);
    c->acct_bytes = c->acct_reqs = 0;
}

static void aes_freectx(void *vctx)
{
    acc_cipher_ctx *c = vctx;

    if (c == NULL)
        return;
    acc_batch_cancel(c);
    acct_publish(c);
    if (c->key_set)
        c->eng->free_key(&c->ks);
    acc_tls_cleanup(c);
    OPENSSL_cleanse(c, sizeof(*c));
    acc_ctx_free(c);
}

static void *aes_dupctx(void *vctx)
{
    acc_cipher_ctx *s = vctx, *d = NULL;

    if ((d = acc_ctx_alloc(sizeof(*d))) == NULL) {
        acc_raise(ACC_PROV_R(ERR_R_MALLOC_FAILURE), "allocating a copy of a cipher context");
        return NULL;
    }
    memcpy(d, s, sizeof(*d));
    d->acct_bytes = d->acct_reqs = 0;   /* the original publishes what it did */
    d->batch_q = NULL;                  /* a waiting request stays the original's */
    d->tlsmac = NULL;
    d->tlsmac_alloced = 0;
    if ((s->key_set && !s->eng->copy_key(&d->ks, &s->ks)) || !acc_tls_dup(d, s)) {
        if (s->key_set && d->ks.evp != s->ks.evp)
            d->eng->free_key(&d->ks);
        OPENSSL_cleanse(d, sizeof(*d));
        acc_ctx_free(d);
        acc_raise(ACC_PROV_R(ERR_R_MALLOC_FAILURE), "copying a cipher context");
        return NULL;
    }
    return d;
}

/* ======================== Parameters ======================== */

/* In the default provider's order (padding, use-bits, the TLS pair, num), so that a call with
 * several bad parameters fails on the same one, with its reason. */
static int aes_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    acc_cipher_ctx *c = vctx;
    const OSSL_PARAM *p;
    unsigned int u;

    if (params == NULL)
        return 1;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_PADDING)) != NULL) {
        if (!OSSL_PARAM_get_uint(p, &u))
            goto bad;
        c->pad = u ? 1 : 0;
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_USE_BITS)) != NULL && !OSSL_PARAM_get_uint(p, &u))
        goto bad;
    if (!acc_tls_set_ctx_params(c, params))
        return 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_NUM)) != NULL) {
        if (!OSSL_PARAM_get_uint(p, &u))
            goto bad;
        /* num indexes the 16-byte keystream block: OpenSSL 3.0's default provider takes any num
         * and reads past it; here it is refused, with our own reason */
        if (c->mode == ACC_MODE_CTR && u >= ACC_AES_BLOCK) {
            acc_raise(ACC_R_INVALID_PARAMETER, "num %u: CTR's num must be below 16", u);
            return 0;
        }
        c->num = u;
    }
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "parameter '%s' is not an unsigned integer", p->key);
    return 0;
}

static size_t ivlen_of(acc_mode mode)
{
    return mode == ACC_MODE_ECB ? 0 : ACC_AES_BLOCK;
}

static int set_iv_param(OSSL_PARAM *p, const uint8_t *iv, size_t ivlen)
{
    return OSSL_PARAM_set_octet_ptr(p, iv, ivlen) || OSSL_PARAM_set_octet_string(p, iv, ivlen);
}

/* In the default provider's order (ivlen, padding, iv, updated-iv, num, keylen, tls-mac). */
static int aes_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    acc_cipher_ctx *c = vctx;
    size_t ivlen = ivlen_of(c->mode);
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL && !OSSL_PARAM_set_size_t(p, ivlen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_PADDING)) != NULL && !OSSL_PARAM_set_uint(p, c->pad))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IV)) != NULL && !set_iv_param(p, c->oiv, ivlen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_UPDATED_IV)) != NULL && !set_iv_param(p, c->iv, ivlen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_NUM)) != NULL && !OSSL_PARAM_set_uint(p, c->num))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL && !OSSL_PARAM_set_size_t(p, c->keylen))
        goto bad;
    return acc_tls_get_ctx_params(c, params);
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s' (%zu bytes of type %u)",
              p->key, p->data_size, p->data_type);
    return 0;
}

static const OSSL_PARAM *aes_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, NULL, 0),
        OSSL_PARAM_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, NULL, 0),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

static const OSSL_PARAM *aes_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_USE_BITS, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS_VERSION, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, NULL),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

/* The get_params of every AES cipher here, the stitched ones of cipher_hmac.c included: one
 * table, one body (declared in cipher.h). aead is the AEAD flag to report (1 for the stitched
 * ciphers, as the default provider reports it; 0 for the rest). */
const OSSL_PARAM *acc_cipher_gettable_params(void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_MODE, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_BLOCK_SIZE, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_AEAD, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_CUSTOM_IV, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_CTS, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_HAS_RAND_KEY, NULL),
        OSSL_PARAM_END
    };
    (void)provctx;
    return known;
}

/* In the default provider's order: mode, the flags, keylen, blocksize, ivlen. */
int acc_cipher_get_params(OSSL_PARAM params[], acc_mode mode, size_t keylen, int aead)
{
    const struct { const char *key; int v; } flags[] = {
        { OSSL_CIPHER_PARAM_AEAD, aead }, { OSSL_CIPHER_PARAM_CUSTOM_IV, 0 }, { OSSL_CIPHER_PARAM_CTS, 0 },
        { OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, 0 }, { OSSL_CIPHER_PARAM_HAS_RAND_KEY, 0 }
    };
    size_t blksz = mode == ACC_MODE_CTR ? 1 : ACC_AES_BLOCK;
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_MODE)) != NULL && !OSSL_PARAM_set_uint(p, mode))
        goto bad;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if ((p = OSSL_PARAM_locate(params, flags[i].key)) != NULL && !OSSL_PARAM_set_int(p, flags[i].v))
            goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL && !OSSL_PARAM_set_size_t(p, keylen))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_BLOCK_SIZE)) != NULL && !OSSL_PARAM_set_size_t(p, blksz))
        goto bad;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, ivlen_of(mode)))
        goto bad;
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s'", p->key);
    return 0;
}

/* ======================== Init ======================== */

static int needs_dec_schedule(const acc_cipher_ctx *c)
{
    return !c->enc && c->mode != ACC_MODE_CTR;
}

static int aes_init(acc_cipher_ctx *c, const unsigned char *key, size_t keylen,
                    const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    acc_batch_cancel(c);   /* a request still waiting would run with the new key and IV */
    c->num = 0;
    c->bufsz = 0;
    c->updated = 0;
    c->enc = enc;
    c->inline_below = acc_policy_inline_below(&c->prov->settings, c->mode, enc);
    if (iv != NULL && c->mode != ACC_MODE_ECB) {
        if (ivlen != ACC_AES_BLOCK) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "iv length %zu, expected 16", ivlen);
            return 0;
        }
        memcpy(c->oiv, iv, ACC_AES_BLOCK);
        memcpy(c->iv, iv, ACC_AES_BLOCK);
        c->iv_set = 1;
    } else if (iv == NULL && c->iv_set && c->mode == ACC_MODE_CBC) {
        /* re-init with the same key and IV starts the stream again */
        memcpy(c->iv, c->oiv, ACC_AES_BLOCK);
    }
    if (key != NULL) {
        if (keylen != c->keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen, c->keylen);
            return 0;
        }
        memcpy(c->rawkey, key, keylen);
    }
    /* A new key, or a direction change on the same key that needs the decryption schedule. */
    if (key != NULL || (c->key_set && needs_dec_schedule(c) && !c->ks.has_dec)) {
        if (c->key_set)
            c->eng->free_key(&c->ks);
        c->key_set = 0;
        if (!c->eng->set_key(&c->ks, c->rawkey, c->keylen, !needs_dec_schedule(c))) {
            acc_raise(ACC_R_ENGINE_FAILURE, "%s engine could not set up the key", c->eng->name);
            return 0;
        }
        c->key_set = 1;
    }
    return aes_set_ctx_params(c, params);
}

static int aes_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv,
                     size_t ivlen, const OSSL_PARAM params[])
{
    return aes_init(vctx, key, keylen, iv, ivlen, params, 1);
}

static int aes_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv,
                     size_t ivlen, const OSSL_PARAM params[])
{
    return aes_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* ======================== Update and final ======================== */

/* Checks common to every data call: a key, room, sane pointers and an int-sized result (EVP
 * reports lengths as int: a larger result would be written, then refused). The default provider
 * checks the key and the room first, with its reasons (a negative int length reaches it as
 * SIZE_MAX - k, with an output size that wraps below it: too small); it trusts the pointers and
 * the length, and crashes or writes past the buffer where the rest refuse with our own reasons. */
static inline int check_call(const acc_cipher_ctx *c, const unsigned char *out, size_t produce, size_t outsize,
                      const unsigned char *in, size_t inl)
{
    if (!c->key_set) {
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
        return 0;
    }
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
    return 1;
}

static inline int run_blocks(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    /* Small requests: straight to the engine, counted in the context (see acct_bytes). */
    if (len < c->inline_below) {
        if (!acc_run_engine(c, in, out, len / ACC_AES_BLOCK, c->iv))
            return acc_engine_fail(c, len);
        c->acct_bytes += len;
        c->acct_reqs++;
        if (c->acct_bytes >= ACC_ACCT_FLUSH)
            acct_publish(c);
        return 1;
    }
    return acc_policy_blocks(c, in, out, len);   /* raises its own error */
}

/* Everything but the common case: partial blocks, held-back blocks, TLS records. */
static __attribute__((noinline)) int block_update_general(acc_cipher_ctx *c, unsigned char *out, size_t *outl,
                                                          size_t outsize, const unsigned char *in, size_t inl)
{
    size_t total, produce, take;

    if (c->tlsversion > 0 && c->key_set)
        return acc_tls_update(c, out, outl, outsize, in, inl);
    /* EVP hands a negative int length down as SIZE_MAX - k: the sum below must not wrap. Refused
     * by check_call, as if all of it were due (it fails at the latest on the int-sized result). */
    if (inl > (size_t)INT_MAX)
        return check_call(c, out, inl, outsize, in, inl);
    total = c->bufsz + inl;
    produce = total & ~(size_t)(ACC_AES_BLOCK - 1);
    /* Decrypting with padding: a stream ending on a block boundary keeps its last block
     * back, in case it is the last one and carries the padding Final must strip. */
    if (!c->enc && c->pad && produce == total && produce > 0)
        produce -= ACC_AES_BLOCK;
    if (!check_call(c, out, produce, outsize, in, inl))
        return 0;
    *outl = produce;
    if (produce == 0) {
        if (inl > 0)
            memcpy(c->buf + c->bufsz, in, inl);
        c->bufsz += inl;
        return 1;
    }
    if (c->bufsz > 0) {
        take = ACC_AES_BLOCK - c->bufsz;
        memcpy(c->buf + c->bufsz, in, take);
        in += take;
        inl -= take;
        if (!run_blocks(c, c->buf, out, ACC_AES_BLOCK))
            return 0;
        out += ACC_AES_BLOCK;
        produce -= ACC_AES_BLOCK;
        c->bufsz = 0;
    }
    if (produce > 0 && !run_blocks(c, in, out, produce))
        return 0;
    in += produce;
    inl -= produce;
    if (inl > 0)
        memcpy(c->buf, in, inl);
    c->bufsz = inl;
    return 1;
}

static int aes_block_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                            const unsigned char *in, size_t inl)
{
    acc_cipher_ctx *c = vctx;

    /* The common case, kept small: whole blocks, nothing buffered, nothing to hold back. */
    if (c->bufsz == 0 && c->tlsversion == 0 && inl % ACC_AES_BLOCK == 0 && inl > 0 && (c->enc || !c->pad)) {
        if (!check_call(c, out, inl, outsize, in, inl) || !run_blocks(c, in, out, inl))
            return 0;
        *outl = inl;
        return 1;
    }
    return block_update_general(c, out, outl, outsize, in, inl);
}

/* PKCS#7 check without branching on the pad bytes, so timing does not tell how wrong it was. */
static int unpad_block(const uint8_t *b, size_t *len)
{
    unsigned int pad = b[ACC_AES_BLOCK - 1], bad = 0;

    bad |= (unsigned int)((pad - 1) >> 8) & 1;          /* pad == 0 */
    bad |= (unsigned int)((16 - pad) >> 8) & 1;         /* pad > 16 */
    for (unsigned int i = 0; i < ACC_AES_BLOCK; i++) {
        unsigned int in_pad = ((i + pad - ACC_AES_BLOCK) >> 8) ^ 1;  /* i >= 16 - pad */
        bad |= in_pad & (unsigned int)((b[i] ^ pad) != 0);
    }
    *len = ACC_AES_BLOCK - (pad & 0x1f);
    return bad == 0;
}

static int aes_block_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    acc_cipher_ctx *c = vctx;
    uint8_t blk[ACC_AES_BLOCK];
    size_t n;

    if (!c->key_set) {
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
        return 0;
    }
    if (c->tlsversion > 0) {
        /* as the default provider: every record is one whole update, there is nothing to finish */
        acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED),
                  "Final on a TLS record context: records are never finalised");
        return 0;
    }
    if (c->enc) {
        if (c->pad) {
            memset(c->buf + c->bufsz, (int)(ACC_AES_BLOCK - c->bufsz), ACC_AES_BLOCK - c->bufsz);
        } else if (c->bufsz == 0) {
            *outl = 0;
            return 1;
        } else {
            acc_raise(ACC_PROV_R(PROV_R_WRONG_FINAL_BLOCK_LENGTH),
                      "%zu bytes left over with padding off: data must be a multiple of 16 bytes", c->bufsz);
            return 0;
        }
        if (!check_call(c, out, ACC_AES_BLOCK, outsize, NULL, 0) || !run_blocks(c, c->buf, out, ACC_AES_BLOCK))
            return 0;
        c->bufsz = 0;
        *outl = ACC_AES_BLOCK;
        return 1;
    }
    if (c->bufsz != ACC_AES_BLOCK) {
        if (c->bufsz == 0 && !c->pad) {
            *outl = 0;
            return 1;
        }
        acc_raise(ACC_PROV_R(PROV_R_WRONG_FINAL_BLOCK_LENGTH),
                  "%zu bytes left over: ciphertext must be whole blocks%s",
                  c->bufsz, c->pad ? " (and at least one with padding)" : "");
        return 0;
    }
    if (!run_blocks(c, c->buf, blk, ACC_AES_BLOCK))
        return 0;
    n = ACC_AES_BLOCK;
    if (c->pad && !unpad_block(blk, &n)) {
        OPENSSL_cleanse(blk, sizeof(blk));
        c->bufsz = 0;
        acc_raise(ACC_PROV_R(PROV_R_BAD_DECRYPT), "the padding is not valid PKCS#7 (wrong key or corrupt data)");
        return 0;
    }
    if (!check_call(c, out, n, outsize, NULL, 0)) {
        OPENSSL_cleanse(blk, sizeof(blk));
        return 0;
    }
    if (n > 0)                   /* a whole block of padding leaves nothing, and out may be NULL */
        memcpy(out, blk, n);
    OPENSSL_cleanse(blk, sizeof(blk));
    c->bufsz = 0;
    *outl = n;
    return 1;
}

/* CTR keeps OpenSSL's structure: buf is the keystream of the counter before iv, num how
 * much of it is used, so num set by a caller means exactly what it means to the default. */
static int ctr_run(acc_cipher_ctx *c, uint8_t *out, const uint8_t *in, size_t len)
{
    unsigned int n = c->num;
    size_t whole;

    while (n != 0 && len > 0) {
        *out++ = *in++ ^ c->buf[n];
        n = (n + 1) & (ACC_AES_BLOCK - 1);
        len--;
    }
    whole = len & ~(size_t)(ACC_AES_BLOCK - 1);
    if (whole > 0 && !run_blocks(c, in, out, whole))
        return 0;
    in += whole;
    out += whole;
    len -= whole;
    if (len > 0) {
        if (!c->eng->ecb_enc(&c->ks, c->iv, c->buf, 1))
            return acc_engine_fail(c, ACC_AES_BLOCK);
        acc_ctr_add(c->iv, 1);
        for (size_t i = 0; i < len; i++)
            out[i] = in[i] ^ c->buf[i];
        n = (unsigned int)len;
        c->acct_bytes += len;
    }
    c->num = n;
    return 1;
}

static int aes_stream_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl)
{
    acc_cipher_ctx *c = vctx;

    if (!check_call(c, out, inl, outsize, in, inl))
        return 0;
    if (inl > 0 && !ctr_run(c, out, in, inl))
        return 0;
    *outl = inl;
    return 1;
}

static int aes_stream_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    acc_cipher_ctx *c = vctx;

    (void)out; (void)outsize;
    if (!c->key_set) {
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "no key set: call an init function with a key first");
        return 0;
    }
    *outl = 0;
    return 1;
}

/* EVP_Cipher: the caller's data as it is, no buffering and no padding. */
static int aes_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                      const unsigned char *in, size_t inl)
{
    acc_cipher_ctx *c = vctx;

    if (!check_call(c, out, inl, outsize, in, inl))
        return 0;
    if (c->mode == ACC_MODE_CTR) {
        if (inl > 0 && !ctr_run(c, out, in, inl))
            return 0;
    } else {
        /* The default provider returns success here having left a partial ECB block as it was,
         * or written a whole CBC block for it: refused, with our own reason. */
        if (inl % ACC_AES_BLOCK != 0) {
            acc_raise(ACC_R_WRONG_FINAL_BLOCK_LENGTH,
                      "EVP_Cipher on %s needs whole 16-byte blocks, got %zu bytes",
                      c->mode == ACC_MODE_CBC ? "CBC" : "ECB", inl);
            return 0;
        }
        if (inl > 0 && !run_blocks(c, in, out, inl))
            return 0;
    }
    *outl = inl;
    return 1;
}

/* ======================== Dispatch tables ======================== */

#define ACC_AES_FUNCTIONS(kbits, lmode, UMODE, shape)                                          \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##lmode##_newctx;                               \
    static void *aes##kbits##lmode##_newctx(void *provctx)                                      \
    {                                                                                           \
        return aes_newctx(provctx, ACC_MODE_##UMODE, (kbits) / 8);                              \
    }                                                                                           \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##lmode##_get_params;                       \
    static int aes##kbits##lmode##_get_params(OSSL_PARAM params[])                              \
    {                                                                                           \
        return acc_cipher_get_params(params, ACC_MODE_##UMODE, (kbits) / 8, 0);                 \
    }                                                                                           \
    static const OSSL_DISPATCH aes##kbits##lmode##_functions[] = {                              \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##lmode##_newctx },                \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))aes_freectx },                              \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))aes_dupctx },                                \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))aes_einit },                           \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))aes_dinit },                           \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))aes_##shape##_update },                      \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))aes_##shape##_final },                        \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))aes_cipher },                                \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##lmode##_get_params },        \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },       \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))aes_get_ctx_params },                \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))aes_set_ctx_params },                \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))aes_gettable_ctx_params },      \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))aes_settable_ctx_params },      \
        { 0, NULL }                                                                             \
    }

ACC_AES_FUNCTIONS(128, ecb, ECB, block);
ACC_AES_FUNCTIONS(192, ecb, ECB, block);
ACC_AES_FUNCTIONS(256, ecb, ECB, block);
ACC_AES_FUNCTIONS(128, cbc, CBC, block);
ACC_AES_FUNCTIONS(192, cbc, CBC, block);
ACC_AES_FUNCTIONS(256, cbc, CBC, block);
ACC_AES_FUNCTIONS(128, ctr, CTR, stream);
ACC_AES_FUNCTIONS(192, ctr, CTR, stream);
ACC_AES_FUNCTIONS(256, ctr, CTR, stream);

const OSSL_ALGORITHM acc_cipher_algorithms[] = {
    { ACC_NAMES_AES_256_ECB, ACC_PROPS, aes256ecb_functions, NULL },
    { ACC_NAMES_AES_192_ECB, ACC_PROPS, aes192ecb_functions, NULL },
    { ACC_NAMES_AES_128_ECB, ACC_PROPS, aes128ecb_functions, NULL },
    { ACC_NAMES_AES_256_CBC, ACC_PROPS, aes256cbc_functions, NULL },
    { ACC_NAMES_AES_192_CBC, ACC_PROPS, aes192cbc_functions, NULL },
    { ACC_NAMES_AES_128_CBC, ACC_PROPS, aes128cbc_functions, NULL },
    { ACC_NAMES_AES_256_CTR, ACC_PROPS, aes256ctr_functions, NULL },
    { ACC_NAMES_AES_192_CTR, ACC_PROPS, aes192ctr_functions, NULL },
    { ACC_NAMES_AES_128_CTR, ACC_PROPS, aes128ctr_functions, NULL },
    { NULL, NULL, NULL, NULL }
};
