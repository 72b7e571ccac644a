/* provider/gpu.c: the GPU plugin glue: dlopen of accelaes-cuda.so (or ACCELAES_GPU_PLUGIN) once per
 * process, gpu_min calibration, and runs on scheduler GPU units, batching requests that queue up. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "provider/gpu.h"
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
#include "scheduler/forksafe.h"
#include "scheduler/sched.h"

#define GPU_MAXSLOTS   16
#define BATCH_MAX      32                    /* jobs per combined run call */
#define BATCH_BYTES    (256u * 1024u * 1024u)
#define UNITMAP_MAX    64
/* backend=auto with gpu_min on auto: CUDA start-up costs about a quarter second per process
 * (bench/results/gpu-h100.md), the CPU time of ~1 GiB of AES. A process loads the plugin only once
 * it has asked about this many bytes of large requests, so short-lived processes never pay for it. */
#define AUTO_WARMUP    (256ull << 20)
/* The longest a request waits for a GPU unit before it runs on the CPU instead: a unit can stay
 * taken for good (a stopped holder, a damaged entry), a queued process works rather than idles,
 * and whatever another process of the user writes into the segment costs a request no more. */
#define GPU_WAIT_US    5000

/* A request waiting for its leader (see acc_gpu_run). Lives on the follower's stack. */
typedef struct waiter {
    acc_gpu_job *job;
    int finished;
} waiter;

/* Requests gathered by a leader while it waits for a GPU unit. Lives on the leader's stack;
 * followers only touch it under g.blk while it is g.open. */
typedef struct batch {
    waiter *w[BATCH_MAX];
    size_t n, bytes;
} batch;

/* Process state of the glue. It belongs to the loaded plugin, which is per process: this is
 * the one place that knows about it. Reset in a forked child (atfork), where it is redone. */
static struct {
    pthread_mutex_t lock;          /* load / init / calibration */
    pid_t pid;                     /* process the fields below belong to */
    int tried, ready, warned;
    const acc_gpu_plugin *pl;
    acc_gpu_info info;
    int calibrated;
    size_t cal_min;                /* calibrated gpu_min (SIZE_MAX: the GPU never won) */
    double cal_retry;              /* no calibration attempt before this time (now_s) */
    pthread_mutex_t blk;           /* batching and the unit -> slot map */
    pthread_cond_t bcv;
    batch *open;
    int unit_id[UNITMAP_MAX], nmapped;
    char last_err[256];            /* the plugin's last_error() is per thread: kept for followers */
    uint64_t auto_seen;            /* bytes asked about under backend=auto, gpu_min=auto */
    pthread_mutex_t slot_lock[GPU_MAXSLOTS];
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .blk = PTHREAD_MUTEX_INITIALIZER, .bcv = PTHREAD_COND_INITIALIZER };
/* Held across GPU runs and calibration (seconds): re-initialised in a child rather than waited for
 * at fork; the state behind them is keyed to g.pid and redone in the child. */
ACC_FORK_SAFE(&g.lock, 1, "gpu load", ACC_RANK_GPU, ACC_FORK_RESET);
ACC_FORK_SAFE(&g.blk, 1, "gpu batch", ACC_RANK_GPU, ACC_FORK_RESET);
ACC_FORK_SAFE(g.slot_lock, GPU_MAXSLOTS, "gpu slots", ACC_RANK_GPU, ACC_FORK_RESET);

static void *g_dl;   /* the plugin stays loaded for the life of the process (fork keeps it mapped) */

static void gpu_atfork_child(void)
{
    /* Only the forking thread survives: batches another thread led are gone (the locks are
     * re-initialised by scheduler/forksafe.c). */
    pthread_cond_init(&g.bcv, NULL);
    g.open = NULL;
    g.pid = 0;
    g.auto_seen = 0;
}

static void gpu_once(void)
{
    for (int i = 0; i < GPU_MAXSLOTS; i++)
        pthread_mutex_init(&g.slot_lock[i], NULL);
    (void)pthread_atfork(NULL, NULL, gpu_atfork_child);
}

/* The one stderr line per process, and only when the user asked for backend = cuda. */
static void warn_once(const acc_settings *s, const char *why)
{
    if (s->backend != ACC_BACKEND_CUDA || g.warned)
        return;
    g.warned = 1;
    fprintf(stderr, "accelaes: backend=cuda but %s: using the CPU\n", why);
}

/* ACCELAES_GPU_PLUGIN, else accelaes-cuda.so beside the module this function lives in. Never the
 * environment's in a setuid, setgid or file-capability program (secure_getenv): the caller's user
 * would choose a library for a more privileged process to load. */
