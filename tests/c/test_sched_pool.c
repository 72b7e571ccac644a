/* tests/c/test_sched_pool.c: the worker pool: every index exactly once with 0 and many
 * helpers, from several threads at once, nested, after fork; pool threads only ever work
 * holding a unit; bytes credited to units. Prints dispatch latency (information only),
 * also for an OpenMP parallel region, the alternative the design names. */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <omp.h>
#include "tests/c/test_sched_common.h"

/* Pieces record who ran them; a piece on a thread that holds no unit and is not one of the
 * callers would be a crypto thread beyond the units. */
#define MAX_CALLERS 8
static int32_t caller_tids[MAX_CALLERS];
static int unheld_pieces;

static int holds_unit(int32_t tid)
{
    acc_shm_table *t = acc_sched_table();
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        if (ACC_LOAD(&t->units[i].owner_tid) == tid && ACC_LOAD(&t->units[i].state) == ACC_UNIT_BUSY)
            return 1;
    return 0;
}

typedef struct cover { int *hits; size_t n; int32_t *who; } cover;

static void cover_piece(void *arg, size_t i)
{
    cover *c = arg;
    if (i >= c->n)
        return;
    __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
    int32_t me = acc_sched_tid();
    if (c->who != NULL)
        c->who[i] = me;
    int caller = 0;
    for (int k = 0; k < MAX_CALLERS; k++)
        caller |= __atomic_load_n(&caller_tids[k], __ATOMIC_RELAXED) == me;   /* set by other callers */
    if (!caller && !holds_unit(me))
        __atomic_fetch_add(&unheld_pieces, 1, __ATOMIC_RELAXED);
}

static int run_cover(size_t n, int helpers, int *ret, int32_t *who)
{
    int *hits = calloc(n ? n : 1, sizeof(int));
    cover c = { hits, n, who };
    *ret = acc_pool_run(cover_piece, &c, n, helpers);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += hits[i] != 1;
    free(hits);
    return bad;
}

static void test_cover(void)
{
    size_t sizes[] = { 0, 1, 2, 3, 7, 64, 1000, 100000 };
    int helpers[] = { 0, 1, 2, 8, 1000 };
    int units = acc_sched_cpu_units();
    for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
        for (size_t b = 0; b < sizeof(helpers) / sizeof(helpers[0]); b++) {
            int ret = -1;
            int bad = run_cover(sizes[a], helpers[b], &ret, NULL);
            CHECK(bad == 0, "n=%zu helpers=%d: %d indices not run exactly once", sizes[a], helpers[b], bad);
            CHECK(ret >= 0 && ret <= helpers[b] && ret <= units - 1, "n=%zu helpers=%d returned %d",
                  sizes[a], helpers[b], ret);
        }
    /* helpers = 0: the caller does everything itself. */
    int32_t who[64];
    int ret = -1;
    run_cover(64, 0, &ret, who);
    int all_caller = 1;
    for (int i = 0; i < 64; i++)
        all_caller &= who[i] == acc_sched_tid();
    CHECK(ret == 0 && all_caller, "helpers=0 ran pieces elsewhere");
    CHECK(acc_pool_run(NULL, NULL, 10, 4) == 0, "NULL fn");
}

/* ---- helpers really take part, hold units, and the units are credited ---- */

/* The caller's first piece waits until a pool thread has run a piece (5 s guard: a hang
 * guard, not a timing claim), so a pool whose helpers never come fails deterministically. */
static int helper_pieces;
static int32_t rendezvous_caller;

static void rendezvous_piece(void *arg, size_t i)
{
    cover_piece(arg, i);
    if (acc_sched_tid() != rendezvous_caller) {
        __atomic_fetch_add(&helper_pieces, 1, __ATOMIC_SEQ_CST);
        return;
    }
    uint64_t t0 = acc_now_ns();
    while (__atomic_load_n(&helper_pieces, __ATOMIC_SEQ_CST) == 0 && acc_now_ns() - t0 < 5000000000u)
        sched_yield();
}

/* Returns the number of runs (of 3) in which a helper took part. */
static int rendezvous_runs(uint64_t piece_bytes)
{
    int hits[16], ok = 0;
    cover c = { hits, 16, NULL };
    rendezvous_caller = acc_sched_tid();
    for (int rep = 0; rep < 3; rep++) {
        memset(hits, 0, sizeof(hits));
        helper_pieces = 0;
        int joined = acc_pool_run_bytes(rendezvous_piece, &c, 16, acc_sched_cpu_units() - 1, piece_bytes);
        int bad = 0;
        for (int i = 0; i < 16; i++)
            bad += hits[i] != 1;
        ok += joined >= 1 && helper_pieces >= 1 && bad == 0;
    }
    return ok;
}

