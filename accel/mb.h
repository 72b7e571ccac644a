/* accel/mb.h: the multi-buffer batch engine (intel-ipsec-mb lanes): many independent
 * whole-block requests, each with its own key and IV, run in one call. */
#ifndef ACCELAES_MB_H
#define ACCELAES_MB_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"

/* A request is an acc_req (accel/engine.h): iv is updated as the engine functions update it,
 * NULL for ECB; decrypt ops need key->has_dec. */
/* 1 when built with intel-ipsec-mb and a manager can be made on this CPU, else 0. */
int acc_mb_available(void);

/* The intel-ipsec-mb release the module runs on ("2.0.0"), NULL when built without it. */
const char *acc_mb_library(void);

/* CBC-encrypt lanes the library runs side by side here (16 with VAES on AVX-512,
 * else 8); 0 when not available. A batch of this many streams fills them. */
int acc_mb_lanes(void);

/* Run n requests. Returns 1 when all are done, 0 on failure (bad request, library
 * failure); on failure outputs and IVs may be partly written and nothing is claimed done. */
int acc_mb_run(acc_req *reqs, size_t n);

/* One MAC-then-encrypt request (accel/cpu/mb_hmac.c): the HMAC of msg[0..len) goes to tag,
 * then, with a key, cbc[0..nblocks) is CBC-encrypted in place from iv (the tag may lie in it). */
typedef struct acc_mb_hmac_req {
    const uint8_t *msg;
    size_t len;
    uint8_t *tag;
    uint8_t *cbc;
    size_t nblocks;
    const uint8_t *iv;
} acc_mb_hmac_req;

/* HMAC-SHA1 (md_size 20) or HMAC-SHA256 (32) of n messages under one MAC key, given as the
 * hash's chaining words (host order) after the key's ipad block and after its opad block, each
 * followed by its CBC when key is not NULL (AES-NI's schedule, accel/engine.h). Returns 1 when
 * all is done; -1 when not available here, before anything was written (the caller does it);
 * 0 when the library failed part way (outputs undefined). */
int acc_mb_hmac_run(size_t md_size, const uint32_t ipad[8], const uint32_t opad[8], const acc_aes_key *key,
                    acc_mb_hmac_req *r, size_t n);

#endif
