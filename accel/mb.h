/* accel/mb.h: the multi-buffer batch engine (intel-ipsec-mb lanes): many independent
 * whole-block requests, each with its own key and IV, run in one call. */
#ifndef ACCELAES_MB_H
#define ACCELAES_MB_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"

enum {
    ACC_MB_CBC_ENC = 1,
    ACC_MB_CBC_DEC,
    ACC_MB_ECB_ENC,
    ACC_MB_ECB_DEC,
    ACC_MB_CTR
};

/* One request. iv is updated as accel/engine.h says (CBC: last ciphertext block;
 * CTR: counter advanced by nblocks with full 128-bit carry); NULL for ECB.
 * Decrypt ops need key->has_dec. in == out is legal; other overlaps are not. */
typedef struct acc_mb_req {
    int op;
    const acc_aes_key *key;
    uint8_t *iv;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks;
} acc_mb_req;

/* 1 when built with intel-ipsec-mb and a manager can be made on this CPU, else 0. */
int acc_mb_available(void);

/* CBC-encrypt lanes the library runs side by side here (16 with VAES on AVX-512,
 * else 8); 0 when not available. A batch of this many streams fills them. */
int acc_mb_lanes(void);

/* Run n requests. Returns 1 when all are done, 0 on failure (bad request, library
 * failure); on failure outputs and IVs may be partly written and nothing is claimed done. */
int acc_mb_run(acc_mb_req *reqs, size_t n);

#endif
