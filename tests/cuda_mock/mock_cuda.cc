/* tests/cuda_mock/mock_cuda.cc: a CPU emulation of the CUDA runtime calls the plugin uses (its three AES
 * kernels are in mock_kernels.cc), so tests/unit/test_cuda_host_pipeline.py runs the plugin's real host code
 * (runtime.cu, pipeline.cu, direct.cu, regcache.cu, host_team.cu) and its ABI tests without a GPU.
 *
 * MOCK_CUDA_MODE=lazy (default): work queued on a stream runs only when the host waits for it (event
 * or stream synchronize, or another stream waiting on an event): the latest a GPU could run it, so a
 * host that touches a staging buffer before waiting for its copies gets stale or clobbered data.
 * MOCK_CUDA_MODE=eager: work runs when queued: the earliest, so a host that fills a buffer after
 * queueing the copy that reads it sends stale data. MOCK_CUDA_MODE=reverse: as lazy, but a wait first
 * runs every stream's queued work, the stream queued on last first (a GPU may run independent streams
 * in any order; only stream order and event waits bind it), so output that lands out of order shows.
 * MOCK_CUDA_FAIL_KERNEL=N: the Nth kernel launched fails, when it runs, with a sticky error, as a
 * faulting kernel does on a GPU: nothing runs after it and every later call returns the error.
 *
 * DMA is checked as a GPU would need it: an async copy whose host side is neither cudaHostAlloc'd nor
 * inside a live cudaHostRegister range, when queued or when it runs, prints MOCK-UNPINNED (a real
 * driver would silently stage it: the direct path did not happen); a copy into a range registered
 * read-only prints MOCK-RO-WRITE; a kernel on host memory where the device offers no pageable access
 * prints MOCK-HOSTPTR. cudaHostRegister fails, as CUDA does, on memory already registered or pinned,
 * and on memory that is not writable unless cudaHostRegisterReadOnly is given. mock_cuda_stats()
 * (exported by tests/cuda_mock/mock.map) reports registrations, bytes per direction and kind of
 * host memory, and waits that would spin. MOCK_CUDA_PAGEABLE=hmm|ats offers pageable memory access
 * (ats: through the host's page tables); MOCK_CUDA_RO_REGISTER=0 refuses cudaHostRegisterReadOnly. */
#include <algorithm>
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <set>
#include <vector>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "accel/cuda/kernels.h"
#include "accel/gpu_plugin.h"
#include "tests/cuda_mock/mock_int.h"

struct mock_stream {
    std::deque<std::function<void()>> q;
    uint64_t ran = 0;   /* operations executed so far; the queue holds the ones after */
    uint64_t last = 0;  /* when work was last queued on it (g_seq) */
};

struct mock_event {
    mock_stream *s = nullptr;
    uint64_t upto = 0;  /* the stream's operation count when recorded */
    unsigned flags = 0;
};

static std::recursive_mutex g_mu;
static std::set<mock_stream *> g_streams;
static int g_eager = -1;
static uint64_t g_seq;
static cudaError_t g_sticky = cudaSuccess; /* a kernel failed: the context is unusable */
static long g_kernels_run;

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
        if (g_sticky == cudaSuccess) /* after a sticky error nothing queued runs */
            f();
    }
}

/* reverse mode: before the host waits for anything, the GPU runs all it holds, latest stream first. */
static void before_wait(void)
{
    const char *m = getenv("MOCK_CUDA_MODE");
    if (!m || strcmp(m, "reverse"))
        return;
    std::vector<mock_stream *> v(g_streams.begin(), g_streams.end());
    std::sort(v.begin(), v.end(), [](mock_stream *a, mock_stream *b) { return a->last > b->last; });
    for (mock_stream *s : v)
        flush(s, UINT64_MAX);
}

/* A kernel being launched: whether it is the one to fail (MOCK_CUDA_FAIL_KERNEL). */
bool mock_kernel_fails(void)
{
    const char *n = getenv("MOCK_CUDA_FAIL_KERNEL");
    return n && ++g_kernels_run == atol(n);
}

