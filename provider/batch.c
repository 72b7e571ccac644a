/* provider/batch.c: async-job batching. CBC-encrypt requests from OpenSSL ASYNC jobs on one
 * thread are queued, their jobs paused, and the queue run at once in multi-buffer lanes. */
#include "provider/batch.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <openssl/async.h>
#include "accel/mb.h"
#include "provider/prov.h"
#include "scheduler/sched.h"

/* Requests smaller than this are not worth a pause and a resume: measured with
 * `openssl speed -async_jobs 16` (bench/results/async-cbc.md), batching loses below about
 * 512 bytes (0.6x at 256) and wins from 768 (1.45x), where the lanes' gain outruns the two
 * fiber switches and the application's select per request. */
#ifndef BATCH_MIN_BYTES
#define BATCH_MIN_BYTES 768
#endif
/* The longest a queued request waits for companions (the design card: ~50 us). The wait is
 * usually far shorter: a queue flushes when full, when it reaches the size the last batches
 * had, or when a resumed job sees that nobody joined since it paused. */
#define BATCH_TIMEOUT_NS ACC_BATCH_TIMEOUT_NS
#define BATCH_CAP 32
/* After two lone flushes in a row, lone requests run inline for a while before one tries the
 * batch again: with a single job in flight a pause buys nothing. The while doubles with each
 * lone probe, from 64 up to 4096 requests, so async_jobs 1 pays almost nothing. */
#define BATCH_SOLO_SKIP_MIN 64
#define BATCH_SOLO_SKIP_MAX 4096
/* Every this many flushes the learned batch size is ignored once, to notice more jobs. */
#define BATCH_RELEARN 8

typedef struct batch_req {
    acc_cipher_ctx *ctx;
    const uint8_t *in;
    uint8_t *out;
    size_t len;
    uint64_t gen;       /* queue generation it was put in; a fork or a reset changes it */
    int done;           /* 1 ok, -1 the batch failed */
} batch_req;

/* One queue per thread: ASYNC jobs run on the thread that starts them, so the queue needs
 * no lock. Entries point into the paused jobs' stacks, which stay valid while they wait. */
typedef struct acc_batch {
    batch_req *q[BATCH_CAP];
    size_t nq;
    uint64_t seq;        /* requests ever queued here: "did anyone join while I slept?" */
    uint64_t gen;
    uint64_t t_first;    /* when the oldest queued request came (ns, monotonic) */
    size_t expect;       /* size of the last batch that closed by itself (0: unknown) */
    unsigned flushes;
    int solo_streak;
    int solo_skip;       /* lone requests still to run inline before the next probe */
    int solo_next;       /* the skip after the next lone probe */
} acc_batch;

static __thread acc_batch tl_batch;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
/* The fd key: any address unique to this module. */
static const char wait_key;

/* A forked child has only the forking thread, and must not run (or wait for) requests its
 * parent queued: drop them; a job resumed in the child finds its request gone and runs it
 * inline (nothing was written yet). */
static void batch_atfork_child(void)
{
    tl_batch.nq = 0;
    tl_batch.gen++;
    tl_batch.expect = 0;
    tl_batch.solo_streak = 0;
    tl_batch.solo_skip = 0;
    tl_batch.solo_next = 0;
}

static void batch_fork_init(void)
{
    (void)pthread_atfork(NULL, NULL, batch_atfork_child);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void wait_fd_cleanup(ASYNC_WAIT_CTX *w, const void *key, OSSL_ASYNC_FD fd, void *custom)
{
    (void)w;
    (void)key;
    (void)custom;
    close(fd);
}

/* Give the job's wait context our fd, once per context: an eventfd, readable whenever the
 * job may be resumed. A paused batch job always may (on resume it finds its request done or
 * moves the batch on), so the fd is made readable before every pause and never drained here.
 * Applications such as `openssl speed -async_jobs` select on exactly one fd per context (and
 * would block on stdin without one). Returns the fd, -1 when the job has no wait context,
 * -2 on failure. */
static int ensure_wait_fd(ASYNC_JOB *job)
{
    ASYNC_WAIT_CTX *w = ASYNC_get_wait_ctx(job);
    OSSL_ASYNC_FD fd;
    void *custom;
    int efd;

    if (w == NULL)
        return -1;
    if (ASYNC_WAIT_CTX_get_fd(w, &wait_key, &fd, &custom))
        return fd;
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0)
        return -2;
    if (!ASYNC_WAIT_CTX_set_wait_fd(w, &wait_key, efd, NULL, wait_fd_cleanup)) {
        close(efd);
        return -2;
    }
    return efd;
}

