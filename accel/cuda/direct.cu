/* accel/cuda/direct.cu: run() with no host pass over the data. The GPU's copy engines read the
 * callers' `in` and write their `out` by DMA (pinned in place: registered for the request or held by
 * the registration cache), or, where the device reaches pageable memory, the kernels read and write
 * them in place; the whole mode runs on the device. What cannot go direct goes staged (pipeline.cu).
 *
 * Completion contract with output landing straight in `out`: chunks are waited for in order and a
 * job's done / iv move only past chunks whose output has landed. A chunk's output is queued to land
 * only after the chunk before it landed (its stream waits on the previous chunk's `done`), and then a
 * one-word marker in pinned memory says it landed. The failure model this rests on: an error while
 * queueing stops issuing (the test hook ACCELAES_CUDA_FAIL_AFTER models exactly that; what is in
 * flight completes and counts); an error while running is sticky for the context: CUDA runs nothing
 * queued after it and every wait reports it, even a wait on a chunk that had landed before it, so the
 * markers say which chunks count. A copy out cut short by a fault elsewhere would leave part of a
 * chunk in `out` uncounted: where that part is the input (in place), the chunk's kernels wait for the
 * chunk before to land, so no kernel of this request runs while a copy out into its input does.
 * (Not in place, such a cut-short copy could only leave correct output beyond done, which the
 * provider overwrites.) */
#include <stdlib.h>
#include <string.h>
#include "accel/engine.h"
#include "accel/cuda/runtime.h"

enum { DJ_STAGED = 0, DJ_COPY = 1, DJ_KERNEL = 2 }; /* acc_cu_dscratch.kind */

typedef struct dgroup {
    acc_cu_slot *sl;
    acc_gpu_job *jobs; /* the direct jobs (sl->ds.djobs) */
    const uint8_t *kind;
    size_t n, chunk;
} dgroup;

static int is_fwd(int op)
{
    return op == ACC_GPU_ECB_ENC || op == ACC_GPU_CTR;
}
static int is_inv(int op)
{
    return op == ACC_GPU_ECB_DEC || op == ACC_GPU_CBC_DEC;
}

/* ---- which jobs go direct, and pinning their memory ---- */

/* The kernels may run on the job's own memory: 16-byte aligned (they load whole blocks), and not
 * CBC-decrypt in place (a thread reads the block before its own, which another may have written). */
static int kernel_ok(const acc_gpu_job *jb)
{
    uintptr_t a = (uintptr_t)jb->in, b = (uintptr_t)jb->out;
    if ((a | b) % 16)
        return 0;
    return !(jb->op == ACC_GPU_CBC_DEC && a < b + jb->len && b < a + jb->len);
}

static int classify(const acc_gpu_job *jb)
{
    if (acc_cu.dma == ACC_DMA_STAGED || jb->len == 0 || jb->len < acc_cu.direct_min)
        return DJ_STAGED;
    return acc_cu.dma == ACC_DMA_PAGEABLE && kernel_ok(jb) ? DJ_KERNEL : DJ_COPY;
}

static int by_start(const void *a, const void *b)
{
    uintptr_t x = ((const acc_cu_range *)a)->lo, y = ((const acc_cu_range *)b)->lo;
    return x < y ? -1 : x > y;
}

/* A page-rounded range job j's DMA needs pinned (ds->want); pin() merges and pins them. */
static void want_range(acc_cu_dscratch *ds, size_t *nwant, uint32_t j, const uint8_t *p, size_t len, int writable)
{
    uintptr_t pg = acc_cu.page;
    acc_cu_range *r = &ds->want[(*nwant)++];
    r->lo = (uintptr_t)p & ~(pg - 1);
    r->hi = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);
    r->job = j;
    r->writable = writable;
}

/* Pin what the copy jobs asked for. CUDA refuses to register a page twice, so ranges sharing a page
 * are merged first (writable if any part is), for the cache as for a request's own registrations:
 * asking the cache for two ranges that share a page would find the first entry held and refuse the
 * second. Each merged range comes from the cache where it takes it, else is registered for this
 * request. A job with a range that could not be pinned (read-only memory where the device cannot pin
 * it so, a page pinned by someone else) goes staged; what was pinned for it is undone with the rest. */
