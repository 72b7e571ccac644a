/* tests/c/test_pool_ranges.c: the pool's range API (acc_pool_run_ranges), which the split uses:
 * every piece exactly once, one call without helpers, guided claims (single pieces at the end);
 * a helper that is late with its range is moved onto the caller's core and goes back to its own
 * core for its next job; a join that stalled closes the gate (the next split request runs on the
 * caller alone, in one call) while acc_pool_run keeps its helpers, and the gate opens again;
 * requests run alone or with helpers, whichever has lately cost less.
 * The stall is made by a helper whose range sleeps, as a preempted helper would stand still.
 * Waits here are hang guards, not timing claims. Run by tests/conformance/test_split.py. */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/wait.h>
#include "tests/c/test_sched_common.h"   /* CHECK, passed/failed, segname, sleep_us */

/* ---- coverage and the shape of the claims ---- */

#define MAX_CALLS 4096
typedef struct rec {
    int *hits;
    size_t n;
    int32_t caller;
    pthread_mutex_t lock;
    size_t ncalls, first[MAX_CALLS], count[MAX_CALLS];
    int32_t who[MAX_CALLS];
    int bad;                        /* a range outside [0, n) or empty */
} rec;

static void rec_range(void *arg, size_t first, size_t count)
{
    rec *r = arg;
    if (count == 0 || first >= r->n || count > r->n - first) {
        __atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t i = first; i < first + count; i++)
        __atomic_fetch_add(&r->hits[i], 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&r->lock);
    if (r->ncalls < MAX_CALLS) {
        r->first[r->ncalls] = first;
        r->count[r->ncalls] = count;
        r->who[r->ncalls] = acc_sched_tid();
        r->ncalls++;
    }
    pthread_mutex_unlock(&r->lock);
}

