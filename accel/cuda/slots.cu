/* accel/cuda/slots.cu: what each slot holds, made on its first run and wiped and freed at shutdown:
 * device buffers, streams and events, pinned piece lists, host scratch, and the pinned NUMA-local
 * staging pool (allocated only where the staged path runs). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "accel/cuda/runtime.h"

/* Pinned host memory on the GPU's node: mmap, prefer the node (mbind, no libnuma needed), touch
 * so the pages are placed now, then pin. Without a known node: cudaHostAlloc. */
static int pinned_alloc(uint8_t **p, int *numa, size_t len, int node)
{
    *numa = 0;
    if (node >= 0 && node < 64) {
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            unsigned long mask = 1UL << node;
            const int mpol_preferred = 1;
            (void)syscall(SYS_mbind, m, len, mpol_preferred, &mask, 64UL, 0U);   /* best effort */
            memset(m, 0, len);
            if (cudaHostRegister(m, len, cudaHostRegisterDefault) == cudaSuccess) {
                *p = (uint8_t *)m;
                *numa = 1;
                return 0;
            }
            cudaGetLastError();
            munmap(m, len);
        }
    }
    return acc_cu_check(cudaHostAlloc((void **)p, len, cudaHostAllocDefault), "cudaHostAlloc");
}

static void pinned_free(uint8_t *p, int numa, size_t len)
{
    if (!p)
        return;
    if (numa) {
        cudaHostUnregister(p);
        munmap(p, len);
    } else {
        cudaFreeHost(p);
    }
}

/* Zero a device buffer before it is freed: it held plaintext, ciphertext or round keys, and freed
 * device memory goes to the next allocation of any process on the GPU as it is. Every device buffer
 * goes through here (the tables and piece lists too, which are not secret), so that the CPU emulation
 * of the tests can check that none is freed unwiped. Best effort (after a CUDA error there may be no
 * context left to do it with). */
static void device_wipe(void *d, size_t len)
{
    if (d != NULL && cudaMemset(d, 0, len) != cudaSuccess)
        cudaGetLastError();
}

static void free_scratch(acc_cu_dscratch *ds)
{
    free(ds->djobs);
    free(ds->sjobs);
    free(ds->didx);
    free(ds->sidx);
    free(ds->kind);
    free(ds->want);
    free(ds->pinned);
    free(ds->held);
}

/* Wipe and free one slot's buffers (its streams idle), and mark it unmade, ready to be made again. */
static void release_slot(acc_cu_slot *sl)
{
    free_scratch(&sl->ds);
    for (int b = 0; b < ACC_CU_MAXBUF; b++) {
        acc_cu_buf *bf = &sl->buf[b];
        if (bf->h)
            explicit_bzero(bf->h, acc_cu.chunk);   /* the last chunks' plaintext and output */
        device_wipe(bf->d_in, acc_cu.chunk);
        device_wipe(bf->d_out, acc_cu.chunk);
        pinned_free(bf->h, bf->h_numa, acc_cu.chunk);
        cudaFree(bf->d_in);
        cudaFree(bf->d_out);
        cudaFreeHost(bf->h_pieces);
        device_wipe(bf->d_pieces, (size_t)ACC_CU_MAXJOBS * sizeof(acc_piece));
        cudaFree(bf->d_pieces);
        free(bf->p.wb);
        if (bf->kdone)
            cudaEventDestroy(bf->kdone);
        if (bf->idle)
            cudaEventDestroy(bf->idle);
        if (bf->done)
            cudaEventDestroy(bf->done);
        if (bf->st)
            cudaStreamDestroy(bf->st);
    }
    if (sl->h_keys)
        explicit_bzero(sl->h_keys, (size_t)ACC_CU_MAXJOBS * ACC_CU_RK_STRIDE * 4);
    device_wipe(sl->d_keys, (size_t)ACC_CU_MAXJOBS * ACC_CU_RK_STRIDE * 4);
    device_wipe(sl->d_chain, (size_t)ACC_CU_MAXJOBS * 16);
    cudaFreeHost(sl->h_keys);
    cudaFreeHost(sl->h_landed);
    cudaFree(sl->d_keys);
    cudaFree(sl->d_chain);
    free(sl->jctr);
    free(sl->spare.wb);
    /* everything after the lock, which stays as it is (it may be held: a slot whose making failed) */
    memset((char *)sl + offsetof(acc_cu_slot, made), 0, sizeof(*sl) - offsetof(acc_cu_slot, made));
}

void acc_cu_release_all(void)
{
    if (acc_cu.team_ready)   /* helpers touch callers' buffers only inside a run: none is running */
        acc_ht_stop(&acc_cu.team);
    for (int s = 0; s < ACC_CU_MAXSLOTS; s++)
        for (int b = 0; b < ACC_CU_MAXBUF; b++)
            if (acc_cu.slot[s].buf[b].st)
                acc_cu_sync(&acc_cu.slot[s].buf[b]);
    if (acc_cu.rc)   /* no run is in progress, so no entry is held: every registration is undone */
        acc_rc_destroy(acc_cu.rc);
    acc_cu.rc = NULL;
    for (int s = 0; s < ACC_CU_MAXSLOTS; s++)
        release_slot(&acc_cu.slot[s]);
    device_wipe(acc_cu.d_tables, sizeof(acc_core_tables));
    cudaFree(acc_cu.d_tables);
    device_wipe(acc_cu.d_one, 4);
    cudaFree(acc_cu.d_one);
    cudaGetLastError();
}

