/* provider/route/policy.c: where a request's whole blocks run. The backends (provider/route/backends.c:
 * lanes for async jobs, the GPU, the pool split, the inline path) are walked in priority order,
 * each from the size its descriptor gives under the settings, drawn once into acc_policy by
 * acc_policy_make. Small requests take the inline path with no other cost. Also the inline
 * backend itself. */
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>
#include "provider/route/backend.h"
#include "provider/route/cipher_ctx.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

static size_t min2(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The size from which backend i may take a request of the kind cap: SIZE_MAX where it cannot
 * take such requests at all, or is a device under backend = cpu or under backend = another device. */
static size_t backend_min(int i, const acc_settings *s, unsigned cap)
{
    const acc_backend *b = acc_backends[i];

    if (!(b->caps & cap))
        return SIZE_MAX;
    if ((b->caps & ACC_BK_DEVICE) && s->backend != ACC_BACKEND_AUTO && s->backend != ACC_BACKEND_OF(i))
        return SIZE_MAX;
    return b->min_size(s, cap);
}

/* The kinds of request that are not block runs, in acc_policy's min_ranges order. */
static const unsigned range_caps[ACC_RANGES_KINDS] = { ACC_BK_AEAD, ACC_BK_XTS };

/* Backend i's thresholds: the block ops', and the ranges' for a backend that runs ranges (the
 * fallback does not: below every other backend's, the caller runs the request its own way). */
static void backend_thresholds(acc_policy *p, int i, const acc_settings *s)
{
    const acc_backend *b = acc_backends[i];

    for (int op = 0; op < ACC_OP_COUNT; op++) {
        p->min[i][op] = backend_min(i, s, op == ACC_OP_CBC_ENC ? ACC_BK_SERIAL : ACC_BK_PARALLEL);
        if (!(b->caps & ACC_BK_FALLBACK))
            p->inline_below[op] = min2(p->inline_below[op], p->min[i][op]);
    }
    for (int k = 0; k < ACC_RANGES_KINDS; k++) {
        p->min_ranges[i][k] = b->run_ranges != NULL ? backend_min(i, s, range_caps[k]) : SIZE_MAX;
        p->ranges_from[k] = min2(p->ranges_from[k], p->min_ranges[i][k]);
    }
}

void acc_policy_make(acc_policy *p, const acc_settings *s)
{
    for (int op = 0; op < ACC_OP_COUNT; op++)
        p->inline_below[op] = SIZE_MAX;
    for (int k = 0; k < ACC_RANGES_KINDS; k++)
        p->ranges_from[k] = SIZE_MAX;
    for (int i = 0; i < ACC_BK_COUNT; i++) {
        const acc_backend *b = acc_backends[i];
        int j = i;

        backend_thresholds(p, i, s);
        /* insertion by priority; the fallback last whatever its number says */
        while (j > 0 && !(b->caps & ACC_BK_FALLBACK)
               && ((acc_backends[p->order[j - 1]]->caps & ACC_BK_FALLBACK)
                   || acc_backends[p->order[j - 1]]->priority > b->priority)) {
            p->order[j] = p->order[j - 1];
            j--;
        }
        p->order[j] = (unsigned char)i;
    }
}

int acc_policy_ranges(const acc_policy *p, int kind, size_t len, acc_range_fn *fn, void *arg, size_t n,
                      uint64_t piece_bytes, acc_path *path)
{
    if (kind < 0 || kind >= ACC_RANGES_KINDS || p->ranges_from[kind] == SIZE_MAX || len < p->ranges_from[kind])
        return -1;
    for (int i = 0; i < ACC_BK_COUNT; i++) {
        unsigned k = p->order[i];
        const acc_backend *b = acc_backends[k];
        size_t min = p->min_ranges[k][kind];
        int r;

        /* SIZE_MAX is never, even for a request of SIZE_MAX bytes */
        if (min == SIZE_MAX || len < min || (r = b->run_ranges(fn, arg, n, piece_bytes)) < 0)
            continue;
        *path = r > 0 ? b->path : ACC_PATH_INLINE;
        return 1;
    }
    return -1;
}

unsigned acc_policy_paths(const acc_policy *p, acc_op op, size_t len)
{
    unsigned paths = 0;

    if (!acc_op_valid(op))
        return 0;
    for (int i = 0; i < ACC_BK_COUNT; i++)
        if (len >= p->min[i][op] && !(acc_backends[i]->caps & ACC_BK_FALLBACK))
            paths |= 1u << i;
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

static size_t inline_run(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    if (!acc_ctx_run(c, in, out, len / 16, c->iv)) {
        acc_engine_fail(c, len);
        return ACC_BK_FAILED;
    }
    acc_sched_count(ACC_PATH_INLINE, len, 1);
    return len;
}

static size_t inline_min(const acc_settings *s, unsigned cap)
{
    (void)s;
    (void)cap;
    return 0;
}

const acc_backend acc_backend_inline = {
    .name = "inline",
    .priority = 1000,
    .caps = ACC_BK_PARALLEL | ACC_BK_SERIAL | ACC_BK_AEAD | ACC_BK_XTS | ACC_BK_FALLBACK,
    .unit = 0,
    .path = ACC_PATH_INLINE,
    .min_size = inline_min,
    .run = inline_run,
};

static int overlaps_partially(const uint8_t *in, const uint8_t *out, size_t len)
{
    return in != out && out < in + len && in < out + len;
}

int acc_policy_blocks(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    const acc_policy *p = &c->prov->policy;
    int partial = overlaps_partially(in, out, len);

    if (!acc_op_valid(c->op)) /* no backend has a size for it: the inline engine's own check */
        return acc_backend_inline.run(c, in, out, len) != ACC_BK_FAILED;

    /* Each backend takes the whole request, a prefix of it (the GPU: a request queued for it
     * comes back finished, its tail run on this thread meanwhile), or declines; the inline
     * backend, last, takes whatever is left. */
    for (int i = 0; i < ACC_BK_COUNT; i++) {
        unsigned k = p->order[i];
        const acc_backend *b = acc_backends[k];
        size_t done;

        if (len < p->min[k][c->op] || (partial && (b->caps & ACC_BK_DISJOINT)))
            continue;
        if ((done = b->run(c, in, out, len)) == ACC_BK_FAILED)
            return 0;
        in += done;
        out += done;
        len -= done;
        if (len == 0 && done != 0)
            return 1;
    }
    return 1;
}
