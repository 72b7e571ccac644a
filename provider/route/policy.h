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

enum { ACC_RANGES_AEAD, ACC_RANGES_XTS, ACC_RANGES_KINDS };

typedef struct acc_policy {
    /* The sizes, in bytes, from which each backend (index into acc_backends) may take a request
     * of each op (SIZE_MAX: never). */
    size_t min[ACC_BACKENDS_MAX][ACC_OP_COUNT];
    unsigned char order[ACC_BACKENDS_MAX]; /* backend indices by priority, the fallback last */
    size_t inline_below[ACC_OP_COUNT];     /* below: nothing but the inline path can take it */
    /* The requests that are not block runs (ACC_RANGES_AEAD: GCM updates and pipelines;
     * ACC_RANGES_XTS: XTS units) are cut into ranges by their own code: the sizes from which each
     * backend runs their ranges (SIZE_MAX: never), and the least of them (below it, no policy call
     * is worth making: the caller runs the request its own way). */
    size_t min_ranges[ACC_BACKENDS_MAX][ACC_RANGES_KINDS];
    size_t ranges_from[ACC_RANGES_KINDS];
} acc_policy;

/* The bits acc_policy_paths returns: bit i for acc_backends[i] (the inline path, which can
 * always take a request, has none). */
enum { ACC_TRY_BATCH = 1u << ACC_BK_LANES, ACC_TRY_GPU = 1u << ACC_BK_GPU, ACC_TRY_SPLIT = 1u << ACC_BK_POOL };

void acc_policy_make(acc_policy *p, const acc_settings *s);

/* The backends that may take len bytes of op, tried in priority order (lanes, GPU, pool), then
 * inline for whatever is left. A request whose input and output overlap other than exactly goes
 * only to backends without ACC_BK_DISJOINT. */
unsigned acc_policy_paths(const acc_policy *p, acc_op op, size_t len);

/* A request of kind ACC_RANGES_* and len bytes, cut by its caller into n pieces of about piece_bytes,
 * run through the backends that take such ranges (ACC_BK_AEAD, ACC_BK_XTS) in priority order: the
 * first that does not decline runs fn over all n (backend.h's acc_range_fn). 1 run, with *path the
 * counter its bytes go to (the backend's, or ACC_PATH_INLINE where the caller ran them alone); -1
 * declined by all (nothing run: the caller runs the request its own way). */
int acc_policy_ranges(const acc_policy *p, int kind, size_t len, acc_range_fn *fn, void *arg, size_t n,
                      uint64_t piece_bytes, acc_path *path);

/* Run whole blocks of a context through the paths (inline / batch / GPU / split), updating its
 * iv. len is a multiple of 16; in == out is legal. 1 on success, 0 on failure, with the error
 * raised (callers must not raise a second one). */
int acc_policy_blocks(struct acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len);

/* Raise ACC_R_ENGINE_FAILURE for a block function of c's engine that failed on len bytes, on
 * the thread whose EVP call fails. Returns 0, for `return acc_engine_fail()`. */
int acc_engine_fail(const struct acc_cipher_ctx *c, size_t len);

#endif
