/* provider/base/compat.c: the running release's differences (provider/base/compat.h), found by asking the
 * running default provider itself, once per process: its own cipher dispatch tables, in a private
 * library context (no configuration, no ENGINE, nothing of the application's), with the calls
 * that tell one behaviour from the other. Patch releases take such changes (the num check came to
 * 3.5 and 3.6 in a patch release), so asking beats a table of version numbers; where the default
 * cannot be asked (no stitched ciphers on this CPU, or no default provider), the release number
 * decides: OpenSSL 3.5 or later behaves as 3.5.9 does, 3.6 or later as 3.6.5. Every error the
 * questions raise is dropped (ERR_set_mark / ERR_pop_to_mark): the application's queue is left as
 * it was. The questions are asked on first use, not at provider init, when libcrypto may be
 * activating providers. */
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>
#include <openssl/provider.h>
#include "provider/base/compat.h"
#include "provider/base/names.h"

static acc_compat_flags flags;
static pthread_once_t once = PTHREAD_ONCE_INIT;

typedef struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    OSSL_FUNC_cipher_decrypt_init_fn *dinit;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_set_ctx_params_fn *set;
    OSSL_FUNC_cipher_gettable_ctx_params_fn *gettable;
    OSSL_FUNC_cipher_settable_ctx_params_fn *settable;
    OSSL_FUNC_cipher_gettable_params_fn *alg_gettable;
    OSSL_FUNC_cipher_get_ctx_params_fn *get;
    OSSL_FUNC_cipher_cipher_fn *cipher;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    void *provctx;
} cipher_fns;

/* name among an algorithm's colon-separated names */
static int has_name(const char *names, const char *name)
{
    size_t n = strlen(name);

    for (const char *s = names; s != NULL && *s != '\0'; s = strchr(s, ':') ? strchr(s, ':') + 1 : NULL)
        if (strncasecmp(s, name, n) == 0 && (s[n] == ':' || s[n] == '\0'))
            return 1;
    return 0;
}

static int find_cipher(OSSL_PROVIDER *prov, const char *name, cipher_fns *f)
{
    int no_cache = 0;
    const OSSL_ALGORITHM *algs;
    const OSSL_DISPATCH *d = NULL;

    memset(f, 0, sizeof(*f));
    if (prov == NULL)
        return 0;
    algs = OSSL_PROVIDER_query_operation(prov, OSSL_OP_CIPHER, &no_cache);
    for (const OSSL_ALGORITHM *a = algs; a != NULL && a->algorithm_names != NULL && d == NULL; a++)
        if (has_name(a->algorithm_names, name))
            d = a->implementation;
    for (; d != NULL && d->function_id != 0; d++) {
        switch (d->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX:
            f->newctx = OSSL_FUNC_cipher_newctx(d);
            break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT:
            f->einit = OSSL_FUNC_cipher_encrypt_init(d);
            break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT:
            f->dinit = OSSL_FUNC_cipher_decrypt_init(d);
            break;
        case OSSL_FUNC_CIPHER_FINAL:
            f->final = OSSL_FUNC_cipher_final(d);
            break;
        case OSSL_FUNC_CIPHER_CIPHER:
            f->cipher = OSSL_FUNC_cipher_cipher(d);
            break;
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS:
            f->set = OSSL_FUNC_cipher_set_ctx_params(d);
            break;
        case OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS:
            f->gettable = OSSL_FUNC_cipher_gettable_ctx_params(d);
            break;
        case OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS:
            f->settable = OSSL_FUNC_cipher_settable_ctx_params(d);
            break;
        case OSSL_FUNC_CIPHER_GETTABLE_PARAMS:
            f->alg_gettable = OSSL_FUNC_cipher_gettable_params(d);
            break;
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS:
            f->get = OSSL_FUNC_cipher_get_ctx_params(d);
            break;
        case OSSL_FUNC_CIPHER_FREECTX:
            f->freectx = OSSL_FUNC_cipher_freectx(d);
            break;
        }
    }
    if (algs != NULL)
        OSSL_PROVIDER_unquery_operation(prov, OSSL_OP_CIPHER, algs);
    f->provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
    return f->newctx != NULL && f->einit != NULL && f->set != NULL && f->freectx != NULL;
}

/* Does the default's AES-128-ECB take a num of 16? (-1: cannot tell) */
static int takes_num_16(OSSL_PROVIDER *prov)
{
    cipher_fns f;
    unsigned int num = 16;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &num), OSSL_PARAM_END };
    void *ctx;
    int ok;

    if (!find_cipher(prov, ACC_NAME_AES_128_ECB, &f) || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    ok = f.set(ctx, p);
    f.freectx(ctx);
    return ok;
}

