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
 * thread, pieces handed out in ranges from a shared atomic counter, nothing allocated per call.
 * Under load from other processes: see rescue_late() and the gate, below. */
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
/* Under load (other processes' threads on our cores) a helper can be preempted while it holds
 * pieces, and the caller cannot take them over: with in == out they may be half written. Left
 * alone, the caller waits until the helper's core comes back to it: a time slice, 4 ms measured
 * with one busy loop there (bench/split_load.sh), against 47 us for a whole 1 MiB request inline.
 * So the caller, once it has run out of pieces, gives each helper until its last claim should
 * have ended (the caller's own time per piece, twice, plus RESCUE_SLACK_NS) and then moves a
 * late helper onto its own core and sleeps there, which lets the helper run at once; the helper
 * goes back to its core before its next job. */
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

/* ---- whether helpers pay, here and now (split requests only: acc_pool_run_ranges) ----
 * Both measures are of this process's own requests, not of the system's state: what other
 * processes do shows only in what our requests take. (The runnable count in /proc/loadavg was
 * no guide: on the shared dev VM it read 2-3 other tasks while a 1 MiB split still took 0.65x
 * the inline time.)
 *  - The stall gate: a join that waits STALL_MIN_NS or more (and more than half the caller's own
 *    share) lost more than the helpers could have saved; the next GATE_NS run alone, so that a
 *    helper whose core was just taken is not asked again at once. (Doubling that time for each
 *    stall that followed soon after the last, up to 1 s, gave away the split where it still won:
 *    with two and four busy loops the old pool, stalls and all, took 0.64-0.95x the inline
 *    time on average in a calm spell, and that gate mostly ran requests alone.) Whether a core
 *    that stays contended costs more than it gives is for the averages below.
 *  - Per request size (powers of two), the mean time per byte of requests run with helpers and
 *    of requests run alone (EWMAs), and the cheaper way is taken; the other is tried now and
 *    then (a burst of PROBE_BURST with helpers every SPLIT_PROBE requests, or 1 in ALONE_PROBE
 *    alone) to follow changes. This sees what the gate cannot: rescues (about 80 us each), and a
 *    caller preempted more often while a helper works: with two busy loops, requests that had
 *    a helper took 24 against 45 us median, but 1.9% of them took over 1 ms against 1.3% alone
 *    (167 against 135 us mean), because a helper at work on a contended core moves that core's
 *    other work onto the caller's. So samples are not capped relative to the average (capped at
 *    8x, the averages chose helpers there), only at ADAPT_CAP (whole-VM stalls of 100-400 ms
 *    were seen here); and the way in use, with many samples, is averaged over 128 of them, so
 *    that its rare slow requests weigh what they cost, the way probed over 16. Probes with
 *    helpers are 0.1% of requests: where helpers lose, every probe is a slow request, and the
 *    p99 of a mix with a share s of slow ones is the p(99 + s) of the rest (1 in 8 single
 *    requests made p99 1.1-1.2x the inline p99, 8 in 1024 up to 1.37x, with two busy loops).
 *    Helpers are given up only after ADAPT_TRUST samples, a whole window of their average, and
 *    no request runs alone before: a process that makes a few large requests keeps the split
 *    as it was (tests/c/test_engine_fail.c, whose fault injection sleeps 2 ms in each of the
 *    caller's engine calls, made helpers look 2-3x slower than running alone after 32).
 *    (A rule on how often a woken helper came too late was tried and dropped: those misses are
 *    all of helpers that were asleep, as often on an idle machine as under load.) */
#define STALL_MIN_NS     250000u
#define GATE_NS        10000000u
#define ADAPT_CLASSES        12     /* requests of 2^15 .. 2^26 bytes and more */
#define ALONE_PROBE         128u
#define SPLIT_PROBE        8192u    /* a burst of PROBE_BURST every SPLIT_PROBE requests */
#define PROBE_BURST           8u
#define ADAPT_CAP      20000000u    /* ns per MiB */
#define EW_IN_USE             7     /* 1/128 */
#define ADAPT_TRUST         128u    /* samples with helpers before they may be given up */
#define EW_PROBE              4     /* 1/16 */
static uint64_t gate_until_ns;       /* atomic */
typedef struct adapt_class {
    uint32_t with, alone;           /* atomics: EWMA ns per MiB (0: no sample yet) */
    uint32_t count;                 /* atomic: requests seen, for the probes */
    uint32_t burst;                 /* atomic: requests left in a probe with helpers */
    uint32_t nwith;                 /* atomic: samples with helpers, up to ADAPT_TRUST */
} adapt_class;
static adapt_class adapt[ADAPT_CLASSES];

