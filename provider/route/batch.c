/* provider/route/batch.c: async-job batching. CBC-encrypt requests from OpenSSL ASYNC jobs on one
 * thread are queued, their jobs paused, and the queue run at once in multi-buffer lanes. */
#include "provider/route/batch.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <openssl/async.h>
#include "accel/mb.h"
#include "provider/route/backend.h"
#include "provider/route/prov.h"
#include "provider/base/err.h"
#include "scheduler/forksafe.h"
#include "scheduler/sched.h"

/* The longest a queued request waits for companions (docs/DESIGN.md: ~50 us). The wait is
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
    int done;           /* 1 ok, -1 the batch failed, -2 the context was freed or re-initialised */
} batch_req;

/* One queue per thread: ASYNC jobs run on the thread that starts them, and only that thread
 * submits and flushes. Entries point into the paused jobs' stacks, which stay valid while they
 * wait (OpenSSL never frees a paused job). The application may free a waiting request's context
 * and buffers on any thread, though: acc_batch_cancel takes the entry out under `lock`, which
 * the owner holds while it touches entries (the lane run included, so a cancel waits for a run
 * that has the context in hand). */
typedef struct acc_batch {
    pthread_mutex_t lock;
    int registered;      /* the thread-exit destructor knows this queue */
    uint64_t fork_gen;   /* batch_fork_gen when this thread's queue was last valid */
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

static __thread acc_batch tl_batch = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
/* Guards every context's batch_q and a queue's life: taken by cancel before a queue's lock, and
 * by a thread's exit before its queue goes. */
static pthread_mutex_t queues_lock = PTHREAD_MUTEX_INITIALIZER;
ACC_FORK_SAFE(&queues_lock, 1, "batch queues", ACC_RANK_BATCH, ACC_FORK_HOLD);
/* Bumped in a forked child: the other threads' queues (and their locks) are the parent's. */
static uint64_t batch_fork_gen = 1;
static pthread_key_t exit_key;
static int exit_key_ok;
/* The fd key: any address unique to this module. */
static const char wait_key;

/* A forked child has only the forking thread, and must not run (or wait for) requests its
 * parent queued: drop them; a job resumed in the child finds its request gone and runs it
 * inline (nothing was written yet). */
static void batch_atfork_child(void)
{
    for (size_t i = 0; i < tl_batch.nq; i++)
        tl_batch.q[i]->ctx->batch_q = NULL;
    batch_fork_gen++;
    tl_batch.fork_gen = batch_fork_gen;
    pthread_mutex_init(&tl_batch.lock, NULL);
    tl_batch.nq = 0;
    tl_batch.gen++;
    tl_batch.expect = 0;
    tl_batch.solo_streak = 0;
    tl_batch.solo_skip = 0;
    tl_batch.solo_next = 0;
}

/* A thread that exits leaves its paused jobs for good: nothing may point at its queue after. */
static void batch_thread_exit(void *vb)
{
    acc_batch *b = vb;

    pthread_mutex_lock(&queues_lock);
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; i < b->nq; i++)
        b->q[i]->ctx->batch_q = NULL;
    b->nq = 0;
    pthread_mutex_unlock(&b->lock);
    pthread_mutex_unlock(&queues_lock);
}

static void batch_fork_init(void)
{
    (void)pthread_atfork(NULL, NULL, batch_atfork_child);
    exit_key_ok = pthread_key_create(&exit_key, batch_thread_exit) == 0;
}

/* Removes ctx's entries from b; b->lock held. */
static void remove_ctx(acc_batch *b, const acc_cipher_ctx *ctx)
{
    size_t k = 0;

    for (size_t i = 0; i < b->nq; i++) {
        if (b->q[i]->ctx == ctx)
            b->q[i]->done = -2;
        else
            b->q[k++] = b->q[i];
    }
    b->nq = k;
}

void acc_batch_cancel(acc_cipher_ctx *ctx)
{
    if (ctx == NULL || __atomic_load_n(&ctx->batch_q, __ATOMIC_ACQUIRE) == NULL)
        return;
    pthread_mutex_lock(&queues_lock);
    acc_batch *b = ctx->batch_q;
    if (b != NULL && b->fork_gen == batch_fork_gen) {
        pthread_mutex_lock(&b->lock);
        remove_ctx(b, ctx);
        pthread_mutex_unlock(&b->lock);
    }
    __atomic_store_n(&ctx->batch_q, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&queues_lock);
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
 * pause, and one that drains the fd must see it readable again. The write costs some throughput
 * (bench/results/async-batch-thresholds.md); hanging an edge-triggered application would cost more. The
 * counter never nears its limit (2^64 - 2) at one increment per pause; a failed write
 * (EAGAIN there) still leaves the fd readable. */
static void wait_fd_signal(int fd)
{
    static const uint64_t one = 1;

    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
        /* Nothing to do: the counter is non-zero, so the fd is readable anyway. */
    }
}

