/* provider/entry/rand.c: a random generator that delegates to OpenSSL's own DRBG in a private library
 * context, so `openssl speed -provider accelaes` (no default provider) can fetch a DRBG.
 * It is not a DRBG: every byte comes from the default provider's CTR-DRBG, seeded from the
 * operating system there. prov.c offers it only to a library context where no other provider has
 * a RAND, so it never replaces a DRBG that would serve without accelaes.
 * What it keeps of what it is given: generate and reseed pass their prediction-resistance request,
 * additional input and (reseed) entropy to the delegate. It ignores the parent (and so never draws
 * from it), instantiate's strength, nonce and personalisation string, and the
 * cipher, digest and use_df settings (the delegate is AES-256 CTR-DRBG with a derivation function):
 * a known-answer test therefore cannot pass through it, and needs the default provider's own. */
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include "provider/cipher/algs.h"
#include "provider/base/names.h"

typedef struct {
    acc_prov_ctx *prov;
    int state;                 /* EVP_RAND_STATE_* */
} acc_rand_ctx;

static OSSL_FUNC_rand_newctx_fn rand_newctx;
static OSSL_FUNC_rand_freectx_fn rand_freectx;
static OSSL_FUNC_rand_instantiate_fn rand_instantiate;
static OSSL_FUNC_rand_uninstantiate_fn rand_uninstantiate;
static OSSL_FUNC_rand_generate_fn rand_generate;
static OSSL_FUNC_rand_reseed_fn rand_reseed;
static OSSL_FUNC_rand_enable_locking_fn rand_enable_locking;
static OSSL_FUNC_rand_lock_fn rand_lock;
static OSSL_FUNC_rand_unlock_fn rand_unlock;
static OSSL_FUNC_rand_gettable_ctx_params_fn rand_gettable_ctx_params;
static OSSL_FUNC_rand_get_ctx_params_fn rand_get_ctx_params;
static OSSL_FUNC_rand_settable_ctx_params_fn rand_settable_ctx_params;
static OSSL_FUNC_rand_set_ctx_params_fn rand_set_ctx_params;
static OSSL_FUNC_rand_get_seed_fn rand_get_seed;
static OSSL_FUNC_rand_clear_seed_fn rand_clear_seed;
static OSSL_FUNC_rand_verify_zeroization_fn rand_verify_zeroization;

/* The private library context's per-thread DRBG (thread-safe by construction). */
static EVP_RAND_CTX *delegate(acc_rand_ctx *r)
{
    OSSL_LIB_CTX *lc = acc_priv_libctx(r->prov);
    EVP_RAND_CTX *d = lc != NULL ? RAND_get0_private(lc) : NULL;

    if (lc != NULL && d == NULL)
        acc_raise(ACC_R_RAND_FAILURE, "the default provider's DRBG is not available");
    return d;
}

static void *rand_newctx(void *provctx, void *parent, const OSSL_DISPATCH *parent_calls)
{
    acc_rand_ctx *r = OPENSSL_zalloc(sizeof(*r));

    (void)parent;         /* seeding is the delegate's business, not the parent's */
    (void)parent_calls;
    if (r == NULL) {
        acc_raise(ACC_R_MALLOC_FAILURE, "allocating a random generator context");
        return NULL;
    }
    r->prov = provctx;
    r->state = EVP_RAND_STATE_UNINITIALISED;
    return r;
}

static void rand_freectx(void *vr)
{
    OPENSSL_free(vr);
}

static int rand_instantiate(void *vr, unsigned int strength, int pr, const unsigned char *pstr,
                            size_t pstr_len, const OSSL_PARAM params[])
{
    acc_rand_ctx *r = vr;

    (void)strength; (void)pr; (void)pstr; (void)pstr_len; (void)params;
    if (delegate(r) == NULL) {
        r->state = EVP_RAND_STATE_ERROR;
        return 0;
    }
    r->state = EVP_RAND_STATE_READY;
    return 1;
}

static int rand_uninstantiate(void *vr)
{
    ((acc_rand_ctx *)vr)->state = EVP_RAND_STATE_UNINITIALISED;
    return 1;
}

static int rand_generate(void *vr, unsigned char *out, size_t outlen, unsigned int strength,
                         int pr, const unsigned char *addin, size_t addin_len)
{
    EVP_RAND_CTX *d = delegate(vr);

    if (d == NULL || !EVP_RAND_generate(d, out, outlen, strength, pr, addin, addin_len)) {
        acc_raise(ACC_R_RAND_FAILURE, "the delegate DRBG failed to generate %zu bytes", outlen);
        return 0;
    }
    return 1;
}

static int rand_reseed(void *vr, int pr, const unsigned char *ent, size_t ent_len,
                       const unsigned char *addin, size_t addin_len)
{
    EVP_RAND_CTX *d = delegate(vr);

    return d != NULL && EVP_RAND_reseed(d, pr, ent, ent_len, addin, addin_len);
}