static void pin(acc_cu_dscratch *ds, size_t nwant, acc_rc *rc)
{
    qsort(ds->want, nwant, sizeof(acc_cu_range), by_start);
    for (size_t a = 0, b; a < nwant; a = b) {
        uintptr_t hi = ds->want[a].hi;
        int writable = ds->want[a].writable;
        for (b = a + 1; b < nwant && ds->want[b].lo < hi; b++) {
            hi = ds->want[b].hi > hi ? ds->want[b].hi : hi;
            writable |= ds->want[b].writable;
        }
        void *base = (void *)ds->want[a].lo;
        acc_rc_entry *e = NULL;
        /* The cache grows a new entry over the unheld ones it overlaps, so the entry may reach into the
         * next ranges' pages, which it would then refuse (held) and CUDA would refuse to register again:
         * give it back and ask for one range over all of them (it merges the one just given back). */
        while (rc && (e = acc_rc_get(rc, base, hi - ds->want[a].lo, writable)) != NULL) {
            uintptr_t end = (uintptr_t)acc_rc_entry_base(e) + acc_rc_entry_len(e);
            if (b >= nwant || ds->want[b].lo >= end)
                break;
            acc_rc_put(rc, e);
            e = NULL;
            hi = end > hi ? end : hi;
            for (; b < nwant && ds->want[b].lo < hi; b++) {
                hi = ds->want[b].hi > hi ? ds->want[b].hi : hi;
                writable |= ds->want[b].writable;
            }
        }
        if (e) {
            ds->held[ds->nheld++] = e;
            continue;
        }
        if (acc_cu_host_register(base, hi - ds->want[a].lo, writable) == 0) {
            ds->pinned[ds->npinned++] = ds->want[a];
            continue;
        }
        for (size_t i = a; i < b; i++)
            ds->kind[ds->want[i].job] = DJ_STAGED;
    }
}

/* A piece's output lands on its input: a cut-short copy out would corrupt what the CPU finishes from. */
static int writes_input(const dgroup *g, const acc_cu_plan *pl)
{
    for (size_t i = 0; i < pl->nwb; i++) {
        const acc_gpu_job *jb = &g->jobs[pl->wb[i].job];
        if (jb->in < jb->out + jb->len && jb->out < jb->in + jb->len)
            return 1;
    }
    return 0;
}

static void unpin(acc_cu_dscratch *ds, acc_rc *rc)
{
    for (size_t i = 0; i < ds->npinned; i++)
        acc_cu_host_unregister((void *)ds->pinned[i].lo);
    for (size_t i = 0; i < ds->nheld; i++)
        acc_rc_put(rc, ds->held[i]);
    ds->npinned = ds->nheld = 0;
}

/* Decide each job's path and pin the memory of those that copy by DMA. */
static void choose(acc_cu_dscratch *ds, const acc_gpu_job *jobs, size_t n)
{
    acc_rc *rc = acc_cu.dma == ACC_DMA_CACHE ? acc_cu_regcache() : NULL;
    size_t nwant = 0;
    ds->npinned = ds->nheld = 0;
    for (size_t j = 0; j < n; j++) {
        const acc_gpu_job *jb = &jobs[j];
        ds->kind[j] = (uint8_t)classify(jb);
        if (ds->kind[j] != DJ_COPY)
            continue;
        if (jb->in == jb->out) {
            want_range(ds, &nwant, (uint32_t)j, jb->in, jb->len, 1);
        } else {
            want_range(ds, &nwant, (uint32_t)j, jb->in, jb->len, 0);
            want_range(ds, &nwant, (uint32_t)j, jb->out, jb->len, 1);
        }
    }
    pin(ds, nwant, rc);
}

/* ---- the chunk pipeline on the callers' memory ---- */

/* The next chunk from job j, offset off: pieces of copy jobs packed in job order; a chunk where the
 * kernels run on a job's own memory holds that job alone (a launch addresses one base pointer). */
static void plan(dgroup *g, size_t *j, size_t *off, acc_cu_plan *p)
{
    size_t pos = 0;
    p->nwb = p->nf = p->ni = 0;
    p->need_in = 1;
    p->host_mem = 0;
    while (*j < g->n && pos < g->chunk) {
        acc_gpu_job *jb = &g->jobs[*j];
        int k = g->kind[*j] == DJ_KERNEL;
        if (p->nwb && (k || p->host_mem))
            break;
        size_t take = jb->len - *off < g->chunk - pos ? jb->len - *off : g->chunk - pos;
        acc_cu_wb *w = &p->wb[p->nwb++];
        w->job = (uint32_t)*j;
        w->op = (uint8_t)jb->op;
        w->joff = *off;
        w->len = take;
        w->pos = pos;
        p->host_mem = k;
        p->nf += is_fwd(jb->op);
        p->ni += is_inv(jb->op);
        pos += take;
        *off += take;
        if (*off == jb->len) {
            (*j)++;
            *off = 0;
        }
    }
    p->bytes = pos;
}