static int plugin_path(char *buf, size_t len)
{
    const char *env = secure_getenv("ACCELAES_GPU_PLUGIN");
    Dl_info di;
    if (env && *env)
        return snprintf(buf, len, "%s", env) < (int)len;
    if (!dladdr((void *)acc_gpu_ready, &di) || !di.dli_fname)
        return 0;
    const char *slash = strrchr(di.dli_fname, '/');
    if (!slash)
        return snprintf(buf, len, "./accelaes-cuda.so") < (int)len;
    return snprintf(buf, len, "%.*s/accelaes-cuda.so", (int)(slash - di.dli_fname), di.dli_fname) < (int)len;
}

static int load_plugin(char *why, size_t wlen)
{
    char path[4096];
    if (!g_dl) {
        if (!plugin_path(path, sizeof(path))) {
            snprintf(why, wlen, "the GPU plugin path could not be found");
            return -1;
        }
        g_dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!g_dl) {
            const char *e = dlerror();
            snprintf(why, wlen, "the GPU plugin could not be loaded (%.250s)", e ? e : path);
            return -1;
        }
    }
    acc_gpu_entry_fn entry;
    *(void **)&entry = dlsym(g_dl, ACC_GPU_ENTRY);
    const acc_gpu_plugin *pl = entry ? entry() : NULL;
    if (!pl || pl->abi != ACC_GPU_ABI_VERSION || !pl->init || !pl->run || !pl->last_error) {
        snprintf(why, wlen, "the GPU plugin has no %s entry of ABI version %d", ACC_GPU_ENTRY, ACC_GPU_ABI_VERSION);
        return -1;
    }
    g.pl = pl;
    return 0;
}

/* Load and initialise once per process; g.lock held. */
static void ensure_loaded(const acc_settings *s)
{
    char why[320], err[256] = "";
    if (g.pid != getpid()) {
        g.pid = getpid();
        g.tried = g.ready = g.warned = g.calibrated = 0;
        g.cal_retry = 0;
        g.nmapped = 0;
    }
    if (g.tried)
        return;
    g.tried = 1;
    memset(&g.info, 0, sizeof(g.info));
    if (load_plugin(why, sizeof(why))) {
        warn_once(s, why);
        return;
    }
    if (g.pl->init(&g.info, err, sizeof(err)) != 0) {
        snprintf(why, sizeof(why), "the %s GPU plugin did not start (%s)", g.pl->name ? g.pl->name : "?",
                 err[0] ? err : g.pl->last_error());
        warn_once(s, why);
        return;
    }
    if (g.info.slots < 1) {
        warn_once(s, "the GPU plugin offers no slots");
        return;
    }
    if (g.info.slots > GPU_MAXSLOTS)
        g.info.slots = GPU_MAXSLOTS;
    g.info.name[sizeof(g.info.name) - 1] = 0;
    if (acc_sched_add_gpu_units(g.info.slots, g.info.numa_node, g.info.name) <= 0) {
        warn_once(s, "no GPU unit could be registered with the scheduler");
        return;
    }
    g.ready = 1;
}

int acc_gpu_ready(const acc_settings *s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    /* dlopen and the driver make system calls a sandboxed forked child must not make. */
    if (!s || s->backend == ACC_BACKEND_CPU || !acc_sched_kernel_ok())
        return 0;
    pthread_once(&once, gpu_once);
    pthread_mutex_lock(&g.lock);
    ensure_loaded(s);
    int r = g.ready;
    pthread_mutex_unlock(&g.lock);
    return r;
}

/* Scheduler unit id -> plugin slot, the same answer every time in this process: slots are given
 * to units in the order they are first seen; a unit beyond the map shares by modulo (the slot
 * lock then keeps two units off one slot's buffers). g.blk held. */
static int slot_of(int unit)
{
    for (int i = 0; i < g.nmapped; i++)
        if (g.unit_id[i] == unit)
            return i % g.info.slots;
    if (g.nmapped < UNITMAP_MAX) {
        g.unit_id[g.nmapped] = unit;
        return g.nmapped++ % g.info.slots;
    }
    return unit % g.info.slots;
}

