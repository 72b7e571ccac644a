/* tests/c/test_sched.c: the unit table within one process: take/release, never more BUSY
 * than units under many threads, FIFO order of waiters, GPU slots, counters per path,
 * a thread dying while it holds a unit. Multi-process cases: test_sched_mp.c and pytest. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include "tests/c/test_sched_common.h"

static int count_busy(acc_shm_table *t, int kind)
{
    int busy = 0;
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        if ((int)t->units[i].kind == kind && ACC_LOAD(&t->units[i].state) == ACC_UNIT_BUSY)
            busy++;
    return busy;
}

static void test_basic(void)
{
    acc_shm_table *t = acc_sched_table();
    CHECK(t != NULL, "no table");
    CHECK(acc_sched_is_shared() == 1, "expected the shared segment %s", segname);
    int n = acc_sched_cpu_units();
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    CHECK(n == CPU_COUNT(&set), "cpu units %d, affinity %d", n, CPU_COUNT(&set));
    int ids[ACC_SHM_MAX_UNITS], got = 0;
    for (int i = 0; i < n; i++) {
        int id = acc_sched_try_acquire(ACC_UNIT_CPU);
        CHECK(id >= 0, "try_acquire %d of %d failed", i, n);
        if (id < 0)
            break;
        for (int j = 0; j < got; j++)
            CHECK(ids[j] != id, "unit %d handed out twice", id);
        CHECK(t->units[id].state == ACC_UNIT_BUSY && t->units[id].owner_pid == getpid(),
              "unit %d not BUSY/owned", id);
        ids[got++] = id;
    }
    CHECK(acc_sched_try_acquire(ACC_UNIT_CPU) == -1, "more units than %d", n);
    CHECK(acc_sched_acquire(ACC_UNIT_CPU, 0) == -1, "acquire with timeout 0 must not wait");
    CHECK(acc_sched_acquire(ACC_UNIT_CPU, 20000) == -1, "acquire must time out when all BUSY");
    uint64_t b0 = t->units[ids[0]].bytes, r0 = t->units[ids[0]].requests;
    for (int i = 0; i < got; i++)
        acc_sched_release(ids[i], 1000, 2);
    CHECK(t->units[ids[0]].bytes == b0 + 1000 && t->units[ids[0]].requests == r0 + 2, "unit counters");
    CHECK(count_busy(t, ACC_UNIT_CPU) == 0, "units left BUSY");
    /* Releasing what we do not hold, or nonsense ids, changes nothing and does not crash. */
    acc_sched_release(ids[0], 5, 5);
    acc_sched_release(-1, 0, 0);
    acc_sched_release(1 << 30, 0, 0);
    CHECK(t->units[ids[0]].bytes == b0 + 1000, "release of an idle unit counted");
    CHECK(acc_sched_try_acquire((acc_unit_kind)7) == -1, "bad kind");
    CHECK(acc_sched_acquire(ACC_UNIT_GPU, 1000) == -1, "no GPU units yet: -1 at once");
}

/* ---- never more BUSY than units ---- */
static int g_busy, g_max_busy, g_violations;
static int g_units;
static int g_use_blocking;

