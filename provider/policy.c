/* provider/policy.c: where a request's whole blocks run — batched in multi-buffer lanes (async
 * jobs), on the GPU, split over idle CPU units plus the caller, or inline on the caller's
 * thread — decided here alone, from the thresholds acc_policy_make draws from the settings;
 * and the split itself. Small requests take the inline path with no other cost. */
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>
#include "provider/batch.h"
#include "provider/cipher_ctx.h"
#include "provider/gpu.h"
#include "provider/policy.h"
#include "provider/prov.h"
#include "scheduler/sched.h"

/* With gpu_min on auto, only requests this large ask the GPU glue (which calibrates). */
#define GPU_AUTO_FLOOR (64u * 1024u)
/* A split piece is at least this large: below it, handing it out costs more than it saves. */
#define SPLIT_PIECE_MIN (32u * 1024u)
/* Lanes pay for CBC-encrypt from this size: below it a pause and a resume cost more than the
 * lanes gain (bench/results/async-batch-thresholds.md). The only mode batched: the others are parallel within
 * a stream and run at least as fast on one core (bench/mb_lanes.c). */
#define BATCH_MIN (768u)

static size_t min2(size_t a, size_t b)
{
    return a < b ? a : b;
}

void acc_policy_make(acc_policy *p, const acc_settings *s)
{
    size_t split = s->split_min > 2 * SPLIT_PIECE_MIN ? s->split_min : 2 * SPLIT_PIECE_MIN;
    size_t gpu = s->backend == ACC_BACKEND_CPU ? SIZE_MAX : s->gpu_min != 0 ? s->gpu_min : GPU_AUTO_FLOOR;

    for (int op = 0; op < ACC_OP_COUNT; op++) {
        /* CBC-encrypt is serial within a stream: the lanes take it across streams; on the GPU one
         * request would be one thread, far slower than one core. */
        int serial = op == ACC_OP_CBC_ENC;

        p->batch_min[op] = serial ? BATCH_MIN : SIZE_MAX;
        p->gpu_min[op] = serial ? SIZE_MAX : gpu;
        p->split_min[op] = serial ? SIZE_MAX : split;
        p->inline_below[op] = min2(p->batch_min[op], min2(p->gpu_min[op], p->split_min[op]));
    }
    /* GCM: one core runs ipsec-mb's stitched GCM at about 11 GB/s, and the split measured 5-18%
     * slower than that at 1 MiB on the 2-vCPU development machine (bench/results/gcm-development.md):
     * it splits only where split_min is set, never on auto. */
    p->split_min_gcm = s->split_min_auto ? SIZE_MAX : split;
    p->split_min_xts = split;
}

int acc_policy_split_gcm(const acc_policy *p, size_t len)
{
    return len >= p->split_min_gcm && acc_sched_cpu_units() > 1;
}

int acc_policy_split_xts(const acc_policy *p, size_t len)
{
    return len >= p->split_min_xts && acc_sched_cpu_units() > 1;
}

unsigned acc_policy_paths(const acc_policy *p, acc_op op, size_t len)
{
    unsigned paths = 0;

    if (!acc_op_valid(op))
        return 0;
    if (len >= p->batch_min[op])
        paths |= ACC_TRY_BATCH;
    if (len >= p->gpu_min[op])
        paths |= ACC_TRY_GPU;
    if (len >= p->split_min[op])
        paths |= ACC_TRY_SPLIT;
    return paths;
}

/* What the error says failed: the engine and the operation, as a reader of the error queue
 * knows them. */
static const char *op_name(acc_op op)
{
    static const char *const names[ACC_OP_COUNT] = {
        "?", "ECB encryption", "ECB decryption", "CBC encryption", "CBC decryption", "CTR"
    };

    return acc_op_valid(op) ? names[op] : names[0];
}

/* Out of line and cold: only a failing nested-EVP engine gets here. */
__attribute__((cold)) int acc_engine_fail(const acc_cipher_ctx *c, size_t len)
{
    const char *name = c->eng->name;

    acc_raise(ACC_R_ENGINE_FAILURE, "the %s engine failed in %s on %zu bytes",
              strcmp(name, "evp") == 0 ? "nested EVP" : name, op_name(c->op), len);
    return 0;
}

/* ---- split: ECB, CTR and CBC-decrypt are parallel over blocks ---- */

/* The request is cut into grains of at least SPLIT_GRAIN bytes (at most SPLIT_MAX_GRAINS of
 * them); the pool hands each thread a range of consecutive grains at a time, run in one engine
 * call: large ranges first, single grains at the end, so that a helper preempted by another
 * process holds little (scheduler/pool.c). */
