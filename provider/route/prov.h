/* provider/route/prov.h: the provider context: the settings, the routing policy and the inline engine
 * every cipher context of a load runs with. The error reasons are provider/base/err.h's (included for
 * the files that raise). */
#ifndef ACCELAES_PROV_H
#define ACCELAES_PROV_H

#include <openssl/core.h>
#include <openssl/types.h>
#include "accel/engine.h"
#include "provider/base/err.h"
#include "provider/route/policy.h"
#include "provider/base/settings.h"

#define ACC_PROV_NAME    "accelaes"
#define ACC_PROV_VERSION "0.1.0"

typedef struct acc_prov_ctx {
    const OSSL_CORE_HANDLE *handle;
    OSSL_LIB_CTX *libctx;         /* the core's library context (for EVP_CIPHER_CTX-free helpers) */
    OSSL_LIB_CTX *priv_libctx;    /* private: default provider, for the DRBG delegate and the EVP engine */
    OSSL_PROVIDER *priv_default;  /* the default provider loaded there: unloaded before the context is freed */
    acc_settings settings;
    acc_policy policy;            /* the routing thresholds, made from the settings */
    const acc_engine *eng;        /* the inline engine (AES-NI, or nested EVP without it) */
    struct acc_prov_ctx *next_live; /* prov.c's list of live loads, whose handles raise errors */
} acc_prov_ctx;

#endif
