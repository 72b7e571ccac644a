/* provider/cipher/cipher_ccm.c: AES-128/192/256-CCM as the running release's default provider has them
 * (ciphercommon_ccm.c is the specification): L and M (the nonce length 15 - L set through the IV
 * length, 7..13; the tag length M, 4..16 and even, set with or without the tag), the message
 * length fixed before the AAD (EVP_CipherUpdate(ctx, NULL, &outl, NULL, len), else the data's
 * own length), the AAD once, the data in one update, a decryption checked at that update against
 * a tag set before it, and the TLS 1.2 record (4-byte fixed and 8-byte explicit IV, the tag M).
 * The AEAD rules shared with GCM are provider/cipher/aead.c's; the AES work is a CCM engine's
 * (accel/ccm.h), counted as every other mode's. */
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "accel/ccm.h"
#include "provider/cipher/aead.h"
#include "provider/cipher/algs.h"
#include "provider/cipher/cipher_ccm.h"
#include "provider/route/cipher_ctx.h"
#include "provider/base/compat.h"
#include "provider/base/names.h"
#include "provider/route/prov.h"
#include "provider/route/skey.h"

/* ======================== Life ======================== */

static void ccm_on_new(acc_cipher_ctx *b)
{
    acc_ccm_ctx *c = (acc_ccm_ctx *)b;

    c->ceng = acc_ccm_engine_default();
    c->l = 8;
    c->m = 12;
    c->tls_aad_len = ACC_AEAD_UNSET;
}

static int ccm_on_dup(acc_cipher_ctx *db, const acc_cipher_ctx *sb)
{
    acc_ccm_ctx *d = (acc_ccm_ctx *)db;
    const acc_ccm_ctx *s = (const acc_ccm_ctx *)sb;

    if (s->key_set && !s->st.eng->copy_key(&d->st.ks, &s->st.ks)) {
        OPENSSL_cleanse(&d->st, sizeof(d->st));
        d->key_set = 0;
        return 0;
    }
    return 1;
}

static void ccm_on_free(acc_cipher_ctx *b)
{
    acc_ccm_ctx *c = (acc_ccm_ctx *)b;

    if (c->key_set)
        c->ceng->cleanse(&c->st);
    OPENSSL_cleanse(c->buf, sizeof(c->buf));
}

/* ======================== Init ======================== */

static int ccm_init(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                    const OSSL_PARAM params[], int enc)
{
    acc_ccm_ctx *c = vctx;

    c->base.enc = enc;
    if (iv != NULL) {
        if (ivlen != ivlen_of(c)) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "CCM nonce of %zu bytes, expected %zu", ivlen,
                      ivlen_of(c));
            return 0;
        }
        memcpy(c->iv, iv, ivlen);
        c->iv_state = ACC_AEAD_IV_BUFFERED;
    }
    if (key != NULL) {
        if (keylen != c->base.keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen,
                      c->base.keylen);
            return 0;
        }
        if (!c->ceng->set_key(&c->st, c->base.eng, key, keylen)) {
            c->key_set = 0;
            acc_raise(ACC_R_ENGINE_FAILURE, "the %s CCM engine could not set up the key", c->ceng->name);
            return 0;
        }
        c->key_set = 1;
        c->key_enc = enc;
        /* as the default's key set-up (CRYPTO_ccm128_init): the counter block cleared, its flags from
         * the context's L and M, the MAC left as it was, so that a tag got next is the last one */
        c->st.nonce[0] = (uint8_t)(((c->l - 1) & 7) | (((c->m - 2) / 2) & 7) << 3);
    }
    return acc_ccm_set_ctx_params(c, params);
}

static OSSL_FUNC_cipher_encrypt_init_fn ccm_einit;
static int ccm_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return ccm_init(vctx, key, keylen, iv, ivlen, params, 1);
}

static OSSL_FUNC_cipher_decrypt_init_fn ccm_dinit;
static int ccm_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return ccm_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* Opaque keys (3.5+): the key's bytes, as GCM's (cipher_gcm.c). */
static int ccm_skey_einit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(ccm_einit, vctx, skey, iv, ivlen, params);
}

static int ccm_skey_dinit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(ccm_dinit, vctx, skey, iv, ivlen, params);
}

/* ======================== The message ======================== */