/* Does the default's stitched cipher refuse a multiblock AAD of interleave 5, which 3.0 takes as
 * 4? (-1: cannot tell: no stitched cipher on this CPU) */
static int mb_refuses_interleave_5(OSSL_PROVIDER *prov)
{
    static const unsigned char key[16], mackey[20];
    unsigned char aad[13] = { 0, 0, 0, 0, 0, 0, 0, 0, 23, 3, 3, 0, 0 }; /* TLS 1.2, length 0 */
    unsigned int il = 5;
    cipher_fns f;
    OSSL_PARAM mk[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_MAC_KEY, (void *)mackey, sizeof(mackey)),
                         OSSL_PARAM_END };
    /* the AAD parameter's size is the write's length, as libssl passes it */
    OSSL_PARAM mb[3] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_AAD, aad, 4 * 4096),
                         OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_INTERLEAVE, &il), OSSL_PARAM_END };
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, ACC_NAME_AES_128_CBC_HMAC_SHA1, &f) || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    if (f.einit(ctx, key, sizeof(key), NULL, 0, NULL) && f.set(ctx, mk))
        r = !f.set(ctx, mb);
    f.freectx(ctx);
    return r;
}

/* Does the default's CBC, asked for its IV as an octet string that fits, raise an error on the
 * way (it tried the pointer first: 3.2 to 3.5)? (-1: cannot tell) A sentinel error of our own
 * shows whether anything came after it. */
static int iv_tries_pointer_first(OSSL_PROVIDER *prov)
{
    static const unsigned char key[16], iv[16];
    unsigned char buf[16];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, buf, sizeof(buf)), OSSL_PARAM_END };
    cipher_fns f;
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, ACC_NAME_AES_128_CBC, &f) || f.get == NULL || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    ERR_raise(ERR_LIB_USER, 1);
    if (f.einit(ctx, key, sizeof(key), iv, sizeof(iv), NULL) && f.get(ctx, p))
        r = ERR_peek_last_error() != ERR_PACK(ERR_LIB_USER, 0, 1);
    f.freectx(ctx);
    return r;
}

enum { GETTABLE, GETTABLE_CTX, SETTABLE_CTX };

/* Is name in one of the default's cipher's parameter tables (first: its first entry)? (-1: cannot tell) */
static int lists_at(OSSL_PROVIDER *prov, const char *cipher, int table, const char *name, int first)
{
    cipher_fns f;
    const OSSL_PARAM *t = NULL;

    if (!find_cipher(prov, cipher, &f))
        return -1;
    if (table == GETTABLE && f.alg_gettable != NULL)
        t = f.alg_gettable(f.provctx);
    else if (table == GETTABLE_CTX && f.gettable != NULL)
        t = f.gettable(NULL, f.provctx);
    else if (table == SETTABLE_CTX && f.settable != NULL)
        t = f.settable(NULL, f.provctx);
    if (t == NULL)
        return -1;
    return first ? t[0].key != NULL && strcmp(t[0].key, name) == 0 : OSSL_PARAM_locate_const(t, name) != NULL;
}

static int lists(OSSL_PROVIDER *prov, const char *cipher, int table, const char *name)
{
    return lists_at(prov, cipher, table, name, 0);
}

/* Does the default's AES-128-GCM raise anything on a decryption's final with no tag set? (-1:
 * cannot tell) A sentinel error of our own shows whether anything came after it. */
static int gcm_final_raises(OSSL_PROVIDER *prov)
{
    static const unsigned char key[16], iv[12];
    unsigned char out[16];
    size_t outl = 0;
    cipher_fns f;
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, ACC_NAME_AES_128_GCM, &f) || f.dinit == NULL || f.final == NULL
        || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    if (f.dinit(ctx, key, sizeof(key), iv, sizeof(iv), NULL)) {
        ERR_raise(ERR_LIB_USER, 1);
        r = !f.final(ctx, out, &outl, sizeof(out)) && ERR_peek_last_error() != ERR_PACK(ERR_LIB_USER, 0, 1);
    }
    f.freectx(ctx);
    return r;
}