/* A kernel about to run: false if it fails, which poisons the context. */
bool mock_kernel_runs(bool fails)
{
    if (fails)
        g_sticky = cudaErrorLaunchFailure;
    return !fails;
}

cudaError_t mock_enqueue(cudaStream_t st, std::function<void()> f)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (!st)
        return cudaErrorInvalidValue;
    if (g_sticky)
        return g_sticky;
    st->q.push_back(std::move(f));
    st->last = ++g_seq;
    if (eager())
        flush(st, UINT64_MAX);
    return cudaSuccess;
}

void mock_die(const char *why)
{
    fprintf(stderr, "mock CUDA: %s\n", why);
    abort();
}

static int env_choice(const char *name, const char *a, const char *b) /* 0 unset/other, 1 a, 2 b */
{
    const char *v = getenv(name);
    return !v ? 0 : !strcmp(v, a) ? 1 : !strcmp(v, b) ? 2 : 0;
}

/* ---- what the device may reach: device memory, pinned and registered host memory ---- */

typedef std::map<uintptr_t, size_t> ranges; /* start -> length, disjoint */
static ranges g_device;                     /* cudaMalloc */
static ranges g_hostalloc;                  /* cudaHostAlloc */
static ranges g_regs;                       /* live cudaHostRegister */
static std::map<uintptr_t, unsigned> g_regflags;
static unsigned g_dev_flags;
enum { H_PINNED = 0, H_REGISTERED = 1, H_UNPINNED = 2 };
static struct {
    unsigned long long regs_total, unpinned, ro_writes, hostptr, spin_waits, kern_host;
    unsigned long long h2d[3], d2h[3];    /* bytes by H_* */
    unsigned long long d2h_pinned_blocks; /* d2h[H_PINNED] in copies of whole AES blocks: data, not a flag word */
    unsigned long long dev_live, dev_peak; /* device memory held now / at most (GPU memory per process) */
} g_st;

/* The range of m holding all of [a, a + len), or m.end(). */
static ranges::const_iterator holder(const ranges &m, uintptr_t a, size_t len)
{
    auto it = m.upper_bound(a);
    if (it == m.begin())
        return m.end();
    --it;
    return a + len <= it->first + it->second ? it : m.end();
}

static bool overlaps(const ranges &m, uintptr_t a, size_t len)
{
    auto it = m.lower_bound(a + len); /* the last range starting before the end is the only candidate */
    if (it == m.begin())
        return false;
    --it;
    return it->first + it->second > a;
}

/* Whether [a, a + len) is mapped and readable throughout (from /proc/self/maps); *w: writable too. */
static bool mapped(uintptr_t a, size_t len, bool *w)
{
    FILE *f = fopen("/proc/self/maps", "r");
    uintptr_t at = a;
    char line[512];
    *w = true;
    if (!f)
        return false;
    while (at < a + len && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at)
            continue;
        if (lo > at || perms[0] != 'r')
            break;
        *w = *w && perms[1] == 'w';
        at = hi;
    }
    fclose(f);
    return at >= a + len;
}

/* What backs a host range an async copy touches; writes: the device writes it. */
static int host_kind(const void *p, size_t len, bool writes)
{
    uintptr_t a = (uintptr_t)p;
    if (holder(g_hostalloc, a, len) != g_hostalloc.end())
        return H_PINNED;
    auto it = holder(g_regs, a, len);
    if (it == g_regs.end())
        return H_UNPINNED;
    if (writes && (g_regflags[it->first] & cudaHostRegisterReadOnly)) {
        g_st.ro_writes++;
        printf("MOCK-RO-WRITE: a copy writes %zu bytes into a range registered read-only\n", len);
    }
    return H_REGISTERED;
}

static void unpinned(const void *p, size_t len, const char *when)
{
    g_st.unpinned++;
    if (g_st.unpinned <= 5)
        printf("MOCK-UNPINNED: async copy of %zu bytes at %p %s: host memory neither pinned nor registered\n", len, p,
               when);
}

/* A kernel reads or writes [p, p + len): device memory, or host memory where the device offers
 * pageable access (else a GPU would fault). */
