/* provider/cipher_aes.c: the nine plain AES ciphers — what each is (its kind) and its dispatch
 * table, one macro per shape (registered in prov.c's one cipher table). The core (cipher_core.c) makes and initialises their contexts;
 * their EVP semantics are cipher_block.c's. */
#include <openssl/core_dispatch.h>
#include "provider/algs.h"
#include "provider/cipher_block.h"
#include "provider/names.h"
#include "provider/skey.h"
#include "provider/tls.h"

#define ACC_AES_KIND(kbits, UMODE)                                                              \
    {                                                                                           \
        .mode = ACC_MODE_##UMODE, .keylen = (kbits) / 8, .ctx_size = sizeof(acc_cipher_ctx),     \
        .dup_raises = 1, .on_dup = acc_tls_dup, .on_free = acc_tls_cleanup,                      \
        .set_ctx_params = acc_block_set_ctx_params                                               \
    }

#define ACC_AES_FUNCTIONS(kbits, lmode, UMODE, shape)                                          \
    static const acc_cipher_kind aes##kbits##lmode##_kind = ACC_AES_KIND(kbits, UMODE);         \
    static OSSL_FUNC_cipher_newctx_fn aes##kbits##lmode##_newctx;                               \
    static void *aes##kbits##lmode##_newctx(void *provctx)                                      \
    {                                                                                           \
        return acc_cipher_newctx(provctx, &aes##kbits##lmode##_kind);                           \
    }                                                                                           \
    static OSSL_FUNC_cipher_get_params_fn aes##kbits##lmode##_get_params;                       \
    static int aes##kbits##lmode##_get_params(OSSL_PARAM params[])                              \
    {                                                                                           \
        return acc_cipher_get_params(params, &aes##kbits##lmode##_kind);                        \
    }                                                                                           \
    const OSSL_DISPATCH acc_aes##kbits##lmode##_functions[] = {                                 \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))aes##kbits##lmode##_newctx },                \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))acc_cipher_freectx },                       \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))acc_cipher_dupctx },                         \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))acc_cipher_einit },                    \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))acc_cipher_dinit },                    \
        { OSSL_FUNC_CIPHER_ENCRYPT_SKEY_INIT, (void (*)(void))acc_cipher_skey_einit },          \
        { OSSL_FUNC_CIPHER_DECRYPT_SKEY_INIT, (void (*)(void))acc_cipher_skey_dinit },          \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))acc_##shape##_update },                      \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))acc_##shape##_final },                        \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))acc_block_cipher },                          \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))aes##kbits##lmode##_get_params },        \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))acc_cipher_gettable_params },       \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))acc_block_get_ctx_params },          \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))acc_block_set_ctx_params },          \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))acc_block_gettable_ctx_params },\
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))acc_block_settable_ctx_params },\
        { 0, NULL }                                                                             \
    }

ACC_AES_FUNCTIONS(128, ecb, ECB, block);
ACC_AES_FUNCTIONS(192, ecb, ECB, block);
ACC_AES_FUNCTIONS(256, ecb, ECB, block);
ACC_AES_FUNCTIONS(128, cbc, CBC, block);
ACC_AES_FUNCTIONS(192, cbc, CBC, block);
ACC_AES_FUNCTIONS(256, cbc, CBC, block);
ACC_AES_FUNCTIONS(128, ctr, CTR, stream);
ACC_AES_FUNCTIONS(192, ctr, CTR, stream);
ACC_AES_FUNCTIONS(256, ctr, CTR, stream);
