/* provider/route/skey.h: opaque AES keys (EVP_SKEY, OpenSSL 3.5+): the key object accelaes's AES key
 * management makes (provider/cipher/skey.c), whose schedule every cipher context given the key shares. */
#ifndef ACCELAES_SKEY_H
#define ACCELAES_SKEY_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include "accel/engine.h"

/* OpenSSL 3.0's headers lack the opaque-key ids; their values are ABI, the same in every release
 * that has them (3.5+), and a 3.0 libcrypto never asks for them (see acc_skeymgmt_query). */
#ifndef OSSL_OP_SKEYMGMT
#define OSSL_OP_SKEYMGMT 15
#define OSSL_FUNC_SKEYMGMT_FREE 1
#define OSSL_FUNC_SKEYMGMT_IMPORT 2
#define OSSL_FUNC_SKEYMGMT_EXPORT 3
#define OSSL_SKEYMGMT_SELECT_SECRET_KEY 0x02
#endif
#ifndef OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT
#define OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT 19
#define OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT 20
#endif
#ifndef OSSL_SKEY_PARAM_RAW_BYTES
#define OSSL_SKEY_PARAM_RAW_BYTES "raw-bytes"
#endif

/* The cipher's skey init, as 3.5's OSSL_FUNC_cipher_encrypt_skey_init_fn (declared here so that
 * the module builds on 3.0's headers too). skeydata is an acc_skey, or NULL (no key given). */
typedef int acc_skey_init_fn(void *cctx, void *skeydata, const unsigned char *iv, size_t ivlen,
                             const OSSL_PARAM params[]);

/* One imported AES key: both schedules expanded once, at import, by the provider's engine, and
 * read (const) by every context given the key, on any thread (engine.h allows that). Freed,
 * cleansed, when EVP frees the key and the last context using it has let go. */
typedef struct acc_skey {
    acc_aes_key ks;            /* first: 64-byte aligned; enc and dec schedules */
    const acc_engine *eng;     /* the engine that made ks */
    int refs;                  /* atomic: EVP_SKEY's reference plus one per context */
    size_t keylen;             /* 16, 24 or 32 */
    uint8_t raw[32];           /* the bytes (export; the GPU plugin's rawkey) */
} acc_skey;

/* OSSL_OP_SKEYMGMT's algorithms where the running libcrypto has opaque keys (3.5+), else NULL. */
const OSSL_ALGORITHM *acc_skeymgmt_query(void);

/* A key of keylen bytes (16, 24, 32; else NULL) with eng's schedules, one reference held. */
acc_skey *acc_skey_new(const acc_engine *eng, const uint8_t *raw, size_t keylen);
/* A context takes a reference (1) or, where the count is broken, gets 0; release drops it. */
int acc_skey_ref(acc_skey *k);
void acc_skey_release(acc_skey *k);

/* The skey init of a cipher that keeps its own schedule (GCM, XTS): its raw-key init run with
 * the key's bytes, or with no key where skeydata is NULL. */
int acc_skey_init_raw(OSSL_FUNC_cipher_encrypt_init_fn *init, void *cctx, void *skeydata,
                      const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[]);

#endif
