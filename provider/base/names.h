/* provider/base/names.h: algorithm names, aliases and OIDs exactly as OpenSSL's default provider
 * spells them, for the one cipher table (provider/cipher/ciphers.c) and every other algorithm table. */
#ifndef ACCELAES_NAMES_H
#define ACCELAES_NAMES_H

#define ACC_NAMES_AES_128_ECB "AES-128-ECB:2.16.840.1.101.3.4.1.1"
#define ACC_NAMES_AES_192_ECB "AES-192-ECB:2.16.840.1.101.3.4.1.21"
#define ACC_NAMES_AES_256_ECB "AES-256-ECB:2.16.840.1.101.3.4.1.41"
#define ACC_NAMES_AES_128_CBC "AES-128-CBC:AES128:2.16.840.1.101.3.4.1.2"
#define ACC_NAMES_AES_192_CBC "AES-192-CBC:AES192:2.16.840.1.101.3.4.1.22"
#define ACC_NAMES_AES_256_CBC "AES-256-CBC:AES256:2.16.840.1.101.3.4.1.42"
#define ACC_NAMES_AES_128_CTR "AES-128-CTR"
#define ACC_NAMES_AES_192_CTR "AES-192-CTR"
#define ACC_NAMES_AES_256_CTR "AES-256-CTR"
#define ACC_NAMES_AES_128_GCM "AES-128-GCM:id-aes128-GCM:2.16.840.1.101.3.4.1.6"
#define ACC_NAMES_AES_192_GCM "AES-192-GCM:id-aes192-GCM:2.16.840.1.101.3.4.1.26"
#define ACC_NAMES_AES_256_GCM "AES-256-GCM:id-aes256-GCM:2.16.840.1.101.3.4.1.46"
#define ACC_NAMES_AES_128_CCM "AES-128-CCM:id-aes128-CCM:2.16.840.1.101.3.4.1.7"
#define ACC_NAMES_AES_192_CCM "AES-192-CCM:id-aes192-CCM:2.16.840.1.101.3.4.1.27"
#define ACC_NAMES_AES_256_CCM "AES-256-CCM:id-aes256-CCM:2.16.840.1.101.3.4.1.47"
#define ACC_NAMES_AES_128_XTS "AES-128-XTS:1.3.111.2.1619.0.1.1"
#define ACC_NAMES_AES_256_XTS "AES-256-XTS:1.3.111.2.1619.0.1.2"
/* The stitched TLS ciphers: the default gives them no aliases or OIDs. */
#define ACC_NAMES_AES_128_CBC_HMAC_SHA1 "AES-128-CBC-HMAC-SHA1"
#define ACC_NAMES_AES_256_CBC_HMAC_SHA1 "AES-256-CBC-HMAC-SHA1"
#define ACC_NAMES_AES_128_CBC_HMAC_SHA256 "AES-128-CBC-HMAC-SHA256"
#define ACC_NAMES_AES_256_CBC_HMAC_SHA256 "AES-256-CBC-HMAC-SHA256"

/* The opaque AES key management (3.5+), as the default names it */
#define ACC_NAMES_AES_SKEY "AES:2.16.840.1.101.3.4.1"

/* The DRBG delegate answers to the name libcrypto fetches by default. */
#define ACC_NAMES_CTR_DRBG "CTR-DRBG"

#define ACC_PROPS "provider=accelaes"

#endif