/* B0 from the nonce, the tag length and the message length (fixed from here on). */
static int set_len(acc_ccm_ctx *c, size_t mlen)
{
    if (!c->ceng->setiv(&c->st, c->iv, ivlen_of(c), mlen))
        return 0;
    c->len_set = 1;
    return 1;
}

/* The data, all of it: encrypting, the tag is then there to get; decrypting, checked against the
 * tag set before (in constant time), the output wiped when it does not match. */
static int data_run(acc_ccm_ctx *c, const unsigned char *in, unsigned char *out, size_t len, const uint8_t *tag)
{
    uint8_t mine[16];
    /* a default whose block function was chosen at its key's set-up MACs the whole blocks as that
     * direction would, whichever way the data goes now (compat.c asks it) */
    int whole_enc = acc_compat()->ccm_blocks_dir_at_key ? c->key_enc : c->base.enc;
    int ok, r = c->ceng->crypt(&c->st, c->base.enc, whole_enc, in, out, len);

    if (r < 0) {   /* the engine failed: the message is lost, as after its end */
        c->tag_set = c->len_set = 0;
        c->iv_state = ACC_AEAD_IV_FINISHED;
        c->eng_failed = 1;
        return acc_aead_engine_failed("CCM", c->ceng->name, out, len, "a data update");
    }
    if (c->base.enc) {
        if (!r || (tag != NULL && !c->ceng->tag(&c->st, (uint8_t *)tag, c->m)))
            return 0;
        acc_cipher_count(&c->base, len, 1);
        return 1;
    }
    ok = r && c->ceng->tag(&c->st, mine, c->m) && CRYPTO_memcmp(mine, tag, c->m) == 0;
    OPENSSL_cleanse(mine, sizeof(mine));
    if (!ok) {
        if (len > 0)
            OPENSSL_cleanse(out, len);
        return 0;
    }
    acc_cipher_count(&c->base, len, 1);
    return 1;
}

/* The TLS 1.2 record in place: explicit IV (encrypting: the AAD's sequence number), payload, tag. */
static int tls_cipher(acc_ccm_ctx *c, unsigned char *out, size_t *padlen, const unsigned char *in, size_t len)
{
    const size_t ex = ACC_AEAD_TLS_EXPLICIT;

    *padlen = 0;
    if (in == NULL || out != in || len < ex + c->m)
        return 0;
    if (c->base.enc)
        memcpy(out, c->buf, ex);
    memcpy(c->iv + ACC_AEAD_TLS_FIXED, in, ex);
    len -= ex + c->m;
    if (!set_len(c, len))
        return 0;
    c->ceng->aad(&c->st, c->buf, c->tls_aad_len);
    in += ex;
    out += ex;
    if (!data_run(c, in, out, len, c->base.enc ? out + len : in + len))
        return 0;
    *padlen = c->base.enc ? len + ex + c->m : len;
    return 1;
}

/* An encryption's final: where the running default makes a message begun (a nonce) with no data call the
 * empty message (OpenSSL 3.5.9: its tag, over the AAD if any; a length fixed other than 0 then fails), run
 * it as a data call of 0 bytes; else nothing to do (compat.c asks it). */
static int final_encrypt(acc_ccm_ctx *c)
{
    if (!acc_compat()->ccm_final_runs_empty || !acc_aead_iv_live(c->iv_state) || c->tag_set)
        return 1;
    if (!c->len_set && !set_len(c, 0))
        return 0;
    if (!data_run(c, NULL, NULL, 0, NULL))
        return 0;
    c->tag_set = 1;
    return 1;
}

/* The default's ccm_cipher_internal: in == NULL and out == NULL: the message length; out == NULL:
 * the AAD; in == NULL: final (nothing to do); else the data. Raises nothing. */
