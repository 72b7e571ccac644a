/* provider/cipher/cipher_gcm.c: AES-128/192/256-GCM as OpenSSL 3.0's default provider has them
 * (ciphercommon_gcm.c is the specification): the kinds and dispatch tables, the context's life
 * beyond the core's, init, update (AAD with out == NULL, then data, in pieces), final with the
 * tag, and EVP_Cipher. The AES and GHASH work is a GCM engine's (accel/gcm.h). Parameters and
 * the TLS 1.2 record mode are in cipher_gcm_params.c. */
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "provider/cipher/algs.h"
#include "provider/cipher/cipher_gcm.h"
#include "provider/base/compat.h"
#include "provider/base/names.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "provider/route/skey.h"

/* GCM's limit on one message's data (SP 800-38D): 2^39 - 256 bits, as CRYPTO_gcm128_encrypt. */
#define GCM_MAX_DATA ((UINT64_C(1) << 36) - 32)
#define GCM_MAX_AAD (UINT64_C(1) << 61) /* bytes: SP 800-38D, and the default's CRYPTO_gcm128_aad */

/* ======================== Kind hooks (the core does the rest) ======================== */

static void gcm_on_new(acc_cipher_ctx *c)
{
    acc_gcm_ctx *g = (acc_gcm_ctx *)c;

    g->geng = acc_gcm_engine_default();
    g->ivlen = ACC_GCM_IV_DEFAULT;
    g->taglen = ACC_GCM_UNSET;
    g->tls_aad_len = ACC_GCM_UNSET;
}

/* d is a byte copy of s: its own AAD buffer, and its own engine state where that owns anything. */
static int gcm_on_dup(acc_cipher_ctx *dc, const acc_cipher_ctx *sc)
{
    acc_gcm_ctx *d = (acc_gcm_ctx *)dc;
    const acc_gcm_ctx *s = (const acc_gcm_ctx *)sc;

    if (!acc_aead_aad_dup(&d->aad, &s->aad))
        return 0;
    if (s->key_set && !s->geng->copy(&d->st, &s->st)) {
        acc_aead_aad_free(&d->aad);
        return 0;
    }
    if (!acc_gcm_pipe_dup(d, s)) {
        if (s->key_set)
            d->geng->cleanse(&d->st);
        acc_aead_aad_free(&d->aad);
        return 0;
    }
    return 1;
}

static void gcm_on_free(acc_cipher_ctx *c)
{
    acc_gcm_ctx *g = (acc_gcm_ctx *)c;

    acc_gcm_pipe_free(g);
    if (g->key_set)
        g->geng->cleanse(&g->st);
    acc_aead_aad_free(&g->aad);
}

/* ======================== Init ======================== */

/* The same key again keeps its tables: ipsec-mb's key set-up (round keys and 48 powers of H)
 * costs more than a small record, and callers such as openssl speed give the key with every
 * record's IV. Compared in constant time; rawkey is cleansed with the context. */
int acc_gcm_set_key(acc_gcm_ctx *g, const unsigned char *key, size_t keylen)
{
    if (g->key_set && CRYPTO_memcmp(g->base.rawkey, key, keylen) == 0)
        return 1;
    g->key_set = 0;
    if (g->base.key_set) {   /* the split's schedule of the old key */
        g->base.eng->free_key(&g->base.ks);
        g->base.key_set = 0;
    }
    if (!g->geng->set_key(&g->st, key, keylen)) {
        acc_raise(ACC_R_ENGINE_FAILURE, "%s GCM engine could not set up the key", g->geng->name);
        return 0;
    }
    memcpy(g->base.rawkey, key, keylen);
    g->key_set = 1;
    return 1;
}

static int engine_failed(acc_gcm_ctx *g, uint8_t *out, size_t len, const char *where);

