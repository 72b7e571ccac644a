/* provider/route/split.c: the pool backend: ECB, CTR and CBC-decrypt requests split over idle CPU
 * units (scheduler/pool.c) plus the caller; and the ranges of GCM updates and pipelines and of XTS
 * units, which their own code cuts (gcm_split.c, cipher_gcm_pipe.c, xts_split.c). */
#include <stdint.h>
#include <string.h>
#include "provider/route/backend.h"
#include "provider/route/cipher_ctx.h"
#include "provider/route/policy.h"
#include "scheduler/sched.h"

/* A split piece is at least this large: below it, handing it out costs more than it saves. */
#define SPLIT_PIECE_MIN (32u * 1024u)

size_t acc_split_min(const acc_settings *s)
{
    return s->split_min > 2 * SPLIT_PIECE_MIN ? s->split_min : 2 * SPLIT_PIECE_MIN;
}

/* GCM: one core runs ipsec-mb's stitched GCM at about 11 GB/s, and the split measured 5-18%
 * slower than that at 1 MiB on the 2-vCPU development machine (bench/results/gcm-development.md):
 * it splits only where split_min is set, never on auto. */
static size_t pool_min(const acc_settings *s, unsigned cap)
{
    if (cap == ACC_BK_AEAD && s->split_min_auto)
        return SIZE_MAX;
    return acc_split_min(s);
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
    int failed;                        /* a range's engine call failed (on whichever thread) */
    uint8_t iv0[16];                   /* the request's IV / counter */
    uint8_t ivs[SPLIT_MAX_GRAINS][16]; /* CBC-decrypt: each grain's chaining block */
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

static size_t pool_run(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    split_job j;
    size_t ngrains, helpers = (size_t)acc_sched_cpu_units() - 1;
    int took;

    if (helpers < 1)
        return 0; /* one CPU unit: nothing to split over, the inline path takes it */

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
    if (__atomic_load_n(&j.failed, __ATOMIC_RELAXED)) { /* the pool's join orders the store */
        acc_engine_fail(c, len);
        return ACC_BK_FAILED;
    }
    acc_sched_count(took > 0 ? ACC_PATH_SPLIT : ACC_PATH_INLINE, len, 1);
    return len;
}

/* The idle CPU units other than the caller's; declined where there is none. */
static int pool_run_ranges(acc_range_fn *fn, void *arg, size_t n, uint64_t piece_bytes)
{
    int helpers = acc_sched_cpu_units() - 1;

    if (helpers < 1)
        return -1;
    return acc_pool_run_ranges(fn, arg, n, helpers, piece_bytes) > 0;
}

/* CBC-encrypt is serial within a stream: the pool never takes it. */
const acc_backend acc_backend_pool = {
    .name = "pool",
    .priority = 30,
    .caps = ACC_BK_PARALLEL | ACC_BK_AEAD | ACC_BK_XTS | ACC_BK_DISJOINT,
    .unit = ACC_UNIT_CPU,
    .path = ACC_PATH_SPLIT,
    .min_size = pool_min,
    .run = pool_run,
    .run_ranges = pool_run_ranges,
};
