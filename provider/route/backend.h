/* provider/route/backend.h: a backend is a descriptor: its name, its priority, what it can take
 * (capabilities), the scheduler unit kind it holds, the size from which it may take a request,
 * and how it runs one. provider/route/backends.c lists them in one table, which the policy
 * (provider/route/policy.c) walks in priority order; the inline path takes whatever is left. Adding a
 * backend (QAT, an FPGA) is a descriptor file, its engine, and one line in that table. */
#ifndef ACCELAES_BACKEND_H
#define ACCELAES_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"
#include "provider/base/settings.h"
#include "scheduler/sched.h"

struct acc_cipher_ctx;

/* What a backend can take. */
enum {
    ACC_BK_PARALLEL = 1u << 0, /* ECB, CTR and CBC-decrypt (parallel over blocks) */
    ACC_BK_SERIAL = 1u << 1,   /* CBC-encrypt (serial within a stream: only across streams) */
    ACC_BK_AEAD = 1u << 2,     /* AEAD updates (GCM, its pipelines) cut into ranges: run_ranges */
    ACC_BK_XTS = 1u << 3,      /* XTS data units cut into ranges: run_ranges */
    ACC_BK_DISJOINT = 1u << 4, /* in and out must be the same or not overlap at all */
    ACC_BK_DEVICE = 1u << 5,   /* runs on a device: off under backend = cpu */
    ACC_BK_FALLBACK = 1u << 6  /* takes anything that is left (the inline path): always last */
};

/* What run returns when it failed (the error raised, the request failed as a whole). */
#define ACC_BK_FAILED SIZE_MAX

/* A request that is not a run of blocks under one IV (a GCM update, whose GHASH the caller
 * combines; an XTS unit, whose tweaks the caller derives; the pipes of a GCM pipeline) is cut by
 * its own code into n pieces; a backend with ACC_BK_AEAD or ACC_BK_XTS runs fn over ranges of
 * them, [first, first + count), each piece once, on whichever of its units, and returns when all
 * have run. fn raises nothing (it may run on another thread) and records its own failure. */
typedef void acc_range_fn(void *arg, size_t first, size_t count);

typedef struct acc_backend_desc {
    const char *name;    /* "lanes", "gpu", "pool", "inline"; as docs and tests name it */
    const char *setting; /* a device's value of the backend setting ("cuda"), else NULL */
    int priority;        /* the policy tries lower first */
    unsigned caps;       /* ACC_BK_* */
    acc_unit_kind unit;  /* the scheduler units it holds while it runs (0: none of its own) */
    acc_path path;       /* the counter its bytes go to */
    /* From how many bytes it may take a request of the kind cap (one ACC_BK_* bit of its caps)
     * under these settings (SIZE_MAX: never). A backend that calibrates (the GPU) gives the floor
     * from which it is asked, and decides above it. */
    size_t (*min_size)(const acc_settings *s, unsigned cap);
    /* Run a prefix of len bytes (whole blocks) of the context's request, advancing c->iv past what
     * it did and counting its own bytes: the number of bytes done (0: declined, len: all of it),
     * or ACC_BK_FAILED with the error raised. The policy runs the rest on the next backends. */
    size_t (*run)(struct acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len);
    /* ACC_BK_AEAD and ACC_BK_XTS: run fn over n pieces of about piece_bytes each (fn above). 1
     * done with the backend's own units taking part, 0 done on the caller alone, -1 declined
     * (nothing run: the caller runs the request its own way). NULL: it takes no such request. */
    int (*run_ranges)(acc_range_fn *fn, void *arg, size_t n, uint64_t piece_bytes);
} acc_backend;

/* The table (provider/route/backends.c), by index; bit i of acc_policy_paths is backends[i]. */
enum { ACC_BK_LANES, ACC_BK_GPU, ACC_BK_POOL, ACC_BK_INLINE, ACC_BK_COUNT };
#define ACC_BACKENDS_MAX 8
extern const acc_backend *const acc_backends[ACC_BK_COUNT];

/* The backend setting's value that asks for the device backend at index i (backend = cuda). */
#define ACC_BACKEND_OF(i) (ACC_BACKEND_DEVICE + (i))
#define ACC_BACKEND_CUDA ACC_BACKEND_OF(ACC_BK_GPU)

/* The descriptors: provider/route/batch.c, provider/route/gpu_backend.c, provider/route/split.c, provider/route/policy.c. */
extern const acc_backend acc_backend_lanes, acc_backend_gpu, acc_backend_pool, acc_backend_inline;

/* The size from which the pool splits (split_min, at least two pieces). */
size_t acc_split_min(const acc_settings *s);

#endif