static int gcm_init(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                    const OSSL_PARAM params[], int enc)
{
    acc_gcm_ctx *g = vctx;
    int was = g->base.enc;

    g->base.enc = enc;
    g->iv_gen_rand = 0; /* "iv-generated" answers for the IV of this init only, as 3.5's */
    if (iv != NULL) {
        if (ivlen == 0 || ivlen > ACC_GCM_IV_MAX) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "iv length %zu, expected 1..%d", ivlen, ACC_GCM_IV_MAX);
            return 0;
        }
        g->ivlen = ivlen;
        memcpy(g->iv, iv, ivlen);
        g->iv_state = ACC_AEAD_IV_BUFFERED;
    }
    if (key != NULL) {
        if (keylen != g->base.keylen) {
            acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen,
                      g->base.keylen);
            return 0;
        }
        g->started = 0;   /* a message in flight ends with any key given */
        g->tls_enc_records = 0;
        if (!acc_gcm_set_key(g, key, keylen))
            return 0;
        /* the default's setkey wipes an open message's GCM state but keeps its IV state: the
         * message goes on from zero, its AAD and data so far forgotten (a misuse; the same bytes) */
        if (g->iv_state == ACC_AEAD_IV_COPIED) {
            g->zero_restart = 1;
            g->aad.len = 0;
            g->msglen = 0;
        }
    }
    /* only a direction, a message open: it goes on in the new direction, as the default's */
    if (g->started && enc != was && !g->geng->set_dir(&g->st, enc))
        return engine_failed(g, NULL, 0, "a change of direction");
    return acc_gcm_set_ctx_params(g, params);
}

static OSSL_FUNC_cipher_encrypt_init_fn gcm_einit;
static int gcm_einit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return gcm_init(vctx, key, keylen, iv, ivlen, params, 1);
}

