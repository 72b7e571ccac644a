/* provider/policy.c: where a request's whole blocks run — batched in multi-buffer lanes (async
 * jobs), on the GPU, split over idle CPU units plus the caller, or inline on the caller's
 * thread — and the split itself. Small requests take the inline path with no other cost. */
#include <string.h>
#include <openssl/crypto.h>
#include "accel/gpu_plugin.h"
#include "provider/batch.h"
#include "provider/cipher.h"
#include "provider/gpu.h"
#include "provider/prov.h"
#include "scheduler/sched.h"

/* With gpu_min on auto, only requests this large ask the GPU glue (which calibrates). */
#define GPU_AUTO_FLOOR (64u * 1024u)
/* Below this, CBC encryption has no path but inline (batch.c's own floor for the lanes is higher). */
#define POLICY_FLOOR 256u
/* A split piece is at least this large: below it, handing it out costs more than it saves. */
#define SPLIT_PIECE_MIN (32u * 1024u)

/* The smallest request that any path but inline could take for this mode and direction: below
 * it a request goes straight to the engine, counted in its context, and never asks the policy
 * (whose per-request counting cost 8% of a 256-byte CTR call). Only CBC encryption has the
 * lanes; the split needs two pieces; the GPU only sees requests from gpu_min, or from its
 * auto floor when a GPU backend may be in use. */
size_t acc_policy_inline_below(const acc_settings *s, acc_mode mode, int enc)
{
    size_t m = s->split_min > 2 * SPLIT_PIECE_MIN ? s->split_min : 2 * SPLIT_PIECE_MIN;

    if (mode == ACC_MODE_CBC && enc && m > POLICY_FLOOR)
        m = POLICY_FLOOR;
    if (s->gpu_min != 0 && s->gpu_min < m)
        m = s->gpu_min;
    else if (s->gpu_min == 0 && s->backend != ACC_BACKEND_CPU && GPU_AUTO_FLOOR < m)
        m = GPU_AUTO_FLOOR;
    return m;
}

/* What the error says failed: the engine and the mode, as a reader of the error queue knows them. */
static const char *mode_name(const acc_cipher_ctx *c)
{
    switch (c->mode) {
    case ACC_MODE_ECB:
        return c->enc ? "ECB encryption" : "ECB decryption";
    case ACC_MODE_CBC:
        return c->enc ? "CBC encryption" : "CBC decryption";
    default:
        return "CTR";
    }
}

/* Out of line and cold: only a failing nested-EVP engine gets here. */
__attribute__((cold)) int acc_engine_fail(const acc_cipher_ctx *c, size_t len)
{
    const char *name = c->eng->name;

    acc_raise(ACC_R_ENGINE_FAILURE, "the %s engine failed in %s on %zu bytes",
              strcmp(name, "evp") == 0 ? "nested EVP" : name, mode_name(c), len);
    return 0;
}