/* Does the default's AES-128-GCM, keyed for encryption with no IV, answer get-iv? (-1: cannot tell) */
static int gcm_get_iv_generates(OSSL_PROVIDER *prov)
{
    static const unsigned char key[16];
    unsigned char iv[16];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, iv, sizeof(iv)), OSSL_PARAM_END };
    cipher_fns f;
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, ACC_NAME_AES_128_GCM, &f) || f.get == NULL || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    if (f.einit(ctx, key, sizeof(key), NULL, 0, NULL))
        r = f.get(ctx, p) == 1;
    f.freectx(ctx);
    return r;
}

/* Does the default's cipher refuse a get (or a set, of value) of key asked twice? (-1: cannot tell) */
static int refuses_repeated(OSSL_PROVIDER *prov, const char *cipher, int set, const char *key, size_t value)
{
    size_t a = value, b = value;
    OSSL_PARAM p[3] = { OSSL_PARAM_size_t(key, &a), OSSL_PARAM_size_t(key, &b), OSSL_PARAM_END };
    cipher_fns f;
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, cipher, &f) || (set ? f.set == NULL : f.get == NULL)
        || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    r = set ? !f.set(ctx, p) : !f.get(ctx, p);
    f.freectx(ctx);
    return r;
}

/* Does the default's AES-128-GCM walk a get request in its order (3.5's decoder loop, which answers
 * each occurrence of a repeated key too), rather than look its own keys up in its own order (3.0's,
 * 3.6's)? Asked with the tag first, which fails before an encryption's final: walking, it stops
 * there and leaves the ivlen after it unanswered. (-1: cannot tell) */
static int gcm_get_walks_request(OSSL_PROVIDER *prov)
{
    static const unsigned char key[16], iv[12];
    unsigned char tag[16];
    size_t ivlen = 0;
    OSSL_PARAM p[3] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, sizeof(tag)),
                        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, &ivlen), OSSL_PARAM_END };
    cipher_fns f;
    void *ctx;
    int r = -1;

    if (!find_cipher(prov, ACC_NAME_AES_128_GCM, &f) || f.get == NULL || (ctx = f.newctx(f.provctx)) == NULL)
        return -1;
    if (f.einit(ctx, key, sizeof(key), iv, sizeof(iv), NULL) && !f.get(ctx, p))
        r = !OSSL_PARAM_modified(&p[1]);
    f.freectx(ctx);
    return r;
}

/* The default's answer, or the release's where the default cannot be asked (-1) */
/* AES-128-CCM of the default, keyed (nonce of 7 bytes) for dec or enc: its functions and a context. */
static void *ccm_ctx(OSSL_PROVIDER *prov, int dec, cipher_fns *f)
{
    static const unsigned char key[16], nonce[7];
    void *ctx;

    if (!find_cipher(prov, ACC_NAME_AES_128_CCM, f) || f->einit == NULL || f->dinit == NULL || f->final == NULL
        || f->cipher == NULL || f->get == NULL || (ctx = f->newctx(f->provctx)) == NULL)
        return NULL;
    if (!(dec ? f->dinit(ctx, key, sizeof(key), nonce, sizeof(nonce), NULL)
              : f->einit(ctx, key, sizeof(key), nonce, sizeof(nonce), NULL))) {
        f->freectx(ctx);
        return NULL;
    }
    return ctx;
}

/* Does the default's CCM final refuse a decryption begun (a nonce) and not checked? (-1: cannot tell) */
static int ccm_final_strict(OSSL_PROVIDER *prov)
{
    unsigned char out[16];
    size_t outl = 0;
    cipher_fns f;
    void *ctx = ccm_ctx(prov, 1, &f);
    int r;

    if (ctx == NULL)
        return -1;
    r = !f.final(ctx, out, &outl, sizeof(out));
    f.freectx(ctx);
    return r;
}

/* Is there a tag to get after the default's CCM final of an encryption with a nonce and no data? (-1: cannot
 * tell) */
static int ccm_final_runs_empty(OSSL_PROVIDER *prov)
{
    unsigned char out[16], tag[12];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, sizeof(tag)), OSSL_PARAM_END };
    size_t outl = 0;
    cipher_fns f;
    void *ctx = ccm_ctx(prov, 0, &f);
    int r;

    if (ctx == NULL)
        return -1;
    ERR_set_mark();
    r = f.final(ctx, out, &outl, sizeof(out)) ? f.get(ctx, p) : -1;
    ERR_pop_to_mark();
    f.freectx(ctx);
    return r;
}

