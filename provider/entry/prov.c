/* provider/entry/prov.c: OSSL_provider_init, the provider context, its gettable parameters,
 * the operation query, and the core handle errors go through before the texts are registered
 * (provider/base/err.c). Read top to bottom. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include "accel/mb.h"
#include "provider/cipher/algs.h"
#include "provider/route/skey.h"
#include "scheduler/forksafe.h"
#include "scheduler/sched.h"

/* ======================== Errors ======================== */

/* Where the process-wide texts could not be registered (acc_err_register: the code linked into a
 * program), errors go through the core handle of a load that is still alive: the live provider
 * contexts, newest first. The core functions are libcrypto's, the same for every load, so one copy
 * is right; the handle is not: it is the OSSL_PROVIDER of one load, freed with it (core_vset_error
 * reads its error library number), and the module outlives it (sched.c pins it). */
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
ACC_FORK_SAFE(&err_lock, 1, "provider errors", ACC_RANK_ERR, ACC_FORK_HOLD);
static acc_prov_ctx *live_provs;
static OSSL_FUNC_core_new_error_fn *c_new_error;
static OSSL_FUNC_core_vset_error_fn *c_vset_error;

/* acc_raise's hook (provider/base/err.h) */
static void raise_via_handle(int reason, const char *fmt, va_list ap)
{
    /* held while raising, so that the handle's provider cannot be torn down meanwhile */
    pthread_mutex_lock(&err_lock);
    if (live_provs != NULL && c_new_error != NULL && c_vset_error != NULL) {
        c_new_error(live_provs->handle);
        c_vset_error(live_provs->handle, (uint32_t)reason, fmt, ap);
    }
    pthread_mutex_unlock(&err_lock);
}

static void live_add(acc_prov_ctx *prov)
{
    pthread_mutex_lock(&err_lock);
    prov->next_live = live_provs;
    live_provs = prov;
    pthread_mutex_unlock(&err_lock);
}

/* Unlinks prov (before it is freed) and frees it. */
static void live_remove_free(acc_prov_ctx *prov)
{
    pthread_mutex_lock(&err_lock);
    for (acc_prov_ctx **pp = &live_provs; *pp != NULL; pp = &(*pp)->next_live)
        if (*pp == prov) {
            *pp = prov->next_live;
            break;
        }
    pthread_mutex_unlock(&err_lock);
    OPENSSL_free(prov);
}

/* ======================== Provider context ======================== */

static pthread_mutex_t priv_lock = PTHREAD_MUTEX_INITIALIZER;
ACC_FORK_SAFE(&priv_lock, 1, "private libctx", ACC_RANK_PRIV, ACC_FORK_HOLD);

/* Set (under priv_lock) when OPENSSL_cleanup has begun: no private context is made after that. */
static int priv_closed;
static int priv_atexit_done;   /* registering was tried (once: the answer does not change) */

static void priv_free_at_cleanup(void);

/* Registers priv_free_at_cleanup with OPENSSL_atexit of the libcrypto this module calls (found from
 * the address of one of its functions), looked up at run time: OpenSSL 4.0 removed OPENSSL_atexit,
 * and with it the ENGINE API (the handler's reason, below) and the atexit-time OPENSSL_cleanup.
 * Where the running libcrypto has none, there is nothing to do early and teardown frees the
 * context. Returns 1 when registered. */
static int priv_register_atexit(void)
{
    typedef int atexit_fn(void (*)(void));
    Dl_info info;
    void *lib;
    atexit_fn *reg = NULL;
    int ok = 0;

    if (dladdr((void *)OSSL_LIB_CTX_new, &info) == 0 || info.dli_fname == NULL)
        return 0;
    lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == NULL)
        return 0;
    *(void **)&reg = dlsym(lib, "OPENSSL_atexit");
    if (reg != NULL)
        ok = reg(priv_free_at_cleanup);
    dlclose(lib);
    return ok;
}

OSSL_LIB_CTX *acc_priv_libctx(acc_prov_ctx *prov)
{
    OSSL_LIB_CTX *lc;

    pthread_mutex_lock(&priv_lock);
    lc = prov->priv_libctx;
    if (lc == NULL && !priv_closed) {
        if (!priv_atexit_done) {
            /* OPENSSL_atexit keeps a pointer into this module, and the system libcrypto does not
             * pin the module that registers one: OSSL_provider_init's acc_sched_attach already
             * pinned it (RTLD_NODELETE, scheduler/sched.c). If registering fails, teardown frees
             * the context instead, as before. */
            (void)priv_register_atexit();
            priv_atexit_done = 1;
        }
        lc = OSSL_LIB_CTX_new();
        /* The handle OSSL_PROVIDER_load returns holds a reference of its own, which
         * OSSL_LIB_CTX_free does not drop: it is kept, and unloaded in priv_release. */
        if (lc != NULL && (prov->priv_default = OSSL_PROVIDER_load(lc, "default")) == NULL) {
            OSSL_LIB_CTX_free(lc);
            lc = NULL;
        }
        prov->priv_libctx = lc;
    }
    pthread_mutex_unlock(&priv_lock);
    if (lc == NULL)
        acc_raise(ACC_R_RAND_FAILURE, "cannot create the private library context with the default provider");
    return lc;
}

