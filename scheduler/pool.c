/* scheduler/pool.c: the worker pool that runs split requests: one lazily created thread per
 * CPU unit of this process, pinned to the unit's core, which works only while holding its
 * unit (taken without waiting), so pool threads never outnumber units across processes.
 *
 * Why not OpenMP (the design's default): measured on the 2-core dev VM (EPYC Zen 4, gcc 12
 * libgomp), shared with other builds (load average 2-4); tests/c/test_sched_pool.c prints
 * the figures (median/p90/mean, us, from the call until the second thread starts).
 *  - fork: a child whose parent had run a parallel region hangs in its own first region
 *    (2-thread `omp parallel` before and after fork(): the child never returned in 10 s).
 *    OpenSSL applications fork (openssl speed -multi, servers): this alone rules it out.
 *  - libgomp's default wait policy spins through idle time: after 2 ms idle, 1.3-1.8 us
 *    median at load 2 but 8-10 ms median at load 3.3 (its spinning threads lose their time
 *    slice), and 2.1-9 ms of CPU burnt per 2 ms gap. OMP_WAIT_POLICY=passive: 5-7 us median
 *    (the woken thread mostly starts on the master's core once the master blocks).
 *  - this pool: 0.3 us back to back; after 2 ms idle 18-33 us median, 28-40 us p90 (futex
 *    wake-up of a pinned thread on an idle vCPU), and the caller is already working on its
 *    own pieces meanwhile. Spinning 200 us instead of 50 us made waits after a 100 us gap
 *    0.5 us median but 360-490 us mean under load (a spinning thread loses its slice), so
 *    the spin stays short and stops as soon as another thread holds our unit.
 *    On the 16-core device host (unloaded): 0.3-0.9 us back to back, 4.7-7.7 us after 100 us
 *    idle, 20-27 us after 2 ms idle; 256 compute pieces 14.5-15.4x faster with 15 helpers.
 *  - units: team threads are not tied to our units, so every region would have each thread
 *    try to take a unit and re-pin itself (a syscall) to the unit's core.
 * So: a plain pthread pool, one thread per unit pinned once, dispatch through a futex word per
 * thread, pieces taken from a shared atomic counter, nothing allocated per call. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include "scheduler/forksafe.h"
#include "scheduler/sched_int.h"

#define HELPER_SPIN_NS  50000u      /* a helper spins this long for the next job, then sleeps */
#define CALLER_SPIN_NS 200000u      /* the caller spins this long for helpers to finish */
#define MAX_HELPERS       255

/* Slot state word: phase in the low 2 bits, a claim sequence above it, so that a caller
 * cancelling its own stale assignment can never cancel a later caller's (no ABA). */
enum { PH_IDLE = 0, PH_CLAIMED = 1, PH_ASSIGNED = 2, PH_RUNNING = 3 };
#define PHASE(s)   ((s) & 3u)
#define WITH(s, p) (((s) & ~3u) | (p))
#define RUN_WAITER 0x80000000u      /* in job.running: the caller sleeps on it */

typedef struct pool_job {
    acc_pool_fn fn;
    void *arg;
    size_t n;
    uint64_t piece_bytes;
    size_t next;                    /* atomic: the next piece to run */
    uint32_t running;               /* atomic futex word: helpers assigned, not finished */
    uint32_t joined;                /* atomic: helpers that ran at least one piece */
} pool_job;

typedef struct pool_slot {
    uint32_t state;                 /* futex word (process-private) */
    uint32_t sleeping;              /* the helper is (about to be) in futex_wait */
    int started;                    /* atomic: 1 thread running, 0 not yet, -1 creation failed */
    int unit, cpu;
    pool_job *job;
} __attribute__((aligned(64))) pool_slot;