/* Does the default's CCM raise "tag not set" for a decryption's data with no tag set? (-1: cannot tell) */
static int ccm_tag_not_set_raised(OSSL_PROVIDER *prov)
{
    unsigned char in[16] = { 0 }, out[16];
    size_t outl = 0;
    cipher_fns f;
    void *ctx = ccm_ctx(prov, 1, &f);
    unsigned long e;
    int r;

    if (ctx == NULL)
        return -1;
    ERR_raise(ERR_LIB_USER, 1);
    r = f.cipher(ctx, out, &outl, sizeof(out), in, sizeof(in)) <= 0;
    e = ERR_peek_last_error();
    f.freectx(ctx);
    return r && ERR_GET_LIB(e) == ERR_LIB_PROV && ERR_GET_REASON(e) == PROV_R_TAG_NOT_SET;
}

/* How many bytes the default's CCM gives for key (IV or UPDATED_IV) into 24 asked: 32 where it gives
 * as many as asked (its nonce buffer and the next one), else 16. (-1: cannot tell) */
static int ccm_iv_room(OSSL_PROVIDER *prov, const char *key)
{
    unsigned char b[24];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(key, b, sizeof(b)), OSSL_PARAM_END };
    cipher_fns f;
    void *ctx = ccm_ctx(prov, 0, &f);
    int r;

    if (ctx == NULL)
        return -1;
    r = f.get(ctx, p) && p[0].return_size == sizeof(b) ? 32 : 16;
    f.freectx(ctx);
    return r;
}

/* Is the default's CCM tag of 16 bytes encrypted by a context keyed for decryption (then made an
 * encryption by a nonce alone) other than that of a context keyed for encryption? (-1: cannot tell) */
static int ccm_blocks_dir_at_key(OSSL_PROVIDER *prov)
{
    static const unsigned char nonce[7];
    unsigned char in[16] = { 0 }, out[16], tag[2][12];
    OSSL_PARAM p[2] = { OSSL_PARAM_END, OSSL_PARAM_END };
    size_t outl;
    int ok = 1;

    for (int dec = 0; dec < 2 && ok; dec++) {
        cipher_fns f;
        void *ctx = ccm_ctx(prov, dec, &f);

        if (ctx == NULL)
            return -1;
        p[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag[dec], sizeof(tag[dec]));
        ok = f.einit(ctx, NULL, 0, nonce, sizeof(nonce), NULL) && f.cipher(ctx, out, &outl, sizeof(out), in, sizeof(in))
             && f.get(ctx, p);
        f.freectx(ctx);
    }
    return ok ? memcmp(tag[0], tag[1], sizeof(tag[0])) != 0 : -1;
}

static int ask(int answer, int by_release)
{
    return answer < 0 ? by_release : answer;
}

static int negated(int answer)
{
    return answer < 0 ? answer : !answer;
}

static void find_flags(void)
{
    int since_3_5 = OpenSSL_version_num() >= 0x30500000L, since_3_6 = OpenSSL_version_num() >= 0x30600000L;
    int since_4_0 = OpenSSL_version_num() >= 0x40000000L;
    OSSL_LIB_CTX *lc;
    OSSL_PROVIDER *def = NULL;

    ERR_set_mark();
    if ((lc = OSSL_LIB_CTX_new()) != NULL)
        def = OSSL_PROVIDER_load(lc, "default");
    flags.num_below_blocksize = ask(negated(takes_num_16(def)), since_3_5);
    flags.gcm_iv_generated = ask(lists(def, ACC_NAME_AES_128_GCM, GETTABLE_CTX, "iv-generated"), since_3_5);
    flags.mb_aad_checked = ask(mb_refuses_interleave_5(def), since_3_5);
    flags.iv_param_by_type = ask(negated(iv_tries_pointer_first(def)), since_3_6);
    flags.alg_encrypt_then_mac = ask(lists(def, ACC_NAME_AES_128_CBC, GETTABLE, "encrypt-then-mac"), since_3_6);
    flags.stitched_lists_tls_version =
        ask(lists(def, ACC_NAME_AES_128_CBC_HMAC_SHA1, SETTABLE_CTX, "tls-version"), !since_3_6);
    flags.stitched_settable_multiblock_first = ask(
        lists_at(def, ACC_NAME_AES_128_CBC_HMAC_SHA1, SETTABLE_CTX, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_MAX_SEND_FRAGMENT, 1),
        since_4_0);
    flags.gcm_final_tag_not_set = ask(gcm_final_raises(def), since_4_0);
    flags.gcm_get_iv_generates = ask(gcm_get_iv_generates(def), since_4_0);
    flags.gcm_get_walks_request = ask(gcm_get_walks_request(def), since_3_5 && !since_3_6);
    flags.repeated_param_refused[ACC_DECODER_COMMON] =
        ask(refuses_repeated(def, ACC_NAME_AES_128_ECB, 0, OSSL_CIPHER_PARAM_IVLEN, 0), since_3_6);
    flags.repeated_param_refused[ACC_DECODER_STITCHED] =
        ask(refuses_repeated(def, ACC_NAME_AES_128_CBC_HMAC_SHA1, 0, OSSL_CIPHER_PARAM_IVLEN, 0), since_4_0);
    flags.ccm_final_strict = ask(ccm_final_strict(def), since_3_5);
    flags.ccm_final_runs_empty = ask(ccm_final_runs_empty(def), since_3_5);
    flags.ccm_tag_not_set = ask(ccm_tag_not_set_raised(def), since_4_0);
    flags.ccm_iv_room[0] = ask(ccm_iv_room(def, OSSL_CIPHER_PARAM_IV), 32);
    flags.ccm_iv_room[1] = ask(ccm_iv_room(def, OSSL_CIPHER_PARAM_UPDATED_IV), 32);
    flags.ccm_blocks_dir_at_key = ask(ccm_blocks_dir_at_key(def), 0);
    flags.repeated_param_refused[ACC_DECODER_XTS_SET] =
        ask(refuses_repeated(def, ACC_NAME_AES_128_XTS, 1, OSSL_CIPHER_PARAM_KEYLEN, 32), since_4_0);
    if (def != NULL)
        OSSL_PROVIDER_unload(def);
    OSSL_LIB_CTX_free(lc);
    ERR_pop_to_mark();
}

