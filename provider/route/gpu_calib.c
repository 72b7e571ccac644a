/* provider/route/gpu_calib.c: gpu_min on auto: from which request size the GPU pays, judged by host
 * CPU-seconds per byte first and wall time second, measured against the CPU engine. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include "provider/route/gpu.h"

/* Why these two bounds (gpu.h):
 * - CPU: offload is for freeing the CPU (issue #16: 0.24-0.43 ns of host CPU per offloaded byte
 *   against 0.14 for the CPU engine made the GPU cost CPU instead of freeing it). The GPU must
 *   at least double the bytes per CPU-second: a smaller saving does not pay for its start-up,
 *   device memory and the context, and is within what a process CPU clock on a busy host can
 *   tell apart (an in-process plugin, which runs the same engine, must never look cheaper).
 * - Wall: only a guard. The sizes calibrated start at 1 MiB, where a real GPU is faster than a
 *   core in wall time too (H100: tens of microseconds of latency, then 45 GB/s and more, against
 *   0.14 ns/B, ~150 us per MiB, for one core), so the bound rarely decides for a GPU; it keeps out
 *   a device so slow that a request would wait for it far longer than its CPU saving is worth.
 *   8x is how long a request takes on a core shared by eight busy threads, which is how a loaded
 *   host (the host offload is for) runs it anyway. (A device without DMA such as the tests'
 *   device process, which copies through process_vm_readv, is 4-5x slower than a VAES core on
 *   the development machine and is chosen; a bound of 2 would refuse it although it frees the
 *   caller's core.) A tie on the wall bound counts as within it; a tie on the CPU share goes
 *   to the CPU engine. */
int acc_gpu_calib_wins(const acc_gpu_sample *s)
{
    if (s == NULL || !(s->cpu_cpu > 0) || !(s->cpu_wall > 0) || !(s->gpu_cpu >= 0) || !(s->gpu_wall >= 0)
        || !isfinite(s->gpu_cpu) || !isfinite(s->gpu_wall))
        return 0; /* no CPU figure to compare with, or nonsense: the GPU is not chosen */
    return s->gpu_cpu < ACC_GPU_CPU_SHARE * s->cpu_cpu && s->gpu_wall <= ACC_GPU_WALL_BOUND * s->cpu_wall;
}

size_t acc_gpu_calib_pick(const acc_gpu_sample *s, size_t n)
{
    for (size_t i = 0; s != NULL && i < n; i++)
        if (acc_gpu_calib_wins(&s[i]))
            return s[i].bytes;
    return SIZE_MAX;
}

double acc_gpu_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wall and process CPU seconds of one side (GPU: run; CPU: the engine); the best of each is
 * kept across repetitions. 0 on success. */
typedef struct side_t {
    double wall, cpu;
} side_t;

static void keep_best(side_t *best, double w0, double c0)
{
    double w = acc_gpu_clock_s(CLOCK_MONOTONIC) - w0, c = acc_gpu_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    best->wall = w < best->wall ? w : best->wall;
    best->cpu = c < best->cpu ? c : best->cpu;
}

static int measure(acc_gpu_calib_run_fn *run, void *arg, const acc_engine *eng, acc_aes_key *ks, uint8_t *buf,
                   acc_gpu_sample *out, int reps, const uint8_t key[16])
{
    side_t g = { 1e9, 1e9 }, c = { 1e9, 1e9 };
    for (int rep = 0; rep < reps; rep++) {
        uint8_t ctr[16] = { 0 };
        acc_gpu_job job = { acc_gpu_abi_op(ACC_OP_CTR), 128, key, { 0 }, buf, buf, out->bytes, 0 };
        double w0 = acc_gpu_clock_s(CLOCK_MONOTONIC), c0 = acc_gpu_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (run(arg, &job) != 0 || job.done != out->bytes)
            return -1;
        keep_best(&g, w0, c0);
        w0 = acc_gpu_clock_s(CLOCK_MONOTONIC);
        c0 = acc_gpu_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (!eng->ctr(ks, buf, buf, out->bytes / 16, ctr))
            return -1;
        keep_best(&c, w0, c0);
    }
    out->gpu_wall = g.wall;
    out->gpu_cpu = g.cpu;
    out->cpu_wall = c.wall;
    out->cpu_cpu = c.cpu;
    return 0;
}

size_t acc_gpu_calibrate(acc_gpu_calib_run_fn *run, void *arg, int verbose)
{
    static const size_t sizes[] = { 1u << 20, 4u << 20, 16u << 20 };
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]) };
    const acc_engine *eng = acc_engine_default();
    uint8_t key[16] = { 0 };
    uint8_t *buf = malloc(sizes[NSIZES - 1]);
    acc_aes_key *ks = OPENSSL_zalloc(sizeof(*ks));
    acc_gpu_sample s[NSIZES];
    size_t found = SIZE_MAX, n = 0;
    if (!buf || !ks || !eng || !eng->set_key(ks, key, sizeof(key), 1))
        goto done;
    memset(buf, 0x5a, sizes[NSIZES - 1]);
    for (; n < NSIZES; n++) {
        s[n].bytes = sizes[n];
        /* Best of three (a busy host's noise); the first size once more: the first GPU run pays
         * for the plugin's warm-up. */
        if (measure(run, arg, eng, ks, buf, &s[n], n == 0 ? 4 : 3, key) != 0)
            goto done; /* no GPU figure: the GPU is not chosen */
        if (verbose)   /* a trace for benchmarks; off by default */
            fprintf(stderr,
                    "accelaes-gpu: calibration CTR %zu KiB: GPU %.3f ms wall %.3f ms CPU, "
                    "CPU engine %.3f ms wall %.3f ms CPU: %s\n",
                    sizes[n] >> 10, s[n].gpu_wall * 1e3, s[n].gpu_cpu * 1e3, s[n].cpu_wall * 1e3, s[n].cpu_cpu * 1e3,
                    acc_gpu_calib_wins(&s[n]) ? "GPU" : "CPU");
        if (acc_gpu_calib_wins(&s[n])) {
            n++;
            break;
        }
    }
    found = acc_gpu_calib_pick(s, n);
done:
    if (ks && eng)
        eng->free_key(ks);
    OPENSSL_free(ks);
    free(buf);
    return found;
}