static pool_slot slots[ACC_SHM_MAX_UNITS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
ACC_FORK_SAFE(&pool_lock, 1, "pool threads", ACC_RANK_POOL, ACC_FORK_HOLD);
static __thread int tls_in_pool;

void acc_pool_child_reset(void)
{
    /* The parent's threads do not exist in the child; start over lazily. */
    memset(slots, 0, sizeof(slots));
    tls_in_pool = 0;
}

static size_t run_pieces(pool_job *job)
{
    size_t done = 0, i;
    while ((i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->n) {
        job->fn(job->arg, i);
        done++;
    }
    return done;
}

/* Spin for the next job while our unit is idle; once another thread holds it (another
 * process's helper, or our own caller running on this core) the core is theirs: sleep. */
static void wait_assigned(pool_slot *s, acc_shm_table *t)
{
    uint64_t t0 = acc_now_ns();
    for (unsigned spin = 1;; spin++) {
        if (PHASE(__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) == PH_ASSIGNED)
            return;
        if (spin % 64 != 0 || (acc_now_ns() - t0 < HELPER_SPIN_NS
                               && (t == NULL || ACC_LOAD(&t->units[s->unit].state) == ACC_UNIT_IDLE))) {
            acc_cpu_relax();
            continue;
        }
        /* Dekker with the caller: it stores ASSIGNED then reads sleeping; we store sleeping
         * then read the state. One of us sees the other, so no wake-up is lost. */
        __atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
        if (PHASE(st) != PH_ASSIGNED)
            acc_futex_wait_private(&s->state, st);
        __atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
        t0 = acc_now_ns();
    }
}

static void *helper_main(void *p)
{
    pool_slot *s = p;
    tls_in_pool = 1;
    if (s->cpu >= 0 && s->cpu < CPU_SETSIZE) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(s->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);   /* best effort */
    }
    acc_shm_table *t = acc_sched_table();
    for (;;) {
        wait_assigned(s, t);
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (PHASE(st) != PH_ASSIGNED
            || !__atomic_compare_exchange_n(&s->state, &st, WITH(st, PH_RUNNING), 0,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;                         /* cancelled by the caller meanwhile */
        pool_job *job = s->job;
        /* Work only while holding our unit: if another process has it, sit this one out. */
        if (t != NULL && acc_sched_take(t, (uint32_t)s->unit)) {
            size_t done = run_pieces(job);
            acc_sched_release(s->unit, done * job->piece_bytes, done ? 1 : 0);
            if (done)
                __atomic_fetch_add(&job->joined, 1, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&s->state, WITH(st, PH_IDLE), __ATOMIC_RELEASE);
        /* After this decrement the job (the caller's stack) may be gone: only the futex
         * address is used, and a stray wake-up on it is harmless. */
        uint32_t old = __atomic_fetch_sub(&job->running, 1, __ATOMIC_ACQ_REL);
        if (old == (RUN_WAITER | 1u))
            acc_futex_wake_private(&job->running, 1);
    }
    return NULL;
}

static int ensure_thread(int k)
{
    pool_slot *s = &slots[k];
    int started = __atomic_load_n(&s->started, __ATOMIC_ACQUIRE);
    if (started != 0)
        return started > 0;
    int ok = 0;
    pthread_mutex_lock(&pool_lock);
    if (s->started != 0) {
        ok = s->started > 0;
    } else {
        int cpu = -1;
        s->unit = acc_sched_cpu_unit(k, &cpu);
        s->cpu = cpu;
        if (s->unit >= 0) {
            /* Application signals are not for our threads: they start with all blocked. */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            pthread_attr_t a;
            pthread_t th;
            if (pthread_attr_init(&a) == 0) {
                pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                ok = pthread_create(&th, &a, helper_main, s) == 0;
                pthread_attr_destroy(&a);
            }
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            /* A failed creation (thread limit) is not retried on every request: this unit
             * simply gets no helper in this process (a fork starts over). */
            __atomic_store_n(&s->started, ok ? 1 : -1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return ok;
}

static void run_inline(acc_pool_fn fn, void *arg, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fn(arg, i);
}

int acc_pool_run_bytes(acc_pool_fn fn, void *arg, size_t n, int helpers, uint64_t piece_bytes)
{
    if (fn == NULL || n == 0)
        return 0;
    int ncpu = acc_sched_cpu_units();
    acc_shm_table *t = acc_sched_table();
    if (tls_in_pool || helpers <= 0 || n < 2 || ncpu < 2 || t == NULL) {
        run_inline(fn, arg, n);     /* nested, or nothing to share the work with */
        return 0;
    }
    /* The caller is a crypto thread too: it holds a unit while it works, and with none idle
     * no helper could get one either. */
    int me = acc_sched_try_acquire(ACC_UNIT_CPU);
    if (me < 0) {
        run_inline(fn, arg, n);
        return 0;
    }
    pool_job job = { fn, arg, n, piece_bytes, 0, 0, 0 };
    int want = helpers;
    if (want > ncpu - 1)
        want = ncpu - 1;
    if ((size_t)want > n - 1)
        want = (int)(n - 1);
    if (want > MAX_HELPERS)
        want = MAX_HELPERS;
    struct { int k; uint32_t val; } claimed[MAX_HELPERS];
    int nclaimed = 0;
    for (int k = 0; k < ncpu && nclaimed < want; k++) {
        int unit = acc_sched_cpu_unit(k, NULL);
        if (unit < 0 || unit == me || ACC_LOAD(&t->units[unit].state) != ACC_UNIT_IDLE)
            continue;
        if (!ensure_thread(k))
            continue;
        pool_slot *s = &slots[k];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
        uint32_t mine = WITH(st + 4u, PH_CLAIMED);
        if (PHASE(st) != PH_IDLE
            || !__atomic_compare_exchange_n(&s->state, &st, mine, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;                          /* another caller's helper now */
        s->job = &job;
        __atomic_fetch_add(&job.running, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, WITH(mine, PH_ASSIGNED), __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->sleeping, __ATOMIC_SEQ_CST))
            acc_futex_wake_private(&s->state, 1);
        claimed[nclaimed].k = k;
        claimed[nclaimed].val = WITH(mine, PH_ASSIGNED);
        nclaimed++;
    }
    tls_in_pool = 1;
    size_t done = run_pieces(&job);
    tls_in_pool = 0;
    acc_sched_release(me, done * piece_bytes, 1);
    /* Helpers that have not started yet would find nothing left: call them off. */
    for (int c = 0; c < nclaimed; c++) {
        uint32_t exp = claimed[c].val;
        if (__atomic_compare_exchange_n(&slots[claimed[c].k].state, &exp, WITH(exp, PH_IDLE), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            __atomic_fetch_sub(&job.running, 1, __ATOMIC_RELAXED);
    }
    uint64_t t0 = 0;
    for (unsigned spin = 1;; spin++) {
        uint32_t r = __atomic_load_n(&job.running, __ATOMIC_ACQUIRE);
        if ((r & ~RUN_WAITER) == 0)
            break;
        if (t0 == 0)
            t0 = acc_now_ns();
        if (spin % 64 != 0 || acc_now_ns() - t0 < CALLER_SPIN_NS) {
            acc_cpu_relax();
            continue;
        }
        if ((r & RUN_WAITER) == 0
            && !__atomic_compare_exchange_n(&job.running, &r, r | RUN_WAITER, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        acc_futex_wait_private(&job.running, r | RUN_WAITER);
    }
    return (int)__atomic_load_n(&job.joined, __ATOMIC_ACQUIRE);
}

int acc_pool_run(acc_pool_fn fn, void *arg, size_t n, int helpers)
{
    return acc_pool_run_bytes(fn, arg, n, helpers, 0);
}