static OSSL_FUNC_cipher_decrypt_init_fn gcm_dinit;
static int gcm_dinit(void *vctx, const unsigned char *key, size_t keylen, const unsigned char *iv, size_t ivlen,
                     const OSSL_PARAM params[])
{
    return gcm_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* Opaque keys (3.5+): this cipher keeps its own key state, so it takes the key's bytes as its
 * raw-key init does (as 3.5's default, which has no skey init here, takes them through EVP). */
static int gcm_skey_einit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(gcm_einit, vctx, skey, iv, ivlen, params);
}

static int gcm_skey_dinit(void *vctx, void *skey, const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return acc_skey_init_raw(gcm_dinit, vctx, skey, iv, ivlen, params);
}

/* ======================== The message ======================== */

void acc_gcm_open(acc_gcm_ctx *g)
{
    memcpy(g->msg_iv, g->iv, g->ivlen);
    g->msg_ivlen = g->ivlen;
    g->aad.len = 0;
    g->msglen = 0;
    g->started = 0;
    g->zero_restart = 0;
    g->iv_state = ACC_AEAD_IV_COPIED;
}

/* AAD is only gathered here: the engine's message starts at the first data or at final. */
static int aad_add(acc_gcm_ctx *g, const uint8_t *aad, size_t len)
{
    if (g->started)
        return 0;   /* AAD after data: the default's CRYPTO_gcm128_aad refuses it too */
    /* past GCM's AAD limit the default's CRYPTO_gcm128_aad refuses it too */
    return acc_aead_aad_add(&g->aad, aad, len, GCM_MAX_AAD) > 0;
}

/* The engine failed in the middle of a message, whose state is then lost: the output is wiped, the
 * message ended (further data and final fail, as after a final; a new IV starts a new one), no tag
 * is left to get, and accelaes's engine failure is raised, once. Returns 0. */
static int engine_failed(acc_gcm_ctx *g, uint8_t *out, size_t len, const char *where)
{
    g->iv_state = ACC_AEAD_IV_FINISHED;
    g->started = 0;
    if (g->base.enc)
        g->taglen = ACC_GCM_UNSET;
    g->eng_failed = 1;
    return acc_aead_engine_failed("GCM", g->geng->name, out, len, where);
}

static int msg_start(acc_gcm_ctx *g, const uint8_t *aad, size_t aadlen)
{
    if (g->started)
        return 1;
    if (g->zero_restart ? !g->geng->restart_zero(&g->st, g->base.enc, g->base.rawkey, g->base.keylen, aad, aadlen)
                        : !g->geng->start(&g->st, g->base.enc, g->msg_iv, g->msg_ivlen, aad, aadlen))
        return 0;
    g->zero_restart = 0;
    g->started = 1;
    return 1;
}

static int overlaps_partially(const uint8_t *in, const uint8_t *out, size_t len)
{
    return in != out && out < in + len && in < out + len;
}

/* Large updates: the whole blocks from the message's next block boundary on may be split over
 * the pool (policy.c says from what size); the bytes that complete the engine's partial block
 * before them, and the partial block after them, go through the engine as usual. */
static int data_run(acc_gcm_ctx *g, const uint8_t *in, uint8_t *out, size_t len, size_t *split)
{
    size_t head = (size_t)((16 - g->msglen % 16) % 16), mid;
    int r;

    *split = 0;
    if (len < g->base.prov->policy.ranges_from[ACC_RANGES_AEAD]) /* the common update: no policy call */
        return g->geng->update(&g->st, in, out, len);
    head = head < len ? head : len;
    mid = (len - head) & ~(size_t)15;
    if (g->geng->split == NULL || overlaps_partially(in, out, len)
        || mid < g->base.prov->policy.ranges_from[ACC_RANGES_AEAD])
        return g->geng->update(&g->st, in, out, len);
    if (head > 0 && !g->geng->update(&g->st, in, out, head))
        return 0;
    r = acc_gcm_split(g, in + head, out + head, mid / 16);
    if (r < 0)
        return g->geng->update(&g->st, in + head, out + head, len - head);
    if (r == 0) {
        OPENSSL_cleanse(out, len);   /* the message is lost: no plaintext is left behind */
        return 0;
    }
    *split = mid;   /* counted by the split, as split bytes (or inline, if no helper came) */
    return len == head + mid || g->geng->update(&g->st, in + head + mid, out + head + mid, len - head - mid);
}

static int data_add(acc_gcm_ctx *g, const uint8_t *in, uint8_t *out, size_t len)
{
    size_t split;

    if (len > GCM_MAX_DATA - g->msglen)
        return 0;
    if (len == 0)
        return 1;
    if (!msg_start(g, g->aad.p, g->aad.len))
        return engine_failed(g, out, len, "the start of a message");
    if (!data_run(g, in, out, len, &split))
        return engine_failed(g, out, len, "a data update");
    g->msglen += len;
    acc_cipher_count(&g->base, len - split, len > split);
    return 1;
}

/* Encrypting: the tag into buf. Decrypting: buf[0..taglen) checked. */
static int msg_finish(acc_gcm_ctx *g)
{
    if (!msg_start(g, g->aad.p, g->aad.len))
        return engine_failed(g, NULL, 0, "the start of a message");
    if (g->base.enc) {
        if (!g->geng->finish(&g->st, g->buf, ACC_GCM_TAG_LEN))
            return 0;
        g->taglen = ACC_GCM_TAG_LEN;
        return 1;
    }
    return g->geng->finish(&g->st, g->buf, g->taglen);
}

int acc_gcm_oneshot(acc_gcm_ctx *g, const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out, size_t len,
                    uint8_t *tag)
{
    g->taglen = ACC_GCM_TAG_LEN;
    if (!msg_start(g, aad, aadlen) || !data_add(g, in, out, len))
        return 0;
    return g->geng->finish(&g->st, tag, ACC_GCM_TAG_LEN);
}

/* An encryption without an IV gets a random one of at least 96 bits, as the default's. */
int acc_gcm_iv_generate(acc_gcm_ctx *g)
{
    if (g->ivlen < ACC_GCM_IV_DEFAULT || RAND_bytes_ex(g->base.prov->libctx, g->iv, g->ivlen, 0) <= 0)
        return 0;
    g->iv_state = ACC_AEAD_IV_BUFFERED;
    g->iv_gen_rand = 1;
    return 1;
}

/* The default's gcm_cipher_internal: in == NULL is final, out == NULL is AAD. Raises nothing;
 * the callers raise what the default's raise. */
static int gcm_cipher_internal(acc_gcm_ctx *g, unsigned char *out, size_t *padlen, const unsigned char *in,
                               size_t len)
{
    size_t olen = 0;
    int rv = 0;

    if (g->tls_aad_len != ACC_GCM_UNSET)
        return acc_gcm_tls_cipher(g, out, padlen, in, len);
    if (!g->key_set || g->iv_state == ACC_AEAD_IV_FINISHED)
        goto err;
    if (g->iv_state == ACC_AEAD_IV_UNSET && (!g->base.enc || !acc_gcm_iv_generate(g)))
        goto err;
    if (g->iv_state == ACC_AEAD_IV_BUFFERED)
        acc_gcm_open(g);
    if (in != NULL) {
        if (!(out == NULL ? aad_add(g, in, len) : data_add(g, in, out, len)))
            goto err;
        olen = len;
    } else {
        /* the tag must be set before a decryption can end (OpenSSL 4.0 says so: provider/base/compat.h) */
        if (!g->base.enc && g->taglen == ACC_GCM_UNSET) {
            if (acc_compat()->gcm_final_tag_not_set)
                acc_raise(ACC_PROV_R(PROV_R_TAG_NOT_SET), "a decryption ends only against a tag");
            goto err;
        }
        if (!msg_finish(g))
            goto err;
        g->iv_state = ACC_AEAD_IV_FINISHED;   /* the IV is not used again */
    }
    rv = 1;
err:
    *padlen = olen;
    return rv;
}

/* ======================== Update, final, EVP_Cipher ======================== */

/* The common data update of an open message, straight to the engine (the checks of
 * gcm_cipher_internal and data_add in one test): short updates are bound by the calls around the
 * engine's. 1: done, 0: failed, -1: not this case, nothing done. */
static int gcm_data_fast(acc_gcm_ctx *g, unsigned char *out, size_t *outl, const unsigned char *in, size_t inl)
{
    if (!(g->started & g->key_set) || g->iv_state != ACC_AEAD_IV_COPIED || g->tls_aad_len != ACC_GCM_UNSET
        || in == NULL || out == NULL || inl >= g->base.prov->policy.ranges_from[ACC_RANGES_AEAD]
        || inl > GCM_MAX_DATA - g->msglen)
        return -1;
    *outl = 0;
    if (!g->geng->update(&g->st, in, out, inl))
        return engine_failed(g, out, inl, "a data update");
    g->msglen += inl;
    acc_cipher_count(&g->base, inl, 1);
    *outl = inl;
    return 1;
}

static OSSL_FUNC_cipher_update_fn gcm_update;
static int gcm_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                      size_t inl)
{
    int r;

    if (inl == 0) {
        *outl = 0;
        return 1;
    }
    if (!acc_aead_piece_ok("GCM", inl) || !acc_aead_out_ok(inl, outsize))
        return 0;
    ((acc_gcm_ctx *)vctx)->eng_failed = 0;
    r = gcm_data_fast(vctx, out, outl, in, inl);
    if (r < 0)
        r = gcm_cipher_internal(vctx, out, outl, in, inl) > 0;
    if (!r) {
        if (!((acc_gcm_ctx *)vctx)->eng_failed) /* an engine failure has raised its own */
            acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED), "GCM update refused");
        return 0;
    }
    return 1;
}