static int op_of(const acc_cipher_ctx *c)
{
    switch (c->mode) {
    case ACC_MODE_ECB:
        return c->enc ? ACC_GPU_ECB_ENC : ACC_GPU_ECB_DEC;
    case ACC_MODE_CBC:
        return c->enc ? ACC_GPU_CBC_ENC : ACC_GPU_CBC_DEC;
    default:
        return ACC_GPU_CTR;
    }
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
    int op;
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
    if (j->op == ACC_GPU_CTR) {
        memcpy(iv, j->iv0, 16);
        acc_ctr_add(iv, b0);
    } else if (j->op == ACC_GPU_CBC_DEC) {
        memcpy(iv, j->ivs[first], 16);
    }
    /* A pool thread cannot raise the caller's error: the caller does, after the run. */
    if (!acc_run_engine(j->c, j->in + b0 * 16, j->out + b0 * 16, b1 - b0, iv))
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

static int split_run(acc_cipher_ctx *c, int op, const uint8_t *in, uint8_t *out, size_t len)
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
    j.op = op;
    j.in = in;
    j.out = out;
    j.nblocks = len / 16;
    j.failed = 0;
    j.grain_blocks = (j.nblocks + ngrains - 1) / ngrains;
    ngrains = (j.nblocks + j.grain_blocks - 1) / j.grain_blocks;
    memcpy(j.iv0, c->iv, 16);
    /* Every grain's chaining block is read before anything is written: in == out is legal,
     * and a CBC-decrypt grain chains from the ciphertext block before it. */
    if (op == ACC_GPU_CBC_DEC) {
        memcpy(j.ivs[0], c->iv, 16);
        for (size_t i = 1; i < ngrains; i++)
            memcpy(j.ivs[i], in + i * j.grain_blocks * 16 - 16, 16);
        memcpy(c->iv, in + len - 16, 16);
    } else if (op == ACC_GPU_CTR) {
        acc_ctr_add(c->iv, j.nblocks);
    }
    took = acc_pool_run_ranges(split_range, &j, ngrains, (int)helpers, (uint64_t)j.grain_blocks * 16);
    if (__atomic_load_n(&j.failed, __ATOMIC_RELAXED))   /* the pool's join orders the store */
        return acc_engine_fail(c, len);
    acc_sched_count(took > 0 ? ACC_PATH_SPLIT : ACC_PATH_INLINE, len, 1);
    return 1;
}

/* ---- GPU: the plugin does a prefix; the CPU finishes whatever it did not ---- */

static size_t gpu_try(acc_cipher_ctx *c, int op, const uint8_t *in, uint8_t *out, size_t len)
{
    acc_gpu_job job;
    size_t done;

    memset(&job, 0, sizeof(job));
    job.op = op;
    job.keybits = (int)c->keylen * 8;
    job.key = c->rawkey;
    memcpy(job.iv, c->iv, 16);
    job.in = in;
    job.out = out;
    job.len = len;
    done = acc_gpu_run(&c->prov->settings, &job);
    if (done > len || done % 16 != 0)
        done = 0;          /* a plugin that breaks the contract gets no credit */
    if (done > 0 && op != ACC_GPU_ECB_ENC && op != ACC_GPU_ECB_DEC)
        memcpy(c->iv, job.iv, 16);
    OPENSSL_cleanse(&job, sizeof(job));
    return done;
}

static int overlaps_partially(const uint8_t *in, const uint8_t *out, size_t len)
{
    return in != out && out < in + len && in < out + len;
}

int acc_policy_blocks(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    const acc_settings *s = &c->prov->settings;
    int op = op_of(c);

    /* Multi-buffer lanes pay for CBC-encrypt, the one mode that is serial within a stream;
     * the batch engine itself declines outside async jobs. */
    if (op == ACC_GPU_CBC_ENC) {
        int r = acc_batch_submit(c, in, out, len);   /* counts its own bytes, raises its own error */
        if (r != 0)
            return r > 0;
    }
    if (len >= s->split_min || (s->gpu_min != 0 && len >= s->gpu_min) || len >= GPU_AUTO_FLOOR) {
        if (overlaps_partially(in, out, len))
            goto inline_path;
        if (s->backend != ACC_BACKEND_CPU && len >= (s->gpu_min != 0 ? s->gpu_min : GPU_AUTO_FLOOR)
            && acc_gpu_wants(s, op, len)) {
            size_t done = gpu_try(c, op, in, out, len);
            in += done;
            out += done;
            len -= done;
            if (len == 0)
                return 1;
        }
        if (len >= s->split_min && op != ACC_GPU_CBC_ENC && len >= 2 * SPLIT_PIECE_MIN
            && acc_sched_cpu_units() > 1)
            return split_run(c, op, in, out, len);
    }
inline_path:
    if (!acc_run_engine(c, in, out, len / 16, c->iv))
        return acc_engine_fail(c, len);
    acc_sched_count(ACC_PATH_INLINE, len, 1);
    return 1;
}