static int ccm_cipher_internal(acc_ccm_ctx *c, unsigned char *out, size_t *padlen, const unsigned char *in,
                               size_t len)
{
    *padlen = 0;
    if (!c->key_set)
        return 0;
    if (c->tls_aad_len != ACC_AEAD_UNSET)
        return tls_cipher(c, out, padlen, in, len);
    if (in == NULL && out != NULL) {   /* final */
        if (c->base.enc)
            return final_encrypt(c);
        /* a decryption begun and not completed: the running default's final may refuse it (compat.c) */
        if (!acc_compat()->ccm_final_strict || !acc_aead_iv_live(c->iv_state))
            return 1;
        if (!c->tag_set && acc_compat()->ccm_tag_not_set)
            acc_raise(ACC_PROV_R(PROV_R_TAG_NOT_SET), "a decryption's final with no tag checked");
        return 0;
    }
    if (!acc_aead_iv_live(c->iv_state))
        return 0;
    if (out == NULL) {
        if (in == NULL) {
            if (!set_len(c, len))
                return 0;
        } else if (!c->len_set && len > 0) {
            return 0;   /* AAD needs the message length first */
        } else {
            c->ceng->aad(&c->st, in, len);
        }
    } else {
        if (!c->len_set && !set_len(c, len))
            return 0;
        if (!c->base.enc && !c->tag_set) {   /* the tag comes before the data */
            if (acc_compat()->ccm_tag_not_set)
                acc_raise(ACC_PROV_R(PROV_R_TAG_NOT_SET), "a decryption's data before its tag");
            return 0;
        }
        if (!data_run(c, in, out, len, c->base.enc ? NULL : c->buf))
            return 0;
        if (c->base.enc) {
            c->tag_set = 1;
        } else {   /* one message per nonce */
            c->tag_set = c->len_set = 0;
            c->iv_state = ACC_AEAD_IV_FINISHED;
        }
    }
    *padlen = len;
    return 1;
}

static OSSL_FUNC_cipher_update_fn ccm_update;
static int ccm_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                      size_t inl)
{
    if (!acc_aead_piece_ok("CCM", inl) || !acc_aead_out_ok(inl, outsize))
        return 0;
    ((acc_ccm_ctx *)vctx)->eng_failed = 0;
    if (!ccm_cipher_internal(vctx, out, outl, in, inl)) {
        if (!((acc_ccm_ctx *)vctx)->eng_failed)   /* an engine failure has raised its own */
            acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED), "CCM update refused");
        return 0;
    }
    return 1;
}

static OSSL_FUNC_cipher_final_fn ccm_final;
static int ccm_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    (void)outsize;
    if (!ccm_cipher_internal(vctx, out, outl, NULL, 0))
        return 0;
    *outl = 0;
    return 1;
}

static OSSL_FUNC_cipher_cipher_fn ccm_oneshot_cipher;
static int ccm_oneshot_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                              const unsigned char *in, size_t inl)
{
    if (!acc_aead_piece_ok("CCM", inl) || !acc_aead_out_ok(inl, outsize))
        return 0;
    if (!ccm_cipher_internal(vctx, out, outl, in, inl))
        return 0;
    *outl = inl;
    return 1;
}

/* ======================== Dispatch tables ======================== */

#define ACC_CCM_FUNCTIONS(kbits)                                                                    \
    static const acc_cipher_kind aes##kbits##ccm_kind = {                                           \
        .mode = ACC_MODE_CCM, .keylen = (kbits) / 8, .ctx_size = sizeof(acc_ccm_ctx), .aead = 1,    \
        .custom_iv = 1, .on_new = ccm_on_new, .on_dup = ccm_on_dup, .on_free = ccm_on_free          \
    };                                                                                              \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##ccm_newctx;                                       \
    static void *aes##kbits##ccm_newctx(void *provctx)                                              \
    {                                                                                               \
        return acc_cipher_newctx(provctx, &aes##kbits##ccm_kind);                                   \
    }                                                                                               \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##ccm_get_params;                               \
    static int aes##kbits##ccm_get_params(OSSL_PARAM params[])                                      \
    {                                                                                               \
        return acc_cipher_get_params(params, &aes##kbits##ccm_kind);                                \
    }                                                                                               \
    const OSSL_DISPATCH acc_aes##kbits##ccm_functions[] = {                                      \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##ccm_newctx },                        \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))acc_cipher_freectx },                           \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))acc_cipher_dupctx },                             \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))ccm_einit },                               \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))ccm_dinit },                               \
        { OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT, (void (*)(void))ccm_skey_einit },                     \
        { OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT, (void (*)(void))ccm_skey_dinit },                     \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))ccm_update },                                    \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))ccm_final },                                      \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))ccm_oneshot_cipher },                            \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##ccm_get_params },                \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))acc_ccm_get_ctx_params },                    \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))acc_ccm_set_ctx_params },                    \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },           \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))acc_ccm_gettable_ctx_params },          \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))acc_ccm_settable_ctx_params },          \
        { 0, NULL }                                                                                 \
    }

ACC_CCM_FUNCTIONS(128);
ACC_CCM_FUNCTIONS(192);
ACC_CCM_FUNCTIONS(256);