static void *busy_thread(void *arg)
{
    (void)arg;
    for (int it = 0; it < 3000; it++) {
        int id = g_use_blocking ? acc_sched_acquire(ACC_UNIT_CPU, -1) : acc_sched_try_acquire(ACC_UNIT_CPU);
        if (id < 0)
            continue;
        int b = __atomic_add_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
        if (b > g_units)
            __atomic_fetch_add(&g_violations, 1, __ATOMIC_RELAXED);
        int m = __atomic_load_n(&g_max_busy, __ATOMIC_RELAXED);
        while (b > m && !__atomic_compare_exchange_n(&g_max_busy, &m, b, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        acc_shm_table *t = acc_sched_table();
        if (t->units[id].owner_tid != acc_sched_tid())
            __atomic_fetch_add(&g_violations, 1, __ATOMIC_RELAXED);
        if (it % 16 == 0)
            sched_yield();
        __atomic_sub_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
        acc_sched_release(id, 16, 1);
    }
    return NULL;
}

static void test_never_oversubscribed(int blocking)
{
    pthread_t th[8];
    g_units = acc_sched_cpu_units();
    g_busy = g_max_busy = g_violations = 0;
    g_use_blocking = blocking;
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, busy_thread, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK(g_violations == 0, "%d times more holders than %d units (or a foreign owner)", g_violations, g_units);
    CHECK(g_max_busy >= 1 && g_max_busy <= g_units, "max busy %d, units %d", g_max_busy, g_units);
    CHECK(count_busy(acc_sched_table(), ACC_UNIT_CPU) == 0, "units left BUSY");
}

/* ---- FIFO order ---- */
static int fifo_order[8], fifo_pos;

static void *fifo_thread(void *arg)
{
    int me = (int)(intptr_t)arg;
    int id = acc_sched_acquire(ACC_UNIT_GPU, 10 * 1000000L);
    if (id < 0)
        return NULL;
    fifo_order[__atomic_fetch_add(&fifo_pos, 1, __ATOMIC_SEQ_CST)] = me;
    sleep_us(1000);   /* give a barging thread, if there were one, the chance to show */
    acc_sched_release(id, 0, 1);
    return NULL;
}

static void test_gpu_and_fifo(void)
{
    acc_shm_table *t = acc_sched_table();
    int n1 = acc_sched_add_gpu_units(1, 0, "test-gpu-fifo");
    CHECK(n1 >= 1, "add_gpu_units returned %d", n1);
    CHECK(acc_sched_add_gpu_units(1, 0, "test-gpu-fifo") == n1, "second registration must be idempotent");
    int gpu = acc_sched_acquire(ACC_UNIT_GPU, -1);
    CHECK(gpu >= 0 && t->units[gpu].kind == ACC_UNIT_GPU && t->units[gpu].cpu == -1, "GPU unit %d", gpu);
    if (gpu < 0)
        return;
    uint64_t waits0 = t->hdr.events[ACC_EV_WAIT];
    pthread_t th[5];
    for (int i = 0; i < 5; i++) {
        pthread_create(&th[i], NULL, fifo_thread, (void *)(intptr_t)i);
        /* The next thread starts only once this one holds its ticket. */
        for (int w = 0; w < 5000 && ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) < (uint32_t)i + 1; w++)
            sleep_us(1000);
        CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == (uint32_t)i + 1, "waiter %d not queued", i);
    }
    CHECK(acc_sched_try_acquire(ACC_UNIT_GPU) == -1, "try_acquire must not pass the queue");
    acc_sched_release(gpu, 0, 1);
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    CHECK(fifo_pos == 5, "only %d of 5 waiters got the unit", fifo_pos);
    for (int i = 0; i < fifo_pos; i++)
        CHECK(fifo_order[i] == i, "position %d went to waiter %d", i, fifo_order[i]);
    CHECK(t->hdr.events[ACC_EV_WAIT] >= waits0 + 5, "waits counted: %llu",
          (unsigned long long)(t->hdr.events[ACC_EV_WAIT] - waits0));
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 0, "queue not empty");
    int n2 = acc_sched_add_gpu_units(2, 1, "test-gpu-other");
    CHECK(n2 == n1 + 2, "a second device adds its own slots: %d -> %d", n1, n2);
    CHECK(acc_sched_add_gpu_units(1000, 0, NULL) <= n2 + 64, "slot count capped");
}

/* ---- registering a device while another thread holds the table lock ---- */
static volatile int holder_has_lock;

static void *hold_table_lock(void *arg)
{
    acc_shm_table *t = arg;
    if (acc_shm_lock(t) != 0)
        return NULL;
    ACC_STORE(&holder_has_lock, 1);
    sleep_us(100000); /* a holder preempted for a while: 50 times the short wait, under the long one */
    acc_shm_unlock(t);
    return NULL;
}

/* Registration happens once per process: a busy lock must delay it, not turn the device off
 * for the process's life (a CI run on 2 loaded vCPUs once lost that race). */