/* Signal "ready to resume" just before pausing. A write per pause, not one at creation:
 * an application watching the fd edge-triggered (epoll EPOLLET) needs a new event for every
 * pause, and one that drains the fd must see it readable again. Measured with
 * `openssl speed -async_jobs 16`, the write costs about 6% at 16 KiB and 20% at 1 KiB against
 * an fd made readable once; hanging an edge-triggered application would cost more. The
 * counter never nears its limit (2^64 - 2) at one increment per pause; a failed write
 * (EAGAIN there) still leaves the fd readable. */
static void wait_fd_signal(int fd)
{
    static const uint64_t one = 1;

    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
        /* Nothing to do: the counter is non-zero, so the fd is readable anyway. */
    }
}

/* Only CBC-encrypt is batched: it is serial within a stream, so lanes over streams win
 * several times over. ECB, CTR and CBC-decrypt are already parallel within a stream and
 * AES-NI/VAES runs them at least as fast on one core (bench/mb_lanes.c measures both). */
static int batch_pays(const acc_cipher_ctx *ctx, size_t len)
{
    return ctx->mode == ACC_MODE_CBC && ctx->enc && len >= BATCH_MIN_BYTES
           && len % ACC_AES_BLOCK == 0 && ctx->key_set;
}

/* The lanes read the key schedule in place, so it must be in AES-NI's layout, which
 * intel-ipsec-mb shares (checked byte for byte: its IMB_AES_KEYEXP_* give the same enc[] and,
 * in decryption order, the same dec[]). Only the AES-NI engine makes that layout; the nested-EVP
 * engine (no AES-NI, or ACCELAES_FORCE_EVP_ENGINE=1) keeps its keys elsewhere. */
static int key_fits_lanes(const acc_cipher_ctx *ctx)
{
    const acc_engine *ni = acc_engine_aesni();

    return ni != NULL && ctx->eng == ni && ctx->ks.evp == NULL;
}

/* Run the queue: one CPU unit held while the lanes run, where one is idle. If none is, the
 * batch runs anyway: the calling thread is already the application's crypto thread and
 * inline work never waits for a unit, so the batch is no worse than inline work would be. */
