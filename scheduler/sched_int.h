/* scheduler/sched_int.h: what the scheduler's files (sched.c, counters.c, fifo.c, pool.c)
 * share with each other and with the tests; the provider uses only scheduler/sched.h. */
#ifndef ACCELAES_SCHED_INT_H
#define ACCELAES_SCHED_INT_H

#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "scheduler/sched.h"
#include "scheduler/shm_layout.h"

/* The table this process uses (shared or private), initialising it on first use. NULL in a forked
 * child the kernel may not serve (acc_sched_kernel_ok), when even an anonymous mapping failed, and
 * for INIT_RETRY_NS after the table lock could not be had within a request's wait. */
acc_shm_table *acc_sched_table(void);
/* The same for what a process does once and cannot redo (registering a device's units): the table
 * lock waited for up to ACC_SHM_LOCK_ONCE_NS, not a request's 2 ms. */
acc_shm_table *acc_sched_table_once(void);

/* This process's slot (in the table, or a private one when the table is full), initialising. */
acc_shm_proc *acc_sched_proc(void);

/* What the counters publish to, with no system call in a forked child: the mapping the process
 * (or its parent) attached, or NULL; and this process's slot, or a private one (a child that has
 * not taken a split, batch or GPU path has no slot: its counts reach the totals only). */
acc_shm_table *acc_sched_count_table(void);
acc_shm_proc *acc_sched_count_proc(void);

/* The seccomp mode (0 none, 1 strict, 2 filter) and number of filters (-1 where the kernel does
 * not say) of the calling process, from /proc/self/status (scheduler/shm.c). 0 ok, -1 unreadable. */
typedef struct acc_seccomp_state {
    int mode, filters;
} acc_seccomp_state;
int acc_seccomp_read(acc_seccomp_state *s);

/* The cached pid of this process and tid of the calling thread (both reset after fork). */
int32_t acc_sched_pid(void);
int32_t acc_sched_tid(void);

/* The i-th CPU unit this process may use: its unit id and core (-1 if i is out of range). */
int acc_sched_cpu_unit(int i, int *cpu);

/* The CPU units this process may use, as discovered; valid once acc_sched_table() is not NULL. */
typedef struct acc_cpu_list {
    int n;
    uint32_t unit[ACC_SHM_MAX_UNITS];
    int cpu[ACC_SHM_MAX_UNITS];
} acc_cpu_list;
const acc_cpu_list *acc_sched_cpus(void);

/* The table if this process has initialised it (units may be taken), else NULL: never initialises. */
acc_shm_table *acc_sched_ready_table(void);

/* This process's pid (0 before it attached), and its start time in *start (0 unknown). */
int32_t acc_sched_pid_start(uint64_t *start);

/* Append a unit to t (table lock held); its index, or -1 when the table is full. */
int acc_sched_add_unit(acc_shm_table *t, acc_unit_kind kind, int cpu, int node, const char *devname);

/* ---- units.c ---- */
/* Forget when this process last swept (a forked child). */
void acc_units_child_reset(void);

/* Take unit `id` if it is idle (trylock, recovering a dead owner's unit). 1 taken, 0 not. */
int acc_sched_take(acc_shm_table *t, uint32_t id);

/* Take any idle unit of kind without waiting, skipping the FIFO check (for the FIFO head). */
int acc_sched_try_kind(acc_shm_table *t, acc_unit_kind kind);

/* Recover units left BUSY by a dead owner (at most every 50 ms per process). */
void acc_sched_sweep(acc_shm_table *t, acc_unit_kind kind);

/* ---- counters.c ---- */
/* Publish the calling thread's buffered inline counts (tests, fork, thread and process exit). */
void acc_sched_flush(void);
/* Forget the calling thread's buffered counts (the child after fork: they were the parent's). */
void acc_counters_child_reset(void);
/* Add an event to the process slot, the totals, and, for recoveries, nothing else. */
void acc_counters_add(acc_shm_table *t, acc_shm_proc *p, acc_path path, uint64_t bytes, uint64_t reqs);

/* ---- fifo.c ---- */
/* Wake the oldest live waiter for kind (after a release). */
void acc_fifo_notify(acc_shm_table *t, acc_unit_kind kind);

/* ---- pool.c ---- */
void acc_pool_child_reset(void);

/* ---- futex on a word that may live in shared memory (so no FUTEX_PRIVATE_FLAG) ---- */
static inline void acc_futex_wait(uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = { (time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u) };
    syscall(SYS_futex, word, FUTEX_WAIT, val, timeout_ns ? &ts : NULL, NULL, 0);
}

static inline void acc_futex_wake(uint32_t *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Process-private words (the pool) may use the cheaper private futex hash. */
static inline void acc_futex_wait_private(uint32_t *word, uint32_t val)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static inline void acc_futex_wake_private(uint32_t *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void acc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
