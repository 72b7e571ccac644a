/* tests/cuda_mock/mock_cuda.cc: a CPU emulation of the CUDA runtime calls and the three AES kernels
 * the plugin uses (kernels from aes_core.h, as the GPU runs them), so tests/test_cuda_mock.py runs the
 * plugin's real host pipeline (runtime.cu, pipeline.cu, host_team.cu) and its ABI tests without a GPU.
 *
 * MOCK_CUDA_MODE=lazy (default): work queued on a stream runs only when the host waits for it (event
 * or stream synchronize, or another stream waiting on an event): the latest a GPU could run it, so a
 * host that touches a staging buffer before waiting for its copies gets stale or clobbered data.
 * MOCK_CUDA_MODE=eager: work runs when queued: the earliest, so a host that fills a buffer after
 * queueing the copy that reads it sends stale data. */
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <set>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "accel/cuda/kernels.h"
#include "accel/gpu_plugin.h"

struct mock_stream {
    std::deque<std::function<void()>> q;
    uint64_t ran = 0;   /* operations executed so far; the queue holds the ones after */
};

struct mock_event {
    mock_stream *s = nullptr;
    uint64_t upto = 0;  /* the stream's operation count when recorded */
};

static std::recursive_mutex g_mu;
static std::set<mock_stream *> g_streams;
static int g_eager = -1;

static bool eager(void)
{
    if (g_eager < 0) {
        const char *m = getenv("MOCK_CUDA_MODE");
        g_eager = m && !strcmp(m, "eager");
    }
    return g_eager;
}

/* Run st's queued operations until it has run upto of them. An operation may flush another
 * stream (a wait on an event): the mutex is recursive. */
static void flush(mock_stream *st, uint64_t upto)
{
    while (st->ran < upto && !st->q.empty()) {
        std::function<void()> f = std::move(st->q.front());
        st->q.pop_front();
        st->ran++;
        f();
    }
}

static cudaError_t enqueue(cudaStream_t st, std::function<void()> f)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (!st)
        return cudaErrorInvalidValue;
    st->q.push_back(std::move(f));
    if (eager())
        flush(st, UINT64_MAX);
    return cudaSuccess;
}

static void die(const char *why)
{
    fprintf(stderr, "mock CUDA: %s\n", why);
    abort();
}

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "mock CUDA error" : "no error"; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    if (dev)
        return cudaErrorInvalidValue;
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "mock CUDA device (CPU emulation)");
    p->multiProcessorCount = 2;
    p->pciDomainID = 0xfffe;   /* no such PCI function: the NUMA node reads as unknown */
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    for (mock_stream *s : g_streams)
        flush(s, UINT64_MAX);
    return cudaSuccess;
}

/* Device allocations and their sizes: cudaFree reports one that still holds a nonzero byte (the
 * plugin wipes every device buffer before it frees it), as "MOCK-UNWIPED" on stdout. */
static std::map<void *, size_t> g_device;

static void *host_alloc(size_t len)
{
    return aligned_alloc(256, (len + 255) & ~(size_t)255);
}

cudaError_t cudaMalloc(void **p, size_t len)
{
    *p = host_alloc(len);
    if (!*p)
        return cudaErrorMemoryAllocation;
    std::lock_guard<std::recursive_mutex> l(g_mu);
    g_device[*p] = len;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    auto it = g_device.find(p);
    if (it != g_device.end()) {
        size_t dirty = 0;
        for (size_t i = 0; i < it->second; i++)
            dirty += ((const unsigned char *)p)[i] != 0;
        if (dirty)
            printf("MOCK-UNWIPED: a device buffer of %zu bytes freed with %zu nonzero bytes\n", it->second, dirty);
        g_device.erase(it);
    }
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t len, unsigned)
{
    *p = host_alloc(len);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaHostRegister(void *, size_t, unsigned) { return cudaSuccess; }
cudaError_t cudaHostUnregister(void *) { return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    *st = new mock_stream;
    g_streams.insert(*st);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    flush(st, UINT64_MAX);
    g_streams.erase(st);
    delete st;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    flush(st, UINT64_MAX);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned) { *ev = new mock_event; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t ev) { delete ev; return cudaSuccess; }

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    ev->s = st;
    ev->upto = st->ran + st->q.size();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (ev->s)
        flush(ev->s, ev->upto);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned)
{
    mock_stream *s = ev->s;   /* the record as of now, as CUDA does */
    uint64_t upto = ev->upto;
    return enqueue(st, [s, upto] { if (s) flush(s, upto); });
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t len, enum cudaMemcpyKind)
{
    cudaDeviceSynchronize();
    memcpy(dst, src, len);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len, enum cudaMemcpyKind, cudaStream_t st)
{
    return enqueue(st, [dst, src, len] { memcpy(dst, src, len); });
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t len, cudaStream_t st)
{
    return enqueue(st, [p, v, len] { memset(p, v, len); });
}

