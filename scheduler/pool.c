/* scheduler/pool.c: the worker pool that runs split requests: one lazily created thread per
 * CPU unit of this process, pinned to the unit's core, which works only while holding its
 * unit (taken without waiting), so pool threads never outnumber units across processes.
 * Not OpenMP: a forked child of a process that ran a parallel region hangs in libgomp, its
 * spinning threads lose their time slices under load, and its team is not tied to our units.
 * So: a plain pthread pool, one thread per unit pinned once, dispatch through a futex word per
 * thread, pieces handed out in ranges from a shared atomic counter, nothing allocated per call.
 * Under load from other processes: rescue_late() below, and pool_adapt.c (helpers or alone).
 * The measurements behind this: bench/results/pool-design.md. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include "scheduler/forksafe.h"
#include "scheduler/pool_int.h"
#include "scheduler/sched_int.h"

#define HELPER_SPIN_NS  50000u      /* a helper spins this long for the next job, then sleeps */
#define CALLER_SPIN_NS 200000u      /* the caller spins this long for helpers to finish */
#define MAX_HELPERS       255
/* Under load a helper can be preempted while it holds pieces, and the caller cannot take them
 * over (with in == out they may be half written): it would wait a whole time slice for the
 * helper's core. So the caller, once out of pieces, gives each helper until its last claim should
 * have ended (the caller's own time per piece, twice, plus RESCUE_SLACK_NS), then moves a late
 * helper onto its own core and sleeps there; the helper goes back to its core before its next job. */
#define RESCUE_SLACK_NS 10000u
#define RESCUE_POLL_NS  1000000u    /* the caller's sleep, while a helper could still need a rescue */

/* Slot state word: phase in the low 2 bits, a claim sequence above it, so that a caller
 * cancelling its own stale assignment can never cancel a later caller's (no ABA). */
enum { PH_IDLE = 0, PH_CLAIMED = 1, PH_ASSIGNED = 2, PH_RUNNING = 3 };
#define PHASE(s)   ((s) & 3u)
#define WITH(s, p) (((s) & ~3u) | (p))
#define RUN_WAITER 0x80000000u      /* in job.running: the caller sleeps on it */

typedef struct pool_job {
    acc_pool_range_fn range;        /* one call per claimed range, or ... */
    acc_pool_fn one;                /* ... one call per piece */
    void *arg;
    size_t n;
    uint64_t piece_bytes;
    size_t threads;                 /* the caller and the helpers assigned: for the claim size */
    size_t next;                    /* atomic: the next piece to hand out */
    uint32_t running;               /* atomic futex word: helpers assigned, not finished */
    uint32_t joined;                /* atomic: helpers that ran at least one piece */
} pool_job;

typedef struct pool_slot {
    uint32_t state;                 /* futex word (process-private) */
    uint32_t sleeping;              /* the helper is (about to be) in futex_wait */
    int started;                    /* atomic: 1 thread running, 0 not yet, -1 creation failed */
    int unit, cpu;
    int32_t tid;                    /* atomic: the helper's thread id, once it runs */
    uint32_t moved;                 /* atomic: a caller moved it off its core (rescue) */
    uint32_t claim_n;               /* atomic: pieces in its current claim (0: none yet) */
    uint64_t claim_ns;              /* atomic: when it took that claim (or started the job) */
    pool_job *job;
} __attribute__((aligned(64))) pool_slot;

