/* provider/route/policy.h: where a request's whole blocks run. Every size threshold lives in one
 * structure, made once from the settings and the backend descriptors (provider/route/backend.h) at
 * provider load (acc_policy_make); one function says which backends may take a request
 * (acc_policy_paths) and one runs it through them in priority order (acc_policy_blocks). */
#ifndef ACCELAES_POLICY_H
#define ACCELAES_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"
#include "provider/route/backend.h"
#include "provider/base/settings.h"

struct acc_cipher_ctx;

typedef struct acc_policy {
    /* The sizes, in bytes, from which each backend (index into acc_backends) may take a request
     * of each op (SIZE_MAX: never). */
    size_t min[ACC_BACKENDS_MAX][ACC_OP_COUNT];
    unsigned char order[ACC_BACKENDS_MAX]; /* backend indices by priority, the fallback last */
    size_t inline_below[ACC_OP_COUNT];     /* below: nothing but the inline path can take it */
    /* GCM and XTS are not block operations (their engines hold a message or a data unit): the
     * pool takes one update of theirs from this size (SIZE_MAX: never). */
    size_t split_min_gcm, split_min_xts;
} acc_policy;

/* The bits acc_policy_paths returns: bit i for acc_backends[i] (the inline path, which can
 * always take a request, has none). */
enum { ACC_TRY_BATCH = 1u << ACC_BK_LANES, ACC_TRY_GPU = 1u << ACC_BK_GPU, ACC_TRY_SPLIT = 1u << ACC_BK_POOL };

void acc_policy_make(acc_policy *p, const acc_settings *s);

/* The backends that may take len bytes of op, tried in priority order (lanes, GPU, pool), then
 * inline for whatever is left. A request whose input and output overlap other than exactly goes
 * only to backends without ACC_BK_DISJOINT. */
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