/* One plugin call on a unit's slot, serialised per slot. */
static int run_on_unit(int unit, acc_gpu_job *jobs, size_t n)
{
    pthread_mutex_lock(&g.blk);
    int slot = slot_of(unit);
    pthread_mutex_unlock(&g.blk);
    pthread_mutex_lock(&g.slot_lock[slot]);
    int rc = g.pl->run(slot, jobs, n);
    pthread_mutex_unlock(&g.slot_lock[slot]);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* gpu_min = 0: time the GPU against the inline engine on CTR at growing sizes (best of two
 * each, after a warm-up run) and keep the first size where the GPU wins; SIZE_MAX if it never
 * does, so the provider is never slower than the CPU path it would replace; 0 when no GPU unit
 * was free within GPU_WAIT_US (calibration is tried again later). g.lock held. */
static size_t calibrate(void)
{
    static const size_t sizes[] = { 1u << 20, 4u << 20, 16u << 20 };
    const size_t big = sizes[2];
    const acc_engine *eng = acc_engine_default();
    uint8_t key[16] = { 0 }, ctr[16] = { 0 };
    uint8_t *buf = malloc(big);
    acc_aes_key *ks = OPENSSL_zalloc(sizeof(*ks));
    size_t found = SIZE_MAX;
    int unit = -1;
    if (!buf || !ks || !eng || !eng->set_key(ks, key, sizeof(key), 1))
        goto done;
    memset(buf, 0x5a, big);
    unit = acc_sched_acquire(ACC_UNIT_GPU, GPU_WAIT_US);
    if (unit < 0) {
        found = 0;          /* no GPU unit free now: try again later */
        goto done;
    }
    for (int warm = 1, i = 0; i < 3; i++) {
        double cpu = 1e9, gpu = 1e9;
        for (int rep = 0; rep < 2 + warm; rep++) {
            acc_gpu_job job = { acc_gpu_abi_op(ACC_OP_CTR), 128, key, { 0 }, buf, buf, sizes[i], 0 };
            double t0 = now_s();
            if (run_on_unit(unit, &job, 1) != 0 || job.done != sizes[i])
                goto done;
            double t1 = now_s();
            if (!eng->ctr(ks, buf, buf, sizes[i] / 16, ctr))
                goto done;          /* no CPU figure to compare with: the GPU is not chosen */
            double t2 = now_s();
            if (rep >= warm) {
                gpu = t1 - t0 < gpu ? t1 - t0 : gpu;
                cpu = t2 - t1 < cpu ? t2 - t1 : cpu;
            }
        }
        warm = 0;
        if (secure_getenv("ACCELAES_GPU_VERBOSE"))   /* a trace for benchmarks; off by default */
            fprintf(stderr, "accelaes-gpu: calibration CTR %zu KiB: GPU %.3f ms, CPU engine %.3f ms\n",
                    sizes[i] >> 10, gpu * 1e3, cpu * 1e3);
        if (gpu < cpu) {
            found = sizes[i];
            break;
        }
    }
done:
    if (unit >= 0)
        acc_sched_release(unit, 0, 0);
    if (ks && eng)
        eng->free_key(ks);
    OPENSSL_free(ks);
    free(buf);
    return found;
}

/* Whether the GPU pays for len bytes now: the plugin is up and len reaches gpu_min as set, or
 * as calibrated. Which ops and sizes may ask at all is the policy's (provider/policy.c). */
static int gpu_pays(const acc_settings *s, size_t len)
{
    if (len == 0 || len % 16)
        return 0;
    if (s->gpu_min == 0 && s->backend == ACC_BACKEND_AUTO
        && __atomic_add_fetch(&g.auto_seen, len, __ATOMIC_RELAXED) < AUTO_WARMUP)
        return 0;
    if (!acc_gpu_ready(s))
        return 0;
    if (s->gpu_min != 0)
        return len >= s->gpu_min;
    pthread_mutex_lock(&g.lock);
    if (!g.calibrated && now_s() >= g.cal_retry) {
        g.cal_min = calibrate();
        g.calibrated = g.cal_min != 0;
        g.cal_retry = now_s() + 1.0;
        if (g.calibrated && secure_getenv("ACCELAES_GPU_VERBOSE"))
            fprintf(stderr, "accelaes-gpu: gpu_min calibrated to %s%zu\n", g.cal_min == SIZE_MAX ? "never: " : "",
                    g.cal_min);
    }
    size_t min = g.calibrated ? g.cal_min : SIZE_MAX;
    pthread_mutex_unlock(&g.lock);
    return len >= min;
}

size_t acc_gpu_offload(const acc_settings *s, acc_op op, const uint8_t *key, size_t keylen, uint8_t iv[16],
                       const uint8_t *in, uint8_t *out, size_t len)
{
    acc_gpu_job job;
    int abi = acc_gpu_abi_op(op);
    size_t done;

    /* which ops and sizes may come here is the policy's; backend=cpu never gets here (and
     * acc_gpu_ready refuses it) */
    if (s == NULL || abi == 0 || !gpu_pays(s, len))
        return 0;
    memset(&job, 0, sizeof(job));
    job.op = abi;
    job.keybits = (int)keylen * 8;
    job.key = key;
    memcpy(job.iv, iv, 16);
    job.in = in;
    job.out = out;
    job.len = len;
    done = acc_gpu_run(s, &job);
    if (done > len || done % 16 != 0)
        done = 0;          /* a plugin that breaks the contract gets no credit */
    if (done > 0 && acc_op_has_iv(op))
        memcpy(iv, job.iv, 16);
    OPENSSL_cleanse(&job, sizeof(job));
    return done;
}

/* Leader: run its own request plus the followers that joined while it waited for a unit. */
static void lead(batch *b, int unit)
{
    acc_gpu_job jobs[BATCH_MAX];
    uint64_t bytes = 0;
    for (size_t i = 0; i < b->n; i++)
        jobs[i] = *b->w[i]->job;
    if (unit >= 0) {
        if (run_on_unit(unit, jobs, b->n) != 0) {
            pthread_mutex_lock(&g.blk);
            snprintf(g.last_err, sizeof(g.last_err), "%s", g.pl->last_error());
            pthread_mutex_unlock(&g.blk);
        }
        for (size_t i = 0; i < b->n; i++)
            bytes += jobs[i].done <= jobs[i].len ? jobs[i].done : 0;
        acc_sched_release(unit, bytes, b->n);
    } else {
        for (size_t i = 0; i < b->n; i++)
            jobs[i].done = 0;
        pthread_mutex_lock(&g.blk);
        snprintf(g.last_err, sizeof(g.last_err), "no GPU unit could be taken from the scheduler");
        pthread_mutex_unlock(&g.blk);
    }
    for (size_t i = 0; i < b->n; i++) {
        b->w[i]->job->done = jobs[i].done;
        memcpy(b->w[i]->job->iv, jobs[i].iv, 16);
    }
    OPENSSL_cleanse(jobs, sizeof(jobs[0]) * b->n);
}

size_t acc_gpu_run(const acc_settings *s, acc_gpu_job *job)
{
    waiter me = { job, 0 };
    batch b = { { &me }, 1, job ? job->len : 0 };
    int unit;
    if (!job)
        return 0;
    job->done = 0;
    if (!acc_gpu_ready(s) || job->len == 0) {
        if (job->len)
            acc_sched_event(ACC_EV_GPU_FALLBACK);
        return 0;
    }
    /* An idle unit: run now. Otherwise join the open batch of a leader that waits for one,
     * or become that leader: requests that queue behind busy slots then go in one run call. */
    unit = acc_sched_try_acquire(ACC_UNIT_GPU);
    if (unit < 0) {
        pthread_mutex_lock(&g.blk);
        batch *ob = g.open;
        if (ob && ob->n < BATCH_MAX && ob->bytes + job->len <= BATCH_BYTES) {
            ob->w[ob->n++] = &me;
            ob->bytes += job->len;
            while (!me.finished)
                pthread_cond_wait(&g.bcv, &g.blk);
            pthread_mutex_unlock(&g.blk);
            goto account;
        }
        g.open = &b;
        pthread_mutex_unlock(&g.blk);
        unit = acc_sched_acquire(ACC_UNIT_GPU, GPU_WAIT_US);
        pthread_mutex_lock(&g.blk);
        if (g.open == &b)
            g.open = NULL;     /* closed: from here on only this thread touches b */
        pthread_mutex_unlock(&g.blk);
    }
    lead(&b, unit);
    if (b.n > 1) {
        pthread_mutex_lock(&g.blk);
        for (size_t i = 1; i < b.n; i++)
            b.w[i]->finished = 1;
        pthread_cond_broadcast(&g.bcv);
        pthread_mutex_unlock(&g.blk);
    }
account:
    if (job->done > job->len || job->done % 16)
        job->done = 0;
    if (job->done)
        acc_sched_count(ACC_PATH_GPU, job->done, 1);
    if (job->done < job->len) {
        acc_sched_event(ACC_EV_GPU_FALLBACK);
        if (s->backend == ACC_BACKEND_CUDA && !g.warned) {
            char why[320];
            pthread_mutex_lock(&g.blk);
            snprintf(why, sizeof(why), "the GPU failed a request (%s)", g.last_err);
            pthread_mutex_unlock(&g.blk);
            pthread_mutex_lock(&g.lock);
            warn_once(s, why);
            pthread_mutex_unlock(&g.lock);
        }
    }
    return job->done;
}