/* Which ops and sizes are batched is the policy's (provider/route/policy.c); this only refuses what
 * the lanes cannot take. */
static int batch_pays(const acc_cipher_ctx *ctx, size_t len)
{
    return ctx->op == ACC_OP_CBC_ENC && len > 0 && len % ACC_AES_BLOCK == 0 && ctx->key_set;
}

/* The lanes read the key schedule in place, so it must be in AES-NI's layout, which
 * intel-ipsec-mb shares (checked byte for byte: its IMB_AES_KEYEXP_* give the same enc[] and,
 * in decryption order, the same dec[]). Only an engine with ACC_CAP_NI_SCHEDULE makes that layout; the nested-EVP
 * engine (no AES-NI, or ACCELAES_FORCE_EVP_ENGINE=1) keeps its keys elsewhere. */
static int key_fits_lanes(const acc_cipher_ctx *ctx)
{
    return acc_engine_has(ctx->eng, ACC_CAP_NI_SCHEDULE) && acc_cipher_key(ctx)->evp == NULL;
}

/* Run the queue: one CPU unit held while the lanes run, where one is idle. If none is, the
 * batch runs anyway: the calling thread is already the application's crypto thread and
 * inline work never waits for a unit, so the batch is no worse than inline work would be. */
static void batch_run(acc_batch *b, int closed_by_itself);

static void batch_flush(acc_batch *b, int closed_by_itself)
{
    pthread_mutex_lock(&b->lock);
    size_t n = b->nq;
    batch_run(b, closed_by_itself);
    for (size_t i = 0; i < n; i++)
        __atomic_store_n(&b->q[i]->ctx->batch_q, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->lock);
}

/* b->lock held; b->q[0 .. the old nq) stay readable after (nq is 0). */
static void batch_run(acc_batch *b, int closed_by_itself)
{
    acc_req reqs[BATCH_CAP];
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

        r->done = r->ctx->eng->cbc_enc(acc_cipher_key(r->ctx), r->in, r->out, r->len / ACC_AES_BLOCK,
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

        reqs[i].op = ACC_OP_CBC_ENC;
        reqs[i].key = acc_cipher_key(r->ctx);
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
            r->done = r->ctx->eng->cbc_enc(acc_cipher_key(r->ctx), r->in, r->out, r->len / ACC_AES_BLOCK,
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
    /* The eventfd and the unit table are system calls a sandboxed forked child must not make. */
    if (job == NULL || !acc_mb_available() || !key_fits_lanes(ctx) || !acc_sched_kernel_ok())
        return 0;
    pthread_once(&fork_once, batch_fork_init);
    if (b->nq == 0 && b->solo_skip > 0) {
        b->solo_skip--;
        return 0;
    }
    if ((fd = ensure_wait_fd(job)) == -2)
        return 0;

    if (!b->registered) {
        if (exit_key_ok)
            (void)pthread_setspecific(exit_key, b);
        b->registered = 1;
        b->fork_gen = batch_fork_gen;
    }

    lanes = batch_lanes();
    req = (batch_req){ ctx, in, out, len, b->gen, 0 };
    pthread_mutex_lock(&b->lock);
    if (b->nq == 0)
        b->t_first = now_ns();
    b->q[b->nq++] = &req;
    b->seq++;
    __atomic_store_n(&ctx->batch_q, b, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->lock);

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
    if (req.done == -2) {
        acc_raise(ACC_R_NOT_INITIALISED, "the context was freed or re-initialised while its async job was paused");
        return -1;
    }
    if (req.done < 0) {
        acc_raise(ACC_R_ENGINE_FAILURE, "multi-buffer batch of CBC encryptions failed");
        return -1;
    }
    return 1;
}

/* ---- the lanes as a backend (provider/route/backend.h) ---- */

/* Lanes pay for CBC-encrypt from this size: below it a pause and a resume cost more than the
 * lanes gain (bench/results/async-batch-thresholds.md). The only mode batched: the others are parallel within
 * a stream and run at least as fast on one core (bench/src/mb_lanes.c). */
#define BATCH_MIN (768u)

static size_t lanes_min(const acc_settings *s, unsigned cap)
{
    (void)s;
    (void)cap;
    return BATCH_MIN;
}

/* Declines outside async jobs; counts its own bytes, raises its own error. */
static size_t lanes_run(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    int r = acc_batch_submit(c, in, out, len);

    return r > 0 ? len : r == 0 ? 0 : ACC_BK_FAILED;
}

const acc_backend acc_backend_lanes = {
    .name = "lanes",
    .priority = 10,
    .caps = ACC_BK_SERIAL,
    .unit = ACC_UNIT_CPU,
    .path = ACC_PATH_BATCH,
    .min_size = lanes_min,
    .run = lanes_run,
};
