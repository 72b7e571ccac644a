/* accel/ccm.h: the CCM engine interface, the hardware table the AEAD layer's CCM
 * (provider/cipher/cipher_ccm.c) runs on. CCM is CBC-MAC over B0, the AAD and the plaintext, and CTR
 * for the data and the tag; its message length is fixed before the AAD (B0 holds it).
 * The state follows the default provider's CCM128 state step by step (a counter/B0 block, a
 * MAC block), so that its misuse cases (a second AAD replaces the first, a length mismatch
 * spoils the flags, a tag length other than the IV's M fails) come out the same. */
#ifndef ACCELAES_CCM_H
#define ACCELAES_CCM_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"

typedef struct acc_ccm_state {
    acc_aes_key ks;             /* first: 64-byte aligned; the encryption schedule */
    const acc_engine *eng;      /* the block engine whose schedule ks is */
    uint8_t nonce[16];          /* B0, then the counter block; byte 0: flags (L-1, M, Adata) */
    uint8_t cmac[16];           /* the CBC-MAC, then the tag */
    int failed;                 /* the block engine failed in this message (nested EVP only) */
} acc_ccm_state;

/* 1 success, 0 failure; no OpenSSL error raised (the provider raises).
 *  - set_key: s holds no key or an earlier one (replaced; cleansed). keylen 16, 24, 32. eng:
 *    the context's block engine (the table without AES-NI runs its blocks on it).
 *  - cleanse: the schedule and the message wiped.
 *  - setiv: a message of mlen bytes with nonce (15 - L bytes); L and the tag length M are the
 *    flags the caller wrote into nonce[0] when it set the key, as the default's CCM128 reads them.
 *  - aad: the whole AAD at once (0 bytes: nothing); a second call starts the MAC again.
 *  - crypt: the data, exactly mlen bytes in one call (0 otherwise, the state as the default's
 *    leaves it); in == out legal. The tag is ready after it. -1: the engine failed (the
 *    message is lost; the caller wipes the output and raises). whole_enc: the direction whose
 *    MAC the whole blocks take (the plaintext: the input encrypting, the output decrypting),
 *    enc the partial last block's; the same but where the caller mirrors a default whose
 *    block function was chosen at its key (compat.h ccm_blocks_dir_at_key).
 *  - tag: the m bytes of the tag; 0 when len is not the message's m. */
typedef struct acc_ccm_engine {
    const char *name;
    int (*set_key)(acc_ccm_state *s, const acc_engine *eng, const uint8_t *key, size_t keylen);
    void (*cleanse)(acc_ccm_state *s);
    int (*setiv)(acc_ccm_state *s, const uint8_t *nonce, size_t nlen, size_t mlen);
    void (*aad)(acc_ccm_state *s, const uint8_t *aad, size_t len);
    int (*crypt)(acc_ccm_state *s, int enc, int whole_enc, const uint8_t *in, uint8_t *out, size_t len);
    int (*tag)(const acc_ccm_state *s, uint8_t *tag, size_t len);
} acc_ccm_engine;

/* accel/cpu/ccm.c: AES-NI (the MAC chain and the counter blocks interleaved) where the CPU has
 * it, else the context's block engine, one block per call; ACCELAES_FORCE_EVP_ENGINE=1 takes the
 * block engine (nested EVP then), as engine_select.c. Read once per process. */
const acc_ccm_engine *acc_ccm_engine_default(void);

#endif
