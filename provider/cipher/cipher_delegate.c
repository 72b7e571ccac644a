/* provider/cipher/cipher_delegate.c: the AES ciphers the running default provider has and accelaes does not
 * serve (OCB, CFB, OFB, wrap, SIV, CBC-CTS, ... whatever the release has), offered under
 * accelaes's name as thin delegates, on OpenSSL 3.5+ only. Why: EVP_CipherInit_SKEY refuses a key
 * whose key management is not the cipher's provider's, and where accelaes is preferred
 * (conf/accelaes.cnf) an application's EVP_SKEY_import(NULL, "AES", ...) key is accelaes's; without
 * delegates every AES mode served by the default alone refused it. A delegate's functions ARE the
 * default's (same bytes, errors, parameters): its dispatch table is the default's own, except that
 * the functions taking a provider context get the default's (of a private library context that
 * lives as long as the process, accel/cpu/evp_engine.c), and that the skey inits are left out, so
 * that EVP takes the raw bytes from accelaes's key and calls the default's plain init. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <openssl/core_dispatch.h>
#include <openssl/crypto.h>
#include <openssl/provider.h>
#include "accel/gcm.h"   /* acc_evp_engine_libctx */
#include "provider/cipher/cipher_delegate.h"
#include "provider/base/names.h"

/* Each delegate needs its own functions for the calls that name no cipher context (newctx, the
 * parameter lists): a fixed pool of them, far above the 48 AES ciphers of OpenSSL 4.0's default. */
#define SLOTS ACC_DELEGATE_MAX
/* OSSL_FUNC_CIPHER_* ids up to 3.5's DECRYPT_SKEY_INIT (20); later ids are unknown here */
#define MAX_FN 20

typedef struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_gettable_params_fn *gettable;
    OSSL_FUNC_cipher_gettable_ctx_params_fn *gettable_ctx;
    OSSL_FUNC_cipher_settable_ctx_params_fn *settable_ctx;
} slot_target;

static slot_target targets[SLOTS];
static void *def_provctx;   /* the private default's provider context (never freed) */

#define SLOT_FNS(i)                                                                      \
    static void *newctx_##i(void *p)                                                     \
    {                                                                                    \
        (void)p;                                                                         \
        return targets[i].newctx(def_provctx);                                           \
    }                                                                                    \
    static const OSSL_PARAM *gettable_##i(void *p)                                       \
    {                                                                                    \
        (void)p;                                                                         \
        return targets[i].gettable(def_provctx);                                         \
    }                                                                                    \
    static const OSSL_PARAM *gettable_ctx_##i(void *c, void *p)                          \
    {                                                                                    \
        (void)p;                                                                         \
        return targets[i].gettable_ctx(c, def_provctx);                                  \
    }                                                                                    \
    static const OSSL_PARAM *settable_ctx_##i(void *c, void *p)                          \
    {                                                                                    \
        (void)p;                                                                         \
        return targets[i].settable_ctx(c, def_provctx);                                  \
    }
