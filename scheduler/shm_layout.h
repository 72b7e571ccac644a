/* scheduler/shm_layout.h: the layout of the per-user unit table (/accelaes.<uid>) and the
 * checks that make it safe to read. Private to scheduler/ and tools/accelaes-stat. */
#ifndef ACCELAES_SHM_LAYOUT_H
#define ACCELAES_SHM_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "scheduler/sched.h"

#define ACC_SHM_MAGIC       0x53454c4543434131ULL   /* "1ACCELES", a version-independent tag */
/* 2: owner-word locks instead of robust pthread mutexes; 3: units' owner_start; 4: per-kind, per-path
 * and per-event arrays sized for ACC_*_MAX (sched.h), so a new backend changes no layout */
#define ACC_SHM_VERSION 4u
#define ACC_SHM_MAX_UNITS   1024u    /* CPU units and GPU slots together */
#define ACC_SHM_MAX_PROCS   1024u    /* process slots; beyond this a process counts into totals only */
#define ACC_SHM_MAX_WAITERS 256u     /* FIFO entries; beyond this a waiter polls instead */
#define ACC_SHM_DEVNAME     32
#define ACC_SHM_NAME_MAX    200

enum { ACC_UNIT_IDLE = 0, ACC_UNIT_BUSY = 1 };
enum { ACC_WAITER_FREE = 0, ACC_WAITER_WAITING = 1 };

/* Every field is read and written with __atomic builtins (relaxed unless a comment says
 * otherwise), so a reader of a torn snapshot sees stale numbers, never UB.
 *
 * Locks are owner words (ACC_OWNER(pid, tid) of the holder, 0 when free), taken by
 * compare-and-swap and taken over when the kernel says the holder thread is gone. Not robust
 * pthread mutexes: glibc keeps a robust mutex on a list threaded through pointers stored in
 * the mutex itself and writes through them on unlock, so anyone able to write the segment
 * could make every holder write to an address of its choosing (tests/system/test_faults.py saw wrong
 * ciphertext and SIGSEGV). An owner word holds no pointer; a damaged one can only make a unit
 * look busy (the provider never waits for a CPU unit, and bounds its wait for a GPU unit). */
typedef uint64_t acc_owner_word;
#define ACC_OWNER(pid, tid)   (((uint64_t)(uint32_t)(pid) << 32) | (uint32_t)(tid))
#define ACC_OWNER_PID(w)      ((int32_t)(uint32_t)((w) >> 32))
#define ACC_OWNER_TID(w)      ((int32_t)(uint32_t)(w))

typedef struct acc_shm_unit {
    acc_owner_word lock;          /* holding the unit == holding this word */
    uint32_t id;                  /* == its index; checked on use */
    uint32_t kind;                /* acc_unit_kind */
    int32_t cpu;                  /* CPU units: the core; GPU slots: -1 */
    int32_t node;                 /* NUMA node, -1 unknown */
    uint32_t state;               /* ACC_UNIT_IDLE / ACC_UNIT_BUSY */
    int32_t owner_pid, owner_tid;
    uint32_t pad0;
    uint64_t since_ns;            /* CLOCK_MONOTONIC of the last state change */
    uint64_t bytes, requests, recoveries;
    char devname[ACC_SHM_DEVNAME];/* GPU slots: the device, NUL-terminated (not trusted) */
    /* The holder's process start time (/proc/<pid>/stat starttime), 0 while unknown: a holder
     * killed with -9 whose pid now belongs to another process is told apart by it. Written
     * after the lock word is taken and zeroed before it is released. */
    uint64_t owner_start;
} __attribute__((aligned(64))) acc_shm_unit;

typedef struct acc_shm_proc {
    int32_t pid;                  /* 0: free; written last when claimed (release) */
    uint32_t pad0;
    uint64_t start_time;          /* /proc/<pid>/stat starttime: tells a reused pid apart */
    uint64_t bytes[ACC_PATH_MAX]; /* indexed by acc_path; those past ACC_PATH_COUNT stay 0 */
    uint64_t requests[ACC_PATH_MAX];
    uint64_t events[ACC_EV_MAX]; /* indexed by acc_event */
} __attribute__((aligned(64))) acc_shm_proc;

typedef struct acc_shm_waiter {
    uint64_t ticket;              /* FIFO order: smaller is older */
    uint64_t heartbeat_ns;        /* refreshed by the waiter each sleep slice: stale == dead */
    int32_t pid, tid;
    uint32_t kind;
    uint32_t state;               /* ACC_WAITER_*; written last (release) */
    uint32_t word;                /* futex word: bumped to wake this waiter */
} __attribute__((aligned(64))) acc_shm_waiter;

