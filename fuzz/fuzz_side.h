/* fuzz/fuzz_side.h: one side of the differential fuzzer — OpenSSL's default provider or accelaes —
 * reached either through EVP (as applications do) or straight through the provider's dispatch
 * table (so that key/IV lengths and output sizes can be wrong on purpose). */
#ifndef ACCELAES_FUZZ_SIDE_H
#define ACCELAES_FUZZ_SIDE_H

#include <stddef.h>
#include <openssl/core_dispatch.h>
#include <openssl/evp.h>

enum { FZ_DEF = 0, FZ_ACC = 1 };
#define FZ_NCIPHERS 17 /* ECB, CBC, CTR x 3 (0-8), GCM x 3 (9-11), XTS 128/256 (12-13), CCM x 3 (14-16) */
#define FZ_FIRST_CCM 14
/* accelaes instances, each in its own library context with its own settings:
 * 0 as shipped, 1 split over the worker pool from 16 KiB, 2 a GPU backend (the fake CPU plugin). */
#define FZ_NINST 3

enum { FZ_ECB = 1, FZ_CBC = 2, FZ_CTR = 5, FZ_GCM = 6, FZ_CCM = 7, FZ_XTS = 0x10001 }; /* = EVP_CIPH_*_MODE */
/* GCM, CCM and XTS: no bytes held back, block size 1 (EVP passes the input length as the output size) */
#define FZ_NEW_MODE(m) ((m) == FZ_GCM || (m) == FZ_CCM || (m) == FZ_XTS)
/* the AEADs: a NULL output is AAD, the nonce length is set before the nonce */
#define FZ_AEAD(m) ((m) == FZ_GCM || (m) == FZ_CCM)
#define FZ_STREAM(m) ((m) == FZ_CTR || FZ_NEW_MODE(m))

/* One cipher of one provider: the EVP object and the raw dispatch functions. */
typedef struct fz_impl {
    EVP_CIPHER *evp;
    void *provctx;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_dupctx_fn *dupctx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    OSSL_FUNC_cipher_decrypt_init_fn *dinit;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_cipher_fn *cipher;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
} fz_impl;

/* A context of one side: an EVP_CIPHER_CTX, or a provider context driven directly. */
typedef struct fz_ctx {
    int raw;
    const fz_impl *impl;
    EVP_CIPHER_CTX *evp;
    void *alg;
} fz_ctx;

/* Loads the providers and looks every cipher up; 1 on success (prints why not on failure). */
int fz_setup(void);
const fz_impl *fz_impl_get(int side, int inst, int cipher);
/* 1 when the provider offers the cipher (accelaes may lack CCM: inputs for it then diverge). */
int fz_impl_present(int side, int inst, int cipher);
const char *fz_cipher_name(int cipher);
int fz_cipher_mode(int cipher);
size_t fz_cipher_keylen(int cipher);

int fz_ctx_new(fz_ctx *c, const fz_impl *impl, int raw);
void fz_ctx_free(fz_ctx *c);
/* dst must be free (fz_ctx_free'd or never made); on failure dst stays free. */
int fz_ctx_dup(fz_ctx *dst, const fz_ctx *src);

/* enc: 1 encrypt, 0 decrypt, -1 keep (EVP only). with_cipher: EVP gets the cipher again (a fresh
 * provider context), raw makes a fresh context. keylen/ivlen: used by raw only (EVP passes its own). */
int fz_init(fz_ctx *c, int with_cipher, const unsigned char *key, size_t keylen,
            const unsigned char *iv, size_t ivlen, int enc, const OSSL_PARAM params[]);
/* outsize: used by raw only; EVP passes what EVP passes (inl + block size, block size at Final). */
int fz_update(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl);
int fz_final(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize);
int fz_cipher(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl);
int fz_set_params(fz_ctx *c, const OSSL_PARAM params[]);
int fz_get_params(fz_ctx *c, OSSL_PARAM params[]);

#endif
