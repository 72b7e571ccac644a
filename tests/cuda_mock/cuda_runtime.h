/* tests/cuda_mock/cuda_runtime.h: the slice of the CUDA runtime API that accel/cuda/runtime.cu and
 * pipeline.cu use, for building the plugin with g++ against a CPU emulation (mock_cuda.cc), so its
 * pipeline is tested where no GPU is. Only what the plugin needs; semantics in mock_cuda.cc. */
#ifndef ACCELAES_MOCK_CUDA_RUNTIME_H
#define ACCELAES_MOCK_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotPermitted = 800,
    cudaErrorNotSupported = 801
} cudaError_t;
enum cudaDeviceAttr {
    cudaDevAttrPageableMemoryAccess = 88,
    cudaDevAttrPageableMemoryAccessUsesHostPageTables = 100,
    cudaDevAttrHostRegisterReadOnlySupported = 113
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
typedef struct mock_stream *cudaStream_t;
typedef struct mock_event *cudaEvent_t;
typedef struct uint4 { unsigned int x, y, z, w; } uint4;

typedef struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount;
    int pciDomainID, pciBusID, pciDeviceID;
} cudaDeviceProp;

#define cudaHostAllocDefault 0u
#define cudaHostRegisterDefault 0u
#define cudaHostRegisterReadOnly 8u
#define cudaEventBlockingSync 1u
#define cudaDeviceScheduleBlockingSync 4u
#define cudaStreamNonBlocking 1u
#define cudaEventDisableTiming 2u

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaSetDeviceFlags(unsigned flags);
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t len);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t len, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostRegister(void *p, size_t len, unsigned flags);
cudaError_t cudaHostUnregister(void *p);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t len, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len, enum cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *p, int v, size_t len, cudaStream_t st);
cudaError_t cudaMemset(void *p, int v, size_t len);

#endif
