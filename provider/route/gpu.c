/* provider/route/gpu.c: the GPU plugin glue: dlopen of accelaes-cuda.so (or ACCELAES_GPU_PLUGIN) once per
 * process, when to calibrate gpu_min, and runs on scheduler GPU units; a request that finds every
 * unit busy queues without blocking and works its own tail on the CPU meanwhile. */
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
#include "provider/route/backend.h"
#include "provider/route/gpu.h"
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
#include "scheduler/forksafe.h"
#include "scheduler/sched.h"

#define GPU_MAXSLOTS 16
#define UNITMAP_MAX    64
/* backend=auto with gpu_min on auto: CUDA start-up costs about a quarter second per process
 * (bench/results/gpu-h100.md), the CPU time of ~1 GiB of AES. A process loads the plugin only once
 * it has asked about this many bytes of large requests, so short-lived processes never pay for it. */
#define AUTO_WARMUP    (256ull << 20)
/* The longest the calibration waits for a GPU unit (it is tried again a second later): a unit
 * can stay taken for good (a stopped holder, a damaged entry). Requests never wait: they queue
 * without blocking and work their tails (run_queued). */
#define GPU_WAIT_US    5000
/* A queued request's CPU slices: an eighth of it, so that it polls its ticket often enough for
 * a granted unit to idle little, within [64 KiB, 1 MiB] (a poll costs a scan of the FIFO, and
 * a slice of 1 MiB is ~0.15 ms on one core, far within the 100 ms a ticket may stay silent). */
#define TAIL_SLICE_MIN (64u * 1024u)
#define TAIL_SLICE_MAX (1024u * 1024u)

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
    double cal_retry;              /* no calibration attempt before this time (CLOCK_MONOTONIC seconds) */
    pthread_mutex_t map;           /* the unit -> slot map */
    int unit_id[UNITMAP_MAX], nmapped;
    uint64_t auto_seen;            /* bytes asked about under backend=auto, gpu_min=auto */
    pthread_mutex_t slot_lock[GPU_MAXSLOTS];
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .map = PTHREAD_MUTEX_INITIALIZER };
/* Held across GPU runs and calibration (seconds): re-initialised in a child rather than waited for
 * at fork; the state behind them is keyed to g.pid and redone in the child. */
ACC_FORK_SAFE(&g.lock, 1, "gpu load", ACC_RANK_GPU, ACC_FORK_RESET);
ACC_FORK_SAFE(&g.map, 1, "gpu slot map", ACC_RANK_GPU, ACC_FORK_RESET);
ACC_FORK_SAFE(g.slot_lock, GPU_MAXSLOTS, "gpu slots", ACC_RANK_GPU, ACC_FORK_RESET);

static void *g_dl;   /* the plugin stays loaded for the life of the process (fork keeps it mapped) */

static void gpu_atfork_child(void)
{
    /* Only the forking thread survives (the locks are re-initialised by scheduler/forksafe.c). */
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
    if (!s || (s->backend != ACC_BACKEND_AUTO && s->backend != ACC_BACKEND_CUDA) || !acc_sched_kernel_ok())
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
 * lock then keeps two units off one slot's buffers). g.map held. */
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
    pthread_mutex_lock(&g.map);
    int slot = slot_of(unit);
    pthread_mutex_unlock(&g.map);
    pthread_mutex_lock(&g.slot_lock[slot]);
    int rc = g.pl->run(slot, jobs, n);
    pthread_mutex_unlock(&g.slot_lock[slot]);
    return rc;
}


static int calib_run(void *arg, acc_gpu_job *job)
{
    return run_on_unit(*(int *)arg, job, 1);
}

/* gpu_min = 0: measured against the CPU engine on a unit held for the whole calibration
 * (gpu_calib.c); 0 when no GPU unit was free within GPU_WAIT_US (tried again later). g.lock held. */
static size_t calibrate(void)
{
    int unit = acc_sched_acquire(ACC_UNIT_GPU, GPU_WAIT_US);
    if (unit < 0)
        return 0;
    size_t found = acc_gpu_calibrate(calib_run, &unit, secure_getenv("ACCELAES_GPU_VERBOSE") != NULL);
    acc_sched_release(unit, 0, 0);
    return found;
}

/* The size from which the GPU pays for a request now (SIZE_MAX: it does not): gpu_min as set, or
 * as calibrated once the plugin is up. Which ops and sizes may ask at all is the policy's. */
static size_t gpu_min_now(const acc_settings *s, size_t len)
{
    if (s->gpu_min == 0 && s->backend == ACC_BACKEND_AUTO
        && __atomic_add_fetch(&g.auto_seen, len, __ATOMIC_RELAXED) < AUTO_WARMUP)
        return SIZE_MAX;
    if (!acc_gpu_ready(s))
        return SIZE_MAX;
    if (s->gpu_min != 0)
        return s->gpu_min;
    pthread_mutex_lock(&g.lock);
    if (!g.calibrated && acc_gpu_clock_s(CLOCK_MONOTONIC) >= g.cal_retry) {
        g.cal_min = calibrate();
        g.calibrated = g.cal_min != 0;
        g.cal_retry = acc_gpu_clock_s(CLOCK_MONOTONIC) + 1.0;
        if (g.calibrated && secure_getenv("ACCELAES_GPU_VERBOSE"))
            fprintf(stderr, "accelaes-gpu: gpu_min calibrated to %s%zu\n", g.cal_min == SIZE_MAX ? "never: " : "",
                    g.cal_min);
    }
    size_t min = g.calibrated ? g.cal_min : SIZE_MAX;
    pthread_mutex_unlock(&g.lock);
    return min;
}

