/* accel/cuda/runtime.cu: the CUDA plugin's entry point and process state: lazy (per-process,
 * fork-aware) CUDA initialisation, the DMA mode, host registrations and their cache, the host team,
 * errors. Each slot's buffers, streams and staging pool: slots.cu. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "accel/cuda/runtime.h"

acc_cu_state acc_cu;
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char t_err[256];

int acc_cu_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_err, sizeof(t_err), fmt, ap);
    va_end(ap);
    return -1;
}

int acc_cu_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return acc_cu_fail("%s: %s", what, cudaGetErrorString(e));
}

/* Waits block in the kernel instead of spinning a core, through events made with cudaEventBlockingSync
 * (every wait of the plugin is on one): not through cudaSetDeviceFlags, which would change how the
 * program's own CUDA work waits too, since the runtime API shares the device's primary context with it.
 * After a sticky error the record fails and nothing more runs: the stream sync then returns at once. */
cudaError_t acc_cu_sync(acc_cu_buf *bf)
{
    cudaError_t e = cudaEventRecord(bf->idle, bf->st);
    return e == cudaSuccess ? cudaEventSynchronize(bf->idle) : cudaStreamSynchronize(bf->st);
}

void acc_cu_after_error(acc_cu_slot *sl)
{
    /* A sticky error (illegal address, launch failure, ...) poisons the context: every later
     * call fails too. Detect it once so later runs fail at once instead of trying again. */
    cudaGetLastError();
    cudaError_t e = sl->buf[0].st ? acc_cu_sync(&sl->buf[0]) : cudaSuccess;   /* the slot that failed */
    if (e != cudaSuccess) {
        acc_cu.broken = 1;
        snprintf(acc_cu.why, sizeof(acc_cu.why), "CUDA context unusable: %.200s", cudaGetErrorString(e));
    }
}

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *v = secure_getenv(name);   /* never the caller's in a setuid program */
    char *end;
    if (!v || !*v)
        return def;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return def;
    return x;
}

/* The NUMA node of the GPU's PCI function, from sysfs; -1 where unknown. */
static int gpu_numa_node(const cudaDeviceProp *p)
{
    char path[128];
    int node = -1;
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node",
             p->pciDomainID, p->pciBusID, p->pciDeviceID);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &node) != 1)
            node = -1;
        fclose(f);
    }
    return node < 0 ? -1 : node;
}

int acc_cu_host_register(void *base, size_t len, int writable)
{
    /* Input only: read-only where the device supports it, so that read-only memory can be pinned too. */
    unsigned flags = !writable && acc_cu.reg_ro ? cudaHostRegisterReadOnly : cudaHostRegisterDefault;
    cudaError_t e = cudaHostRegister(base, len, flags);
    if (e != cudaSuccess)
        cudaGetLastError();   /* not sticky: the range goes staged */
    return e == cudaSuccess ? 0 : -1;
}

void acc_cu_host_unregister(void *base)
{
    if (cudaHostUnregister(base) != cudaSuccess)
        cudaGetLastError();
}

/* The cache calls these from its own threads too: the device is per thread in the runtime API. */
static int rc_reg(void *, void *base, size_t len, int writable)
{
    cudaSetDevice(acc_cu.dev);
    return acc_cu_host_register(base, len, writable);
}

static void rc_unreg(void *, void *base, size_t)
{
    cudaSetDevice(acc_cu.dev);
    acc_cu_host_unregister(base);
}