static int kernels(dgroup *g, acc_cu_buf *bf, const uint32_t first[3])
{
    const acc_cu_plan *pl = &bf->p;
    const acc_gpu_job *jb = &g->jobs[pl->wb[0].job];
    acc_kargs a;
    a.in = pl->host_mem ? (const uint4 *)(jb->in + pl->wb[0].joff) : bf->d_in;
    a.out = pl->host_mem ? (uint4 *)(jb->out + pl->wb[0].joff) : bf->d_out;
    a.rk = g->sl->d_keys;
    a.chain = g->sl->d_chain;
    a.tables = acc_cu.d_tables;
    a.ks_only = 0; /* CTR: the XOR too, on the device */
    return acc_cu_kernels(&a, bf, first);
}

/* Queue a chunk: input by DMA from the callers' memory, the kernels, output by DMA into the callers'
 * memory once the previous chunk's output has landed (prev: that chunk, if still in flight), then the
 * chunk's landed marker. bf->nout counts the pieces whose output may land; with a failure part-way,
 * `done` is still recorded after them so that they are waited for and counted. */
static int launch(dgroup *g, acc_cu_buf *bf, acc_cu_buf *prev, uint32_t *landed)
{
    const acc_cu_plan *pl = &bf->p;
    cudaStream_t st = bf->st;
    uint32_t first[3];
    int chain = acc_cu_describe(g->sl, g->jobs, bf, NULL, first);
    int strict = pl->host_mem || writes_input(g, pl);
    __atomic_store_n(landed, 0, __ATOMIC_RELEASE);
    bf->nout = 0;
    if (acc_cu_check(
            cudaMemcpyAsync(bf->d_pieces, bf->h_pieces, pl->nwb * sizeof(acc_piece), cudaMemcpyHostToDevice, st),
            "copy pieces"))
        return -1;
    for (size_t i = 0; i < pl->nwb && !pl->host_mem; i++) {
        const acc_cu_wb *w = &pl->wb[i];
        if (acc_cu_check(cudaMemcpyAsync((uint8_t *)bf->d_in + w->pos, g->jobs[w->job].in + w->joff, w->len,
                                         cudaMemcpyHostToDevice, st),
                         "copy in (DMA)"))
            return -1;
    }
    /* in order into out; strict: the kernels too (see the top of the file), else they still overlap
     * the previous chunk's copy out */
    if ((chain && prev && acc_cu_check(cudaStreamWaitEvent(st, prev->kdone, 0), "cudaStreamWaitEvent"))
        || (strict && prev && acc_cu_check(cudaStreamWaitEvent(st, prev->done, 0), "cudaStreamWaitEvent")))
        return -1;
    if (kernels(g, bf, first) || acc_cu_check(cudaEventRecord(bf->kdone, st), "cudaEventRecord"))
        return -1;
    if (!strict && prev && acc_cu_check(cudaStreamWaitEvent(st, prev->done, 0), "cudaStreamWaitEvent"))
        return -1;
    int rc = 0;
    if (pl->host_mem)
        bf->nout = pl->nwb; /* the kernels wrote the output in place */
    for (size_t i = 0; i < pl->nwb && !pl->host_mem && rc == 0; i++) {
        const acc_cu_wb *w = &pl->wb[i];
        rc = acc_cu_check(cudaMemcpyAsync(g->jobs[w->job].out + w->joff, (uint8_t *)bf->d_out + w->pos, w->len,
                                          cudaMemcpyDeviceToHost, st),
                          "copy out (DMA)");
        bf->nout += rc == 0;
    }
    if (rc == 0)
        rc = acc_cu_check(cudaMemcpyAsync(landed, acc_cu.d_one, 4, cudaMemcpyDeviceToHost, st), "copy marker");
    if (acc_cu_check(cudaEventRecord(bf->done, st), "cudaEventRecord")) {
        bf->nout = 0; /* not even a record: the context is gone, and nothing queued on it runs */
        return -1;
    }
    return rc;
}

/* The first upto pieces of a chunk have landed: move their jobs' done and iv. */
static void account(dgroup *g, const acc_cu_buf *bf, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        const acc_cu_wb *w = &bf->p.wb[i];
        acc_gpu_job *jb = &g->jobs[w->job];
        jb->done = w->joff + w->len;
        if (w->op == ACC_GPU_CTR || w->op == ACC_GPU_CBC_DEC)
            memcpy(jb->iv, w->next_iv, 16);
        else if (w->op == ACC_GPU_CBC_ENC)
            acc_iv_at_block(ACC_OP_CBC_ENC, jb->iv, NULL, jb->out + w->joff, w->len / 16, jb->iv);
    }
}

/* The direct jobs through the slot's ring of device buffers: up to nbuf chunks in flight, each on
 * its own stream, so that one chunk's copy in, another's kernels and a third's copy out overlap (both
 * copy engines busy). The host only queues and waits (blocking): it touches no data. */
