/* accel/cuda/pipeline.cu: run() for one slot, and the staged path: jobs that do not go direct
 * (direct.cu) are cut into chunks staged through the slot's pinned buffers, each chunk on its own
 * stream (copy in, kernels, copy out overlap across chunks), and written back to the callers' buffers
 * strictly in order, so a failure leaves a correct prefix. The host copies of a chunk are split over
 * the process's host team (host_team.cu). */
#include <string.h>
#include "accel/engine.h"
#include "accel/cuda/runtime.h"

/* Where staging has got to: job j, offset off in it. */
typedef struct cursor {
    size_t j, off;
} cursor;

typedef struct group {
    acc_cu_slot *sl;
    acc_gpu_job *jobs;
    size_t n;
    size_t chunk;   /* bytes per chunk for this group (<= the staging buffer size) */
    int nt;         /* copies use non-temporal stores */
    acc_ht *team;   /* host threads sharing each chunk's copies, or NULL */
} group;

static int is_fwd(int op) { return op == ACC_GPU_ECB_ENC || op == ACC_GPU_CTR; }
static int is_inv(int op) { return op == ACC_GPU_ECB_DEC || op == ACC_GPU_CBC_DEC; }

static int valid_job(const acc_gpu_job *jb)
{
    return (is_fwd(jb->op) || is_inv(jb->op) || jb->op == ACC_GPU_CBC_ENC)
        && (jb->keybits == 128 || jb->keybits == 192 || jb->keybits == 256)
        && jb->key && jb->len % 16 == 0 && (jb->len == 0 || (jb->in && jb->out))
        && jb->len / 16 < (1ULL << 40);
}

/* Expand every job's key on the host and copy the schedules to the device (then wipe the
 * pinned copy: key material stays in pinned memory only for the copy). */
int acc_cu_upload_keys(acc_cu_slot *sl, const acc_gpu_job *jobs, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        uint32_t *rk = sl->h_keys + j * ACC_CU_RK_STRIDE;
        int rounds = acc_core_enc_keys(jobs[j].key, jobs[j].keybits, rk);
        if (is_inv(jobs[j].op))
            acc_core_dec_keys(rk, rounds, rk + 60);
        memcpy(sl->jctr[j], jobs[j].iv, 16);
    }
    size_t bytes = n * ACC_CU_RK_STRIDE * 4;
    cudaStream_t st = sl->buf[0].st;
    int rc = acc_cu_check(cudaMemcpyAsync(sl->d_keys, sl->h_keys, bytes, cudaMemcpyHostToDevice, st), "copy keys")
          || acc_cu_check(acc_cu_sync(&sl->buf[0]), "copy keys (sync)");
    explicit_bzero(sl->h_keys, bytes);
    return rc ? -1 : 0;
}

void acc_cu_wipe_keys(acc_cu_slot *sl, size_t n)
{
    cudaMemsetAsync(sl->d_keys, 0, n * ACC_CU_RK_STRIDE * 4, sl->buf[0].st);
    acc_cu_sync(&sl->buf[0]);
}

static int rounds_of(int keybits) { return keybits / 32 + 6; }

static int needs_in(int op) { return !(op == ACC_GPU_CTR && acc_cu.ctr_ks); }

/* Decide the next chunk's pieces from cursor c (job order, staging offsets); copies nothing yet. */
static void plan_chunk(group *g, cursor *c, acc_cu_plan *p)
{
    size_t pos = 0;
    p->nwb = p->nf = p->ni = 0;
    p->need_in = p->host_mem = 0;
    while (c->j < g->n && pos < g->chunk) {
        acc_gpu_job *jb = &g->jobs[c->j];
        size_t take = jb->len - c->off;
        if (take > g->chunk - pos)
            take = g->chunk - pos;
        if (take == 0) {
            c->j++;
            c->off = 0;
            continue;
        }
        acc_cu_wb *w = &p->wb[p->nwb++];
        w->job = (uint32_t)c->j;
        w->op = (uint8_t)jb->op;
        w->joff = c->off;
        w->len = take;
        w->pos = pos;
        p->need_in |= needs_in(jb->op);
        p->nf += is_fwd(jb->op);
        p->ni += is_inv(jb->op);
        pos += take;
        c->off += take;
        if (c->off == jb->len) {
            c->j++;
            c->off = 0;
        }
    }
    p->bytes = pos;
}

/* One task for the host team over a staging buffer's byte range: copy a finished chunk out to the
 * callers (or XOR its keystream into their data), then copy the next chunk's input in. Both walk the
 * same staging offsets, so whoever copies a range out also refills it: no range is overwritten
 * before it was read, without any barrier between the two. */