static rec *rec_new(size_t n)
{
    rec *r = calloc(1, sizeof(*r));
    r->hits = calloc(n ? n : 1, sizeof(int));
    r->n = n;
    r->caller = acc_sched_tid();
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

static void rec_free(rec *r)
{
    pthread_mutex_destroy(&r->lock);
    free(r->hits);
    free(r);
}

static int rec_missing(const rec *r)
{
    int bad = r->bad;
    for (size_t i = 0; i < r->n; i++)
        bad += r->hits[i] != 1;
    return bad;
}

static void test_cover(void)
{
    static const size_t sizes[] = { 1, 2, 3, 7, 64, 256, 1000, 3000 };
    static const int helpers[] = { 0, 1, 8 };
    int units = acc_sched_cpu_units();
    for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
        for (size_t b = 0; b < sizeof(helpers) / sizeof(helpers[0]); b++) {
            rec *r = rec_new(sizes[a]);
            int ret = acc_pool_run_ranges(rec_range, r, sizes[a], helpers[b], 16);
            CHECK(rec_missing(r) == 0, "n=%zu helpers=%d: pieces not run exactly once", sizes[a], helpers[b]);
            CHECK(ret >= 0 && ret <= helpers[b] && ret <= units - 1, "n=%zu helpers=%d returned %d",
                  sizes[a], helpers[b], ret);
            if (helpers[b] == 0 || sizes[a] == 1)
                CHECK(r->ncalls == 1 && r->first[0] == 0 && r->count[0] == sizes[a] && r->who[0] == r->caller,
                      "n=%zu without helpers: %zu calls, the first (%zu, %zu)", sizes[a], r->ncalls,
                      r->first[0], r->count[0]);
            rec_free(r);
        }
    CHECK(acc_pool_run_ranges(NULL, NULL, 10, 4, 16) == 0, "NULL fn");
    rec *r = rec_new(0);
    CHECK(acc_pool_run_ranges(rec_range, r, 0, 4, 16) == 0 && r->ncalls == 0, "n = 0 calls nothing");
    rec_free(r);
}

static int gate_open_wait(void);
static int32_t main_tid;
static int helper_ran;
static void wait_flag(int *flag, long guard_us);

/* rec_range, and the caller's first range waits until a helper has run one (1 s guard), so that
 * the helper really takes part: pieces this small would otherwise all be done before it came. */
static void rec_meet_range(void *arg, size_t first, size_t count)
{
    rec *r = arg;
    rec_range(arg, first, count);
    if (acc_sched_tid() != main_tid)
        __atomic_store_n(&helper_ran, 1, __ATOMIC_SEQ_CST);
    else if (count < r->n)
        wait_flag(&helper_ran, 1000000);
}

/* With helpers, no claim is more than half of the request, and the last one is a single piece. */
static void test_guided(void)
{
    if (acc_sched_cpu_units() < 2) {
        printf("skip: guided claims need 2 CPU units\n");
        return;
    }
    main_tid = acc_sched_tid();
    for (int rep = 0; rep < 20; rep++) {
        /* test_cover's tiny jobs may have left the pool running this size alone. */
        CHECK(gate_open_wait(), "the split's helpers never came");
        /* The pool may also choose to run a request alone (its measure of whether helpers pay,
         * which these waiting ranges make look bad): retry until helpers took part. */
        rec *r = NULL;
        for (uint64_t g0 = acc_now_ns(); acc_now_ns() - g0 < 5000000000u;) {
            if (r != NULL) {
                CHECK(rec_missing(r) == 0, "guided (alone): pieces not run exactly once");
                rec_free(r);
            }
            r = rec_new(64);
            helper_ran = 0;
            if (acc_pool_run_ranges(rec_meet_range, r, 64, acc_sched_cpu_units() - 1, 16) >= 1)
                break;
        }
        size_t biggest = 0, last_first = 0, last_count = 0;
        for (size_t c = 0; c < r->ncalls; c++) {
            biggest = r->count[c] > biggest ? r->count[c] : biggest;
            if (r->first[c] >= last_first) {
                last_first = r->first[c];
                last_count = r->count[c];
            }
        }
        CHECK(rec_missing(r) == 0, "guided: pieces not run exactly once");
        CHECK(biggest <= 32 && r->ncalls >= 2, "guided: %zu calls, the biggest %zu pieces of 64", r->ncalls, biggest);
        CHECK(last_first == 63 && last_count == 1, "guided: the last claim is (%zu, %zu), not one piece",
              last_first, last_count);
        rec_free(r);
    }
}

/* ---- a late helper is moved onto the caller's core; the gate ---- */

static int caller_cpu, helper_cpu;
static int helper_started, helper_moved, helper_home_ok;

static int only_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set);
}

static void wait_flag(int *flag, long guard_us)
{
    for (long t = 0; t < guard_us && !__atomic_load_n(flag, __ATOMIC_SEQ_CST); t += 50)
        sleep_us(50);
}

/* The caller's first range waits for the helper to hold one; the helper's stands still until it
 * finds itself on the caller's core, and then 50 ms more (so the join has surely stalled). */
static void late_range(void *arg, size_t first, size_t count)
{
    (void)arg, (void)first;
    if (acc_sched_tid() == main_tid) {
        if (count < 16)
            wait_flag(&helper_started, 5000000);
        return;
    }
    if (__atomic_exchange_n(&helper_started, 1, __ATOMIC_SEQ_CST))
        return;                                  /* only its first range stands still */
    for (long t = 0; t < 5000000; t += 1000) {
        if (only_cpu(caller_cpu)) {
            __atomic_store_n(&helper_moved, 1, __ATOMIC_SEQ_CST);
            break;
        }
        sleep_us(1000);
    }
    sleep_us(50000);
}

/* A rendezvous: the caller's first range waits until a helper has run one (a helper that never
 * comes fails it, not hangs it); the helper notes whether it runs on its own core alone. A call
 * for all 16 pieces at once is the caller alone (no helper, or the gate): nothing to wait for. */
static int meet_gave_up;