/* Takes prov's private context and its default provider out of prov. priv_lock held. */
static void priv_detach(acc_prov_ctx *prov, OSSL_PROVIDER **def, OSSL_LIB_CTX **lc)
{
    *def = prov->priv_default;
    *lc = prov->priv_libctx;
    prov->priv_default = NULL;
    prov->priv_libctx = NULL;
}

static void priv_release(OSSL_PROVIDER *def, OSSL_LIB_CTX *lc)
{
    if (def != NULL)
        OSSL_PROVIDER_unload(def);
    OSSL_LIB_CTX_free(lc);
}

/* OPENSSL_cleanup frees the ENGINE lock (engine_cleanup_int) before it tears down the default
 * library context, and with it this provider. ENGINE tables are process-wide, so an ENGINE set
 * as default for AES-256-CTR also serves the private context's CTR-DRBG, whose cipher contexts
 * then hold the ENGINE: freeing them from prov_teardown takes the freed lock (SIGSEGV at exit).
 * OPENSSL_atexit handlers run first in OPENSSL_cleanup, with all of libcrypto alive: the private
 * contexts are freed here, as OpenSSL frees its own default DRBG early
 * (ossl_release_default_drbg_ctx). Lock order: priv_lock, then err_lock, as everywhere (errors
 * may be raised under any other lock). */
static void priv_free_at_cleanup(void)
{
    OSSL_PROVIDER *def;
    OSSL_LIB_CTX *lc;

    do {
        lc = NULL;
        def = NULL;
        pthread_mutex_lock(&priv_lock);
        priv_closed = 1;
        pthread_mutex_lock(&err_lock);
        for (acc_prov_ctx *prov = live_provs; prov != NULL && lc == NULL; prov = prov->next_live)
            priv_detach(prov, &def, &lc);
        pthread_mutex_unlock(&err_lock);
        pthread_mutex_unlock(&priv_lock);
        priv_release(def, lc);   /* outside the locks: it runs the default provider's teardown */
    } while (lc != NULL);
}

static void prov_teardown(void *vprov)
{
    acc_prov_ctx *prov = vprov;
    OSSL_PROVIDER *def;
    OSSL_LIB_CTX *lc;

    if (prov == NULL)
        return;
    pthread_mutex_lock(&priv_lock);
    priv_detach(prov, &def, &lc);
    pthread_mutex_unlock(&priv_lock);
    priv_release(def, lc);
    live_remove_free(prov);
}

/* ======================== Parameters and query ======================== */

static const OSSL_PARAM prov_param_types[] = {
    OSSL_PARAM_DEFN(OSSL_PROV_PARAM_NAME, OSSL_PARAM_UTF8_PTR, NULL, 0),
    OSSL_PARAM_DEFN(OSSL_PROV_PARAM_VERSION, OSSL_PARAM_UTF8_PTR, NULL, 0),
    OSSL_PARAM_DEFN(OSSL_PROV_PARAM_BUILDINFO, OSSL_PARAM_UTF8_PTR, NULL, 0),
    OSSL_PARAM_DEFN(OSSL_PROV_PARAM_STATUS, OSSL_PARAM_INTEGER, NULL, 0),
    OSSL_PARAM_END
};

static const OSSL_PARAM *prov_gettable_params(void *vprov)
{
    (void)vprov;
    return prov_param_types;
}

/* The multi-buffer lanes as build info says them: tests that need the lanes read it (conftest.py
 * lanes_missing) to skip, saying why, where the build or the CPU has none. */
static void lanes_info(char *buf, size_t n)
{
    const char *lib = acc_mb_library();

    if (lib == NULL)
        snprintf(buf, n, "lanes none (built without intel-ipsec-mb)");
    else if (!acc_mb_available())
        snprintf(buf, n, "lanes none (intel-ipsec-mb %s: no hardware AES here)", lib);
    else
        snprintf(buf, n, "lanes %d (intel-ipsec-mb %s)", acc_mb_lanes(), lib);
}

static int prov_get_params(void *vprov, OSSL_PARAM params[])
{
    acc_prov_ctx *prov = vprov;
    static char buildinfo[256];
    char lanes[96];
    OSSL_PARAM *p;

    lanes_info(lanes, sizeof(lanes));
    snprintf(buildinfo, sizeof(buildinfo), "accelaes %s, engine %s, %s, built " __DATE__, ACC_PROV_VERSION,
             prov->eng != NULL ? prov->eng->name : "none", lanes);
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, "accelaes AES offload provider"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, ACC_PROV_VERSION))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_BUILDINFO)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, buildinfo))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS)) != NULL
        && !OSSL_PARAM_set_int(p, prov->eng != NULL))
        return 0;
    return 1;
}