typedef struct swap {
    group *g;
    uint8_t *h;
    const acc_cu_plan *out, *in;   /* either may be NULL */
} swap;

/* The first piece of p that ends after staging offset lo. */
static size_t first_after(const acc_cu_plan *p, size_t lo)
{
    size_t a = 0, b = p->nwb;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (p->wb[m].pos + p->wb[m].len <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static void swap_range(void *arg, size_t lo, size_t hi)
{
    const swap *s = (const swap *)arg;
    for (int ph = 0; ph < 2; ph++) {
        const acc_cu_plan *p = ph ? s->in : s->out;
        if (!p || (ph && !p->need_in))
            continue;
        for (size_t i = first_after(p, lo); i < p->nwb && p->wb[i].pos < hi; i++) {
            const acc_cu_wb *w = &p->wb[i];
            acc_gpu_job *jb = &s->g->jobs[w->job];
            size_t a = w->pos > lo ? w->pos : lo, b = w->pos + w->len < hi ? w->pos + w->len : hi;
            size_t at = w->joff + (a - w->pos);
            if (ph) {
                if (needs_in(w->op))
                    acc_hc_copy(s->h + a, jb->in + at, b - a, s->g->nt);
            } else if (w->op == ACC_GPU_CTR && acc_cu.ctr_ks)
                acc_hc_xor(jb->out + at, jb->in + at, s->h + a, b - a, s->g->nt);
            else
                acc_hc_copy(jb->out + at, s->h + a, b - a, s->g->nt);
        }
    }
}

static void host_work(group *g, uint8_t *h, const acc_cu_plan *out, const acc_cu_plan *in)
{
    swap s = { g, h, out, in };
    size_t total = out ? out->bytes : 0;
    if (in && in->need_in && in->bytes > total)
        total = in->bytes;
    acc_ht_run(g->team, total, swap_range, &s);
}

/* Piece descriptors of the chunk planned in bf->p, grouped per kernel (encrypt direction, decrypt
 * direction, CBC-encrypt) with a running block index each: first[k] ends as kernel k's block count.
 * Each job's next IV is taken now from the chunk's input: `staged` (the staging buffer), or, when
 * NULL, the job's own memory (direct: in place, this chunk's output overwrites it once queued).
 * Offsets are into the staging / device buffers, or from 0 where the kernels run on the job's own
 * memory (bf->p.host_mem). Returns whether a CBC-encrypt piece continues from the chaining value the
 * previous chunk left on the device. Shared by pipeline.cu and direct.cu. */
int acc_cu_describe(acc_cu_slot *sl, const acc_gpu_job *jobs, acc_cu_buf *bf, const uint8_t *staged, uint32_t first[3])
{
    acc_cu_plan *pl = &bf->p;
    size_t at[3] = { 0, pl->nf, pl->nf + pl->ni };
    int chain = 0;
    first[0] = first[1] = first[2] = 0;
    for (size_t i = 0; i < pl->nwb; i++) {
        acc_cu_wb *w = &pl->wb[i];
        const acc_gpu_job *jb = &jobs[w->job];
        int k = is_fwd(w->op) ? 0 : is_inv(w->op) ? 1 : 2;
        acc_piece *p = &bf->h_pieces[at[k]++];
        uint8_t *jc = sl->jctr[w->job];
        p->first = first[k];
        p->nblk = (uint32_t)(w->len / 16);
        p->off = pl->host_mem ? 0 : (uint32_t)(w->pos / 16);
        p->job = w->job;
        p->op = w->op;
        p->rounds = (uint8_t)rounds_of(jb->keybits);
        p->flags = 0;
        p->pad = 0;
        first[k] += p->nblk;
        memcpy(p->iv, jc, 16);   /* CTR: counter here; CBC-dec: previous ciphertext; CBC-enc: IV */
        if (w->op == ACC_GPU_CTR || w->op == ACC_GPU_CBC_DEC) {
            const uint8_t *src = staged ? staged + w->pos : jb->in + w->joff;
            acc_iv_at_block(acc_op_of_gpu_abi(w->op), jc, src, NULL, p->nblk, jc);
            memcpy(w->next_iv, jc, 16);
        } else if (w->op == ACC_GPU_CBC_ENC && w->joff > 0) {
            p->flags = ACC_PIECE_CHAIN;
            chain = 1;
        }
    }
    return chain;
}

/* Launch the chunk's kernels on bf's stream, one per kind that has pieces (encrypt direction, decrypt
 * direction, CBC-encrypt), a's buffers set by the caller: the block-parallel ones on a grid no larger
 * than the GPU holds at once (persistent: each block loops over many AES blocks). */
int acc_cu_kernels(acc_kargs *a, acc_cu_buf *bf, const uint32_t first[3])
{
    const acc_cu_plan *pl = &bf->p;
    size_t counts[3] = { pl->nf, pl->ni, pl->nwb - pl->nf - pl->ni }, base = 0;
    for (int k = 0; k < 3; k++) {
        if (!counts[k])
            continue;
        a->pieces = bf->d_pieces + base;
        a->npieces = (uint32_t)counts[k];
        a->nblocks = first[k];
        base += counts[k];
        size_t want = (a->nblocks + ACC_CU_THREADS - 1) / ACC_CU_THREADS;
        size_t cap = (size_t)acc_cu.occ[k == 0 ? ACC_K_FWD : ACC_K_INV] * acc_cu.sms;
        int grid = (int)(want < cap ? want : cap);
        cudaError_t e = k == 2 ? acc_cu_launch_cbcenc(a, bf->st)
            : k == 0           ? acc_cu_launch_fwd(a, grid, bf->st)
                               : acc_cu_launch_inv(a, grid, bf->st);
        if (acc_cu_check(e, "kernel launch"))
            return -1;
    }
    return 0;
}

/* Queue the copies and kernels of the chunk planned in bf->p (its input already staged) on bf's
 * stream. prev: the buffer of the chunk before, still in flight (CBC-encrypt chaining), or NULL. */
static int launch(group *g, acc_cu_buf *bf, acc_cu_buf *prev)
{
    const acc_cu_plan *pl = &bf->p;
    size_t np = pl->nwb;
    uint32_t first[3];
    /* CBC-dec chains from the staged input, read before the kernel runs */
    int chain = acc_cu_describe(g->sl, g->jobs, bf, bf->h, first);
    cudaStream_t st = bf->st;
    if (acc_cu_check(cudaMemcpyAsync(bf->d_pieces, bf->h_pieces, np * sizeof(acc_piece), cudaMemcpyHostToDevice, st), "copy pieces")
        || (pl->need_in && acc_cu_check(cudaMemcpyAsync(bf->d_in, bf->h, pl->bytes, cudaMemcpyHostToDevice, st), "copy in"))
        || (chain && prev && acc_cu_check(cudaStreamWaitEvent(st, prev->kdone, 0), "cudaStreamWaitEvent")))
        return -1;
    acc_kargs a;
    a.in = bf->d_in;
    a.out = bf->d_out;
    a.rk = g->sl->d_keys;
    a.chain = g->sl->d_chain;
    a.tables = acc_cu.d_tables;
    a.ks_only = acc_cu.ctr_ks;
    if (acc_cu_kernels(&a, bf, first))
        return -1;
    if (acc_cu_check(cudaEventRecord(bf->kdone, st), "cudaEventRecord")
        || acc_cu_check(cudaMemcpyAsync(bf->h, bf->d_out, pl->bytes, cudaMemcpyDeviceToHost, st), "copy out")
        || acc_cu_check(cudaEventRecord(bf->done, st), "cudaEventRecord"))
        return -1;
    return 0;
}

/* A completed chunk: advance its jobs' done and iv. Called before its output is copied out (that
 * cannot fail) and before anything new is staged over it (CBC-encrypt reads its last block there). */
static void account(group *g, const acc_cu_buf *bf)
{
    for (size_t i = 0; i < bf->p.nwb; i++) {
        const acc_cu_wb *w = &bf->p.wb[i];
        acc_gpu_job *jb = &g->jobs[w->job];
        jb->done = w->joff + w->len;
        if (w->op == ACC_GPU_CTR || w->op == ACC_GPU_CBC_DEC)
            memcpy(jb->iv, w->next_iv, 16);
        else if (w->op == ACC_GPU_CBC_ENC)   /* the output, still in the staging buffer */
            acc_iv_at_block(ACC_OP_CBC_ENC, jb->iv, NULL, bf->h + w->pos, w->len / 16, jb->iv);
    }
}

int acc_cu_fail_after_hit(void)
{
    return acc_cu_fail("ACCELAES_CUDA_FAIL_AFTER: failing as asked after %ld chunks", acc_cu.fail_after);
}

/* The first chunk's copy-in and the last one's copy-out overlap nothing: a group of a few chunks is
 * cut into acc_cu.split chunks (not below 256 KiB), so that the fill and drain of the ring stay a
 * small part of it and copy-in, kernel and copy-out still pipeline. */
size_t acc_cu_group_chunk(size_t total)
{
    size_t want = (total / (size_t)acc_cu.split + 15) & ~(size_t)15;
    if (want < (256u << 10))
        want = 256u << 10;
    return acc_cu.adapt && want < acc_cu.chunk ? want : acc_cu.chunk;
}

/* Whether another chunk may be staged. The test hook ACCELAES_CUDA_FAIL_AFTER ends staging with an
 * error here; chunks already in flight are still written back. */
static int may_stage(group *g, const cursor *c, long *chunks_left, int *stop, int *rc)
{
    if (*stop || c->j >= g->n)
        return 0;
    if (*chunks_left == 0) {
        *rc = acc_cu_fail_after_hit();
        *stop = 1;
        return 0;
    }
    return 1;
}

/* One group of at most ACC_CU_MAXJOBS jobs through the slot's ring of buffers. The ring first
 * fills (stage only); then each step waits for the oldest chunk, and one host task copies it out
 * and stages the next chunk into the same buffer; at the end the ring drains (copy out only). */
int acc_cu_staged_group(acc_cu_slot *sl, acc_gpu_job *jobs, size_t n, long *chunks_left)
{
    group g = { sl, jobs, n, acc_cu.chunk, 0, NULL };
    size_t total = 0;
    for (size_t j = 0; j < n; j++)
        total += jobs[j].len;
    g.chunk = acc_cu_group_chunk(total);
    /* Large groups stream through the cache: non-temporal stores spare the read-for-ownership of
     * every destination line and keep the caller's cache for the caller. */
    g.nt = acc_cu.nt_min && total >= acc_cu.nt_min;
    g.team = acc_cu_team();
    cursor c = { 0, 0 };
    size_t head = 0, tail = 0;   /* chunks staged / written back (ring index = count % nbuf) */
    int rc = 0, stop = 0;        /* stop: stage no more; chunks already in flight are still written back */
    const size_t nbuf = (size_t)acc_cu.nbuf;
    if (acc_cu_staging(sl) || acc_cu_upload_keys(sl, jobs, n))
        return -1;
    for (;;) {
        if (head - tail < nbuf && may_stage(&g, &c, chunks_left, &stop, &rc)) {
            acc_cu_buf *bf = &sl->buf[head % nbuf];
            plan_chunk(&g, &c, &bf->p);
            host_work(&g, bf->h, NULL, &bf->p);
            if (launch(&g, bf, head > tail ? &sl->buf[(head - 1) % nbuf] : NULL) == 0) {
                head++;
                if (*chunks_left > 0)
                    (*chunks_left)--;
                continue;
            }
            rc = -1;
            stop = 1;
        }
        if (tail == head)
            break;
        /* In order: a chunk is written back only if every chunk before it was. */
        acc_cu_buf *bf = &sl->buf[tail % nbuf];
        if (acc_cu_check(cudaEventSynchronize(bf->done), "chunk")) {
            rc = -1;
            break;
        }
        int refill = head - tail == nbuf && may_stage(&g, &c, chunks_left, &stop, &rc);
        if (refill)
            plan_chunk(&g, &c, &sl->spare);
        account(&g, bf);
        host_work(&g, bf->h, &bf->p, refill ? &sl->spare : NULL);
        tail++;
        if (!refill)
            continue;
        acc_cu_plan done = bf->p;   /* the buffer now holds the new chunk: swap the plans */
        bf->p = sl->spare;
        sl->spare = done;
        if (launch(&g, bf, &sl->buf[(head - 1) % nbuf]) == 0) {
            head++;
            if (*chunks_left > 0)
                (*chunks_left)--;
        } else {
            rc = -1;
            stop = 1;
        }
    }
    if (rc)   /* nothing may still be queued when the buffers are next used */
        for (int b = 0; b < acc_cu.nbuf; b++)
            acc_cu_sync(&sl->buf[b]);
    acc_cu_wipe_keys(sl, n);
    return rc;
}

int acc_cu_run(int slot, acc_gpu_job *jobs, size_t njobs)
{
    for (size_t i = 0; i < njobs; i++)
        if (!valid_job(&jobs[i]))
            return acc_cu_fail("run: job %zu is invalid (op %d, keybits %d, len %zu)", i, jobs[i].op,
                               jobs[i].keybits, jobs[i].len);
    acc_cu_slot *sl = &acc_cu.slot[slot];
    long chunks_left = acc_cu.fail_after;   /* -1: no limit */
    int rc = 0;
    pthread_mutex_lock(&sl->lock);
    if (acc_cu_check(cudaSetDevice(acc_cu.dev), "cudaSetDevice") || acc_cu_slot_make(sl)) {
        rc = -1;
    } else {
        for (size_t g = 0; g < njobs && rc == 0; g += ACC_CU_MAXJOBS)
            rc = acc_cu_group(sl, jobs + g, njobs - g < ACC_CU_MAXJOBS ? njobs - g : ACC_CU_MAXJOBS, &chunks_left);
    }
    if (rc && acc_cu.fail_after < 0)
        acc_cu_after_error(sl);
    pthread_mutex_unlock(&sl->lock);
    return rc;
}