/* A tag that does not match fails with no error raised, as the default's. */
static OSSL_FUNC_cipher_final_fn gcm_final;
static int gcm_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    (void)outsize;
    if (gcm_cipher_internal(vctx, out, outl, NULL, 0) <= 0)
        return 0;
    *outl = 0;
    return 1;
}

static OSSL_FUNC_cipher_cipher_fn gcm_oneshot_cipher;
static int gcm_oneshot_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                              size_t inl)
{
    if (!acc_aead_piece_ok("GCM", inl) || !acc_aead_out_ok(inl, outsize))
        return 0;
    if (gcm_cipher_internal(vctx, out, outl, in, inl) <= 0)
        return 0;
    *outl = inl;
    return 1;
}

/* ======================== Dispatch tables ======================== */

#define ACC_GCM_ENTRIES(kbits)                                                                  \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##gcm_newctx },                    \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))acc_cipher_freectx },                       \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))acc_cipher_dupctx },                         \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))gcm_einit },                           \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))gcm_dinit },                           \
        { OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT, (void (*)(void))gcm_skey_einit },                 \
        { OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT, (void (*)(void))gcm_skey_dinit },                 \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))gcm_update },                                \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))gcm_final },                                  \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))gcm_oneshot_cipher },                        \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##gcm_get_params },            \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))acc_gcm_get_ctx_params },            \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))acc_gcm_set_ctx_params },            \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },       \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))acc_gcm_gettable_ctx_params },  \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))acc_gcm_settable_ctx_params }