static int run_direct(dgroup *g, long *chunks_left)
{
    acc_cu_slot *sl = g->sl;
    const size_t nbuf = (size_t)acc_cu.nbuf;
    size_t j = 0, off = 0, head = 0, tail = 0;
    int rc = 0, stop = 0;
    if (acc_cu_upload_keys(sl, g->jobs, g->n))
        return -1;
    for (;;) {
        while (!stop && j < g->n && head - tail < nbuf) {
            if (*chunks_left == 0) {
                rc = acc_cu_fail_after_hit();
                stop = 1;
                break;
            }
            acc_cu_buf *bf = &sl->buf[head % nbuf];
            plan(g, &j, &off, &bf->p);
            if (launch(g, bf, head > tail ? &sl->buf[(head - 1) % nbuf] : NULL, &sl->h_landed[head % nbuf])) {
                rc = -1;
                stop = 1;
            }
            if (bf->nout)
                head++; /* some of its output may land: wait for it and count it */
            if (*chunks_left > 0)
                (*chunks_left)--;
        }
        if (tail == head)
            break;
        acc_cu_buf *bf = &sl->buf[tail % nbuf];
        if (acc_cu_check(cudaEventSynchronize(bf->done), "chunk")) {
            rc = -1;
            /* a sticky error is reported for chunks that had landed before it too: their markers say */
            for (; tail < head && __atomic_load_n(&sl->h_landed[tail % nbuf], __ATOMIC_ACQUIRE); tail++)
                account(g, &sl->buf[tail % nbuf], sl->buf[tail % nbuf].p.nwb);
            break;
        }
        account(g, bf, bf->nout);
        tail++;
    }
    if (rc) /* nothing may still be queued when the buffers (and the pinned ranges) are next used */
        for (size_t b = 0; b < nbuf; b++)
            acc_cu_sync(&sl->buf[b]);
    acc_cu_wipe_keys(sl, g->n);
    return rc;
}

/* The direct jobs, copied out of the group in order (idx: where each came from). */
static size_t gather(const acc_gpu_job *jobs, size_t n, const uint8_t *kind, acc_gpu_job *to, uint32_t *idx)
{
    size_t m = 0;
    for (size_t j = 0; j < n; j++)
        if (kind[j] != DJ_STAGED) {
            to[m] = jobs[j];
            idx[m++] = (uint32_t)j;
        }
    return m;
}

static void scatter(acc_gpu_job *jobs, const acc_gpu_job *from, const uint32_t *idx, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        jobs[idx[i]].done = from[i].done;
        memcpy(jobs[idx[i]].iv, from[i].iv, 16);
    }
}

int acc_cu_group(acc_cu_slot *sl, acc_gpu_job *jobs, size_t n, long *chunks_left)
{
    acc_cu_dscratch *ds = &sl->ds;
    if (acc_cu.dma == ACC_DMA_STAGED)
        return acc_cu_staged_group(sl, jobs, n, chunks_left);
    choose(ds, jobs, n);
    size_t nd = gather(jobs, n, ds->kind, ds->djobs, ds->didx);
    if (nd == 0) {
        unpin(ds, acc_cu.rc);
        return acc_cu_staged_group(sl, jobs, n, chunks_left);
    }
    size_t total = 0;
    for (size_t i = 0; i < nd; i++)
        total += ds->djobs[i].len;
    /* the kinds of the direct jobs, in their order, where the planner reads them */
    for (size_t i = 0; i < nd; i++)
        ds->kind[i] = ds->kind[ds->didx[i]];
    dgroup g = { sl, ds->djobs, ds->kind, nd, acc_cu_group_chunk(total) };
    int rc = run_direct(&g, chunks_left);
    unpin(ds, acc_cu.rc); /* every chunk has completed or the streams were drained */
    scatter(jobs, ds->djobs, ds->didx, nd);
    if (rc || nd == n)
        return rc;
    size_t ns = 0;
    for (size_t j = 0, i = 0; j < n; j++) { /* the staged rest: every index not in didx (both ascend) */
        if (i < nd && ds->didx[i] == j) {
            i++;
            continue;
        }
        if (jobs[j].len == 0) /* done as it is: no reason to start the staged path for it */
            continue;
        ds->sjobs[ns] = jobs[j];
        ds->sidx[ns++] = (uint32_t)j;
    }
    if (ns == 0)
        return 0;
    rc = acc_cu_staged_group(sl, ds->sjobs, ns, chunks_left);
    scatter(jobs, ds->sjobs, ds->sidx, ns);
    return rc;
}