static void test_participation(void)
{
    int units = acc_sched_cpu_units();
    acc_shm_table *t = acc_sched_table();
    if (units < 2) {
        printf("skip: participation needs 2 CPU units, have %d\n", units);
        return;
    }
    uint64_t before = 0, after = 0;
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        if (t->units[i].kind == ACC_UNIT_CPU)
            before += t->units[i].bytes;
    int ok = rendezvous_runs(1000);
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        if (t->units[i].kind == ACC_UNIT_CPU)
            after += t->units[i].bytes;
    CHECK(ok == 3, "a helper took part in only %d of 3 runs (%d units)", ok, units);
    CHECK(after - before == 3 * 16 * 1000, "units credited %llu bytes, expected %d",
          (unsigned long long)(after - before), 3 * 16 * 1000);
    CHECK(unheld_pieces == 0, "%d pieces ran on a pool thread without a unit", unheld_pieces);
    int busy = 0;
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        busy += ACC_LOAD(&t->units[i].state) == ACC_UNIT_BUSY;
    CHECK(busy == 0, "%d units left BUSY after the pool ran", busy);
}

/* ---- several callers at once, and nesting ---- */
static int conc_bad;

static void *conc_thread(void *arg)
{
    __atomic_store_n(&caller_tids[(intptr_t)arg], acc_sched_tid(), __ATOMIC_RELAXED);
    for (int rep = 0; rep < 300; rep++) {
        int ret;
        int bad = run_cover(257, 4, &ret, NULL);
        __atomic_fetch_add(&conc_bad, bad, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void nested_piece(void *arg, size_t i)
{
    cover *outer = arg;
    cover_piece(outer, i);
    int ret;
    if (run_cover(9, 4, &ret, NULL) != 0 || ret != 0)
        __atomic_fetch_add(&conc_bad, 1, __ATOMIC_RELAXED);
}

static void test_concurrent_and_nested(void)
{
    pthread_t th[4];
    conc_bad = 0;
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, conc_thread, (void *)(i + 1));
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK(conc_bad == 0, "%d indices wrong with 4 concurrent callers", conc_bad);
    CHECK(unheld_pieces == 0, "%d pieces ran on a pool thread without a unit", unheld_pieces);
    int hits[32] = { 0 };
    cover c = { hits, 32, NULL };
    conc_bad = 0;
    acc_pool_run(nested_piece, &c, 32, 4);
    int bad = 0;
    for (int i = 0; i < 32; i++)
        bad += hits[i] != 1;
    CHECK(bad == 0 && conc_bad == 0, "nested: %d outer, %d inner wrong (inner must run inline)", bad, conc_bad);
}

static void test_after_fork(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        caller_tids[0] = acc_sched_tid();
        int ret, bad = run_cover(5000, 8, &ret, NULL);
        bad += run_cover(5000, 8, &ret, NULL);
        /* Helpers are new threads in the child: they must really come. */
        if (acc_sched_cpu_units() >= 2 && rendezvous_runs(0) != 3)
            bad++;
        _exit(bad == 0 && unheld_pieces == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pool in the forked child failed (status %d)", st);
}

/* ---- dispatch latency: information only ----
 * From the call until a helper starts its piece (the caller's own piece waits for it), with
 * the helper hot (back to back) or asleep (after 2 ms idle); the same for the second thread
 * of an OpenMP parallel region. Medians, in microseconds. */
static uint64_t lat_start, lat_helper;

static void lat_piece(void *arg, size_t i)
{
    (void)arg;
    (void)i;
    if (acc_sched_tid() != rendezvous_caller) {
        __atomic_store_n(&lat_helper, acc_now_ns(), __ATOMIC_SEQ_CST);
        return;
    }
    uint64_t t0 = acc_now_ns();
    while (__atomic_load_n(&lat_helper, __ATOMIC_SEQ_CST) == 0 && acc_now_ns() - t0 < 100000000u)
        acc_cpu_relax();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "median / 90th percentile / mean" in microseconds. */
static const char *stats_us(uint64_t *v, int n, char *buf, size_t len)
{
    if (n == 0) {
        snprintf(buf, len, "no samples");
        return buf;
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)v[i];
    snprintf(buf, len, "%.1f/%.1f/%.1f", v[n / 2] / 1e3, v[n * 9 / 10] / 1e3, sum / n / 1e3);
    return buf;
}

/* CPU time this process used (all threads), to show what spinning between requests costs. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void idle_gap(long gap_us)
{
    struct timespec ts = { 0, gap_us * 1000 };
    if (gap_us)
        nanosleep(&ts, NULL);
}

static const char *lat_pool(int reps, long gap_us, char *buf, size_t len, double *cpu_us)
{
    static uint64_t v[2000];
    uint64_t c0 = cpu_ns();
    int n = 0;
    rendezvous_caller = acc_sched_tid();
    for (int r = 0; r < reps && r < 2000; r++) {
        idle_gap(gap_us);
        lat_helper = 0;
        lat_start = acc_now_ns();
        acc_pool_run(lat_piece, NULL, 2, 1);
        if (lat_helper)
            v[n++] = lat_helper - lat_start;
    }
    *cpu_us = (double)(cpu_ns() - c0) / 1e3 / (reps ? reps : 1);
    return stats_us(v, n, buf, len);
}

static const char *lat_omp(int reps, long gap_us, char *buf, size_t len, double *cpu_us)
{
    static uint64_t v[2000];
    uint64_t c0 = cpu_ns();
    int n = 0;
    for (int r = 0; r < reps && r < 2000; r++) {
        idle_gap(gap_us);
        uint64_t t0 = acc_now_ns(), t1 = 0;
#pragma omp parallel num_threads(2)
        {
            if (omp_get_thread_num() == 1)
                t1 = acc_now_ns();
        }
        if (t1)
            v[n++] = t1 - t0;
    }
    *cpu_us = (double)(cpu_ns() - c0) / 1e3 / (reps ? reps : 1);
    return stats_us(v, n, buf, len);
}

/* A piece of fixed compute (~tens of us), to show that pieces really run in parallel. */
static void work_piece(void *arg, size_t i)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ i;
    for (int k = 0; k < 50000; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    __atomic_store_n(&((uint64_t *)arg)[i % 64], x, __ATOMIC_RELAXED);   /* pieces share the sink */
}

static void report_scaling(void)
{
    static uint64_t sink[64];
    int units = acc_sched_cpu_units();
    double t[2];
    for (int h = 0; h < 2; h++) {
        int helpers = h ? units - 1 : 0;
        acc_pool_run(work_piece, sink, 256, helpers);
        uint64_t best = UINT64_MAX;
        for (int rep = 0; rep < 5; rep++) {
            uint64_t t0 = acc_now_ns();
            acc_pool_run(work_piece, sink, 256, helpers);
            uint64_t dt = acc_now_ns() - t0;
            best = dt < best ? dt : best;
        }
        t[h] = (double)best / 1e3;
    }
    printf("info: 256 compute pieces: %.0f us alone, %.0f us with %d helpers: %.2fx\n", t[0], t[1],
           units - 1, t[0] / t[1]);
}

static void report_latency(void)
{
    report_scaling();
    if (acc_sched_cpu_units() < 2) {
        printf("info: dispatch latency needs 2 CPU units\n");
        return;
    }
    char b1[64], b2[64];
    double c1, c2;
    lat_pool(50, 0, b1, sizeof(b1), &c1);
    lat_pool(2000, 0, b1, sizeof(b1), &c1);
    char b3[64];
    double c3;
    lat_pool(500, 100, b3, sizeof(b3), &c3);
    lat_pool(100, 2000, b2, sizeof(b2), &c2);
    printf("info: pool: helper starts after the call, median/p90/mean us: back to back %s, after 100 us idle %s,"
           " after 2 ms idle %s (CPU per 2 ms-gap call %.0f us)\n", b1, b3, b2, c2);
    lat_omp(50, 0, b1, sizeof(b1), &c1);
    lat_omp(2000, 0, b1, sizeof(b1), &c1);
    lat_omp(500, 100, b3, sizeof(b3), &c3);
    lat_omp(100, 2000, b2, sizeof(b2), &c2);
    printf("info: omp (OMP_WAIT_POLICY=%s): 2nd thread starts, median/p90/mean us: back to back %s, after 100 us"
           " idle %s, after 2 ms idle %s (CPU per 2 ms-gap region %.0f us)\n",
           getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "default", b1, b3, b2, c2);
}

int main(int argc, char **argv)
{
    snprintf(segname, sizeof(segname), "/accelaes-test-pool.%d", (int)getpid());
    setenv("ACCELAES_SHM_NAME", segname, 1);
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    caller_tids[0] = acc_sched_tid();
    test_cover();
    test_participation();
    test_concurrent_and_nested();
    test_after_fork();
    if (argc < 2 || strcmp(argv[1], "--no-latency") != 0)
        report_latency();
    shm_unlink(segname);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