void mock_kernel_mem(const void *p, size_t len)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (holder(g_device, (uintptr_t)p, len) != g_device.end())
        return;
    g_st.kern_host += len;
    if (!env_choice("MOCK_CUDA_PAGEABLE", "hmm", "ats") && g_st.hostptr++ < 5)
        printf("MOCK-HOSTPTR: a kernel touches %zu bytes of host memory at %p without pageable access\n", len, p);
}

extern "C" __attribute__((visibility("default"))) int mock_cuda_stats(char *buf, size_t len)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    size_t live = 0;
    for (auto &r : g_regs)
        live += r.second;
    return snprintf(buf, len,
                    "live_regs=%zu live_reg_bytes=%zu regs_total=%llu unpinned=%llu ro_writes=%llu hostptr=%llu "
                    "spin_waits=%llu kern_host=%llu h2d_pinned=%llu h2d_reg=%llu h2d_unpinned=%llu "
                    "d2h_pinned=%llu d2h_pinned_blocks=%llu d2h_reg=%llu d2h_unpinned=%llu dev_flags=%u dev_peak=%llu",
                    g_regs.size(), live, g_st.regs_total, g_st.unpinned, g_st.ro_writes, g_st.hostptr, g_st.spin_waits,
                    g_st.kern_host, g_st.h2d[0], g_st.h2d[1], g_st.h2d[2], g_st.d2h[0], g_st.d2h_pinned_blocks,
                    g_st.d2h[1], g_st.d2h[2], g_dev_flags, g_st.dev_peak);
}

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaSetDeviceFlags(unsigned flags)
{
    g_dev_flags = flags;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int dev)
{
    int pageable = env_choice("MOCK_CUDA_PAGEABLE", "hmm", "ats");
    if (dev)
        return cudaErrorInvalidValue;
    switch (attr) {
    case cudaDevAttrPageableMemoryAccess:
        *v = pageable != 0;
        return cudaSuccess;
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables:
        *v = pageable == 2;
        return cudaSuccess;
    case cudaDevAttrHostRegisterReadOnlySupported:
        *v = env_choice("MOCK_CUDA_RO_REGISTER", "0", "") != 1;
        return cudaSuccess;
    }
    return cudaErrorInvalidValue;
}
cudaError_t cudaGetLastError(void)
{
    return g_sticky;
}
const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaErrorLaunchFailure ? "mock CUDA: kernel failed (sticky)" : e ? "mock CUDA error" : "no error";
}

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

/* A stream or device wait spins unless the device was set to block (cudaDeviceScheduleBlockingSync);
 * after a sticky error it returns at once. */
static void stream_wait(void)
{
    if (!g_sticky && !(g_dev_flags & cudaDeviceScheduleBlockingSync))
        g_st.spin_waits++;
}

/* Everything queued on every stream, as the legacy default stream orders it. */
static cudaError_t flush_all(void)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    before_wait();
    for (mock_stream *s : g_streams)
        flush(s, UINT64_MAX);
    return g_sticky;
}

cudaError_t cudaDeviceSynchronize(void)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    stream_wait();
    return flush_all();
}

/* cudaFree reports a device buffer that still holds a nonzero byte (the plugin wipes every device
 * buffer before it frees it), as "MOCK-UNWIPED" on stdout. */
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
    g_device[(uintptr_t)*p] = len;
    g_st.dev_live += len;
    g_st.dev_peak = g_st.dev_live > g_st.dev_peak ? g_st.dev_live : g_st.dev_peak;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    auto it = g_device.find((uintptr_t)p);
    if (it != g_device.end()) {
        size_t dirty = 0;
        for (size_t i = 0; i < it->second; i++)
            dirty += ((const unsigned char *)p)[i] != 0;
        if (dirty && !g_sticky) /* a dead context cannot be wiped (its memory dies with it) */
            printf("MOCK-UNWIPED: a device buffer of %zu bytes freed with %zu nonzero bytes\n", it->second, dirty);
        g_st.dev_live -= it->second;
        g_device.erase(it);
    }
    free(p);
    return cudaSuccess;
}