static pool_slot slots[ACC_SHM_MAX_UNITS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
ACC_FORK_SAFE(&pool_lock, 1, "pool threads", ACC_RANK_POOL, ACC_FORK_HOLD);
static __thread int tls_in_pool;
static uint64_t last_piece_ns;      /* atomic: a caller's latest time per piece, for the next */

void acc_pool_child_reset(void)
{
    /* The parent's threads do not exist in the child; start over lazily. */
    memset(slots, 0, sizeof(slots));
    tls_in_pool = 0;
}

/* Guided: half of an even share of what is left, so the first claims are large (few claims) and
 * the last ones single pieces (a preempted thread holds little, the ends come out even). */
static size_t claim(pool_job *job, size_t *first)
{
    size_t i = __atomic_load_n(&job->next, __ATOMIC_RELAXED);
    for (;;) {
        if (i >= job->n)
            return 0;
        size_t k = (job->n - i) / (2 * __atomic_load_n(&job->threads, __ATOMIC_RELAXED));
        if (k == 0)
            k = 1;
        if (__atomic_compare_exchange_n(&job->next, &i, i + k, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *first = i;
            return k;
        }
    }
}

static size_t run_pieces(pool_job *job, pool_slot *s)
{
    size_t done = 0, first, k;
    while ((k = claim(job, &first)) != 0) {
        if (s != NULL) {
            __atomic_store_n(&s->claim_n, (uint32_t)k, __ATOMIC_RELAXED);
            __atomic_store_n(&s->claim_ns, acc_now_ns(), __ATOMIC_RELAXED);
        }
        if (job->range != NULL) {
            job->range(job->arg, first, k);
        } else {
            for (size_t i = first; i < first + k; i++)
                job->one(job->arg, i);
        }
        done += k;
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

static void pin_to(int32_t tid, int cpu)
{
    if (cpu >= 0 && cpu < CPU_SETSIZE) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(tid, sizeof(set), &set);   /* best effort */
    }
}

/* Back to our own core after a caller moved us onto its own (rescue_late()). */
static void repin_if_moved(pool_slot *s)
{
    if (__atomic_load_n(&s->moved, __ATOMIC_RELAXED) && __atomic_exchange_n(&s->moved, 0, __ATOMIC_ACQ_REL))
        pin_to(0, s->cpu);
}

static void *helper_main(void *p)
{
    pool_slot *s = p;
    tls_in_pool = 1;
    pin_to(0, s->cpu);
    __atomic_store_n(&s->tid, acc_sched_tid(), __ATOMIC_RELEASE);
    acc_shm_table *t = acc_sched_table();
    for (;;) {
        repin_if_moved(s);
        wait_assigned(s, t);
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        /* Before RUNNING is visible: a caller judging how late we are reads this claim. */
        __atomic_store_n(&s->claim_n, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->claim_ns, acc_now_ns(), __ATOMIC_RELAXED);
        if (PHASE(st) != PH_ASSIGNED
            || !__atomic_compare_exchange_n(&s->state, &st, WITH(st, PH_RUNNING), 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;                         /* cancelled by the caller meanwhile */
        pool_job *job = s->job;
        /* Work only while holding our unit: if another process has it, sit this one out. */
        if (t != NULL && acc_sched_take(t, (uint32_t)s->unit)) {
            size_t done = run_pieces(job, s);
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

typedef struct pool_claim {
    int k;                          /* slot index; -1 once called off, finished or rescued */
    uint32_t val;                   /* its state word as assigned */
} pool_claim;

/* Look at each helper still on our job: one past its due time is moved onto our core and no
 * longer watched; for the others *next_due is lowered to their due time. Returns 1 if a late
 * helper now needs our core (the caller should sleep rather than spin), else 0. */
static int rescue_late(pool_claim *claimed, int nclaimed, uint64_t piece_ns, uint64_t now, uint64_t *next_due)
{
    int cpu = -1, moved = 0;
    for (int c = 0; c < nclaimed; c++) {
        if (claimed[c].k < 0)
            continue;
        pool_slot *s = &slots[claimed[c].k];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != WITH(claimed[c].val, PH_RUNNING)) {
            claimed[c].k = -1;                 /* done with our job (or never started it) */
            continue;
        }
        uint64_t due = __atomic_load_n(&s->claim_ns, __ATOMIC_RELAXED)
                       + 2 * piece_ns * __atomic_load_n(&s->claim_n, __ATOMIC_RELAXED) + RESCUE_SLACK_NS;
        if ((int64_t)(now - due) < 0) {
            if (due < *next_due)
                *next_due = due;
            continue;
        }
        claimed[c].k = -1;
        if (cpu < 0 && (cpu = sched_getcpu()) < 0)
            return moved;
        int32_t tid = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE);
        if (s->cpu == cpu) {
            moved = 1;                         /* its own core is ours now: it needs us to sleep */
            continue;
        }
        if (tid <= 0)
            continue;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        /* The flag after the move: a helper that re-pinned in between sees it again. */
        if (sched_setaffinity(tid, sizeof(set), &set) == 0) {
            __atomic_store_n(&s->moved, 1, __ATOMIC_RELEASE);
            moved = 1;
        }
    }
    return moved;
}

static void futex_wait_for(uint32_t *word, uint32_t val, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* Wait until every helper assigned to the job has finished with it (the job lives on our stack). */
static void join(pool_job *job, pool_claim *claimed, int nclaimed, uint64_t piece_ns)
{
    uint64_t t0 = 0, next_due = 0;
    int watching = nclaimed > 0, sleep_now = 0;
    for (unsigned spin = 1;; spin++) {
        uint32_t r = __atomic_load_n(&job->running, __ATOMIC_ACQUIRE);
        if ((r & ~RUN_WAITER) == 0)
            break;
        if (spin % 64 != 1 && !sleep_now) {
            acc_cpu_relax();
            continue;
        }
        uint64_t now = acc_now_ns();
        if (t0 == 0)
            t0 = now;
        if (watching && (int64_t)(now - next_due) >= 0) {
            next_due = UINT64_MAX;
            if (rescue_late(claimed, nclaimed, piece_ns, now, &next_due))
                sleep_now = 1;                  /* our core is the helper's now */
            watching = next_due != UINT64_MAX;
        }
        if (!sleep_now && now - t0 < CALLER_SPIN_NS) {
            acc_cpu_relax();
            continue;
        }
        if ((r & RUN_WAITER) == 0
            && !__atomic_compare_exchange_n(&job->running, &r, r | RUN_WAITER, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        if (watching)
            futex_wait_for(&job->running, r | RUN_WAITER, next_due > now ? next_due - now : RESCUE_POLL_NS);
        else
            acc_futex_wait_private(&job->running, r | RUN_WAITER);
    }
}

static void run_alone(pool_job *job)
{
    if (job->range != NULL) {
        job->range(job->arg, 0, job->n);
    } else {
        for (size_t i = 0; i < job->n; i++)
            job->one(job->arg, i);
    }
}

static int pool_run(pool_job *job, int helpers, int gated)
{
    acc_pool_choice ch = { NULL, 0, 0, RUN_WITH };
    if (gated) {
        uint64_t bytes = (uint64_t)job->n * job->piece_bytes;
        acc_pool_adapt_choose(&ch, bytes);
        if (ch.how == RUN_ALONE || ch.how == RUN_ALONE_PROBE) {
            /* Alone, the caller still holds a unit while it works, as it does with helpers: its
             * core is busy, and another process's split must not wake a helper onto it. */
            int own = acc_sched_try_acquire(ACC_UNIT_CPU);
            run_alone(job);
            if (own >= 0)
                acc_sched_release(own, bytes, 1);
            acc_pool_adapt_alone(&ch, acc_now_ns());
            return 0;
        }
    }
    int ncpu = acc_sched_cpu_units();
    acc_shm_table *t = acc_sched_table();
    int me = -1;
    /* Nested, or nothing to share the work with: the caller does it all, in one call. The
     * caller is a crypto thread too: it holds a unit while it works, and with none idle no
     * helper could get one either. */
    if (tls_in_pool || helpers <= 0 || job->n < 2 || ncpu < 2 || t == NULL
        || (me = acc_sched_try_acquire(ACC_UNIT_CPU)) < 0) {
        run_alone(job);
        return 0;
    }
    int want = helpers;
    if (want > ncpu - 1)
        want = ncpu - 1;
    if ((size_t)want > job->n - 1)
        want = (int)(job->n - 1);
    if (want > MAX_HELPERS)
        want = MAX_HELPERS;
    pool_claim claimed[MAX_HELPERS];
    int nclaimed = 0;
    __atomic_store_n(&job->threads, 1 + (size_t)want, __ATOMIC_RELAXED);
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
        s->job = job;
        __atomic_fetch_add(&job->running, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, WITH(mine, PH_ASSIGNED), __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->sleeping, __ATOMIC_SEQ_CST))
            acc_futex_wake_private(&s->state, 1);
        claimed[nclaimed].k = k;
        claimed[nclaimed].val = WITH(mine, PH_ASSIGNED);
        nclaimed++;
    }
    __atomic_store_n(&job->threads, 1 + (size_t)nclaimed, __ATOMIC_RELAXED);
    tls_in_pool = 1;
    uint64_t own0 = acc_now_ns();
    size_t done = run_pieces(job, NULL);
    uint64_t own = acc_now_ns() - own0;
    tls_in_pool = 0;
    acc_sched_release(me, done * job->piece_bytes, 1);
    /* Helpers that have not started yet would find nothing left: call them off. */
    for (int c = 0; c < nclaimed; c++) {
        uint32_t exp = claimed[c].val;
        if (__atomic_compare_exchange_n(&slots[claimed[c].k].state, &exp, WITH(exp, PH_IDLE), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            __atomic_fetch_sub(&job->running, 1, __ATOMIC_RELAXED);
            claimed[c].k = -1;
        }
    }
    /* The time a piece takes here and now, from our own pieces (else from the last caller's). */
    uint64_t piece_ns = done ? own / done : __atomic_load_n(&last_piece_ns, __ATOMIC_RELAXED);
    if (done)
        __atomic_store_n(&last_piece_ns, piece_ns, __ATOMIC_RELAXED);
    uint64_t j0 = acc_now_ns();
    join(job, claimed, nclaimed, piece_ns);
    uint64_t now = acc_now_ns(), jw = now - j0;
    int joined = (int)__atomic_load_n(&job->joined, __ATOMIC_ACQUIRE);
    if (gated && nclaimed > 0)
        acc_pool_adapt_with(&ch, now, own, jw);
    return joined;
}

int acc_pool_run_ranges(acc_pool_range_fn fn, void *arg, size_t n, int helpers, uint64_t piece_bytes)
{
    if (fn == NULL || n == 0)
        return 0;
    pool_job job = { fn, NULL, arg, n, piece_bytes, 1, 0, 0, 0 };
    return pool_run(&job, helpers, 1);
}

int acc_pool_run_bytes(acc_pool_fn fn, void *arg, size_t n, int helpers, uint64_t piece_bytes)
{
    if (fn == NULL || n == 0)
        return 0;
    pool_job job = { NULL, fn, arg, n, piece_bytes, 1, 0, 0, 0 };
    return pool_run(&job, helpers, 0);
}

int acc_pool_run(acc_pool_fn fn, void *arg, size_t n, int helpers)
{
    return acc_pool_run_bytes(fn, arg, n, helpers, 0);
}