/* OpenSSL 3.5's pipelines (cipher_gcm_pipe.c): EVP_CIPHER_can_pipeline says yes for both directions. */
#define ACC_GCM_PIPE_ENTRIES                                                                    \
    { OSSL_FUNC_CIPHER_PIPELINE_ENCRYPT_INIT, (void (*)(void))acc_gcm_pipe_einit },             \
        { OSSL_FUNC_CIPHER_PIPELINE_DECRYPT_INIT, (void (*)(void))acc_gcm_pipe_dinit },         \
        { OSSL_FUNC_CIPHER_PIPELINE_UPDATE, (void (*)(void))acc_gcm_pipe_update },              \
        { OSSL_FUNC_CIPHER_PIPELINE_FINAL, (void (*)(void))acc_gcm_pipe_final }

#define ACC_GCM_FUNCTIONS(kbits)                                                                \
    static const acc_cipher_kind aes##kbits##gcm_kind = {                                       \
        .mode = ACC_MODE_GCM, .keylen = (kbits) / 8, .ctx_size = sizeof(acc_gcm_ctx), .aead = 1, \
        .custom_iv = 1, .on_new = gcm_on_new, .on_dup = gcm_on_dup, .on_free = gcm_on_free      \
    };                                                                                          \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##gcm_newctx;                                   \
    static void *aes##kbits##gcm_newctx(void *provctx)                                          \
    {                                                                                           \
        return acc_cipher_newctx(provctx, &aes##kbits##gcm_kind);                               \
    }                                                                                           \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##gcm_get_params;                           \
    static int aes##kbits##gcm_get_params(OSSL_PARAM params[])                                  \
    {                                                                                           \
        return acc_cipher_get_params(params, &aes##kbits##gcm_kind);                            \
    }                                                                                           \
    const OSSL_DISPATCH acc_aes##kbits##gcm_functions[] = {                                     \
        ACC_GCM_ENTRIES(kbits), { 0, NULL }                                                     \
    };                                                                                          \
    const OSSL_DISPATCH acc_aes##kbits##gcm_functions_35[] = {                                  \
        ACC_GCM_ENTRIES(kbits), ACC_GCM_PIPE_ENTRIES, { 0, NULL }                               \
    }

ACC_GCM_FUNCTIONS(128);
ACC_GCM_FUNCTIONS(192);
ACC_GCM_FUNCTIONS(256);