const acc_compat_flags *acc_compat(void)
{
    pthread_once(&once, find_flags);
    return &flags;
}

int acc_compat_set_iv(OSSL_PARAM *p, const void *iv, size_t len, int string_first)
{
    if (acc_compat()->iv_param_by_type) /* OpenSSL 3.6: the caller's form only */
        return p->data_type == OSSL_PARAM_OCTET_PTR ? OSSL_PARAM_set_octet_ptr(p, iv, len)
                                                    : OSSL_PARAM_set_octet_string(p, iv, len);
    if (string_first)
        return OSSL_PARAM_set_octet_string(p, iv, len) || OSSL_PARAM_set_octet_ptr(p, iv, len);
    return OSSL_PARAM_set_octet_ptr(p, iv, len) || OSSL_PARAM_set_octet_string(p, iv, len);
}

#ifndef PROV_R_REPEATED_PARAMETER
#define PROV_R_REPEATED_PARAMETER 252 /* include/openssl/proverr.h from 3.6 */
#endif

/* The key at the first place of params that repeats an earlier one that is_known says is the
 * cipher's (where the default's decoder, walking in order, stops), or NULL */
static const char *repeated(const OSSL_PARAM params[], int (*is_known)(const char *, const void *), const void *arg)
{
    for (size_t j = 1; params[j].key != NULL; j++)
        for (size_t i = 0; i < j; i++)
            if (strcmp(params[i].key, params[j].key) == 0 && is_known(params[j].key, arg))
                return params[j].key;
    return NULL;
}

static int in_table(const char *key, const void *arg)
{
    return OSSL_PARAM_locate_const(arg, key) != NULL;
}

static int in_keys(const char *key, const void *arg)
{
    for (const char *const *k = arg; *k != NULL; k++)
        if (strcmp(*k, key) == 0)
            return 1;
    return 0;
}

static int unrepeated(const OSSL_PARAM params[], int (*is_known)(const char *, const void *), const void *arg,
                      int decoder)
{
    const char *key;

    if (params == NULL || params[0].key == NULL || params[1].key == NULL
        || !acc_compat()->repeated_param_refused[decoder])
        return 1;
    if ((key = repeated(params, is_known, arg)) == NULL)
        return 1;
    ERR_raise_data(ERR_LIB_PROV, PROV_R_REPEATED_PARAMETER, "param %s is repeated", key);
    return 0;
}

int acc_compat_unrepeated(const OSSL_PARAM params[], const OSSL_PARAM *known, int decoder)
{
    return known == NULL || unrepeated(params, in_table, known, decoder);
}

int acc_compat_unrepeated_keys(const OSSL_PARAM params[], const char *const keys[], int decoder)
{
    return unrepeated(params, in_keys, keys, decoder);
}
