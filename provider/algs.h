/* provider/algs.h: the algorithm tables each operation's file offers to prov.c's query. */
#ifndef ACCELAES_ALGS_H
#define ACCELAES_ALGS_H

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include "provider/prov.h"

extern const OSSL_ALGORITHM acc_cipher_algorithms[];
/* provider/cipher_gcm.c: for the running libcrypto, with the pipeline functions on 3.5 and later. */
const OSSL_ALGORITHM *acc_gcm_algorithms(void);
extern const OSSL_ALGORITHM acc_xts_cipher_algorithms[];   /* provider/cipher_xts.c */
extern const OSSL_ALGORITHM acc_rand_algorithms[];

/* provider/prov.c: the private library context holding OpenSSL's default provider (for the
 * DRBG delegate), created at first use. NULL on failure (error raised). */
OSSL_LIB_CTX *acc_priv_libctx(acc_prov_ctx *prov);

#endif