/* The delegate locks itself; callers may still ask for locking. */
static int rand_enable_locking(void *vr) { (void)vr; return 1; }
static int rand_lock(void *vr) { (void)vr; return 1; }
static void rand_unlock(void *vr) { (void)vr; }

static const OSSL_PARAM *rand_gettable_ctx_params(void *vr, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_int(OSSL_RAND_PARAM_STATE, NULL),
        OSSL_PARAM_uint(OSSL_RAND_PARAM_STRENGTH, NULL),
        OSSL_PARAM_size_t(OSSL_RAND_PARAM_MAX_REQUEST, NULL),
        OSSL_PARAM_END
    };
    (void)vr; (void)provctx;
    return known;
}

static int rand_get_ctx_params(void *vr, OSSL_PARAM params[])
{
    acc_rand_ctx *r = vr;
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_STATE)) != NULL && !OSSL_PARAM_set_int(p, r->state))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_STRENGTH)) != NULL && !OSSL_PARAM_set_uint(p, 256))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_MAX_REQUEST)) != NULL
        && !OSSL_PARAM_set_size_t(p, 1 << 16))
        return 0;
    return 1;
}

static const OSSL_PARAM *rand_settable_ctx_params(void *vr, void *provctx)
{
    static const OSSL_PARAM none[] = { OSSL_PARAM_END };
    (void)vr; (void)provctx;
    return none;
}

/* libcrypto passes the DRBG settings (cipher, digest) of its configuration through; the
 * delegate has its own, so they are accepted and ignored. */
static int rand_set_ctx_params(void *vr, const OSSL_PARAM params[])
{
    (void)vr; (void)params;
    return 1;
}

/* Seed material for child DRBGs that take this one as parent. */
static size_t rand_get_seed(void *vr, unsigned char **buffer, int entropy, size_t min_len,
                            size_t max_len, int pr, const unsigned char *adin, size_t adin_len)
{
    size_t n = min_len > 0 ? min_len : (size_t)(entropy + 7) / 8;
    unsigned char *b;

    if (n < 32)
        n = 32;
    if (n > max_len)
        n = max_len;
    if ((b = OPENSSL_secure_malloc(n)) == NULL)
        return 0;
    if (!rand_generate(vr, b, n, 256, pr, adin, adin_len)) {
        OPENSSL_secure_clear_free(b, n);
        return 0;
    }
    *buffer = b;
    return n;
}

static void rand_clear_seed(void *vr, unsigned char *buffer, size_t b_len)
{
    (void)vr;
    OPENSSL_secure_clear_free(buffer, b_len);
}

static int rand_verify_zeroization(void *vr) { (void)vr; return 1; }

static const OSSL_DISPATCH rand_functions[] = {
    { OSSL_FUNC_RAND_NEWCTX, (void (*)(void))rand_newctx },
    { OSSL_FUNC_RAND_FREECTX, (void (*)(void))rand_freectx },
    { OSSL_FUNC_RAND_INSTANTIATE, (void (*)(void))rand_instantiate },
    { OSSL_FUNC_RAND_UNINSTANTIATE, (void (*)(void))rand_uninstantiate },
    { OSSL_FUNC_RAND_GENERATE, (void (*)(void))rand_generate },
    { OSSL_FUNC_RAND_RESEED, (void (*)(void))rand_reseed },
    { OSSL_FUNC_RAND_ENABLE_LOCKING, (void (*)(void))rand_enable_locking },
    { OSSL_FUNC_RAND_LOCK, (void (*)(void))rand_lock },
    { OSSL_FUNC_RAND_UNLOCK, (void (*)(void))rand_unlock },
    { OSSL_FUNC_RAND_GETTABLE_CTX_PARAMS, (void (*)(void))rand_gettable_ctx_params },
    { OSSL_FUNC_RAND_GET_CTX_PARAMS, (void (*)(void))rand_get_ctx_params },
    { OSSL_FUNC_RAND_SETTABLE_CTX_PARAMS, (void (*)(void))rand_settable_ctx_params },
    { OSSL_FUNC_RAND_SET_CTX_PARAMS, (void (*)(void))rand_set_ctx_params },
    { OSSL_FUNC_RAND_GET_SEED, (void (*)(void))rand_get_seed },
    { OSSL_FUNC_RAND_CLEAR_SEED, (void (*)(void))rand_clear_seed },
    { OSSL_FUNC_RAND_VERIFY_ZEROIZATION, (void (*)(void))rand_verify_zeroization },
    { 0, NULL }
};

const OSSL_ALGORITHM acc_rand_algorithms[] = {
    { ACC_NAMES_CTR_DRBG, ACC_PROPS, rand_functions, "DRBG delegating to the default provider's" },
    { NULL, NULL, NULL, NULL }
};