acc_rc *acc_cu_regcache(void)
{
    if (!__atomic_load_n(&acc_cu.rc_tried, __ATOMIC_ACQUIRE)) {
        /* Started on first use, like the team: its monitor thread is the process's own (after any fork). */
        pthread_mutex_lock(&g_init_lock);
        if (!acc_cu.rc_tried) {
            char why[128];
            size_t mb = (size_t)env_long("ACCELAES_CUDA_REGCACHE_MB", 1024, 1, 1L << 20);
            acc_cu.rc = acc_rc_create(256, mb << 20, rc_reg, rc_unreg, NULL, why, sizeof(why));
            __atomic_store_n(&acc_cu.rc_tried, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_init_lock);
    }
    return acc_cu.rc;
}

/* ACCELAES_CUDA_DMA. auto, until measured on the H100: pageable where the device reads pageable
 * memory through the host's page tables (a coherent link: no pinning at all, no CPU cost per byte);
 * else registration per request. Not the cache by default, although a buffer used again then costs
 * no new pinning (cudaHostRegister costs ~0.04 ns/B, more than the whole CPU budget): its userfaultfd
 * watch splits the caller's mapping at the cached range, and the caller's own mremap of the whole
 * mapping then fails with EFAULT (glibc's realloc falls back to a copy; another program may not), a
 * difference the default provider never makes. Not pageable through HMM: there the device migrates
 * pages on fault, which moves every page twice and costs the CPU the faults. Staged is what cannot be
 * pinned. -1: unknown value. */
static int dma_mode(void)
{
    const char *v = secure_getenv("ACCELAES_CUDA_DMA");
    static const char *const names[] = { "staged", "register", "cache", "pageable" };
    if (!v || !*v || !strcmp(v, "auto"))
        return acc_cu.pageable == 2 ? ACC_DMA_PAGEABLE : ACC_DMA_REGISTER;
    for (int m = 0; m < 4; m++)
        if (!strcmp(v, names[m]))   /* pageable asked where not offered: register instead */
            return m == ACC_DMA_PAGEABLE && !acc_cu.pageable ? ACC_DMA_REGISTER : m;
    return -1;
}

static int device_attr(enum cudaDeviceAttr a)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, acc_cu.dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return v;
}

/* What the device offers for DMA on callers' memory, and the mode chosen from it. */
static int init_dma(void)
{
    acc_cu.page = (size_t)sysconf(_SC_PAGESIZE);
    acc_cu.pageable = device_attr(cudaDevAttrPageableMemoryAccess)
                        ? 1 + (device_attr(cudaDevAttrPageableMemoryAccessUsesHostPageTables) != 0)
                        : 0;
    acc_cu.reg_ro = device_attr(cudaDevAttrHostRegisterReadOnlySupported) != 0;
    acc_cu.dma = dma_mode();
    if (acc_cu.dma < 0)
        return acc_cu_fail("ACCELAES_CUDA_DMA: unknown value (staged, register, cache, pageable or auto)");
    /* Below 64 KiB the per-piece copy calls and the pinning cost about what a host copy does (not
     * measured yet on the H100). */
    acc_cu.direct_min = (size_t)env_long("ACCELAES_CUDA_DIRECT_MIN_KB", 64, 0, 1L << 30) * 1024;
    if (acc_cu.direct_min < 16)
        acc_cu.direct_min = 16;
    return 0;
}

/* The CUDA runtime reports a machine with no NVIDIA driver at all as "CUDA driver version is
 * insufficient for CUDA runtime version", which reads as an old driver: say what is missing instead.
 * NULL where a driver is there (then the runtime's own words are the reason). */
static const char *driver_missing(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);   /* what the runtime itself loads */
    if (!h)
        return "no NVIDIA driver installed (libcuda.so.1 not found)";
    dlclose(h);
    if (access("/proc/driver/nvidia/version", F_OK) != 0)
        return "the NVIDIA driver library is installed but its kernel module is not loaded";
    return NULL;
}