static int alloc_scratch(acc_cu_dscratch *ds)
{
    const size_t n = ACC_CU_MAXJOBS;
    ds->djobs = (acc_gpu_job *)calloc(n, sizeof(acc_gpu_job));
    ds->sjobs = (acc_gpu_job *)calloc(n, sizeof(acc_gpu_job));
    ds->didx = (uint32_t *)calloc(n, sizeof(uint32_t));
    ds->sidx = (uint32_t *)calloc(n, sizeof(uint32_t));
    ds->kind = (uint8_t *)calloc(n, 1);
    ds->want = (acc_cu_range *)calloc(2 * n, sizeof(acc_cu_range));
    ds->pinned = (acc_cu_range *)calloc(2 * n, sizeof(acc_cu_range));
    ds->held = (acc_rc_entry **)calloc(2 * n, sizeof(acc_rc_entry *));
    if (!ds->djobs || !ds->sjobs || !ds->didx || !ds->sidx || !ds->kind || !ds->want || !ds->pinned || !ds->held)
        return acc_cu_fail("out of host memory");
    return 0;
}

/* Device buffers and pinned piece lists per slot; the pinned staging buffers come later (acc_cu_staging). */
static int alloc_slot(acc_cu_slot *sl)
{
    size_t kbytes = (size_t)ACC_CU_MAXJOBS * ACC_CU_RK_STRIDE * 4;
    if (acc_cu_check(cudaHostAlloc((void **)&sl->h_keys, kbytes, cudaHostAllocDefault), "cudaHostAlloc(keys)")
        || acc_cu_check(cudaMalloc((void **)&sl->d_keys, kbytes), "cudaMalloc(keys)")
        || acc_cu_check(cudaMalloc((void **)&sl->d_chain, (size_t)ACC_CU_MAXJOBS * 16), "cudaMalloc(chain)")
        || acc_cu_check(cudaHostAlloc((void **)&sl->h_landed, ACC_CU_MAXBUF * 4, cudaHostAllocDefault), "cudaHostAlloc"))
        return -1;
    sl->jctr = (uint8_t(*)[16])calloc(ACC_CU_MAXJOBS, 16);
    sl->spare.wb = (acc_cu_wb *)calloc(ACC_CU_MAXJOBS, sizeof(acc_cu_wb));
    if (!sl->jctr || !sl->spare.wb || alloc_scratch(&sl->ds))
        return acc_cu_fail("out of host memory");
    for (int b = 0; b < acc_cu.nbuf; b++) {
        acc_cu_buf *bf = &sl->buf[b];
        size_t pbytes = (size_t)ACC_CU_MAXJOBS * sizeof(acc_piece);
        if (acc_cu_check(cudaStreamCreateWithFlags(&bf->st, cudaStreamNonBlocking), "cudaStreamCreate")
            || acc_cu_check(cudaEventCreateWithFlags(&bf->kdone, cudaEventDisableTiming), "cudaEventCreate")
            || acc_cu_check(cudaEventCreateWithFlags(&bf->idle, cudaEventBlockingSync | cudaEventDisableTiming),
                            "cudaEventCreate")
            || acc_cu_check(cudaEventCreateWithFlags(&bf->done, cudaEventBlockingSync | cudaEventDisableTiming),
                            "cudaEventCreate")
            || acc_cu_check(cudaMalloc((void **)&bf->d_in, acc_cu.chunk), "cudaMalloc(in)")
            || acc_cu_check(cudaMalloc((void **)&bf->d_out, acc_cu.chunk), "cudaMalloc(out)")
            || acc_cu_check(cudaHostAlloc((void **)&bf->h_pieces, pbytes, cudaHostAllocDefault), "cudaHostAlloc(pieces)")
            || acc_cu_check(cudaMalloc((void **)&bf->d_pieces, pbytes), "cudaMalloc(pieces)"))
            return -1;
        bf->p.wb = (acc_cu_wb *)calloc(ACC_CU_MAXJOBS, sizeof(acc_cu_wb));
        if (!bf->p.wb)
            return acc_cu_fail("out of host memory");
    }
    return 0;
}

int acc_cu_staging(acc_cu_slot *sl)
{
    if (sl->staging)
        return 0;
    for (int b = 0; b < acc_cu.nbuf; b++)
        if (!sl->buf[b].h && pinned_alloc(&sl->buf[b].h, &sl->buf[b].h_numa, acc_cu.chunk, acc_cu.numa_node))
            return -1;
    sl->staging = 1;
    return 0;
}

int acc_cu_slot_make(acc_cu_slot *sl)
{
    if (sl->made)
        return 0;
    if (alloc_slot(sl) == 0) {
        sl->made = 1;
        return 0;
    }
    release_slot(sl);   /* what was made of it; the next run tries again */
    cudaGetLastError();
    return -1;
}