static void test_register_busy_lock(void)
{
    acc_shm_table *t = acc_sched_table();
    pthread_t th;
    holder_has_lock = 0;
    CHECK(t != NULL && pthread_create(&th, NULL, hold_table_lock, t) == 0, "holder thread");
    for (int w = 0; w < 5000 && !ACC_LOAD(&holder_has_lock); w++)
        sleep_us(200);
    CHECK(ACC_LOAD(&holder_has_lock), "the holder took the table lock");
    uint64_t t0 = acc_now_ns();
    int n = acc_sched_add_gpu_units(1, 0, "test-gpu-busy");
    uint64_t waited = acc_now_ns() - t0;
    pthread_join(th, NULL);
    CHECK(n >= 1, "registration behind a 100 ms holder returned %d after %llu us", n,
          (unsigned long long)(waited / 1000));
}

/* ---- a thread that dies holding a unit ---- */
static void *die_holding(void *arg)
{
    int *id = arg;
    *id = acc_sched_try_acquire(ACC_UNIT_CPU);
    return NULL;   /* exits without release: its owner word names a thread that is gone */
}

/* The sweep (rate-limited to every 50 ms) finds a gone owner and frees u: 1 once it is free. */
static int swept_free(acc_shm_unit *u)
{
    for (int i = 0; i < 200; i++) {
        sleep_us(2000);
        int got = acc_sched_try_acquire(ACC_UNIT_CPU);
        if (got >= 0)
            acc_sched_release(got, 0, 0);
        if (ACC_LOAD(&u->state) == ACC_UNIT_IDLE && ACC_LOAD(&u->lock) == 0)
            return 1;
    }
    return 0;
}

static void test_thread_death(void)
{
    acc_shm_table *t = acc_sched_table();
    int id = -1;
    pthread_t th;
    pthread_create(&th, NULL, die_holding, &id);
    pthread_join(th, NULL);
    CHECK(id >= 0, "thread could not take a unit");
    if (id < 0)
        return;
    uint64_t rec0 = t->units[id].recoveries, prec0 = acc_sched_proc()->events[ACC_EV_RECOVERY];
    CHECK(swept_free(&t->units[id]), "unit %d still BUSY for a dead thread", id);
    CHECK(t->units[id].recoveries == rec0 + 1, "unit recoveries %llu", (unsigned long long)t->units[id].recoveries);
    CHECK(acc_sched_proc()->events[ACC_EV_RECOVERY] == prec0 + 1, "process recoveries");
}

/* ---- liveness across memory growth and pid reuse ---- */

/* Field 22 of /proc/self/stat, parsed here independently of the scheduler's parser. */
static unsigned long long stat_starttime(void)
{
    char buf[1024];
    unsigned long long st = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                            &st) != 1)
        st = 0;
    return st;
}

static void test_start_time(void)
{
    acc_shm_proc *p = acc_sched_proc();
    uint64_t st = ACC_LOAD(&p->start_time);
    CHECK(st != 0 && st == stat_starttime(), "slot start time %llu, /proc says %llu",
          (unsigned long long)st, stat_starttime());
    /* Memory grows after the slot was claimed (every busy server): the process stays alive. */
    size_t len = 64u << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
        memset(m, 1, len);
        CHECK(acc_pid_alive(getpid(), st), "a process whose memory grew is taken for dead");
        munmap(m, len);
    }
}

/* A holder killed with -9 whose pid now names another live process: the unit is recovered. */
static void test_pid_reuse(void)
{
    acc_shm_table *t = acc_sched_table();
    pid_t other = fork();
    if (other == 0) {
        pause();
        _exit(0);
    }
    int id = acc_sched_try_acquire(ACC_UNIT_CPU);
    CHECK(id >= 0, "no unit to stage the case with");
    if (id >= 0) {
        /* Stage what a dead holder leaves: its word names `other` (pid == tid, alive), with a
         * start time that is not other's, held long ago. */
        acc_shm_unit *u = &t->units[id];
        ACC_STORE(&u->owner_start, acc_proc_start_time(other) + 12345);
        ACC_STORE(&u->owner_pid, other);
        ACC_STORE(&u->owner_tid, other);
        ACC_STORE(&u->since_ns, acc_now_ns() - 1000000000ull);
        ACC_STORE(&u->lock, ACC_OWNER(other, other));
        uint64_t rec0 = ACC_LOAD(&u->recoveries);
        CHECK(swept_free(u) && ACC_LOAD(&u->recoveries) == rec0 + 1, "unit %d stays BUSY for a reused pid", id);
        /* The same word with the right start time is a live holder: not taken. */
        ACC_STORE(&u->owner_start, acc_proc_start_time(other));
        ACC_STORE(&u->since_ns, acc_now_ns() - 1000000000ull);
        ACC_STORE(&u->state, ACC_UNIT_BUSY);
        ACC_STORE(&u->lock, ACC_OWNER(other, other));
        CHECK(!acc_sched_take(t, (uint32_t)id), "a live holder's unit was taken");
        ACC_STORE(&u->lock, 0);
        ACC_STORE(&u->state, ACC_UNIT_IDLE);
    }
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
}