static int init_device(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        const char *missing = driver_missing();
        if (missing)
            return acc_cu_fail("%s", missing);
        return acc_cu_fail("no usable CUDA driver or device (%s)", cudaGetErrorString(e));
    }
    acc_cu.dev = (int)env_long("ACCELAES_CUDA_DEVICE", 0, 0, 63);
    if (n <= 0 || acc_cu.dev >= n)
        return acc_cu_fail("no CUDA device %d (%d found)", acc_cu.dev, n);
    cudaDeviceProp p;
    if (acc_cu_check(cudaSetDevice(acc_cu.dev), "cudaSetDevice"))
        return -1;
    if (acc_cu_check(cudaGetDeviceProperties(&p, acc_cu.dev), "cudaGetDeviceProperties") || init_dma())
        return -1;
    acc_cu.sms = p.multiProcessorCount;
    acc_cu.numa_node = gpu_numa_node(&p);
    snprintf(acc_cu.name, sizeof(acc_cu.name), "%.63s", p.name);
    /* Slots are concurrent callers, each with its own host thread doing the copies, and the host
     * side is what limits a request, so more slots serve more callers (bench/results/cuda-design.md). */
    acc_cu.nslots = (int)env_long("ACCELAES_CUDA_SLOTS", 4, 1, ACC_CU_MAXSLOTS);
    acc_cu.nbuf = (int)env_long("ACCELAES_CUDA_STREAMS", 3, 2, ACC_CU_MAXBUF);
    /* 4 MiB chunks: big enough that launch and copy set-up are noise, small enough
     * that the first chunk's copy-in overlaps little work and the pool stays modest. */
    acc_cu.chunk = (size_t)env_long("ACCELAES_CUDA_CHUNK_KB", 4096, 64, 65536) * 1024;
    acc_cu.fail_after = env_long("ACCELAES_CUDA_FAIL_AFTER", -1, 0, 1L << 40);
    acc_cu.adapt = (int)env_long("ACCELAES_CUDA_ADAPT", 1, 0, 1);
    /* 3 chunks for a small group: more, smaller chunks cost more in per-chunk set-up and hand-offs
     * than they save in ring fill and drain (bench/results/cuda-design.md). */
    acc_cu.split = (int)env_long("ACCELAES_CUDA_SPLIT", 3, 1, 64);
    /* One thread's copies and XORs fall far short of a PCIe direction, so a chunk's host work is
     * split over a team. Half the online CPUs at most (8 by default), leaving the rest to the
     * application and the CPU pool; every helper costs CPU time (bench/results/cuda-design.md). */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long def_threads = ncpu / 2 < 8 ? ncpu / 2 : 8;
    acc_cu.host_threads = (int)env_long("ACCELAES_CUDA_HOST_THREADS", def_threads < 1 ? 1 : def_threads, 1,
                                        ACC_HT_MAXTHREADS);
    /* Idle helpers sleep at once (they polled 200 us before #16): the staged path is the fallback now,
     * and a polling helper burns a core the application could use (H100 run 4: 0.22 against 0.27 ns of
     * CPU per byte, for 0-18% of staged throughput, within that run's noise). */
    acc_cu.spin_us = (unsigned)env_long("ACCELAES_CUDA_HOST_SPIN_US", 0, 0, 100000);
    acc_cu.nt_min = (size_t)env_long("ACCELAES_CUDA_NT_KB", 4096, 0, 1L << 30) * 1024;
    const char *ctr = secure_getenv("ACCELAES_CUDA_CTR");
    acc_cu.ctr_ks = !(ctr && !strcmp(ctr, "full"));
    for (int k = 0; k < 3; k++)
        if ((acc_cu.occ[k] = acc_cu_occupancy(k)) <= 0)
            return acc_cu_fail("kernel occupancy query failed (no kernel image for this GPU?)");
    acc_core_tables_init(&acc_cu.host_tables);
    const uint32_t one = 1;
    if (acc_cu_check(cudaMalloc((void **)&acc_cu.d_tables, sizeof(acc_core_tables)), "cudaMalloc(tables)")
        || acc_cu_check(cudaMemcpy(acc_cu.d_tables, &acc_cu.host_tables, sizeof(acc_core_tables),
                                   cudaMemcpyHostToDevice), "cudaMemcpy(tables)")
        || acc_cu_check(cudaMalloc((void **)&acc_cu.d_one, 4), "cudaMalloc(one)")
        || acc_cu_check(cudaMemcpy(acc_cu.d_one, &one, 4, cudaMemcpyHostToDevice), "cudaMemcpy(one)"))
        return -1;
    return 0;
}

