/* scheduler/sched.h: the device-slot scheduler (unit table shared by every process of a
 * user, FIFO waiting, IDLE/BUSY, crash recovery, counters) and the worker pool that runs
 * split requests. The provider calls only what is declared here. */
#ifndef ACCELAES_SCHED_H
#define ACCELAES_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* Unit kinds, paths and events are numbered here and named in one table each
 * (scheduler/tables.c), which the segment's arrays and accelaes-stat are indexed by: a new
 * device backend adds a line to each, not code. The segment reserves room for up to
 * ACC_*_MAX of each, so a new one changes no layout. */
#define ACC_UNIT_KIND_MAX 8u
#define ACC_PATH_MAX 8u
#define ACC_EV_MAX 8u

/* What a unit is (kind 0 is no kind). */
typedef enum { ACC_UNIT_CPU = 1, ACC_UNIT_GPU = 2, ACC_UNIT_KIND_COUNT } acc_unit_kind;

/* Where a request's bytes went (per-process counters, shown by accelaes-stat). */
typedef enum {
    ACC_PATH_INLINE = 0,
    ACC_PATH_SPLIT  = 1,
    ACC_PATH_BATCH  = 2,
    ACC_PATH_GPU    = 3,
    ACC_PATH_COUNT
} acc_path;

/* Events counted per process. */
typedef enum {
    ACC_EV_WAIT = 0,          /* waited in the FIFO for a unit */
    ACC_EV_RECOVERY = 1,      /* recovered a unit left BUSY by a dead owner (its owner word names a gone thread) */
    ACC_EV_GPU_FALLBACK = 2,  /* a GPU request (or part of one) finished on the CPU */
    /* Not a count but bytes: the tails of GPU requests that the caller ran on the CPU while it
     * was queued for a GPU unit (provider/route/gpu.c). They are in the inline bytes too. */
    ACC_EV_GPU_TAIL_BYTES = 3,
    ACC_EV_COUNT
} acc_event;

_Static_assert(ACC_UNIT_KIND_COUNT <= ACC_UNIT_KIND_MAX && ACC_PATH_COUNT <= ACC_PATH_MAX && ACC_EV_COUNT <= ACC_EV_MAX,
               "the segment reserves ACC_*_MAX slots");

/* The tables (scheduler/tables.c). Names are what accelaes-stat prints and --json keys. */
typedef struct acc_unit_kind_info {
    const char *name; /* "cpu", "gpu"; NULL: no such kind */
    int per_core;     /* units are CPU cores, found by CPU discovery (not registered by a backend) */
} acc_unit_kind_info;
extern const acc_unit_kind_info acc_unit_kinds[ACC_UNIT_KIND_COUNT];
extern const char *const acc_path_names[ACC_PATH_COUNT]; /* "inline", "split", ... */

typedef struct acc_event_info {
    const char *json;   /* --json key */
    const char *column; /* text column heading */
    int width;          /* text column width */
    int bytes;          /* the figure is bytes (printed as such), not a count */
} acc_event_info;
extern const acc_event_info acc_events[ACC_EV_COUNT];

/* kind is one of the table's kinds (values from the segment or a caller are checked with it). */
static inline int acc_unit_kind_valid(uint32_t kind)
{
    return kind > 0 && kind < ACC_UNIT_KIND_COUNT && acc_unit_kinds[kind].name != NULL;
}

/* The kind's name, "unknown" for a value no table line has. */
static inline const char *acc_unit_kind_name(uint32_t kind)
{
    return acc_unit_kind_valid(kind) ? acc_unit_kinds[kind].name : "unknown";
}

typedef struct acc_sched_conf {
    int shm;       /* -1 auto (shared segment, silent private fallback), 0 off, 1 on (fallback reported on stderr once) */
    int workers;   /* CPU units to use at most; 0 = one per CPU in the affinity set */
} acc_sched_conf;

/* Set the configuration (before first use; later calls are ignored once initialised).
 * Initialisation itself is lazy and redone in a forked child. Never fails: without a
 * usable segment the process keeps a private table. */
void acc_sched_configure(const acc_sched_conf *conf);

/* Attach to the unit table (shared segment or private) and claim a counter slot: called when
 * the provider is initialised, so that a forked child can count with no system call. */
void acc_sched_attach(void);

/* 1 if the split, batch and GPU paths may make the system calls they need (threads, eventfd,
 * CPU discovery, dlopen) in this process; 0 in a forked child that entered a seccomp sandbox
 * (or whose state cannot be read): those paths then decline and the work runs inline. */