/* How a request runs, and what it teaches. */
enum { RUN_ALONE, RUN_ALONE_PROBE, RUN_WITH, RUN_WITH_PROBE, RUN_WITH_COLD };

static int gate_closed(uint64_t now)
{
    return (int64_t)(now - __atomic_load_n(&gate_until_ns, __ATOMIC_RELAXED)) < 0;
}

static void gate_stall(uint64_t now)
{
    __atomic_store_n(&gate_until_ns, now + GATE_NS, __ATOMIC_RELAXED);
}

static adapt_class *adapt_of(uint64_t bytes)
{
    int c = 0;
    while (c < ADAPT_CLASSES - 1 && (bytes >> (16 + c)) != 0)
        c++;
    return &adapt[c];
}

/* A probe with helpers is a burst, the way helpers are used once chosen: a helper spins a while
 * after a request and then sleeps, and a wake-up costs a 1 MiB request 20-40 us (the first
 * ever, a thread's creation, more); the first request of a burst (RUN_WITH_COLD) teaches
 * nothing. Single probes took the wake-up for the price of helpers and, on an idle machine,
 * seldom chose them again. */
static int adapt_choose(adapt_class *a)
{
    uint32_t with = __atomic_load_n(&a->with, __ATOMIC_RELAXED);
    uint32_t alone = __atomic_load_n(&a->alone, __ATOMIC_RELAXED);
    uint32_t k = __atomic_add_fetch(&a->count, 1, __ATOMIC_RELAXED);
    uint32_t burst = __atomic_load_n(&a->burst, __ATOMIC_RELAXED);
    if (burst != 0) {
        __atomic_store_n(&a->burst, burst - 1, __ATOMIC_RELAXED);
        return RUN_WITH_PROBE;
    }
    if (with != 0 && __atomic_load_n(&a->nwith, __ATOMIC_RELAXED) < ADAPT_TRUST)
        return RUN_WITH;            /* helpers until their average is worth a decision */
    if (with != 0 && alone == 0)
        return RUN_ALONE_PROBE;
    if (with != 0 && with <= alone)
        return k % ALONE_PROBE != 0 ? RUN_WITH : RUN_ALONE_PROBE;
    if (with != 0 && k % SPLIT_PROBE != 0)
        return RUN_ALONE;
    __atomic_store_n(&a->burst, PROBE_BURST - 1, __ATOMIC_RELAXED);
    return RUN_WITH_COLD;
}

static void adapt_note(uint32_t *ew, uint64_t ns, uint64_t bytes, unsigned shift)
{
    if (bytes == 0)
        return;
    uint64_t v = ns * (1u << 20) / bytes, old = __atomic_load_n(ew, __ATOMIC_RELAXED);
    if (v > ADAPT_CAP)
        v = ADAPT_CAP;
    uint64_t now = old == 0 ? v : old - (old >> shift) + (v >> shift);
    __atomic_store_n(ew, (uint32_t)(now ? now : 1), __ATOMIC_RELAXED);
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
    adapt_class *a = NULL;
    uint64_t t_start = 0, bytes = (uint64_t)job->n * job->piece_bytes;
    int how = RUN_WITH;
    if (gated) {
        a = adapt_of(bytes);
        t_start = acc_now_ns();
        how = gate_closed(t_start) ? RUN_ALONE : adapt_choose(a);
        if (how == RUN_ALONE || how == RUN_ALONE_PROBE) {
            /* Alone, the caller still holds a unit while it works, as it does with helpers: its
             * core is busy, and another process's split must not wake a helper onto it. (Without
             * this, openssl speed -multi 2 -bytes 1048576 lost 5-10%: each process's helpers ran
             * on the other's core while it worked alone.) */
            int own = acc_sched_try_acquire(ACC_UNIT_CPU);
            run_alone(job);
            if (own >= 0)
                acc_sched_release(own, bytes, 1);
            adapt_note(&a->alone, acc_now_ns() - t_start, bytes, how == RUN_ALONE ? EW_IN_USE : EW_PROBE);
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
    if (gated && nclaimed > 0) {
        if (jw >= STALL_MIN_NS && jw >= own / 2)
            gate_stall(now);
        if (how != RUN_WITH_COLD) {
            adapt_note(&a->with, now - t_start, bytes, how == RUN_WITH ? EW_IN_USE : EW_PROBE);
            if (__atomic_load_n(&a->nwith, __ATOMIC_RELAXED) < ADAPT_TRUST)
                __atomic_fetch_add(&a->nwith, 1, __ATOMIC_RELAXED);
        }
    }
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
