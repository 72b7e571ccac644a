/* accel/cuda/runtime.h: the CUDA plugin's process state (device, per-slot streams and staging
 * pool), shared by runtime.cu (init, memory, errors), direct.cu (run(): jobs by DMA on the callers'
 * memory) and pipeline.cu (jobs staged through pinned buffers). */
#ifndef ACCELAES_CUDA_RUNTIME_H
#define ACCELAES_CUDA_RUNTIME_H

#include <pthread.h>
#include <sys/types.h>
#include "accel/gpu_plugin.h"
#include "accel/cuda/kernels.h"
#include "accel/cuda/host_team.h"
#include "accel/cuda/regcache.h"

#define ACC_CU_MAXSLOTS 8
#define ACC_CU_MAXBUF   4      /* streams (each with its own staging buffers) per slot */
#define ACC_CU_MAXJOBS  1024   /* jobs per launch group; a run() with more is done in groups */

/* What a staged chunk must do on the host once its stream completes (one per piece). */
typedef struct acc_cu_wb {
    uint32_t job;        /* index in the group */
    uint8_t op;
    size_t joff;         /* offset in the job */
    size_t len;          /* bytes */
    size_t pos;          /* offset in the staging buffer */
    uint8_t next_iv[16]; /* CTR: counter after the piece; CBC-dec: its last input block */
} acc_cu_wb;

/* One chunk as planned: its pieces in staging order, before or while it is in flight. */
typedef struct acc_cu_plan {
    acc_cu_wb *wb;       /* host: ACC_CU_MAXJOBS entries */
    size_t nwb;
    size_t bytes;        /* staging bytes used */
    size_t nf, ni;       /* pieces for the encrypt-direction / decrypt-direction kernels */
    int need_in;         /* some piece's input goes through staging (not CTR keystream-only) */
    int host_mem;        /* direct: the kernels run on the one job's own memory (pageable access) */
} acc_cu_plan;

typedef struct acc_cu_buf {
    cudaStream_t st;
    cudaEvent_t kdone;   /* kernels of this chunk finished (orders CBC-enc chaining) */
    cudaEvent_t done;    /* output copied back into h */
    cudaEvent_t idle;    /* blocking: recorded to wait for everything queued on st (acc_cu_sync) */
    uint8_t *h;          /* pinned: the chunk's input, then its output (or CTR keystream) */
    int h_numa;          /* h came from mmap + mbind + cudaHostRegister (else cudaHostAlloc) */
    uint4 *d_in, *d_out;
    acc_piece *h_pieces, *d_pieces;
    acc_cu_plan p;       /* the chunk in this buffer */
    size_t nout;         /* direct: pieces of p whose output was queued to land in the callers' out */
} acc_cu_buf;

/* How callers' buffers reach the GPU (ACCELAES_CUDA_DMA). */
enum { ACC_DMA_STAGED = 0, ACC_DMA_REGISTER = 1, ACC_DMA_CACHE = 2, ACC_DMA_PAGEABLE = 3 };

/* A page-rounded host range pinned for one request; job: the job that needs it (before merging). */
typedef struct acc_cu_range {
    uintptr_t lo, hi;
    uint32_t job;
    int writable;
} acc_cu_range;

/* The direct path's per-slot scratch (direct.cu), allocated with the slot: the hot path allocates
 * nothing. A group's jobs are split into copies that run direct and copies that run staged; their
 * done and iv are copied back. */
typedef struct acc_cu_dscratch {
    acc_gpu_job *djobs, *sjobs;
    uint32_t *didx, *sidx;       /* their indices in the group */
    uint8_t *kind;               /* per job of the group: staged, copies by DMA, or kernels on its memory */
    acc_cu_range *want, *pinned; /* 2 per job: ranges asked for, registrations made */
    size_t npinned;
    acc_rc_entry **held; /* 2 per job: cache entries held for the request */
    size_t nheld;
} acc_cu_dscratch;

typedef struct acc_cu_slot {
    pthread_mutex_t lock;            /* first: run() on one slot is serial even if callers collide */
    int made;                        /* the slot's streams and buffers exist (made on its first run) */
    acc_cu_buf buf[ACC_CU_MAXBUF];
    uint32_t *h_keys, *d_keys;       /* pinned / device: ACC_CU_MAXJOBS * ACC_CU_RK_STRIDE words */
    uint32_t *d_chain;               /* device: 4 words per job */
    uint8_t (*jctr)[16];             /* host, per job: next counter / CBC-dec IV to stage */
    acc_cu_plan spare;               /* the next chunk, planned while its buffer still holds the last */
    int staging;                     /* the pinned staging buffers were allocated (on first staged use) */
    uint32_t *h_landed;              /* pinned, per buffer: the direct chunk's output has landed (1) */
    acc_cu_dscratch ds;
} acc_cu_slot;

