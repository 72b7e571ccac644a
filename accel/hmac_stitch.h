/* accel/hmac_stitch.h: the stitched CBC-HMAC kernels (accel/cpu/hmac_stitch.c): encrypting with
 * AES-CBC and hashing with SHA-1 or SHA-256 in one loop, 64 bytes per step. */
#ifndef ACCELAES_HMAC_STITCH_H
#define ACCELAES_HMAC_STITCH_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"

typedef struct acc_stitch_kernels {
    /* n steps: the n 64-byte blocks at hin hashed into the state hs (big-endian words as SHA*_CTX
     * keeps them: h0..h4, h[0..7]), and the n * 64 bytes at aio encrypted in place with AES-CBC
     * under ks (the AES-NI engine's schedule layout) from iv, which is updated. hin may be aio
     * itself or ahead of it, never behind: every byte is hashed before it is encrypted. */
    void (*sha1_cbc)(uint32_t hs[5], const uint8_t *hin, uint8_t *aio, size_t n, const acc_aes_key *ks,
                     uint8_t iv[16]);
    void (*sha256_cbc)(uint32_t hs[8], const uint8_t *hin, uint8_t *aio, size_t n, const acc_aes_key *ks,
                       uint8_t iv[16]);
} acc_stitch_kernels;

/* The kernels where this CPU has SHA-NI and AES-NI (with SSE4.1 and SSSE3), else NULL. */
const acc_stitch_kernels *acc_stitch_kernels_get(void);

#endif