#define SPLIT_GRAIN (16u * 1024u)
#define SPLIT_MAX_GRAINS 256

typedef struct {
    const acc_cipher_ctx *c;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks, grain_blocks;
    int failed;                          /* a range's engine call failed (on whichever thread) */
    uint8_t iv0[16];                     /* the request's IV / counter */
    uint8_t ivs[SPLIT_MAX_GRAINS][16];   /* CBC-decrypt: each grain's chaining block */
} split_job;

static void split_range(void *arg, size_t first, size_t count)
{
    split_job *j = arg;
    size_t b0 = first * j->grain_blocks, b1 = (first + count) * j->grain_blocks;
    uint8_t iv[16];

    if (b1 > j->nblocks)
        b1 = j->nblocks;
    if (j->c->op == ACC_OP_CBC_DEC)
        memcpy(iv, j->ivs[first], 16);
    else
        acc_iv_at_block(j->c->op, j->iv0, j->in, j->out, b0, iv);
    /* A pool thread cannot raise the caller's error: the caller does, after the run. */
    if (!acc_ctx_run(j->c, j->in + b0 * 16, j->out + b0 * 16, b1 - b0, iv))
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

static int split_run(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    split_job j;
    size_t ngrains, helpers = (size_t)acc_sched_cpu_units() - 1;
    int took;

    ngrains = len / SPLIT_GRAIN;
    if (ngrains > SPLIT_MAX_GRAINS)
        ngrains = SPLIT_MAX_GRAINS;
    if (ngrains < 2)
        ngrains = 2;
    j.c = c;
    j.in = in;
    j.out = out;
    j.nblocks = len / 16;
    j.failed = 0;
    j.grain_blocks = (j.nblocks + ngrains - 1) / ngrains;
    ngrains = (j.nblocks + j.grain_blocks - 1) / j.grain_blocks;
    memcpy(j.iv0, c->iv, 16);
    /* Every grain's chaining block is read before anything is written: in == out is legal,
     * and a CBC-decrypt grain chains from the ciphertext block before it. */
    if (c->op == ACC_OP_CBC_DEC)
        for (size_t i = 0; i < ngrains; i++)
            acc_iv_at_block(c->op, c->iv, in, out, i * j.grain_blocks, j.ivs[i]);
    acc_iv_at_block(c->op, c->iv, in, out, j.nblocks, c->iv);
    took = acc_pool_run_ranges(split_range, &j, ngrains, (int)helpers, (uint64_t)j.grain_blocks * 16);
    if (__atomic_load_n(&j.failed, __ATOMIC_RELAXED))   /* the pool's join orders the store */
        return acc_engine_fail(c, len);
    acc_sched_count(took > 0 ? ACC_PATH_SPLIT : ACC_PATH_INLINE, len, 1);
    return 1;
}

/* The inline engine for the slices a request queued for the GPU runs meanwhile (provider/gpu.c). */
static int gpu_cpu_run(void *arg, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t iv[16])
{
    return acc_ctx_run(arg, in, out, nblocks, iv);
}

static int overlaps_partially(const uint8_t *in, const uint8_t *out, size_t len)
{
    return in != out && out < in + len && in < out + len;
}

int acc_policy_blocks(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    unsigned paths = acc_policy_paths(&c->prov->policy, c->op, len);

    if (paths & ACC_TRY_BATCH) {
        /* declines outside async jobs; counts its own bytes, raises its own error */
        int r = acc_batch_submit(c, in, out, len);
        if (r != 0)
            return r > 0;
    }
    if ((paths & (ACC_TRY_GPU | ACC_TRY_SPLIT)) && !overlaps_partially(in, out, len)) {
        if (paths & ACC_TRY_GPU) {
            /* the GPU does a prefix; the CPU finishes whatever it did not (a request that queued
             * for the GPU comes back finished, its tail run on this thread meanwhile) */
            acc_gpu_cpu cpu = { gpu_cpu_run, c };
            size_t done = acc_gpu_offload(&c->prov->settings, c->op, c->rawkey, c->keylen, c->iv, in, out, len, &cpu);
            if (done == ACC_GPU_CPU_FAILED)
                return acc_engine_fail(c, len);
            in += done;
            out += done;
            len -= done;
            if (len == 0)
                return 1;
        }
        if ((paths & ACC_TRY_SPLIT) && len >= c->prov->policy.split_min[c->op] && acc_sched_cpu_units() > 1)
            return split_run(c, in, out, len);
    }
    if (!acc_ctx_run(c, in, out, len / 16, c->iv))
        return acc_engine_fail(c, len);
    acc_sched_count(ACC_PATH_INLINE, len, 1);
    return 1;
}