int acc_sched_kernel_ok(void);

/* 1 when this process is attached to the shared segment, 0 when it uses a private table. */
int acc_sched_is_shared(void);

/* Number of CPU units this process may use (>= 1). */
int acc_sched_cpu_units(void);

/* Take an IDLE unit of the given kind without waiting. Returns its id, or -1 if none is idle. */
int acc_sched_try_acquire(acc_unit_kind kind);

/* Take a unit of the given kind, waiting in the cross-process FIFO if all are BUSY.
 * timeout_us < 0 waits without limit. Returns its id, or -1 (no such unit, or timeout). */
int acc_sched_acquire(acc_unit_kind kind, long timeout_us);

/* A place in the FIFO held without blocking: the caller works on while it waits and asks between
 * pieces of that work whether its turn came. It must ask (or cancel) at least every 100 ms: a
 * ticket whose holder is silent for 200 ms is passed over by newcomers, for 2 s dropped as dead. */
typedef struct acc_sched_ticket {
    acc_unit_kind kind;
    int idx;             /* FIFO entry; -1 when the FIFO was full: poll then takes any idle unit */
    uint64_t ticket;
} acc_sched_ticket;

/* Queue the calling thread for a unit of kind without waiting (counts one ACC_EV_WAIT). 0 queued,
 * -1 (nothing queued) when there is no unit of that kind or no table. */
int acc_sched_enqueue(acc_unit_kind kind, acc_sched_ticket *tk);

/* From the thread that queued: the unit id when the ticket's turn came and a unit was taken (the
 * ticket is then spent), or -1: still queued. Never waits. */
int acc_sched_poll(acc_sched_ticket *tk);

/* Leave the queue (the turn passes to the next waiter); a spent or unqueued ticket is a no-op. */
void acc_sched_cancel(acc_sched_ticket *tk);

/* Give a unit back; its bytes and requests served grow by the given amounts. */
void acc_sched_release(int unit, uint64_t bytes, uint64_t requests);

/* Register n GPU slots (units of kind gpu) on NUMA node `node` (-1 unknown) for this host.
 * Idempotent per host: a second process finds them already registered. Returns the number
 * of GPU units now in the table (0 on failure). */
int acc_sched_add_gpu_units(int n, int node, const char *devname);
/* The same for any device kind of the table (not a per-core kind): n units of kind, each named
 * devname (default: the kind's name). MAX_DEVICE_SLOTS bounds n for every device kind. */
int acc_sched_add_device_units(acc_unit_kind kind, int n, int node, const char *devname);

/* Per-process counters; cheap, lock-free, safe from any thread. */
void acc_sched_count(acc_path path, uint64_t bytes, uint64_t requests);
void acc_sched_event(acc_event ev);
/* Add n to an event's figure (ACC_EV_GPU_TAIL_BYTES counts bytes). */
void acc_sched_event_add(acc_event ev, uint64_t n);

/* ---- worker pool (scheduler/pool.c) ---- */

/* fn(arg, i) runs once for every i in [0, n). */
typedef void (*acc_pool_fn)(void *arg, size_t i);

/* Run n pieces on the calling thread plus at most `helpers` pool threads, each pool thread
 * holding a CPU unit taken without waiting (so crypto threads never outnumber units across
 * processes). Returns the number of pool threads that took part (0: the caller did it all).
 * Nothing is allocated per call once the pool exists. */
int acc_pool_run(acc_pool_fn fn, void *arg, size_t n, int helpers);

/* As acc_pool_run, and each unit that took part (the caller's included) is credited with
 * piece_bytes per piece it ran, so the unit table shows bytes served by CPU units
 * (acc_pool_run credits requests only). Added by the scheduler; acc_pool_run is unchanged. */
int acc_pool_run_bytes(acc_pool_fn fn, void *arg, size_t n, int helpers, uint64_t piece_bytes);

/* As acc_pool_run_bytes, but each thread is handed consecutive pieces [first, first + count) at
 * a time: large ranges first, single pieces toward the end (guided), so that a thread preempted
 * by another process holds little of the request. Without helpers, one call for all n. */
typedef void (*acc_pool_range_fn)(void *arg, size_t first, size_t count);
int acc_pool_run_ranges(acc_pool_range_fn fn, void *arg, size_t n, int helpers, uint64_t piece_bytes);

#endif