/* Forget everything without calling CUDA: used in a forked child, whose copy of the parent's
 * pointers and handles must never be used (or freed). */
static void forget_all(void)
{
    memset(&acc_cu, 0, sizeof(acc_cu));
    for (int s = 0; s < ACC_CU_MAXSLOTS; s++)
        pthread_mutex_init(&acc_cu.slot[s].lock, NULL);
}

acc_ht *acc_cu_team(void)
{
    if (acc_cu.host_threads < 2)
        return NULL;
    if (!__atomic_load_n(&acc_cu.team_ready, __ATOMIC_ACQUIRE)) {
        /* Started here, not at init: a process that only sends small requests never gets threads.
         * init already ran in this process (after any fork), so these threads are its own. */
        pthread_mutex_lock(&g_init_lock);
        if (!acc_cu.team_ready) {
            acc_ht_start(&acc_cu.team, acc_cu.host_threads, acc_cu.spin_us);
            __atomic_store_n(&acc_cu.team_ready, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_init_lock);
    }
    return acc_cu.team.nhelp ? &acc_cu.team : NULL;
}

static void fill_info(acc_gpu_info *info)
{
    if (!info)
        return;
    memcpy(info->name, acc_cu.name, sizeof(info->name));
    info->slots = acc_cu.nslots;
    info->numa_node = acc_cu.numa_node;
}

static int cu_init(acc_gpu_info *info, char *err, size_t errlen)
{
    pid_t me = getpid();
    int rc = 0;
    pthread_mutex_lock(&g_init_lock);
    if (acc_cu.pid != me) {
        /* First call, or a forked child: the parent's context is not ours to use or free. */
        int forked = acc_cu.pid != 0 && acc_cu.ready;
        forget_all();
        acc_cu.pid = me;
        if (forked) {
            /* CUDA does not support a child of a process that initialised it: its calls may fail
             * or hang. Refuse at once, without a CUDA call (the provider uses the CPU here). */
            snprintf(acc_cu.why, sizeof(acc_cu.why), "CUDA was initialised before fork(): not usable in this child");
        } else if (init_device() == 0) {
            acc_cu.ready = 1;
        } else {
            snprintf(acc_cu.why, sizeof(acc_cu.why), "%.250s", t_err);
            acc_cu_release_all();
            cudaGetLastError();
        }
    }
    if (acc_cu.ready && !acc_cu.broken)
        fill_info(info);
    else
        rc = -1;
    if (rc && err && errlen)
        snprintf(err, errlen, "%s", acc_cu.why);
    if (rc)
        snprintf(t_err, sizeof(t_err), "%s", acc_cu.why);
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

static int cu_run(int slot, acc_gpu_job *jobs, size_t njobs)
{
    if (!jobs && njobs)
        return acc_cu_fail("run: jobs is NULL");
    for (size_t i = 0; i < njobs; i++)
        jobs[i].done = 0;
    if (!acc_cu.ready || acc_cu.pid != getpid())
        return acc_cu_fail("run: CUDA not initialised in this process");
    if (acc_cu.broken)
        return acc_cu_fail("%s", acc_cu.why);
    if (slot < 0 || slot >= acc_cu.nslots)
        return acc_cu_fail("run: slot %d out of range (0..%d)", slot, acc_cu.nslots - 1);
    return acc_cu_run(slot, jobs, njobs);
}

static const char *cu_last_error(void)
{
    return t_err[0] ? t_err : acc_cu.why;
}

static void cu_shutdown(void)
{
    pthread_mutex_lock(&g_init_lock);
    if (acc_cu.ready && acc_cu.pid == getpid())
        acc_cu_release_all();
    forget_all();
    pthread_mutex_unlock(&g_init_lock);
}

static const acc_gpu_plugin g_plugin = {
    ACC_GPU_ABI_VERSION, "cuda", cu_init, cu_run, cu_last_error, cu_shutdown
};

extern "C" __attribute__((visibility("default"))) const acc_gpu_plugin *accelaes_gpu_plugin(void)
{
    return &g_plugin;
}