static void meet_range(void *arg, size_t first, size_t count)
{
    (void)arg, (void)first;
    if (acc_sched_tid() == main_tid) {
        if (count < 16 && !meet_gave_up) {
            wait_flag(&helper_ran, 1000000);
            meet_gave_up = !__atomic_load_n(&helper_ran, __ATOMIC_SEQ_CST);
        }
        return;
    }
    if (only_cpu(helper_cpu))
        __atomic_store_n(&helper_home_ok, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&helper_ran, 1, __ATOMIC_SEQ_CST);
}

static void meet_piece(void *arg, size_t i)
{
    meet_range(arg, i, 1);
}

static int meet(int ranges, int helpers)
{
    helper_ran = meet_gave_up = 0;
    int ret = ranges ? acc_pool_run_ranges(meet_range, NULL, 16, helpers, 16)
                     : acc_pool_run(meet_piece, NULL, 16, helpers);
    return ret >= 1 && __atomic_load_n(&helper_ran, __ATOMIC_SEQ_CST);
}

/* Until a split request gets a helper again: a hang guard of 5 s (the gate closes for 10 ms,
 * and while helpers seem not to pay, a burst of them is tried every 8192 requests). */
static int gate_open_wait(void)
{
    int saved = main_tid, ok = 0;
    main_tid = acc_sched_tid();
    for (uint64_t g0 = acc_now_ns(); !ok && acc_now_ns() - g0 < 5000000000u;) {
        ok = meet(1, acc_sched_cpu_units() - 1);
        if (!ok)
            sleep_us(50);
    }
    main_tid = saved;
    return ok;
}

static void test_late_helper_and_gate(void)
{
    int units = acc_sched_cpu_units();
    if (units < 2 || acc_sched_cpu_unit(0, &caller_cpu) < 0 || acc_sched_cpu_unit(1, &helper_cpu) < 0
        || caller_cpu < 0 || helper_cpu < 0) {
        printf("skip: a late helper needs 2 CPU units on known cores\n");
        return;
    }
    /* The caller on the first unit's core, so that it takes that unit and the helper is the
     * second unit's thread, pinned to another core. */
    cpu_set_t one, saved;
    sched_getaffinity(0, sizeof(saved), &saved);
    CPU_ZERO(&one);
    CPU_SET(caller_cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        printf("skip: cannot pin the test thread to CPU %d\n", caller_cpu);
        return;
    }
    main_tid = acc_sched_tid();
    CHECK(gate_open_wait(), "the split's helpers never came");

    /* Retried while the pool runs the request alone (see test_guided). */
    uint64_t t0 = 0, t_end = 0;
    int ret = 0;
    for (uint64_t g0 = acc_now_ns(); ret < 1 && acc_now_ns() - g0 < 5000000000u;) {
        helper_started = helper_moved = 0;
        t0 = acc_now_ns();
        ret = acc_pool_run_ranges(late_range, NULL, 16, units - 1, 16);
        t_end = acc_now_ns();
    }
    CHECK(ret == 1 && helper_started, "the late helper took part (returned %d, started %d)", ret, helper_started);
    CHECK(helper_moved, "the late helper was not moved onto the caller's CPU %d (run took %.1f ms)",
          caller_cpu, (double)(t_end - t0) / 1e6);

    /* The join stalled: the next split request runs on the caller alone, in one call. */
    rec *r = rec_new(64);
    uint64_t t_call = acc_now_ns();
    ret = acc_pool_run_ranges(rec_range, r, 64, units - 1, 16);
    if (t_call - t_end < 2000000u)
        CHECK(ret == 0 && r->ncalls == 1 && r->count[0] == 64 && r->who[0] == main_tid,
              "after a stall: returned %d, %zu calls (the gate stayed open)", ret, r->ncalls);
    else
        printf("skip: this thread was away %.1f ms after the stall: the gate may have opened\n",
               (double)(t_call - t_end) / 1e6);
    CHECK(rec_missing(r) == 0, "gated run: pieces not run exactly once");
    rec_free(r);

    /* acc_pool_run has no gate: its helpers still come (and the moved one is home again). */
    helper_home_ok = 0;
    CHECK(meet(0, units - 1), "acc_pool_run without helpers while the split's gate is closed");
    CHECK(helper_home_ok, "the moved helper is not back on its own CPU %d for its next job", helper_cpu);

    /* The gate opens again (GATE_NS, 10 ms, after the stall). */
    CHECK(gate_open_wait(), "the split's helpers did not come back within 5 s of the stall");
    sched_setaffinity(0, sizeof(saved), &saved);
}

