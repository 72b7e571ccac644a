/* scheduler/forksafe.h: every process-private mutex of the module is declared fork-safe here, next
 * to its definition, with ACC_FORK_SAFE. After fork() the child has only the forking thread, so a
 * mutex another thread held would stay locked for ever in the child (the child's first provider
 * error or first private-library-context use hung). One pthread_atfork handler set covers them
 * all, in a fixed order, so that no lock is forgotten and no two are taken in opposite orders. */
#ifndef ACCELAES_FORKSAFE_H
#define ACCELAES_FORKSAFE_H

#include <pthread.h>
#include <stddef.h>

typedef enum {
    /* Taken before fork (waiting for its holder), released in parent and child: the child sees
     * the state it protects complete. For locks held only briefly. */
    ACC_FORK_HOLD = 0,
    /* Re-initialised in the child, never waited for: for locks held across long waits (GPU
     * calibration, a GPU run). Their owner treats the state they protect as the parent's and
     * redoes it in the child (it keys that state to the pid). */
    ACC_FORK_RESET = 1
} acc_fork_mode;

typedef struct acc_fork_lock_reg {
    pthread_mutex_t *m;      /* the first of n mutexes */
    size_t n;
    const char *name;
    int rank;                /* HOLD locks are taken in rising rank: a lock taken inside another ranks higher */
    acc_fork_mode mode;
} acc_fork_lock_reg;

/* Ranks: outermost first. acc_raise (err_lock) may be called under any other lock. */
enum {
    /* provider/route/batch.c: the async queues. A cancel holds it while it takes a thread's queue
     * lock, and a flush holds that queue lock while it counts and takes a unit (sched init). */
    ACC_RANK_BATCH = 5,
    ACC_RANK_POOL = 10,      /* scheduler/pool.c: starting a thread asks the scheduler for units */
    ACC_RANK_SCHED = 20,     /* scheduler/sched.c: initialisation */
    ACC_RANK_CIPHERS = 30,   /* provider/entry/prov.c: the cipher table, made with the private default (evp engine) */
    ACC_RANK_EVP_ENGINE = 40,
    ACC_RANK_PRIV = 50,      /* provider/entry/prov.c: the private library context */
    ACC_RANK_GPU = 60,
    ACC_RANK_ERR = 90        /* provider/entry/prov.c: raising an error */
};

#define ACC_FORK_CAT2(a, b) a##b
#define ACC_FORK_CAT(a, b) ACC_FORK_CAT2(a, b)
/* Registers n mutexes starting at `first` (a pthread_mutex_t *). The entry is a pointer in the
 * acc_fork_locks section, which the linker gathers per module (shared object or program). */
#define ACC_FORK_SAFE(first, count, lockname, lockrank, lockmode)                                       \
    static const acc_fork_lock_reg ACC_FORK_CAT(acc_fork_reg_, __LINE__) =                              \
        { (first), (count), (lockname), (lockrank), (lockmode) };                                      \
    static const acc_fork_lock_reg *const ACC_FORK_CAT(acc_fork_regp_, __LINE__)                        \
        __attribute__((used, section("acc_fork_locks"), aligned(sizeof(void *)))) =                     \
        &ACC_FORK_CAT(acc_fork_reg_, __LINE__)

/* Installs the atfork handlers once per process (idempotent, thread-safe). Called when the
 * provider is initialised and when the scheduler first starts. */
void acc_fork_install(void);

/* The registered locks, in the order they are taken before fork (tests). */
size_t acc_fork_lock_count(void);
const acc_fork_lock_reg *acc_fork_lock_at(size_t i);

#endif
