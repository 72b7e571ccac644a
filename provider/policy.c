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
#define SPLIT_MAX_PIECES 64

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

typedef struct {
    const acc_cipher_ctx *c;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks, piece_blocks;
    int failed;                          /* a piece's engine call failed (on whichever thread) */
    uint8_t ivs[SPLIT_MAX_PIECES][16];   /* each piece's starting IV / counter */
} split_job;

static void split_piece(void *arg, size_t i)
{
    split_job *j = arg;
    size_t first = i * j->piece_blocks;
    size_t nb = j->nblocks - first < j->piece_blocks ? j->nblocks - first : j->piece_blocks;
    uint8_t iv[16];

    memcpy(iv, j->ivs[i], 16);
    /* A pool thread cannot raise the caller's error: the caller does, after the run. */
    if (!acc_run_engine(j->c, j->in + first * 16, j->out + first * 16, nb, iv))
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

static int split_run(acc_cipher_ctx *c, int op, const uint8_t *in, uint8_t *out, size_t len)
{
    split_job j;
    size_t npieces, helpers = (size_t)acc_sched_cpu_units() - 1;
    int took;

    npieces = len / SPLIT_PIECE_MIN;
    if (npieces > (helpers + 1) * 4)
        npieces = (helpers + 1) * 4;       /* a few per thread, for balance */
    if (npieces > SPLIT_MAX_PIECES)
        npieces = SPLIT_MAX_PIECES;
    j.c = c;
    j.in = in;
    j.out = out;
    j.nblocks = len / 16;
    j.failed = 0;
    j.piece_blocks = (j.nblocks + npieces - 1) / npieces;
    npieces = (j.nblocks + j.piece_blocks - 1) / j.piece_blocks;
    /* Every piece's IV is read before anything is written: in == out is legal, and a
     * CBC-decrypt piece chains from the ciphertext block before it. */
    for (size_t i = 0; i < npieces; i++) {
        size_t first = i * j.piece_blocks;
        if (op == ACC_GPU_CTR) {
            memcpy(j.ivs[i], c->iv, 16);
            acc_ctr_add(j.ivs[i], first);
        } else if (op == ACC_GPU_CBC_DEC) {
            memcpy(j.ivs[i], i == 0 ? c->iv : in + first * 16 - 16, 16);
        }
    }
    if (op == ACC_GPU_CTR)
        acc_ctr_add(c->iv, j.nblocks);
    else if (op == ACC_GPU_CBC_DEC)
        memcpy(c->iv, in + len - 16, 16);
    took = acc_pool_run_bytes(split_piece, &j, npieces, (int)helpers, (uint64_t)j.piece_blocks * 16);
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