/* ---- counters ---- */
static void test_counters(void)
{
    acc_shm_table *t = acc_sched_table();
    acc_shm_proc *p = acc_sched_proc();
    CHECK(p >= t->procs && p < t->procs + ACC_SHM_MAX_PROCS && p->pid == getpid(), "process slot");
    acc_sched_flush();
    uint64_t in0 = p->bytes[ACC_PATH_INLINE], inr0 = p->requests[ACC_PATH_INLINE];
    uint64_t tot0 = t->hdr.bytes[ACC_PATH_INLINE], sp0 = p->bytes[ACC_PATH_SPLIT];
    uint64_t gpu0 = t->hdr.bytes[ACC_PATH_GPU], fb0 = p->events[ACC_EV_GPU_FALLBACK];
    for (int i = 0; i < 1000; i++)
        acc_sched_count(ACC_PATH_INLINE, 16, 1);
    acc_sched_count(ACC_PATH_SPLIT, 1 << 20, 1);
    acc_sched_count(ACC_PATH_GPU, 4096, 2);
    acc_sched_count((acc_path)99, 1, 1);
    acc_sched_event(ACC_EV_GPU_FALLBACK);
    acc_sched_event((acc_event)99);
    /* Split and GPU are published at once; inline after a flush. */
    CHECK(p->bytes[ACC_PATH_SPLIT] == sp0 + (1 << 20), "split bytes");
    CHECK(t->hdr.bytes[ACC_PATH_GPU] == gpu0 + 4096, "gpu total");
    CHECK(p->events[ACC_EV_GPU_FALLBACK] == fb0 + 1, "fallback event");
    acc_sched_flush();
    CHECK(p->bytes[ACC_PATH_INLINE] == in0 + 16000 && p->requests[ACC_PATH_INLINE] == inr0 + 1000,
          "inline %llu", (unsigned long long)(p->bytes[ACC_PATH_INLINE] - in0));
    CHECK(t->hdr.bytes[ACC_PATH_INLINE] == tot0 + 16000, "inline total");
    CHECK(p->bytes[ACC_PATH_BATCH] == 0, "batch untouched");
    /* Past the 64 KiB buffer the counts publish by themselves. */
    for (int i = 0; i < 8192; i++)
        acc_sched_count(ACC_PATH_INLINE, 16, 1);
    CHECK(p->bytes[ACC_PATH_INLINE] >= in0 + 16000 + 65536, "inline not published after 128 KiB");
    acc_sched_flush();

    /* Cost of the hot path (information only: no timed assertion on a shared machine). */
    const int iters = 20000000;
    uint64_t t0 = acc_now_ns();
    for (int i = 0; i < iters; i++) {
        acc_sched_count(ACC_PATH_INLINE, 16, 1);
        __asm__ volatile("" ::: "memory");
    }
    uint64_t dt = acc_now_ns() - t0;
    acc_sched_flush();
    printf("info: acc_sched_count(INLINE, 16) %.2f ns/call\n", (double)dt / iters);
}

int main(void)
{
    snprintf(segname, sizeof(segname), "/accelaes-test-sched.%d", (int)getpid());
    setenv("ACCELAES_SHM_NAME", segname, 1);
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    test_basic();
    test_never_oversubscribed(0);
    test_never_oversubscribed(1);
    test_gpu_and_fifo();
    test_register_busy_lock();
    test_thread_death();
    test_counters();
    test_start_time();
    test_pid_reuse();
    shm_unlink(segname);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