#define SLOT_ENTRY(i) { newctx_##i, gettable_##i, gettable_ctx_##i, settable_ctx_##i },
#define X16(m, H)                                                                        \
    m(0x##H##0) m(0x##H##1) m(0x##H##2) m(0x##H##3) m(0x##H##4) m(0x##H##5) m(0x##H##6) \
    m(0x##H##7) m(0x##H##8) m(0x##H##9) m(0x##H##a) m(0x##H##b) m(0x##H##c) m(0x##H##d) \
    m(0x##H##e) m(0x##H##f)
#define X128(m) X16(m, 0) X16(m, 1) X16(m, 2) X16(m, 3) X16(m, 4) X16(m, 5) X16(m, 6) X16(m, 7)

_Static_assert(SLOTS == 128, "X128 makes 128 slots: ACC_DELEGATE_MAX must match it");
X128(SLOT_FNS)
static const slot_target slot_fns[SLOTS] = { X128(SLOT_ENTRY) };

static OSSL_DISPATCH tables[SLOTS][MAX_FN + 1];
static OSSL_ALGORITHM delegates[SLOTS + 1];

/* Does the colon-separated list names hold name (any case)? */
static int names_have(const char *names, const char *name, size_t n)
{
    for (const char *s = names; s != NULL && *s != '\0'; s = strchr(s, ':') != NULL ? strchr(s, ':') + 1 : NULL)
        if (strncasecmp(s, name, n) == 0 && (s[n] == ':' || s[n] == '\0'))
            return 1;
    return 0;
}

/* Is any name of names an AES cipher's (AES...), and none of them served by the table served? */
static int unserved_aes(const char *names, const OSSL_ALGORITHM *served)
{
    int aes = 0;

    for (const char *s = names; s != NULL && *s != '\0'; s = strchr(s, ':') != NULL ? strchr(s, ':') + 1 : NULL) {
        size_t n = strchr(s, ':') != NULL ? (size_t)(strchr(s, ':') - s) : strlen(s);

        aes |= strncasecmp(s, "AES", 3) == 0;
        for (const OSSL_ALGORITHM *a = served; a->algorithm_names != NULL; a++)
            if (names_have(a->algorithm_names, s, n))
                return 0;
    }
    return aes;
}

/* Slot i's table from the default's: the context functions as they are, the provider-context ones
 * through slot i, the skey inits (19, 20) and unknown ids left out. 0 if it lacks a newctx. */
static int table_make(size_t i, const OSSL_DISPATCH *d)
{
    OSSL_DISPATCH *out = tables[i];
    size_t n = 0;

    memset(&targets[i], 0, sizeof(targets[i]));
    for (; d->function_id != 0 && n < MAX_FN; d++) {
        OSSL_DISPATCH e = *d;

        switch (d->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX:
            targets[i].newctx = OSSL_FUNC_cipher_newctx(d);
            e.function = (void (*)(void))slot_fns[i].newctx;
            break;
        case OSSL_FUNC_CIPHER_GETTABLE_PARAMS:
            targets[i].gettable = OSSL_FUNC_cipher_gettable_params(d);
            e.function = (void (*)(void))slot_fns[i].gettable;
            break;
        case OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS:
            targets[i].gettable_ctx = OSSL_FUNC_cipher_gettable_ctx_params(d);
            e.function = (void (*)(void))slot_fns[i].gettable_ctx;
            break;
        case OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS:
            targets[i].settable_ctx = OSSL_FUNC_cipher_settable_ctx_params(d);
            e.function = (void (*)(void))slot_fns[i].settable_ctx;
            break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT:
        case OSSL_FUNC_CIPHER_DECRYPT_INIT:
        case OSSL_FUNC_CIPHER_UPDATE:
        case OSSL_FUNC_CIPHER_FINAL:
        case OSSL_FUNC_CIPHER_CIPHER:
        case OSSL_FUNC_CIPHER_FREECTX:
        case OSSL_FUNC_CIPHER_DUPCTX:
        case OSSL_FUNC_CIPHER_GET_PARAMS:
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS:
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS:
        case 15: case 16: case 17: case 18: /* the pipeline functions (3.5+): they take the cipher context */
            break;
        default: /* 19, 20: skey inits, whose key would be accelaes's; later ids: unknown arguments */
            continue;
        }
        out[n++] = e;
    }
    out[n].function_id = 0;
    out[n].function = NULL;
    return targets[i].newctx != NULL;
}

int acc_cipher_delegates(const OSSL_ALGORITHM *served, const OSSL_ALGORITHM **out)
{
    OSSL_LIB_CTX *lib;
    OSSL_PROVIDER *def;
    const OSSL_ALGORITHM *algs;
    int no_cache = 0, n = 0;

    *out = delegates;
    delegates[0].algorithm_names = NULL;
    if (OpenSSL_version_num() < 0x30500000UL)
        return 0;
    /* one more reference to the private default, kept: its context serves the delegates' contexts
     * for as long as the process lives (the library context is never freed either) */
    if ((lib = acc_evp_engine_libctx()) == NULL || (def = OSSL_PROVIDER_load(lib, "default")) == NULL)
        return -1;
    def_provctx = OSSL_PROVIDER_get0_provider_ctx(def);
    algs = OSSL_PROVIDER_query_operation(def, OSSL_OP_CIPHER, &no_cache);
    /* The names, descriptions and dispatch tables are the built-in default provider's static data in
     * libcrypto, which outlives this module: pointers to them are kept past the unquery. */
    for (const OSSL_ALGORITHM *a = algs; a != NULL && a->algorithm_names != NULL; a++) {
        if (!unserved_aes(a->algorithm_names, served))
            continue;
        if (n == SLOTS) {
            /* never silently: the test asking every default AES name with an accelaes key fails too */
            fprintf(stderr, "accelaes: more than %d AES ciphers to delegate; %s not offered\n", SLOTS,
                    a->algorithm_names);
            continue;
        }
        if (!table_make((size_t)n, a->implementation))
            continue;
        delegates[n].algorithm_names = a->algorithm_names;
        delegates[n].property_definition = ACC_PROPS;
        delegates[n].implementation = tables[n];
        delegates[n].algorithm_description = a->algorithm_description;
        n++;
    }
    if (algs != NULL)
        OSSL_PROVIDER_unquery_operation(def, OSSL_OP_CIPHER, algs);
    delegates[n].algorithm_names = NULL;
    return n;
}
