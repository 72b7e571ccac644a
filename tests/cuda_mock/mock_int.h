/* tests/cuda_mock/mock_int.h: what the emulation's kernels (mock_kernels.cc) use of its runtime
 * (mock_cuda.cc): queueing on a stream, the fault injection, and the reachability check. */
#ifndef ACCELAES_MOCK_INT_H
#define ACCELAES_MOCK_INT_H

#include <functional>
#include <stddef.h>
#include "cuda_runtime.h"

/* Queue f on st (run at once in eager mode); the sticky error once a kernel failed. */
cudaError_t mock_enqueue(cudaStream_t st, std::function<void()> f);
/* A broken rule of the CUDA API: say which and abort. */
[[noreturn]] void mock_die(const char *why);
/* A kernel reads or writes [p, p + len): device memory, or host memory where pageable access is offered
 * (else MOCK-HOSTPTR). */
void mock_kernel_mem(const void *p, size_t len);
/* A kernel is being launched: whether it is the one MOCK_CUDA_FAIL_KERNEL names. */
bool mock_kernel_fails(void);
/* The kernel is about to run: false if it fails (which makes the context's error sticky). */
bool mock_kernel_runs(bool fails);

#endif