typedef struct acc_shm_hdr {
    uint64_t magic;
    uint32_t version, hdr_size;
    uint64_t total_size;
    uint32_t max_units, max_procs, max_waiters;
    uint32_t unit_size, proc_size, waiter_size;
    uint32_t owner_uid;
    uint64_t created_ns;          /* CLOCK_REALTIME at creation, for display */
    acc_owner_word lock __attribute__((aligned(64)));   /* unit adds, slots, FIFO */
    uint32_t nunits;              /* published with release after the unit is initialised */
    uint32_t nwaiting[ACC_UNIT_KIND_MAX]; /* FIFO entries per kind (index = acc_unit_kind) */
    uint64_t next_ticket;
    uint64_t bytes[ACC_PATH_MAX]; /* cumulative totals since creation */
    uint64_t requests[ACC_PATH_MAX];
    uint64_t events[ACC_EV_MAX];
} __attribute__((aligned(64))) acc_shm_hdr;

typedef struct acc_shm_table {
    acc_shm_hdr hdr;
    acc_shm_unit units[ACC_SHM_MAX_UNITS];
    acc_shm_proc procs[ACC_SHM_MAX_PROCS];
    acc_shm_waiter waiters[ACC_SHM_MAX_WAITERS];
} acc_shm_table;

#define ACC_LOAD(p)      __atomic_load_n((p), __ATOMIC_RELAXED)
#define ACC_LOAD_ACQ(p)  __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ACC_STORE(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ACC_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ACC_ADD(p, v)    ((void)__atomic_fetch_add((p), (v), __ATOMIC_RELAXED))

/* ---- scheduler/shm.c ---- */

/* The segment name: $ACCELAES_SHM_NAME or /accelaes.<uid>. 0 on success, -1 if the
 * override is not a valid POSIX shm name ("/x", no other '/', short). */
int acc_shm_name(char *buf, size_t len);

/* Check an open segment's file: regular, owned by geteuid(), mode exactly 0600, and of the
 * expected size. 0 if usable, else -1 and *why says what was wrong. */
int acc_shm_check_fd(int fd, const char **why);

/* Check a mapped or copied table's header (magic, version, sizes, counts). 0 / -1 + *why. */
int acc_shm_check_header(const acc_shm_table *t, const char **why);

/* Attach to the user's segment, creating it if absent (temporary name + link, so it appears
 * fully initialised or not at all). Returns the mapping or NULL with *why set. */
acc_shm_table *acc_shm_attach(const char *name, const char **why);

/* A process-private table with the same layout (anonymous mapping). NULL only on ENOMEM. */
acc_shm_table *acc_shm_private(void);

void acc_shm_unmap(acc_shm_table *t);

/* Try once to take an owner word for `me`: 1 taken, 2 taken over from a holder thread that
 * no longer exists (checked only when check_dead), 0 held by someone else. */
int acc_lock_try(acc_owner_word *w, acc_owner_word me, int check_dead);

/* The holder named by owner word w is alive: its thread exists and, when start (its process's
 * start time) is not 0, the process with that pid is the one that started then. */
int acc_owner_alive(acc_owner_word w, uint64_t start);

/* Free an owner word if `me` holds it (release ordering). */
void acc_lock_release(acc_owner_word *w, acc_owner_word me);

/* Lock the header lock, repairing the FIFO counters if a previous holder died. 0, or -1
 * when a live holder kept it for ACC_SHM_LOCK_WAIT_NS (stopped, or a lock word another process
 * of the user wrote): every caller then does without it. Sections under the lock are scans of
 * microseconds, so the wait is short: it bounds what a hostile word costs a request. */
#define ACC_SHM_LOCK_WAIT_NS 2000000ull
int acc_shm_lock(acc_shm_table *t);
/* The same with a wait of wait_ns: for what a process does once and cannot redo later (registering
 * a device's units), where a holder preempted for a few time slices on a loaded machine must not
 * turn into a lasting fallback. */
#define ACC_SHM_LOCK_ONCE_NS 250000000ull
int acc_shm_lock_wait(acc_shm_table *t, uint64_t wait_ns);
void acc_shm_unlock(acc_shm_table *t);

/* The number of units, bounded by the table size (the shm value is not trusted). */
uint32_t acc_shm_nunits(const acc_shm_table *t);

/* /proc/<pid>/stat starttime, 0 if unknown. */
uint64_t acc_proc_start_time(pid_t pid);

/* 1 if pid (> 0) is alive and, when start_time != 0, still the same process. */
int acc_pid_alive(int32_t pid, uint64_t start_time);

/* 1 if thread tid of process pid exists. */
int acc_tid_alive(int32_t pid, int32_t tid);

uint64_t acc_now_ns(void);

#endif