/* Whole pages of their own, as the driver maps them: never a page shared with the callers' heap. */
cudaError_t cudaHostAlloc(void **p, size_t len, unsigned)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    *p = aligned_alloc(pg, (len + pg - 1) / pg * pg);
    if (!*p)
        return cudaErrorMemoryAllocation;
    std::lock_guard<std::recursive_mutex> l(g_mu);
    g_hostalloc[(uintptr_t)*p] = len;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    g_hostalloc.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}

/* Stricter than CUDA in one way: the range must be page aligned (the plugin rounds its ranges). */
cudaError_t cudaHostRegister(void *p, size_t len, unsigned flags)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    uintptr_t a = (uintptr_t)p, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    bool w;
    if (!len || a % pg || len % pg)
        return cudaErrorInvalidValue;
    if (overlaps(g_hostalloc, a, len) || overlaps(g_regs, a, len))
        return cudaErrorHostMemoryAlreadyRegistered;
    if (!mapped(a, len, &w))
        return cudaErrorInvalidValue;
    if ((flags & cudaHostRegisterReadOnly) && env_choice("MOCK_CUDA_RO_REGISTER", "0", "") == 1)
        return cudaErrorNotSupported;
    if (!(flags & cudaHostRegisterReadOnly) && !w)
        return cudaErrorNotPermitted; /* CUDA pins for device writes: read-only pages need the flag */
    g_regs[a] = len;
    g_regflags[a] = flags;
    g_st.regs_total++;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (!g_regs.erase((uintptr_t)p))
        return cudaErrorHostMemoryNotRegistered;
    g_regflags.erase((uintptr_t)p);
    return cudaSuccess;
}

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
    stream_wait();
    before_wait();
    flush(st, UINT64_MAX);
    return g_sticky;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    *ev = new mock_event;
    (*ev)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) { delete ev; return cudaSuccess; }

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (g_sticky)
        return g_sticky;
    ev->s = st;
    ev->upto = st->ran + st->q.size();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    std::lock_guard<std::recursive_mutex> l(g_mu);
    if (!(ev->flags & cudaEventBlockingSync))
        g_st.spin_waits++;
    before_wait();
    if (ev->s)
        flush(ev->s, ev->upto);
    return g_sticky;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned)
{
    mock_stream *s = ev->s;   /* the record as of now, as CUDA does */
    uint64_t upto = ev->upto;
    return mock_enqueue(st, [s, upto] { if (s) flush(s, upto); });
}

/* The synchronous copy and memset wait for the work queued before them, and are not counted as spinning
 * waits: the plugin calls them only to start (the tables) and to shut down (the wipes), never per request. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t len, enum cudaMemcpyKind)
{
    if (flush_all() != cudaSuccess)
        return g_sticky;
    memcpy(dst, src, len);
    return cudaSuccess;
}

/* Host memory is checked when the copy is queued and again when it runs: a range unregistered
 * while a copy on it was still queued is caught (lazy mode runs copies at the host's wait). */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len, enum cudaMemcpyKind kind, cudaStream_t st)
{
    bool d2h = kind == cudaMemcpyDeviceToHost;
    const void *host = d2h ? dst : src;
    {
        std::lock_guard<std::recursive_mutex> l(g_mu);
        if (len && host_kind(host, len, d2h) == H_UNPINNED)
            unpinned(host, len, "when queued");
    }
    return mock_enqueue(st, [dst, src, len, d2h, host] {
        int k = len ? host_kind(host, len, d2h) : H_PINNED;
        if (k == H_UNPINNED)
            unpinned(host, len, "when run");
        (d2h ? g_st.d2h : g_st.h2d)[k] += len;
        if (d2h && k == H_PINNED && len % 16 == 0)
            g_st.d2h_pinned_blocks += len;
        memcpy(dst, src, len);
    });
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t len, cudaStream_t st)
{
    return mock_enqueue(st, [p, v, len] { memset(p, v, len); });
}

cudaError_t cudaMemset(void *p, int v, size_t len)
{
    if (flush_all() != cudaSuccess) /* the legacy default stream: after the work before it */
        return g_sticky;
    memset(p, v, len);
    return cudaSuccess;
}

