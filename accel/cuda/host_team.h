/* accel/cuda/host_team.h: the CUDA plugin's host-side helpers: a small per-process thread team that
 * splits one chunk's staging work (copy in, copy out, CTR keystream XOR) with the calling thread, and
 * the copy / XOR loops it runs. Plain C (no CUDA), so a gcc-built test exercises it without a GPU. */
#ifndef ACCELAES_CUDA_HOST_TEAM_H
#define ACCELAES_CUDA_HOST_TEAM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define ACC_HT_MAXTHREADS 32            /* caller included */
#define ACC_HT_MIN_PIECE  (32u << 10)   /* smaller pieces cost more in hand-off than they save */

/* Work over the byte range [lo, hi) of a task; called concurrently on disjoint ranges. */
typedef void (*acc_ht_fn)(void *arg, size_t lo, size_t hi);

/* Counters the caller and the helpers hand a task over with; all accessed with __atomic builtins. */
typedef struct acc_ht {
    pthread_mutex_t use;      /* held by the caller whose task is out; busy: that caller works alone */
    pthread_mutex_t lock;     /* helpers sleeping on cv */
    pthread_cond_t cv;
    pthread_t th[ACC_HT_MAXTHREADS];
    int nhelp;                /* helper threads running (the caller is not one) */
    unsigned spin_us;         /* how long an idle helper polls before it sleeps */
    /* the task, written by its caller before gen is bumped */
    acc_ht_fn fn;
    void *arg;
    size_t total, piece, npieces;
    size_t next;              /* next piece to claim */
    size_t finished;          /* pieces completed */
    int open;                 /* helpers may join the task */
    int active;               /* helpers inside the task */
    int sleepers;             /* helpers waiting on cv */
    int stop;
    uint64_t gen;             /* bumped once per task (and at stop) */
    uint64_t helped;          /* pieces done by helpers, over the team's life (tests, stats) */
} acc_ht;

/* Start nthreads - 1 helpers (the caller is the nth). Returns the number of helpers running:
 * fewer than asked (even 0) if threads cannot be created, in which case callers work alone. */
int acc_ht_start(acc_ht *t, int nthreads, unsigned spin_us);
/* Stop and join the helpers (no task may be running). */
void acc_ht_stop(acc_ht *t);
/* Run fn over [0, total): cut into pieces claimed by the caller and any idle helper, and return
 * once every piece is done and no helper touches the task any more. A NULL, helperless or busy
 * team, or a task too small to split, is run by the caller alone as fn(arg, 0, total). */
void acc_ht_run(acc_ht *t, size_t total, acc_ht_fn fn, void *arg);

/* dst = src (nt: non-temporal stores, for data no one on this CPU reads soon). */
void acc_hc_copy(uint8_t *dst, const uint8_t *src, size_t len, int nt);
/* dst = a ^ b (dst may be a). */
void acc_hc_xor(uint8_t *dst, const uint8_t *a, const uint8_t *b, size_t len, int nt);

#endif
