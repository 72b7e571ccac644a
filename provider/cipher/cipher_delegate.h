/* provider/cipher/cipher_delegate.h: the running default provider's AES ciphers that accelaes does not serve,
 * offered as delegates to the default's own functions (OpenSSL 3.5+, for EVP_SKEY: cipher_delegate.c). */
#ifndef ACCELAES_CIPHER_DELEGATE_H
#define ACCELAES_CIPHER_DELEGATE_H

#include <stddef.h>
#include <openssl/core.h>

/* At most this many delegates (a pool of functions: cipher_delegate.c). */
#define ACC_DELEGATE_MAX 128

/* Sets *out to the delegates (NULL-ended) of every AES cipher of the default provider none of whose
 * names is in the table served (NULL-ended), and returns how many: 0 where the running libcrypto has no
 * EVP_SKEY (before 3.5), -1 where the default provider could not be had (an allocation failed: call
 * again later). Not thread-safe: ciphers.c calls it under its lock until it succeeds, then never again. */
int acc_cipher_delegates(const OSSL_ALGORITHM *served, const OSSL_ALGORITHM **out);

#endif