cudaError_t cudaMemset(void *p, int v, size_t len)
{
    cudaDeviceSynchronize();   /* the legacy default stream: after the work queued before it */
    memset(p, v, len);
    return cudaSuccess;
}

/* ---- the kernels, block by block on the CPU (plain tables: sh = 0, lane = 0) ---- */

/* What every launch must satisfy: pieces in running order, inside the staging buffer's blocks. */
static void check_pieces(const acc_kargs &a)
{
    uint32_t at = 0;
    for (uint32_t i = 0; i < a.npieces; i++) {
        if (a.pieces[i].first != at)
            die("piece list not in running block order");
        at += a.pieces[i].nblk;
    }
    if (at != a.nblocks)
        die("nblocks is not the sum of the pieces");
}

static void store(uint4 *dst, const uint32_t w[4]) { memcpy(dst, w, 16); }

static void run_fwd(const acc_kargs a)
{
    check_pieces(a);
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
        uint64_t hi = (uint64_t)ACC_BSWAP(pc->iv[0]) << 32 | ACC_BSWAP(pc->iv[1]);
        uint64_t lo = (uint64_t)ACC_BSWAP(pc->iv[2]) << 32 | ACC_BSWAP(pc->iv[3]);
        for (uint32_t b = 0; b < pc->nblk; b++) {
            uint32_t w[4], o[4], s[4];
            if (pc->op != ACC_GPU_CTR || !a.ks_only)
                memcpy(w, a.in + pc->off + b, 16);
            if (pc->op == ACC_GPU_CTR) {
                acc_core_ctr_step(a.tables->te0, 0, 0, rk, pc->rounds, hi, lo, b, a.ks_only ? NULL : w, o);
            } else {
                acc_core_load(s, w);
                acc_core_enc(a.tables->te0, 0, 0, rk, pc->rounds, s);
                for (int k = 0; k < 4; k++)
                    o[k] = ACC_BSWAP(s[k]);
            }
            store(a.out + pc->off + b, o);
        }
    }
}

static void run_inv(const acc_kargs a)
{
    check_pieces(a);
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *dk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE + 60;
        for (uint32_t b = 0; b < pc->nblk; b++) {
            uint32_t w[4], o[4], s[4], prev[4];
            memcpy(w, a.in + pc->off + b, 16);
            if (pc->op == ACC_GPU_CBC_DEC) {
                memcpy(prev, b ? (const uint32_t *)(a.in + pc->off + b - 1) : pc->iv, 16);
                acc_core_cbc_dec_step(a.tables->td0, a.tables->isbox, 0, 0, dk, pc->rounds, w, prev, o);
            } else {
                acc_core_load(s, w);
                acc_core_dec(a.tables->td0, a.tables->isbox, 0, 0, dk, pc->rounds, s);
                for (int k = 0; k < 4; k++)
                    o[k] = ACC_BSWAP(s[k]);
            }
            store(a.out + pc->off + b, o);
        }
    }
}

static void run_cbcenc(const acc_kargs a)
{
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
        uint32_t *cv = a.chain + 4 * (size_t)pc->job, chain[4];
        if (pc->flags & ACC_PIECE_CHAIN)
            memcpy(chain, cv, 16);
        else
            acc_core_load(chain, pc->iv);
        acc_core_cbc_enc_run(a.tables->te0, 0, 0, rk, pc->rounds, (const uint32_t *)(a.in + pc->off),
                             (uint32_t *)(a.out + pc->off), pc->nblk, chain);
        memcpy(cv, chain, 16);
    }
}

int acc_cu_occupancy(int) { return 4; }

cudaError_t acc_cu_launch_fwd(const acc_kargs *a, int grid, cudaStream_t st)
{
    if (grid <= 0)
        die("empty grid");
    acc_kargs k = *a;
    return enqueue(st, [k] { run_fwd(k); });
}

cudaError_t acc_cu_launch_inv(const acc_kargs *a, int grid, cudaStream_t st)
{
    if (grid <= 0)
        die("empty grid");
    acc_kargs k = *a;
    return enqueue(st, [k] { run_inv(k); });
}

cudaError_t acc_cu_launch_cbcenc(const acc_kargs *a, cudaStream_t st)
{
    acc_kargs k = *a;
    return enqueue(st, [k] { run_cbcenc(k); });
}