static void batch_flush(acc_batch *b, int closed_by_itself)
{
    acc_mb_req reqs[BATCH_CAP];
    uint8_t iv0[BATCH_CAP][16];
    size_t n = b->nq, i, bytes = 0;
    int unit, ok;

    if (n == 0)
        return;
    b->nq = 0;
    b->flushes++;
    for (i = 0; i < n; i++)
        bytes += b->q[i]->len;

    if (n == 1) {
        /* A lone stream gains nothing from lanes: the inline engine is as fast or faster. */
        batch_req *r = b->q[0];

        r->done = r->ctx->eng->cbc_enc(&r->ctx->ks, r->in, r->out, r->len / ACC_AES_BLOCK,
                                       r->ctx->iv) ? 1 : -1;
        acc_sched_count(ACC_PATH_INLINE, bytes, 1);
        if (closed_by_itself) {
            b->expect = 0;
            if (++b->solo_streak >= 2) {
                b->solo_skip = b->solo_next < BATCH_SOLO_SKIP_MIN ? BATCH_SOLO_SKIP_MIN : b->solo_next;
                b->solo_next = b->solo_skip < BATCH_SOLO_SKIP_MAX ? 2 * b->solo_skip : BATCH_SOLO_SKIP_MAX;
            }
        }
        return;
    }
    b->solo_streak = 0;
    b->solo_next = 0;
    if (closed_by_itself)
        b->expect = n;

    for (i = 0; i < n; i++) {
        batch_req *r = b->q[i];

        reqs[i].op = ACC_MB_CBC_ENC;
        reqs[i].key = &r->ctx->ks;
        reqs[i].iv = r->ctx->iv;
        reqs[i].in = r->in;
        reqs[i].out = r->out;
        reqs[i].nblocks = r->len / ACC_AES_BLOCK;
        memcpy(iv0[i], r->ctx->iv, 16);
    }
    unit = acc_sched_try_acquire(ACC_UNIT_CPU);
    ok = acc_mb_run(reqs, n);
    if (unit >= 0)
        acc_sched_release(unit, ok ? bytes : 0, ok ? n : 0);
    if (ok) {
        acc_sched_count(ACC_PATH_BATCH, bytes, n);
        for (i = 0; i < n; i++)
            b->q[i]->done = 1;
        return;
    }
    /* The library failed part-way (it validated nothing we had not). A request whose input
     * is intact (out of place) is redone inline from its saved IV; one done in place may have
     * lost its input and fails. */
    for (i = 0; i < n; i++) {
        batch_req *r = b->q[i];

        if (r->in != r->out) {
            memcpy(r->ctx->iv, iv0[i], 16);
            r->done = r->ctx->eng->cbc_enc(&r->ctx->ks, r->in, r->out, r->len / ACC_AES_BLOCK,
                                           r->ctx->iv) ? 1 : -1;
            acc_sched_count(ACC_PATH_INLINE, r->len, 1);
        } else {
            r->done = -1;
        }
    }
}

static size_t batch_lanes(void)
{
    int l = acc_mb_lanes();

    return l < 2 ? 2 : (l > BATCH_CAP ? BATCH_CAP : (size_t)l);
}

int acc_batch_submit(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len)
{
    acc_batch *b = &tl_batch;
    ASYNC_JOB *job;
    batch_req req;
    size_t lanes;
    uint64_t seen;
    int fd;

    if (ctx == NULL || in == NULL || out == NULL || ctx->eng == NULL || !batch_pays(ctx, len))
        return 0;
    if (in != out && out < in + len && in < out + len)
        return 0;   /* partial overlap: legal for nobody's lanes, the caller copes */
    job = ASYNC_get_current_job();
    if (job == NULL || !acc_mb_available() || !key_fits_lanes(ctx))
        return 0;
    pthread_once(&fork_once, batch_fork_init);
    if (b->nq == 0 && b->solo_skip > 0) {
        b->solo_skip--;
        return 0;
    }
    if ((fd = ensure_wait_fd(job)) == -2)
        return 0;

    lanes = batch_lanes();
    req = (batch_req){ ctx, in, out, len, b->gen, 0 };
    if (b->nq == 0)
        b->t_first = now_ns();
    b->q[b->nq++] = &req;
    b->seq++;

    /* Full, or as many as the last batches had (except now and then, to learn of more jobs),
     * or the oldest has waited long enough: run now, without pausing this job. */
    if (b->nq >= lanes
        || (b->expect >= 2 && b->nq >= b->expect && b->flushes % BATCH_RELEARN != 0)
        || (b->nq > 1 && now_ns() - b->t_first >= BATCH_TIMEOUT_NS))
        batch_flush(b, 0);

    while (req.done == 0) {
        seen = b->seq;
        /* The application resumes this job when it likes (our fd is always ready). A pause
         * that fails, or is blocked (ASYNC_block_pause), returns at once: nobody joined, so
         * the queue is flushed below and the request is still done. */
        wait_fd_signal(fd);
        (void)ASYNC_pause_job();
        if (req.done != 0)
            break;
        if (req.gen != b->gen)
            return 0;   /* forked child: the queue was dropped, the request untouched */
        if (b->seq == seen || now_ns() - b->t_first >= BATCH_TIMEOUT_NS)
            batch_flush(b, b->seq == seen);
    }
    if (req.done < 0) {
        acc_raise(ACC_R_ENGINE_FAILURE, "multi-buffer batch of CBC encryptions failed");
        return -1;
    }
    return 1;
}
