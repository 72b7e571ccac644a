/* accel/gcm.h: the GCM engine interface. GCM is not a block operation (accel/engine.h): its
 * GHASH runs over the whole message, so an engine here holds one key and one message at a time
 * (the cipher context's), and the provider (provider/cipher_gcm.c) keeps the EVP semantics: IV
 * states, AAD gathering, the tag's length and its check, the TLS record mode. */
#ifndef ACCELAES_GCM_H
#define ACCELAES_GCM_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/types.h>

#define ACC_GCM_TAG_LEN 16
/* Room for an engine's key data and message state, inside the (64-byte aligned) cipher
 * context, so that a context needs no allocation of its own: intel-ipsec-mb's gcm_key_data
 * (expanded keys and 48 hash-key powers, 1008 bytes) and gcm_context_data. Each engine checks
 * that it fits (_Static_assert). */
#define ACC_GCM_STATE_SIZE 1280

typedef struct acc_gcm_state {
    uint8_t opaque[ACC_GCM_STATE_SIZE];
} __attribute__((aligned(64))) acc_gcm_state;

/* Every function returns 1 on success and 0 on failure; an engine raises no OpenSSL error of its
 * own (the EVP call that fails does, as the default provider would).
 *  - set_key: s is all zero (a new context) or holds an earlier key of the same engine, which
 *    goes (cleansed). keylen is 16, 24 or 32.
 *  - copy: dst is a byte copy of src (the provider copied the context): make dst own what it
 *    must own alone. On failure dst owns nothing (cleanse must still be safe on it).
 *  - cleanse: free what set_key made and wipe the key data; s is all zero afterwards.
 *  - start: begin a message with the whole AAD (ipsec-mb's init takes it at once).
 *  - update: in == out is legal, other overlaps are not; len may be any size, pieces of any
 *    length follow one another as one stream.
 *  - finish: encrypting, the 16-byte tag is written to tag; decrypting, the computed tag is
 *    compared in constant time with tag[0..taglen): 1 equal, 0 different (or failed). */
typedef struct acc_gcm_engine {
    const char *name;
    int (*set_key)(acc_gcm_state *s, const uint8_t *key, size_t keylen);
    int (*copy)(acc_gcm_state *dst, const acc_gcm_state *src);
    void (*cleanse)(acc_gcm_state *s);
    int (*start)(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen);
    int (*update)(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len);
    int (*finish)(acc_gcm_state *s, uint8_t *tag, size_t taglen);
} acc_gcm_engine;

/* accel/cpu/gcm_imb.c: intel-ipsec-mb's GCM API; NULL without the library or without AES-NI. */
const acc_gcm_engine *acc_gcm_engine_imb(void);
/* accel/cpu/gcm_evp.c: nested EVP into the default provider in a private library context. */
const acc_gcm_engine *acc_gcm_engine_evp(void);
/* ipsec-mb where usable, else nested EVP; ACCELAES_FORCE_EVP_ENGINE=1 forces EVP (tests).
 * Read once per process (engine_select.c). */
const acc_gcm_engine *acc_gcm_engine_default(void);

/* accel/cpu/evp_engine.c: its private library context (default provider), NULL if it cannot
 * be made. */
OSSL_LIB_CTX *acc_evp_engine_libctx(void);

#endif
