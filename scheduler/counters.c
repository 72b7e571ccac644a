/* scheduler/counters.c: per-process counters of where bytes went and what happened.
 *
 * acc_sched_count(ACC_PATH_INLINE, ...) runs on every EVP update (often 16 bytes), so it
 * only adds to a per-thread buffer; the buffer is published to the shared slot and the
 * totals once it holds 64 KiB or ~1000 calls, when the thread exits, at process exit (the
 * exiting thread), before fork, and on acc_sched_flush(). Staleness: a live thread's inline
 * numbers seen by accelaes-stat may lag by up to 64 KiB / 1024 calls; other paths and events
 * are published at once (they are per split/batch/GPU request, not per 16 bytes).
 * A call costs about what an empty function call does (bench/results/pool-design.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include "scheduler/sched_int.h"

#define FLUSH_CREDIT (64 * 1024)
#define CALL_COST    64          /* each call spends at least this much credit: <= 1024 calls */

/* initial-exec: in a dlopened module the default TLS model calls __tls_get_addr on every
 * access, half as much again per call; these 32 bytes come out of glibc's static TLS surplus
 * reserved for dlopened modules. */
static __thread struct {
    uint64_t left;               /* credit before the next publish; 0: first call */
    uint64_t bytes, requests;
    int registered;              /* the thread-exit destructor knows this thread */
} tc __attribute__((tls_model("initial-exec")));

static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static int tc_key_ok;

static void tc_thread_exit(void *unused)
{
    (void)unused;
    acc_sched_flush();
}

static void tc_make_key(void)
{
    tc_key_ok = pthread_key_create(&tc_key, tc_thread_exit) == 0;
}

void acc_counters_add(acc_shm_table *t, acc_shm_proc *p, acc_path path, uint64_t bytes, uint64_t reqs)
{
    if ((unsigned)path >= ACC_PATH_COUNT)
        return;
    if (p != NULL) {
        ACC_ADD(&p->bytes[path], bytes);
        ACC_ADD(&p->requests[path], reqs);
    }
    if (t != NULL) {
        ACC_ADD(&t->hdr.bytes[path], bytes);
        ACC_ADD(&t->hdr.requests[path], reqs);
    }
}

/* Never initialises anything in a forked child: publishing is atomic adds into the mapping the
 * parent attached (no system call), or nothing until the child attaches. */
void acc_sched_flush(void)
{
    if (tc.bytes == 0 && tc.requests == 0)
        return;
    acc_shm_table *t = acc_sched_count_table();
    if (t == NULL)
        return;
    acc_counters_add(t, acc_sched_count_proc(), ACC_PATH_INLINE, tc.bytes, tc.requests);
    tc.bytes = 0;
    tc.requests = 0;
}

void acc_counters_child_reset(void)
{
    /* The forking thread's buffer was published to the parent in prepare. */
    tc.bytes = 0;
    tc.requests = 0;
    tc.left = 0;
}

static void __attribute__((noinline)) count_slow(void)
{
    if (!tc.registered) {
        pthread_once(&tc_once, tc_make_key);
        if (tc_key_ok)
            pthread_setspecific(tc_key, &tc);
        tc.registered = 1;
    }
    acc_sched_flush();
    tc.left = FLUSH_CREDIT;
}

static void __attribute__((noinline)) count_other(acc_path path, uint64_t bytes, uint64_t requests)
{
    if ((unsigned)path >= ACC_PATH_COUNT)
        return;
    acc_shm_table *t = acc_sched_count_table();
    if (t != NULL)
        acc_counters_add(t, acc_sched_count_proc(), path, bytes, requests);
}

/* Kept a leaf on the fast path (both slow paths are tail calls): no frame, no spills. */
__attribute__((optimize("no-tree-slp-vectorize")))
void acc_sched_count(acc_path path, uint64_t bytes, uint64_t requests)
{
    if (__builtin_expect(path != ACC_PATH_INLINE, 0)) {
        count_other(path, bytes, requests);
        return;
    }
    uint64_t left = tc.left;
    tc.bytes += bytes;
    tc.requests += requests;
    if (__builtin_expect(bytes + CALL_COST < left && bytes < FLUSH_CREDIT, 1)) {
        tc.left = left - bytes - CALL_COST;
        return;
    }
    count_slow();
}

void acc_sched_event(acc_event ev)
{
    acc_sched_event_add(ev, 1);
}

void acc_sched_event_add(acc_event ev, uint64_t n)
{
    if ((unsigned)ev >= ACC_EV_COUNT || n == 0)
        return;
    acc_shm_table *t = acc_sched_count_table();
    if (t == NULL)
        return;
    acc_shm_proc *p = acc_sched_count_proc();
    if (p != NULL)
        ACC_ADD(&p->events[ev], n);
    ACC_ADD(&t->hdr.events[ev], n);
}
