/* provider/route/gpu.h: the provider's side of the GPU plugin: finding and loading it (dlopen), the
 * size from which the GPU pays (gpu_min, set, or calibrated by CPU-seconds: gpu_calib.c), and
 * running a request on a GPU slot while the caller works the request's tail if it must queue. */
#ifndef ACCELAES_PROVIDER_GPU_H
#define ACCELAES_PROVIDER_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "accel/engine.h"
#include "provider/base/settings.h"
#include "accel/gpu_plugin.h"

/* 1 if a GPU plugin is loaded and initialised in this process (lazy, once, redone after fork). */
int acc_gpu_ready(const acc_settings *s);

/* The caller's CPU engine, for the parts of a request the caller runs itself while it is queued
 * for a GPU unit: nblocks of the request's op from in to out, iv (CBC IV / CTR counter) advanced.
 * 1 done, 0 the engine failed (it raises nothing: the caller does). */
typedef int acc_gpu_cpu_fn(void *arg, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t iv[16]);
typedef struct acc_gpu_cpu {
    acc_gpu_cpu_fn *run;
    void *arg;
} acc_gpu_cpu;

/* acc_gpu_offload's answer when cpu->run failed: the caller raises the engine error. */
#define ACC_GPU_CPU_FAILED SIZE_MAX

/* Offer len bytes of op (whole blocks; in == out legal) to the GPU: tried when the GPU pays for
 * that size now (gpu_min as set or calibrated; the plugin loads lazily). With a GPU unit idle, the
 * GPU runs it and this returns the bytes done, a multiple of 16, with iv advanced to match; the
 * caller finishes [done, len) on the CPU. With every unit busy, the request queues in the FIFO
 * without blocking and runs slices from its end with cpu while it waits; the GPU then gets the
 * head that is left, or none once the head is too small to pay (the ticket is cancelled), and
 * everything is finished here: returns len with iv the one to continue with, or
 * ACC_GPU_CPU_FAILED. Bytes are counted: the GPU's as ACC_PATH_GPU, the caller's as inline, the
 * tail also as ACC_EV_GPU_TAIL_BYTES. */
size_t acc_gpu_offload(const acc_settings *s, acc_op op, const uint8_t *key, size_t keylen, uint8_t iv[16],
                       const uint8_t *in, uint8_t *out, size_t len, const acc_gpu_cpu *cpu);

/* ---- calibration (provider/route/gpu_calib.c) ---- */

/* One size measured both ways: seconds of wall time and of host CPU time (the process's, so the
 * plugin's own threads count) for the GPU run and for the CPU engine on the same bytes. */
typedef struct acc_gpu_sample {
    size_t bytes;
    double gpu_wall, gpu_cpu;
    double cpu_wall, cpu_cpu;
} acc_gpu_sample;

/* The GPU wins a size when it spends less than ACC_GPU_CPU_SHARE of the CPU engine's host CPU
 * time (more than twice its bytes per CPU-second) and at most ACC_GPU_WALL_BOUND times its wall
 * time (a guard only); gpu_calib.c says why these two figures. */
#define ACC_GPU_CPU_SHARE 0.5
#define ACC_GPU_WALL_BOUND 8.0
int acc_gpu_calib_wins(const acc_gpu_sample *s);

/* The smallest size of n samples (ascending sizes) that the GPU wins, SIZE_MAX if none. */
size_t acc_gpu_calib_pick(const acc_gpu_sample *s, size_t n);

/* Run one job on the GPU unit the calibration holds: 0 when all of it was done. */
typedef int acc_gpu_calib_run_fn(void *arg, acc_gpu_job *job);

/* Measure CTR at growing sizes with run and with the default CPU engine (a warm-up, then the
 * best of three each) and pick by acc_gpu_calib_pick; SIZE_MAX if the GPU never wins or a run
 * fails. verbose: one stderr line per size with both figures. */
size_t acc_gpu_calibrate(acc_gpu_calib_run_fn *run, void *arg, int verbose);
/* Seconds on clock id (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID for the host CPU). */
double acc_gpu_clock_s(clockid_t id);

#endif
