/* provider/cipher/algs.h: the algorithm tables each operation's file offers to prov.c's query. */
#ifndef ACCELAES_ALGS_H
#define ACCELAES_ALGS_H

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include "provider/route/prov.h"

/* The dispatch tables of the ciphers accelaes serves, one line per mode, each made by its mode's file
 * and listed in provider/cipher/ciphers.c's one table: acc_aes<kbits><mode>_functions, and where a running
 * libcrypto 3.5+ gets more functions (GCM's pipelines), acc_aes<kbits><mode>_functions_35 too. */
#define ACC_DISPATCH(kbits, mode) extern const OSSL_DISPATCH acc_aes##kbits##mode##_functions[]
#define ACC_DISPATCH3(mode) ACC_DISPATCH(128, mode); ACC_DISPATCH(192, mode); ACC_DISPATCH(256, mode)
#define ACC_DISPATCH_35(kbits, mode) extern const OSSL_DISPATCH acc_aes##kbits##mode##_functions_35[]
#define ACC_DISPATCH3_35(mode)                                                                  \
    ACC_DISPATCH3(mode); ACC_DISPATCH_35(128, mode); ACC_DISPATCH_35(192, mode); ACC_DISPATCH_35(256, mode)
ACC_DISPATCH3(ecb);                                  /* provider/cipher/cipher_aes.c */
ACC_DISPATCH3(cbc);
ACC_DISPATCH3(ctr);
ACC_DISPATCH3_35(gcm);                               /* provider/cipher/cipher_gcm.c */
ACC_DISPATCH(128, xts); ACC_DISPATCH(256, xts);      /* provider/cipher/cipher_xts.c */
ACC_DISPATCH3(ccm);                                  /* provider/cipher/cipher_ccm.c */
ACC_DISPATCH(128, cbc_hmac_sha1); ACC_DISPATCH(256, cbc_hmac_sha1);      /* provider/cipher/cipher_hmac.c */
ACC_DISPATCH(128, cbc_hmac_sha256); ACC_DISPATCH(256, cbc_hmac_sha256);

/* provider/cipher/ciphers.c: the answer to the cipher query. *no_cache set where it is not final yet. */
const OSSL_ALGORITHM *acc_cipher_query(int *no_cache);

extern const OSSL_ALGORITHM acc_rand_algorithms[];

/* provider/entry/prov.c: the private library context holding OpenSSL's default provider (for the
 * DRBG delegate), created at first use. NULL on failure (error raised). */
OSSL_LIB_CTX *acc_priv_libctx(acc_prov_ctx *prov);

#endif
