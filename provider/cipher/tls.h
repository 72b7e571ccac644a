/* provider/cipher/tls.h: TLS 1.0-1.2 CBC records on the plain AES-CBC ciphers (provider/cipher/tls.c), as the
 * default provider does them for libssl: padding and MAC extraction in constant time. */
#ifndef ACCELAES_TLS_H
#define ACCELAES_TLS_H

#include <stddef.h>
#include <openssl/core.h>
#include "provider/route/cipher_ctx.h"

int  acc_tls_update(acc_cipher_ctx *ctx, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl);
int  acc_tls_set_ctx_params(acc_cipher_ctx *ctx, const OSSL_PARAM params[]);
/* OSSL_CIPHER_PARAM_TLS_MAC: 1 set, 0 could not be set */
int  acc_tls_get_mac(acc_cipher_ctx *ctx, OSSL_PARAM *p);
int  acc_tls_dup(acc_cipher_ctx *dst, const acc_cipher_ctx *src);
void acc_tls_cleanup(acc_cipher_ctx *ctx);

#endif