typedef struct acc_cu_state {
    pid_t pid;            /* process that initialised (0: never); a different getpid() = forked child */
    int ready;
    int broken;           /* a sticky CUDA error: the context is unusable for the process */
    char why[256];        /* reason for !ready / broken */
    char name[64];        /* device name */
    int dev, numa_node, sms;
    int nslots, nbuf;
    size_t chunk;         /* bytes per staging buffer */
    int occ[3];           /* blocks per SM per kernel */
    int ctr_ks;           /* CTR: GPU makes the keystream, CPU XORs (else stage in and out) */
    int adapt;            /* cut groups of a few chunks into smaller ones */
    int split;            /* ... into this many (ACCELAES_CUDA_SPLIT) */
    long fail_after;      /* test hook: fail after this many chunks in a run (-1: off) */
    int host_threads;     /* threads on one chunk's host work, the caller included (1: caller alone) */
    unsigned spin_us;     /* an idle helper polls this long before it sleeps */
    size_t nt_min;        /* groups of at least this many bytes copy with non-temporal stores (0: never) */
    int dma;              /* ACC_DMA_*: how callers' buffers reach the device (ACCELAES_CUDA_DMA) */
    int pageable;         /* the device reaches pageable memory: 0 no, 1 yes (HMM), 2 via host page tables */
    int reg_ro;           /* cudaHostRegisterReadOnly is supported (read-only inputs can be pinned) */
    size_t page;          /* host page size */
    size_t direct_min;    /* jobs shorter than this go staged (ACCELAES_CUDA_DIRECT_MIN_KB) */
    acc_rc *rc;           /* cache mode: the registration cache, NULL where it could not start */
    int rc_tried;
    int team_ready;       /* the team was started (or tried) in this process */
    acc_ht team;
    acc_core_tables host_tables;
    acc_core_tables *d_tables;
    uint32_t *d_one; /* device: the word 1, copied into a chunk's landed marker */
    acc_cu_slot slot[ACC_CU_MAXSLOTS];
} acc_cu_state;

extern acc_cu_state acc_cu;

/* Record an error for last_error() (thread-local) and return -1. */
int acc_cu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* e != cudaSuccess: record "what: CUDA's text" and return -1; else 0. */
int acc_cu_check(cudaError_t e, const char *what);
/* After a failed run: if the context is poisoned (sticky error), mark the plugin broken. */
void acc_cu_after_error(acc_cu_slot *sl);

/* The process's host team, started on first use; NULL where the caller works alone. */
acc_ht *acc_cu_team(void);

/* slots.cu: the staging buffers of a slot, allocated on its first staged chunk (pinned memory is spent only
 * where the staged path runs). 0 or -1 (error recorded). */
int acc_cu_staging(acc_cu_slot *sl);
/* Cache mode: the process's registration cache, started on first use; NULL: register per request. */
acc_rc *acc_cu_regcache(void);
/* Pin / unpin a host range (page aligned) for DMA; writable: the device writes it. */
int acc_cu_host_register(void *base, size_t len, int writable);
void acc_cu_host_unregister(void *base);

/* pipeline.cu */
int acc_cu_run(int slot, acc_gpu_job *jobs, size_t njobs);
/* Jobs through the staging buffers; chunks_left: the fail-after hook's budget (-1: none). */
int acc_cu_staged_group(acc_cu_slot *sl, acc_gpu_job *jobs, size_t n, long *chunks_left);
/* Expand and upload n jobs' key schedules (slot's key area, job order) and seed sl->jctr from their IVs. */
int acc_cu_upload_keys(acc_cu_slot *sl, const acc_gpu_job *jobs, size_t n);
void acc_cu_wipe_keys(acc_cu_slot *sl, size_t n);
/* Bytes per chunk for a group of total bytes (small groups cut into ACCELAES_CUDA_SPLIT chunks). */
size_t acc_cu_group_chunk(size_t total);
int acc_cu_fail_after_hit(void);

/* slots.cu: the slot's streams and buffers, made on its first run (sl->lock held): a process that uses one slot
 * holds one slot's device memory, not every slot's. 0, or -1 with the error recorded. */
int acc_cu_slot_make(acc_cu_slot *sl);
/* slots.cu: stop the team, undo every registration, wipe and free every slot and the tables (no run
 * in progress; init_lock held). */
void acc_cu_release_all(void);

/* Wait, sleeping, for everything queued so far on bf's stream; CUDA's error if any. */
cudaError_t acc_cu_sync(acc_cu_buf *bf);

/* pipeline.cu: the piece descriptors of the chunk planned in bf->p (staged: its staging buffer, or NULL:
 * the jobs' own memory); returns whether a CBC-encrypt piece chains from the previous chunk. */
int acc_cu_describe(acc_cu_slot *sl, const acc_gpu_job *jobs, acc_cu_buf *bf, const uint8_t *staged, uint32_t first[3]);

/* pipeline.cu: the chunk's kernels on bf's stream (a's buffers, keys and tables set by the caller). */
int acc_cu_kernels(acc_kargs *a, acc_cu_buf *bf, const uint32_t first[3]);

/* direct.cu: one group of at most ACC_CU_MAXJOBS jobs, direct where it can, staged otherwise. */
int acc_cu_group(acc_cu_slot *sl, acc_gpu_job *jobs, size_t n, long *chunks_left);

#endif
