/* provider/policy.h: where a request's whole blocks run. Every size threshold lives in one
 * structure, made once from the settings at provider load (acc_policy_make); one function says
 * which paths may take a request (acc_policy_paths) and one runs it (acc_policy_blocks). */
#ifndef ACCELAES_POLICY_H
#define ACCELAES_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"
#include "provider/settings.h"

struct acc_cipher_ctx;

/* The sizes, in bytes, from which each path may take a request of each op (SIZE_MAX: never). */
typedef struct acc_policy {
    size_t batch_min[ACC_OP_COUNT];    /* multi-buffer lanes, for requests from async jobs */
    size_t gpu_min[ACC_OP_COUNT];      /* ask the GPU glue (which may calibrate a higher size) */
    size_t split_min[ACC_OP_COUNT];    /* split over idle CPU units plus the caller */
    size_t inline_below[ACC_OP_COUNT]; /* below: nothing but the inline path can take it */
    /* GCM and XTS are not block operations (their engines hold a message or a data unit): the
     * split takes one update of theirs from this size (SIZE_MAX: never). */
    size_t split_min_gcm, split_min_xts;
} acc_policy;

/* The paths acc_policy_paths may name besides inline, which can always take a request. */
enum { ACC_TRY_BATCH = 1, ACC_TRY_GPU = 2, ACC_TRY_SPLIT = 4 };

void acc_policy_make(acc_policy *p, const acc_settings *s);

/* The paths that may take len bytes of op, tried in the order batch, GPU, split, then inline
 * for whatever is left. A request whose input and output overlap other than exactly goes inline. */
unsigned acc_policy_paths(const acc_policy *p, acc_op op, size_t len);

/* Whether one GCM update (whole blocks) or one XTS data unit of len bytes is split over the pool. */
int acc_policy_split_gcm(const acc_policy *p, size_t len);
int acc_policy_split_xts(const acc_policy *p, size_t len);

/* Run whole blocks of a context through the paths (inline / batch / GPU / split), updating its
 * iv. len is a multiple of 16; in == out is legal. 1 on success, 0 on failure, with the error
 * raised (callers must not raise a second one). */
int acc_policy_blocks(struct acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len);

/* Raise ACC_R_ENGINE_FAILURE for a block function of c's engine that failed on len bytes, on
 * the thread whose EVP call fails. Returns 0, for `return acc_engine_fail()`. */
int acc_engine_fail(const struct acc_cipher_ctx *c, size_t len);

#endif
