/* provider/cipher/gcm_split.c: a large GCM data update cut into ranges, which the backends that take
 * AEAD ranges run (the route is policy.c's acc_policy_ranges: the pool, over idle CPU units plus
 * the caller, from split_min). The whole blocks of one update are cut into grains as the pool's
 * block split (split.c's pool_run) cuts a CTR request; each range of grains,
 * on whichever thread, XORs its keystream and hashes its ciphertext from a zero GHASH state:
 *  - with the engine's split->range (ipsec-mb: its stitched update over a context of the range's
 *    own, counting by inc32 itself) in one pass; else
 *  - in two: the keystream of counter blocks from the message's counter moved on by the range's
 *    first block, counted by GCM's inc32 (acc_gcm_ctr32: the low 32 bits wrap, the CTR engine's
 *    128-bit carry must not reach byte 11), and the engine's ghash (IMB_GHASH), the input before
 *    it is decrypted (in == out is legal), the output after it is encrypted.
 * A run with no helper is one range: the same pass over the whole update. With no backend to
 * take it, the caller's engine updates as usual.
 * The caller then combines: state = state * H^m xor range's GHASH, range by range in message
 * order (m: the range's blocks), and hands the state on to the engine (split->put), whose later
 * updates and final continue the message as if it had done these blocks itself. */
#include <string.h>
#include <openssl/crypto.h>
#include "provider/cipher/cipher_gcm.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

/* As pool_run (split.c): grains of at least 16 KiB, at most 256 of them. Within a range, the
 * keystream and GHASH alternate over chunks of CHUNK blocks, so the second pass over the data
 * finds it in the core's cache. */
#define GRAIN (16u * 1024u)
#define MAX_GRAINS 256
#define CHUNK_BLOCKS 512u

typedef struct {
    const acc_cipher_ctx *c;
    const acc_gcm_engine *geng;
    const acc_gcm_state *st;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks, grain_blocks;
    int enc, failed;
    uint8_t ctr0[16];                  /* the counter block of the split's first block */
    uint8_t hash[MAX_GRAINS][16];      /* GHASH from zero of the range that starts at grain i */
    size_t count[MAX_GRAINS];          /* that range's grains (0: no range starts at i) */
} gcm_split_job;

static void gcm_range(void *arg, size_t first, size_t count)
{
    gcm_split_job *j = arg;
    size_t b = first * j->grain_blocks, end = (first + count) * j->grain_blocks;
    uint8_t ctr[16], state[16] = { 0 };
    int ok = 1;

    if (end > j->nblocks)
        end = j->nblocks;
    memcpy(ctr, j->ctr0, 16);
    acc_gcm_inc32(ctr, b);
    if (j->geng->split->range != NULL) {
        /* the engine's stitched pass: keystream and GHASH in one read of the data */
        j->geng->split->range(j->st, ctr, j->in + b * 16, j->out + b * 16, end - b, state);
        b = end;
    }
    while (b < end) {
        size_t n = end - b < CHUNK_BLOCKS ? end - b : CHUNK_BLOCKS;
        const uint8_t *in = j->in + b * 16;
        uint8_t *out = j->out + b * 16;

        if (!j->enc)
            j->geng->split->ghash(j->st, in, n, state);
        ok &= acc_gcm_ctr32(j->c->eng, &j->c->ks, in, out, n, ctr);
        if (j->enc)
            j->geng->split->ghash(j->st, out, n, state);
        acc_gcm_inc32(ctr, n);
        b += n;
    }
    /* each range writes only its own slots; the pool's join orders them before the caller reads */
    memcpy(j->hash[first], state, 16);
    j->count[first] = count;
    OPENSSL_cleanse(ctr, sizeof(ctr));
    if (!ok)
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

/* The engine's counter and GHASH key come from the message itself; the split's CTR engine needs
 * an AES key schedule, made from the raw key on the first split of a key (base.ks, cleansed
 * with the context or a new key, copied by dupctx: the core's, since base.key_set says so). */
static int split_key(acc_gcm_ctx *g)
{
    acc_cipher_ctx *c = &g->base;

    if (c->key_set || g->geng->split->range != NULL)
        return 1;
    if (!c->eng->set_key(&c->ks, c->rawkey, c->keylen, 1))
        return 0;
    c->key_set = 1;
    return 1;
}

int acc_gcm_split(acc_gcm_ctx *g, const uint8_t *in, uint8_t *out, size_t nblocks)
{
    gcm_split_job j;   /* 6 KiB on the caller's stack, as pool_run's: nothing to allocate */
    uint8_t ghash[16], h[16], hg[16], hlast[16];
    size_t ngrains;
    acc_path path;

    if (g->geng->split == NULL || nblocks < 2 || !split_key(g))
        return -1;
    if (!g->geng->split->get(&g->st, ghash, j.ctr0, h))
        return -1;   /* not at a block boundary: the caller updates as usual */
    ngrains = nblocks * 16 / GRAIN;
    ngrains = ngrains > MAX_GRAINS ? MAX_GRAINS : ngrains < 2 ? 2 : ngrains;
    j.c = &g->base;
    j.geng = g->geng;
    j.st = &g->st;
    j.in = in;
    j.out = out;
    j.enc = g->base.enc;
    j.failed = 0;
    j.nblocks = nblocks;
    j.grain_blocks = (nblocks + ngrains - 1) / ngrains;
    ngrains = (nblocks + j.grain_blocks - 1) / j.grain_blocks;
    memset(j.count, 0, sizeof(j.count));
    if (acc_policy_ranges(&g->base.prov->policy, ACC_RANGES_AEAD, nblocks * 16, gcm_range, &j, ngrains,
                          (uint64_t)j.grain_blocks * 16, &path) < 0) {
        OPENSSL_cleanse(&j, sizeof(j));
        return -1;   /* nothing run: the engine updates as usual */
    }
    if (__atomic_load_n(&j.failed, __ATOMIC_RELAXED)) {
        /* only the nested-EVP engine fails, and it wipes what it wrote; the message is lost */
        OPENSSL_cleanse(&j, sizeof(j));
        return 0;
    }
    /* Combine in message order: state * H^m xor the range's GHASH, m = the range's blocks, as
     * H^grain_blocks per grain (every grain but the last is that long) and H^last for the last. */
    acc_gf128_pow(hg, h, j.grain_blocks);
    acc_gf128_pow(hlast, h, nblocks - (ngrains - 1) * j.grain_blocks);
    for (size_t i = 0; i < ngrains;) {
        size_t start = i, end = i + j.count[i];   /* the pool ran every grain once, in ranges */

        if (end == start || end > ngrains) {   /* a range lost: never (the pool runs each once) */
            OPENSSL_cleanse(&j, sizeof(j));
            return 0;
        }
        for (; i < end; i++)
            acc_gf128_mul(ghash, i == ngrains - 1 ? hlast : hg);
        for (int b = 0; b < 16; b++)
            ghash[b] ^= j.hash[start][b];
    }
    g->geng->split->put(&g->st, ghash, nblocks);
    acc_sched_count(path, (uint64_t)nblocks * 16, 1);
    OPENSSL_cleanse(h, sizeof(h));
    OPENSSL_cleanse(hg, sizeof(hg));
    OPENSSL_cleanse(hlast, sizeof(hlast));
    OPENSSL_cleanse(ghash, sizeof(ghash));
    OPENSSL_cleanse(&j, sizeof(j));
    return 1;
}
