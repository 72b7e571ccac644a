/* accel/gcm.h: the GCM engine interface. GCM is not a block operation (accel/engine.h): its
 * GHASH runs over the whole message, so an engine here holds one key and one message at a time
 * (the cipher context's), and the provider (provider/cipher/cipher_gcm.c) keeps the EVP semantics: IV
 * states, AAD gathering, the tag's length and its check, the TLS record mode. */
#ifndef ACCELAES_GCM_H
#define ACCELAES_GCM_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/types.h>
#include "accel/engine.h"

#define ACC_GCM_TAG_LEN 16
/* Room for an engine's key data and message state, inside the (64-byte aligned, heap-allocated,
 * per-process) cipher context, so that a context needs no allocation of its own: intel-ipsec-mb's
 * gcm_key_data (expanded keys and the hash-key powers: 1008 bytes in 1.x, 1264 in 2.0, whose
 * AVX2 and AVX512 tables grew) and gcm_context_data (88 bytes in both). Each engine checks that
 * it fits (_Static_assert); no layout outside the process depends on this size. */
#define ACC_GCM_STATE_SIZE 3072 /* two engines side by side: accel/cpu/gcm_dual.c */

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
    /*  - restart_zero: the message as the default provider leaves it when a key is given while a
     *    message is open (its setkey wipes the GCM state, the IV state stays): the next counter
     *    block is zero, the AAD given is hashed from a zero state, no data yet, and the tag is the
     *    bare GHASH (no E(K, J0) added). key: the key now set (already given to set_key). */
    int (*restart_zero)(acc_gcm_state *s, int enc, const uint8_t *key, size_t keylen, const uint8_t *aad,
                        size_t aadlen);
    /*  - set_dir: the open message goes on in direction enc (the default's init with only a
     *    direction: its later updates and its final are those of the new direction). */
    int (*set_dir)(acc_gcm_state *s, int enc);
    /* The split's hooks (acc_gcm_split_ops below), or NULL: this engine's updates never split. */
    const struct acc_gcm_split_ops *split;
} acc_gcm_engine;

/* The split (provider/cipher/gcm_split.c): an engine's optional second table. Only at a block
 * boundary of the data (the data so far a multiple of 16, which the provider knows from its own
 * count); GHASH values in GCM's byte order (as a tag's).
 *  - get: the GHASH so far (AAD and data), the counter block of the next data block (big-endian,
 *    as GCM's inc32 counts it) and H. 0: not at a block boundary, do not split.
 *  - ghash: state = GHASH of nblocks from in, continued from state (thread-safe, s const).
 *  - put: nblocks more data blocks went by outside the engine, the GHASH is now ghash.
 *  - range (optional): one range in one stitched pass, as the message's direction says: nblocks
 *    from in to out with counter blocks from ctr (inc32), and ghash = the GHASH from zero of the
 *    range's ciphertext. Thread-safe, s const. Without it the split runs acc_gcm_ctr32 and
 *    ghash, two passes. */
typedef struct acc_gcm_split_ops {
    int (*get)(const acc_gcm_state *s, uint8_t ghash[16], uint8_t ctr[16], uint8_t h[16]);
    void (*ghash)(const acc_gcm_state *s, const uint8_t *in, size_t nblocks, uint8_t state[16]);
    void (*put)(acc_gcm_state *s, const uint8_t ghash[16], uint64_t nblocks);
    void (*range)(const acc_gcm_state *s, const uint8_t ctr[16], const uint8_t *in, uint8_t *out, size_t nblocks,
                  uint8_t ghash[16]);
} acc_gcm_split_ops;

/* accel/cpu/gcm_clmul.c: GCM's arithmetic for the split, on any engine.
 *  - acc_gf128_mul: x = x * y in GF(2^128) with GCM's bit order and polynomial (PCLMULQDQ;
 *    constant time). acc_gf128_pow: out = h^e (e public: a count of blocks).
 *  - acc_gcm_inc32: GCM's counter rule, n steps: the low 32 bits (big-endian) wrap mod 2^32,
 *    the upper 96 never change.
 *  - acc_gcm_ctr32: out = in xor the keystream of nblocks counter blocks from ctr, counted by
 *    inc32, with the CTR engine eng (128-bit carry) on spans that do not wrap the low word.
 *    1, or the engine's 0. */
void acc_gf128_mul(uint8_t x[16], const uint8_t y[16]);
void acc_gf128_pow(uint8_t out[16], const uint8_t h[16], uint64_t e);
void acc_gcm_inc32(uint8_t ctr[16], uint64_t n);
int acc_gcm_ctr32(const acc_engine *eng, const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks,
                  const uint8_t ctr[16]);

/* accel/cpu/gcm_vaes.c: accelaes's own engine (VAES, VPCLMULQDQ, AVX-512); NULL where the CPU
 * lacks them or ACCELAES_NO_VAES=1. */
const acc_gcm_engine *acc_gcm_engine_vaes(void);
/* accel/cpu/gcm_vaesy.c: the same engine on ymm (VAES and VPCLMULQDQ without AVX-512: AMD Zen 3);
 * NULL where the CPU lacks them or ACCELAES_NO_VAES=1. */
const acc_gcm_engine *acc_gcm_engine_vaesy(void);
/* accel/cpu/gcm_vaesx.c: the same engine on xmm, SSE only (AES-NI and PCLMULQDQ, no VAES or AVX needed);
 * NULL where the CPU lacks AES-NI or PCLMULQDQ. */
const acc_gcm_engine *acc_gcm_engine_vaesx(void);
/* accel/cpu/gcm_imb.c: intel-ipsec-mb's GCM API; NULL without the library or without AES-NI. */
const acc_gcm_engine *acc_gcm_engine_imb(void);
/* accel/cpu/gcm_evp.c: nested EVP into the default provider in a private library context. */
const acc_gcm_engine *acc_gcm_engine_evp(void);
/* accelaes's own engine at the widest the CPU has (zmm: with ipsec-mb per message where the build has it,
 * gcm_dual.c; ymm; xmm), else ipsec-mb (AES-NI without PCLMULQDQ), else nested EVP (engine_select.c).
 * ACCELAES_GCM_ENGINE=dual|vaesy|vaes|vaesx|imb|evp picks one (tests; one this machine lacks gives nested EVP);
 * ACCELAES_FORCE_EVP_ENGINE=1 forces EVP. Read once per process (engine_select.c). */
const acc_gcm_engine *acc_gcm_engine_default(void);

/* accel/cpu/evp_engine.c: its private library context (default provider), NULL if it cannot
 * be made. */
OSSL_LIB_CTX *acc_evp_engine_libctx(void);

#endif
