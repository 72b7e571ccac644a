/* provider/cipher/cipher_aes.c: the nine plain AES ciphers — what each is (its kind) and its dispatch
 * table, one macro per shape, listed in provider/cipher/ciphers.c. The core (cipher_core.c) makes and
 * initialises their contexts; their EVP semantics are cipher_block.c's. */
#include <openssl/core_dispatch.h>
#include "provider/cipher/algs.h"
#include "provider/cipher/cipher_block.h"
#include "provider/base/names.h"
#include "provider/route/skey.h"
#include "provider/cipher/tls.h"

#define ACC_AES_KIND(kbits, UMODE)                                                              \
    {                                                                                           \
        .mode = ACC_MODE_##UMODE, .keylen = (kbits) / 8, .ctx_size = sizeof(acc_cipher_ctx),     \
        .dup_raises = 1, .on_dup = acc_tls_dup, .on_free = acc_tls_cleanup,                      \
        .set_ctx_params = acc_block_set_ctx_params                                               \
    }

#define ACC_AES_FUNCTIONS(kbits, lmode, UMODE, shape)                                          \
    static const acc_cipher_kind aes##kbits##lmode##_kind = ACC_AES_KIND(kbits, UMODE);         \
    ACC_KIND_FUNCTIONS(aes##kbits##lmode, &aes##kbits##lmode##_kind)                            \
    const OSSL_DISPATCH acc_aes##kbits##lmode##_functions[] = {                                 \
        ACC_CORE_ENTRIES(aes##kbits##lmode),                                                    \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))acc_##shape##_update },                      \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))acc_##shape##_final },                        \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))acc_block_cipher },                          \
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