/* A GPU request (or part of one) ends on the CPU: counted, and said once on stderr when the user
 * asked for backend = cuda. */
static void fell_back(const acc_settings *s, const char *reason)
{
    acc_sched_event(ACC_EV_GPU_FALLBACK);
    if (s->backend != ACC_BACKEND_CUDA || g.warned)
        return;
    char why[320];
    snprintf(why, sizeof(why), "the GPU failed a request (%s)", reason);
    pthread_mutex_lock(&g.lock);
    warn_once(s, why);
    pthread_mutex_unlock(&g.lock);
}

/* Run job on a unit this thread holds, give the unit back, count the GPU's bytes. Returns the
 * bytes done (0 for a plugin that breaks the completion contract); job->iv matches them. */
static size_t run_held(const acc_settings *s, int unit, acc_gpu_job *job)
{
    char err[256] = "";
    if (run_on_unit(unit, job, 1) != 0) /* last_error is per thread: read it on this one */
        snprintf(err, sizeof(err), "%s", g.pl->last_error());
    if (job->done > job->len || job->done % 16)
        job->done = 0;
    acc_sched_release(unit, job->done, 1);
    if (job->done)
        acc_sched_count(ACC_PATH_GPU, job->done, 1);
    if (job->done < job->len)
        fell_back(s, err[0] ? err : "the plugin did not finish the request");
    return job->done;
}

static size_t tail_slice(size_t len)
{
    size_t slice = len / 8;
    slice = slice < TAIL_SLICE_MIN ? TAIL_SLICE_MIN : slice > TAIL_SLICE_MAX ? TAIL_SLICE_MAX : slice;
    return slice & ~(size_t)15;
}

/* Every GPU unit is busy: queue, and run slices from the end on the CPU until the unit comes
 * (the GPU gets the head, untouched so far: in == out stays legal) or the head left is too small
 * for the GPU to pay (min), then the CPU does it too. The IV to continue with is read first: an
 * in-place CBC-decrypt tail overwrites the last ciphertext block. */
static size_t run_queued(const acc_settings *s, acc_op op, acc_gpu_job *job, size_t min, const acc_gpu_cpu *cpu)
{
    acc_sched_ticket tk;
    uint8_t last[16], iv[16];
    size_t len = job->len, head = len, slice = tail_slice(len), done = 0;
    int unit;
    if (acc_sched_enqueue(ACC_UNIT_GPU, &tk) != 0) {
        fell_back(s, "no GPU unit could be taken from the scheduler");
        return 0;
    }
    memcpy(last, job->iv, 16);
    acc_iv_at_block(op, job->iv, job->in, job->out, len / 16, last);
    while ((unit = acc_sched_poll(&tk)) < 0) {
        if (head < min + slice || head <= slice) {
            acc_sched_cancel(&tk);
            break;
        }
        memcpy(iv, job->iv, 16);
        acc_iv_at_block(op, job->iv, job->in, job->out, (head - slice) / 16, iv);
        if (!cpu->run(cpu->arg, job->in + head - slice, job->out + head - slice, slice / 16, iv)) {
            acc_sched_cancel(&tk);
            return ACC_GPU_CPU_FAILED;
        }
        head -= slice;
    }
    if (head < len) {
        acc_sched_count(ACC_PATH_INLINE, len - head, 1);
        acc_sched_event_add(ACC_EV_GPU_TAIL_BYTES, len - head);
    }
    job->len = head;
    if (unit >= 0)
        done = run_held(s, unit, job);
    else
        fell_back(s, "every GPU unit stayed busy while the request ran on the CPU");
    if (done < head) { /* job->iv is the IV at done (the plugin's completion contract) */
        if (!cpu->run(cpu->arg, job->in + done, job->out + done, (head - done) / 16, job->iv))
            return ACC_GPU_CPU_FAILED;
        acc_sched_count(ACC_PATH_INLINE, head - done, head == len); /* one inline request, not two */
    }
    memcpy(job->iv, last, 16);
    job->len = len;
    return len;
}

size_t acc_gpu_offload(const acc_settings *s, acc_op op, const uint8_t *key, size_t keylen, uint8_t iv[16],
                       const uint8_t *in, uint8_t *out, size_t len, const acc_gpu_cpu *cpu)
{
    acc_gpu_job job;
    int abi = acc_gpu_abi_op(op), unit;
    size_t done, min;

    /* which ops and sizes may come here is the policy's; backend=cpu never gets here (and
     * acc_gpu_ready refuses it) */
    if (s == NULL || abi == 0 || len == 0 || len % 16 || (min = gpu_min_now(s, len)) > len)
        return 0;
    memset(&job, 0, sizeof(job));
    job.op = abi;
    job.keybits = (int)keylen * 8;
    job.key = key;
    memcpy(job.iv, iv, 16);
    job.in = in;
    job.out = out;
    job.len = len;
    unit = acc_sched_try_acquire(ACC_UNIT_GPU);
    if (unit >= 0)
        done = run_held(s, unit, &job);
    else if (cpu != NULL && cpu->run != NULL)
        done = run_queued(s, op, &job, min, cpu);
    else {
        fell_back(s, "no GPU unit was free");
        done = 0;
    }
    if (done > 0 && done != ACC_GPU_CPU_FAILED && acc_op_has_iv(op))
        memcpy(iv, job.iv, 16);
    OPENSSL_cleanse(&job, sizeof(job));
    return done;
}
