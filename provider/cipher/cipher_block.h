/* provider/cipher/cipher_block.h: the EVP functions of the plain AES modes (provider/cipher/cipher_block.c),
 * which the dispatch tables of provider/cipher/cipher_aes.c name. */
#ifndef ACCELAES_CIPHER_BLOCK_H
#define ACCELAES_CIPHER_BLOCK_H

#include <openssl/core_dispatch.h>
#include "provider/route/cipher_ctx.h"

/* ECB and CBC: PKCS#7 padding and the held-back block */
OSSL_FUNC_cipher_update_fn acc_block_update;
OSSL_FUNC_cipher_final_fn acc_block_final;
/* CTR: a stream, with num */
OSSL_FUNC_cipher_update_fn acc_stream_update;
OSSL_FUNC_cipher_final_fn acc_stream_final;
/* EVP_Cipher, every mode */
OSSL_FUNC_cipher_cipher_fn acc_block_cipher;
OSSL_FUNC_cipher_get_ctx_params_fn acc_block_get_ctx_params;
OSSL_FUNC_cipher_set_ctx_params_fn acc_block_set_ctx_params;
OSSL_FUNC_cipher_gettable_ctx_params_fn acc_block_gettable_ctx_params;
OSSL_FUNC_cipher_settable_ctx_params_fn acc_block_settable_ctx_params;

#endif