/* OSSL_PROVIDER_do_all callback: does a provider other than this load offer any RAND? */
static int other_rand_cb(OSSL_PROVIDER *p, void *arg)
{
    const acc_prov_ctx *self = ((const acc_prov_ctx **)arg)[0];
    const OSSL_ALGORITHM *algs;
    int nc = 0;

    if (OSSL_PROVIDER_get0_provider_ctx(p) == self)
        return 1;
    algs = OSSL_PROVIDER_query_operation(p, OSSL_OP_RAND, &nc);
    if (algs != NULL && algs[0].algorithm_names != NULL)
        ((const acc_prov_ctx **)arg)[1] = self;   /* found: any non-NULL mark */
    if (algs != NULL)
        OSSL_PROVIDER_unquery_operation(p, OSSL_OP_RAND, algs);
    return ((const acc_prov_ctx **)arg)[1] == NULL;   /* stop at the first one */
}

/* The DRBG delegate is offered only to a library context where no other provider has a RAND
 * (`openssl speed -provider accelaes` alone): elsewhere the DRBGs and every RAND fetch must come
 * from the provider that would serve them without accelaes, whatever default_properties prefers.
 * Not cached, so that the answer follows the providers loaded at each fetch. */
static const OSSL_ALGORITHM *rand_query(acc_prov_ctx *prov, int *no_cache)
{
    const acc_prov_ctx *arg[2] = { prov, NULL };

    *no_cache = 1;
    if (prov->libctx != NULL)
        OSSL_PROVIDER_do_all(prov->libctx, other_rand_cb, arg);
    return arg[1] == NULL ? acc_rand_algorithms : NULL;
}

static const OSSL_ALGORITHM *prov_query(void *vprov, int operation_id, int *no_cache)
{
    *no_cache = 0;
    switch (operation_id) {
    case OSSL_OP_CIPHER:
        return acc_cipher_query(no_cache);   /* provider/cipher/ciphers.c */
    case OSSL_OP_RAND:
        return rand_query(vprov, no_cache);
    case OSSL_OP_SKEYMGMT:
        return acc_skeymgmt_query();
    }
    return NULL;
}

static const OSSL_ITEM *prov_reason_strings(void *vprov)
{
    (void)vprov;
    return acc_err_reason_strings();
}

/* prov_dispatch_texts adds the per-load reason texts: only where acc_err_register could not register
 * them for the process. */
static const OSSL_DISPATCH prov_dispatch[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))prov_teardown },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))prov_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))prov_get_params },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))prov_query },
    { 0, NULL },
};
static const OSSL_DISPATCH prov_dispatch_texts[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))prov_teardown },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))prov_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))prov_get_params },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))prov_query },
    { OSSL_FUNC_PROVIDER_GET_REASON_STRINGS, (void (*)(void))prov_reason_strings },
    { 0, NULL },
};

/* ======================== Setup ======================== */

OSSL_provider_init_fn OSSL_provider_init;
__attribute__((visibility("default")))
int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx)
{
    OSSL_FUNC_core_get_params_fn *c_get_params = NULL;
    OSSL_FUNC_core_get_libctx_fn *c_get_libctx = NULL;
    acc_prov_ctx *prov;
    acc_sched_conf sc;

    for (; in->function_id != 0; in++) {
        switch (in->function_id) {
        case OSSL_FUNC_CORE_GET_PARAMS:
            c_get_params = OSSL_FUNC_core_get_params(in);
            break;
        case OSSL_FUNC_CORE_GET_LIBCTX:
            c_get_libctx = OSSL_FUNC_core_get_libctx(in);
            break;
        case OSSL_FUNC_CORE_NEW_ERROR:
            pthread_mutex_lock(&err_lock);
            if (c_new_error == NULL)
                c_new_error = OSSL_FUNC_core_new_error(in);
            pthread_mutex_unlock(&err_lock);
            break;
        case OSSL_FUNC_CORE_VSET_ERROR:
            pthread_mutex_lock(&err_lock);
            if (c_vset_error == NULL)
                c_vset_error = OSSL_FUNC_core_vset_error(in);
            pthread_mutex_unlock(&err_lock);
            break;
        }
    }

    prov = OPENSSL_zalloc(sizeof(*prov));
    if (prov == NULL)
        return 0;
    prov->handle = handle;
    acc_err_set_hook(raise_via_handle);
    live_add(prov);   /* first: the failures below raise errors through this handle */
    prov->libctx = c_get_libctx != NULL ? (OSSL_LIB_CTX *)c_get_libctx(handle) : NULL;
    if (!acc_settings_read(&prov->settings, handle, c_get_params)) {
        live_remove_free(prov);
        return 0;
    }
    acc_policy_make(&prov->policy, &prov->settings);
    prov->eng = acc_engine_default();
    if (prov->eng == NULL) {
        acc_raise(ACC_R_ENGINE_FAILURE, "no AES engine is usable on this CPU");
        live_remove_free(prov);
        return 0;
    }
    sc.shm = prov->settings.shm;
    sc.workers = prov->settings.workers;
    acc_sched_configure(&sc);
    acc_sched_attach();   /* also installs the fork handlers and pins the module */

    /* a load that got this far stays mapped */
    *out = acc_err_register((void *)c_new_error) ? prov_dispatch : prov_dispatch_texts;
    *provctx = prov;
    return 1;
}
