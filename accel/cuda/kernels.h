/* accel/cuda/kernels.h: what the host runtime (runtime.cu, pipeline.cu) hands the AES kernels
 * (kernels.cu): a list of pieces, one per job slice in a chunk, and the per-job key schedules. */
#ifndef ACCELAES_CUDA_KERNELS_H
#define ACCELAES_CUDA_KERNELS_H

#include <stdint.h>
#include <cuda_runtime.h>
#include "accel/cuda/aes_core.h"

#define ACC_CU_RK_STRIDE 120      /* words per job: 60 encryption + 60 decryption round keys */
#define ACC_CU_THREADS   256      /* threads per block of the block-parallel kernels */
#define ACC_PIECE_CHAIN  1u       /* CBC-enc: continue from the job's chaining value in device memory */

/* One job's slice inside one chunk. The kernels map a global block index to a piece by binary
 * search over `first`, so one launch serves any mix of jobs, keys and key sizes. */
typedef struct acc_piece {
    uint32_t first;   /* index of the piece's first block in its kernel's work list */
    uint32_t nblk;    /* blocks in the piece */
    uint32_t off;     /* block offset of the piece in the chunk's staging buffers */
    uint32_t job;     /* index into the round-key and chaining arrays */
    uint8_t op;       /* enum acc_gpu_op */
    uint8_t rounds;   /* 10, 12, 14 */
    uint8_t flags;    /* ACC_PIECE_CHAIN */
    uint8_t pad;
    uint32_t iv[4];   /* raw bytes: CTR counter at the piece's first block; CBC IV / previous ciphertext */
} acc_piece;

typedef struct acc_kargs {
    const acc_piece *pieces;        /* device: this kernel's pieces */
    uint32_t npieces;
    uint32_t nblocks;               /* blocks over all its pieces */
    const uint4 *in;                /* device staging input (unused for CTR when ks_only) */
    uint4 *out;                     /* device staging output (never the same buffer as in) */
    const uint32_t *rk;             /* device: ACC_CU_RK_STRIDE words per job */
    uint32_t *chain;                /* device: 4 words per job (CBC-enc chaining values) */
    const acc_core_tables *tables;  /* device copy of the tables */
    int ks_only;                    /* CTR pieces write the keystream; the CPU XORs it */
} acc_kargs;

/* Blocks per SM each kernel reaches (from the occupancy calculator); 0 on error. */
int acc_cu_occupancy(int which);
enum { ACC_K_FWD = 0, ACC_K_INV = 1, ACC_K_CBCENC = 2 };

/* Launch on stream st with `grid` blocks. Return cudaSuccess or the launch error. */
cudaError_t acc_cu_launch_fwd(const acc_kargs *a, int grid, cudaStream_t st);    /* ECB-enc, CTR */
cudaError_t acc_cu_launch_inv(const acc_kargs *a, int grid, cudaStream_t st);    /* ECB-dec, CBC-dec */
cudaError_t acc_cu_launch_cbcenc(const acc_kargs *a, cudaStream_t st);           /* one thread per piece */

#endif
