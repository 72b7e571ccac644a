/* provider/gpu.h: the provider's side of the GPU plugin: finding and loading it (dlopen), the
 * size from which the GPU pays (gpu_min, calibrated or set), and running a job on a GPU slot. */
#ifndef ACCELAES_PROVIDER_GPU_H
#define ACCELAES_PROVIDER_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"
#include "provider/settings.h"
#include "accel/gpu_plugin.h"

/* 1 if a GPU plugin is loaded and initialised in this process (lazy, once, redone after fork). */
int acc_gpu_ready(const acc_settings *s);

/* Offer len bytes of op (whole blocks; in == out legal) to the GPU: tried when the GPU pays for
 * that size now (gpu_min as set or calibrated; the plugin loads lazily). Returns the bytes done,
 * a multiple of 16, with iv advanced to match; the caller finishes [done, len) on the CPU. */
size_t acc_gpu_offload(const acc_settings *s, acc_op op, const uint8_t *key, size_t keylen, uint8_t iv[16],
                       const uint8_t *in, uint8_t *out, size_t len);

/* Runs job on a GPU slot taken from the scheduler (acc_sched_acquire(ACC_UNIT_GPU, ...): waits in the FIFO),
 * counts job->done bytes as ACC_PATH_GPU and, if the GPU stopped early, one ACC_EV_GPU_FALLBACK event.
 * Returns job->done; the caller finishes [done, len) on the CPU from job->iv. */
size_t acc_gpu_run(const acc_settings *s, acc_gpu_job *job);

#endif