/* ---- the choice between helpers and alone follows what each took ----
 * 1 MiB requests (64 pieces of 16 KiB, a size class of their own here), made slower one way
 * than the other by a sleep: (a) the caller's ranges are slow whenever helpers are in play
 * (300 us); (b) the single call of a request run alone is (2 ms), and the helpers come (the
 * caller's first range waits for one). */
enum { SLOW_WITH, SLOW_ALONE_MEET };
static int adaptive_case;

static void adaptive_range(void *arg, size_t first, size_t count)
{
    rec *r = arg;
    rec_range(arg, first, count);
    if (acc_sched_tid() != main_tid) {
        __atomic_store_n(&helper_ran, 1, __ATOMIC_SEQ_CST);
        return;
    }
    int alone = count == r->n;
    if (adaptive_case == SLOW_WITH && !alone)
        sleep_us(300);
    else if (adaptive_case == SLOW_ALONE_MEET && alone)
        sleep_us(2000);               /* more than a helper's wake-up under two busy loops */
    else if (adaptive_case == SLOW_ALONE_MEET)
        wait_flag(&helper_ran, 1000000);
}

/* Of `runs` requests, how many the pool ran alone in one call. */
static int alone_runs(int runs)
{
    int alone = 0;
    for (int i = 0; i < runs; i++) {
        rec *r = rec_new(64);
        helper_ran = 0;
        acc_pool_run_ranges(adaptive_range, r, 64, acc_sched_cpu_units() - 1, 16384);
        CHECK(rec_missing(r) == 0, "adaptive: pieces not run exactly once");
        alone += r->ncalls == 1 && r->count[0] == 64;
        rec_free(r);
    }
    return alone;
}

static void test_adaptive(void)
{
    static const char *what[] = { "helpers cost 300 us more", "running alone costs 2 ms more" };
    if (acc_sched_cpu_units() < 2) {
        printf("skip: the choice of helpers needs 2 CPU units\n");
        return;
    }
    main_tid = acc_sched_tid();
    CHECK(gate_open_wait(), "the split's helpers never came");
    for (adaptive_case = SLOW_WITH; adaptive_case <= SLOW_ALONE_MEET; adaptive_case++) {
        alone_runs(200);
        int a = alone_runs(200);
        printf("info: adaptive: %s: %d of 200 requests ran alone\n", what[adaptive_case], a);
        if (adaptive_case == SLOW_ALONE_MEET)
            CHECK(a <= 60, "%s, yet %d of 200 requests ran alone", what[adaptive_case], a);
        else
            CHECK(a >= 140, "%s, yet only %d of 200 requests ran alone", what[adaptive_case], a);
    }
}

/* In a forked child the range API starts its own helpers and covers every piece. */
static void test_after_fork(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        for (int rep = 0; rep < 20; rep++) {
            rec *r = rec_new(300);
            acc_pool_run_ranges(rec_range, r, 300, 8, 16);
            bad += rec_missing(r);
            rec_free(r);
        }
        if (acc_sched_cpu_units() >= 2) {
            bad += !gate_open_wait();                  /* helpers really come in the child */
        }
        _exit(bad == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ranges in the forked child failed (status %d)", st);
}

int main(void)
{
    snprintf(segname, sizeof(segname), "/accelaes-test-ranges.%d", (int)getpid());
    setenv("ACCELAES_SHM_NAME", segname, 1);
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    test_cover();
    test_guided();
    test_late_helper_and_gate();
    test_adaptive();
    test_after_fork();
    shm_unlink(segname);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
