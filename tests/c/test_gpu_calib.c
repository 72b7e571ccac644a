/* tests/c/test_gpu_calib.c: the calibration's decision (acc_gpu_calib_wins / _pick, provider/
 * gpu_calib.c) on made-up figures: the GPU is chosen by host CPU-seconds per byte within a wall
 * bound, never by wall time alone; ties, zero and nonsense figures; the smallest winning size. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include "provider/route/gpu.h"

#include "tests/c/check.h"

/* bytes, GPU wall, GPU CPU, CPU-engine wall, CPU-engine CPU (seconds) */
static acc_gpu_sample S(size_t bytes, double gw, double gc, double cw, double cc)
{
    acc_gpu_sample s = { bytes, gw, gc, cw, cc };
    return s;
}

static void test_wins(void)
{
    /* A GPU that is faster in wall time but costs as much CPU (the in-process fake, or a
     * host-side copy pass): wall time alone would pick it; CPU-seconds do not. */
    acc_gpu_sample fast_but_costly = S(1 << 20, 0.5e-3, 1.0e-3, 1.0e-3, 1.0e-3);
    CHECK(!acc_gpu_calib_wins(&fast_but_costly), "faster in wall time but no CPU saved");
    /* Slower in wall time within the bound, almost no CPU: a DMA device that frees the core. */
    acc_gpu_sample frees_cpu = S(1 << 20, 3.0e-3, 0.02e-3, 1.0e-3, 1.0e-3);
    CHECK(acc_gpu_calib_wins(&frees_cpu), "frees the CPU within the wall bound");
    /* Frees the CPU but is far slower than the bound allows. */
    acc_gpu_sample too_slow = S(1 << 20, (ACC_GPU_WALL_BOUND + 0.5) * 1e-3, 0, 1.0e-3, 1.0e-3);
    CHECK(!acc_gpu_calib_wins(&too_slow), "beyond the wall bound");
    /* Ties: exactly on the wall bound is within it; exactly the CPU share goes to the CPU. */
    acc_gpu_sample wall_tie = S(1 << 20, ACC_GPU_WALL_BOUND * 1e-3, 0.1e-3, 1e-3, 1e-3);
    CHECK(acc_gpu_calib_wins(&wall_tie), "on the wall bound");
    acc_gpu_sample cpu_tie = S(1 << 20, 0.1e-3, ACC_GPU_CPU_SHARE * 1e-3, 1e-3, 1e-3);
    CHECK(!acc_gpu_calib_wins(&cpu_tie), "on the CPU share: the CPU engine keeps it");
    acc_gpu_sample just_under = S(1 << 20, 0.1e-3, ACC_GPU_CPU_SHARE * 0.99e-3, 1e-3, 1e-3);
    CHECK(acc_gpu_calib_wins(&just_under), "just under the CPU share");
    acc_gpu_sample equal = S(1 << 20, 1e-3, 1e-3, 1e-3, 1e-3);
    CHECK(!acc_gpu_calib_wins(&equal), "identical figures: the CPU engine");
    /* Zero CPU time: a GPU that costs no measurable CPU wins on that count; a CPU engine that
     * measured none gives nothing to compare with, so the GPU is not chosen. */
    acc_gpu_sample gpu_zero = S(1 << 20, 1e-3, 0, 1e-3, 1e-3);
    CHECK(acc_gpu_calib_wins(&gpu_zero), "GPU CPU time zero");
    acc_gpu_sample cpu_zero = S(1 << 20, 1e-3, 0, 1e-3, 0);
    CHECK(!acc_gpu_calib_wins(&cpu_zero), "CPU engine's CPU time zero");
    acc_gpu_sample both_zero = S(1 << 20, 0, 0, 0, 0);
    CHECK(!acc_gpu_calib_wins(&both_zero), "all zero");
    acc_gpu_sample neg = S(1 << 20, -1, -1, 1e-3, 1e-3), nan_ = S(1 << 20, NAN, 0, 1e-3, 1e-3);
    CHECK(!acc_gpu_calib_wins(&neg) && !acc_gpu_calib_wins(&nan_), "negative or NaN figures");
    acc_gpu_sample inf_ = S(1 << 20, 1e-3, INFINITY, 1e-3, 1e-3);
    CHECK(!acc_gpu_calib_wins(&inf_) && !acc_gpu_calib_wins(NULL), "infinite CPU, NULL");
}

static void test_pick(void)
{
    acc_gpu_sample s[3] = {
        S(1 << 20, 1e-3, 0.1e-3, 0.1e-3, 1e-3),   /* saves CPU, far too slow: no */
        S(4 << 20, 1e-3, 0.1e-3, 0.4e-3, 4e-3),   /* first win */
        S(16 << 20, 2e-3, 0.1e-3, 1.6e-3, 16e-3), /* also wins: the smallest counts */
    };
    CHECK(acc_gpu_calib_pick(s, 3) == (4u << 20), "picked %zu", acc_gpu_calib_pick(s, 3));
    CHECK(acc_gpu_calib_pick(s, 1) == SIZE_MAX, "none of the first: never");
    CHECK(acc_gpu_calib_pick(NULL, 3) == SIZE_MAX && acc_gpu_calib_pick(s, 0) == SIZE_MAX, "nothing to pick");
    s[1].gpu_cpu = s[1].cpu_cpu; /* no CPU saved at 4 MiB any more */
    CHECK(acc_gpu_calib_pick(s, 3) == (16u << 20), "picked %zu", acc_gpu_calib_pick(s, 3));
}

int main(void)
{
    test_wins();
    test_pick();
    return CHECK_SUMMARY();
}
