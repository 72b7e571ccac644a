/* provider/prov.h: the provider context, the settings it carries, and the error-reason table
 * through which every failing call reports what was wrong. */
#ifndef ACCELAES_PROV_H
#define ACCELAES_PROV_H

#include <openssl/core.h>
#include <openssl/types.h>
#include "accel/engine.h"
#include "provider/settings.h"

#define ACC_PROV_NAME    "accelaes"
#define ACC_PROV_VERSION "0.1.0"

typedef struct acc_prov_ctx {
    const OSSL_CORE_HANDLE *handle;
    OSSL_LIB_CTX *libctx;         /* the core's library context (for EVP_CIPHER_CTX-free helpers) */
    OSSL_LIB_CTX *priv_libctx;    /* private: default provider, for the DRBG delegate and the EVP engine */
    OSSL_PROVIDER *priv_default;  /* the default provider loaded there: unloaded before the context is freed */
    acc_settings settings;
    const acc_engine *eng;        /* the inline engine (AES-NI, or nested EVP without it) */
    size_t inline_below;          /* requests shorter than this run inline without asking the policy */
    struct acc_prov_ctx *next_live; /* prov.c's list of live loads, whose handles raise errors */
} acc_prov_ctx;

/* Reason codes (the table in prov.c gives each its text). */
enum {
    ACC_R_BAD_KEY_LENGTH = 1,
    ACC_R_BAD_IV_LENGTH,
    ACC_R_NO_KEY_SET,
    ACC_R_NO_IV_SET,
    ACC_R_WRONG_FINAL_BLOCK_LENGTH,
    ACC_R_BAD_DECRYPT,
    ACC_R_OUTPUT_BUFFER_TOO_SMALL,
    ACC_R_INVALID_PARAMETER,
    ACC_R_INVALID_SETTING,
    ACC_R_TLS_RECORD,
    ACC_R_ENGINE_FAILURE,
    ACC_R_LENGTH_TOO_LARGE,
    ACC_R_NULL_POINTER,
    ACC_R_MALLOC_FAILURE,
    ACC_R_NOT_INITIALISED,
    ACC_R_RAND_FAILURE
};

/* Raise an OpenSSL error with one of the reasons above and printf-style detail. */
void acc_raise(int reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
