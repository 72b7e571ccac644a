/* accel/cuda/kernels.cu: the AES kernels. Block-parallel ECB/CTR/CBC-decrypt over many jobs per
 * launch, and CBC-encrypt one thread per stream; round code from aes_core.h (also tested on the CPU). */
#include "accel/cuda/kernels.h"
#include "accel/gpu_plugin.h"

/* Copy te0 (or td0 and the inverse S-box) into shared memory, replicated once per lane so that
 * every lookup of lane L hits bank L (see acc_tw in aes_core.h for why). A block fills 32 KiB
 * (40 KiB for decryption) once and then loops over many AES blocks (grid-stride), so the fill is
 * paid a few hundred times per launch, not per AES block. */
__device__ __forceinline__ void fill_words(uint32_t *dst, const uint32_t *src)
{
    for (unsigned i = threadIdx.x; i < 256 * 32; i += blockDim.x)
        dst[i] = src[i >> 5];
}

__device__ __forceinline__ void fill_bytes(uint8_t *dst, const uint8_t *src)
{
    for (unsigned i = threadIdx.x; i < 256 * 32; i += blockDim.x)
        dst[acc_tb_index(i >> 5, 5, i & 31)] = src[i >> 5];
}

/* The piece holding global block g: try the last one first (grid-stride steps usually stay
 * inside a big piece), else binary search over the ascending `first` offsets. */
__device__ __forceinline__ uint32_t find_piece(const acc_piece *p, uint32_t n, uint32_t g, uint32_t hint)
{
    if (hint < n && g >= p[hint].first && g - p[hint].first < p[hint].nblk)
        return hint;
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (p[mid].first <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ void ld4(uint32_t w[4], const uint4 *src)
{
    uint4 v = *src;
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
}

__device__ __forceinline__ void st4(uint4 *dst, const uint32_t w[4])
{
    *dst = make_uint4(w[0], w[1], w[2], w[3]);
}

/* ECB-encrypt and CTR: everything that runs the forward cipher block by block. */
__global__ void __launch_bounds__(ACC_CU_THREADS) k_fwd(acc_kargs a)
{
    __shared__ uint32_t s_te[256 * 32];
    fill_words(s_te, a.tables->te0);
    __syncthreads();
    const unsigned lane = threadIdx.x & 31;
    uint32_t hint = 0;
    for (uint32_t g = blockIdx.x * blockDim.x + threadIdx.x; g < a.nblocks; g += gridDim.x * blockDim.x) {
        hint = find_piece(a.pieces, a.npieces, g, hint);
        const acc_piece *pc = &a.pieces[hint];
        const uint32_t b = g - pc->first, at = pc->off + b;
        const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
        uint32_t w[4], o[4];
        if (pc->op == ACC_GPU_CTR) {
            uint64_t hi = (uint64_t)ACC_BSWAP(pc->iv[0]) << 32 | ACC_BSWAP(pc->iv[1]);
            uint64_t lo = (uint64_t)ACC_BSWAP(pc->iv[2]) << 32 | ACC_BSWAP(pc->iv[3]);
            if (a.ks_only) {   /* two calls, not one with a maybe-NULL pointer: keeps w in registers */
                acc_core_ctr_step(s_te, 5, lane, rk, pc->rounds, hi, lo, b, NULL, o);
            } else {
                ld4(w, a.in + at);
                acc_core_ctr_step(s_te, 5, lane, rk, pc->rounds, hi, lo, b, w, o);
            }
        } else {
            uint32_t s[4];
            ld4(w, a.in + at);
            acc_core_load(s, w);
            acc_core_enc(s_te, 5, lane, rk, pc->rounds, s);
            for (int i = 0; i < 4; i++)
                o[i] = ACC_BSWAP(s[i]);
        }
        st4(a.out + at, o);
    }
}

/* ECB-decrypt and CBC-decrypt. CBC reads the previous ciphertext block from the input buffer,
 * which no thread writes (out is a separate buffer), so blocks are independent. */
__global__ void __launch_bounds__(ACC_CU_THREADS) k_inv(acc_kargs a)
{
    __shared__ uint32_t s_td[256 * 32];
    __shared__ uint8_t s_isb[256 * 32];
    fill_words(s_td, a.tables->td0);
    fill_bytes(s_isb, a.tables->isbox);
    __syncthreads();
    const unsigned lane = threadIdx.x & 31;
    uint32_t hint = 0;
    for (uint32_t g = blockIdx.x * blockDim.x + threadIdx.x; g < a.nblocks; g += gridDim.x * blockDim.x) {
        hint = find_piece(a.pieces, a.npieces, g, hint);
        const acc_piece *pc = &a.pieces[hint];
        const uint32_t b = g - pc->first, at = pc->off + b;
        const uint32_t *dk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE + 60;
        uint32_t w[4], o[4];
        ld4(w, a.in + at);
        if (pc->op == ACC_GPU_CBC_DEC) {
            uint32_t prev[4];
            if (b == 0)
                for (int i = 0; i < 4; i++)
                    prev[i] = pc->iv[i];
            else
                ld4(prev, a.in + at - 1);
            acc_core_cbc_dec_step(s_td, s_isb, 5, lane, dk, pc->rounds, w, prev, o);
        } else {
            uint32_t s[4];
            acc_core_load(s, w);
            acc_core_dec(s_td, s_isb, 5, lane, dk, pc->rounds, s);
            for (int i = 0; i < 4; i++)
                o[i] = ACC_BSWAP(s[i]);
        }
        st4(a.out + at, o);
    }
}

/* CBC-encrypt is serial within a stream, so the parallelism is across streams: thread t runs
 * piece t start to end. A piece continuing a job of the previous chunk starts from the chaining
 * value that chunk's launch left in a.chain (the runtime orders the two launches). */
__global__ void __launch_bounds__(ACC_CU_THREADS) k_cbcenc(acc_kargs a)
{
    __shared__ uint32_t s_te[256 * 32];
    fill_words(s_te, a.tables->te0);
    __syncthreads();
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= a.npieces)
        return;
    const acc_piece *pc = &a.pieces[t];
    const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
    uint32_t *cv = a.chain + 4 * (size_t)pc->job;
    uint32_t chain[4];
    if (pc->flags & ACC_PIECE_CHAIN)
        for (int i = 0; i < 4; i++)
            chain[i] = cv[i];
    else
        acc_core_load(chain, pc->iv);
    acc_core_cbc_enc_run(s_te, 5, threadIdx.x & 31, rk, pc->rounds, (const uint32_t *)(a.in + pc->off),
                         (uint32_t *)(a.out + pc->off), pc->nblk, chain);
    for (int i = 0; i < 4; i++)
        cv[i] = chain[i];
}

int acc_cu_occupancy(int which)
{
    int n = 0;
    const void *k = which == ACC_K_FWD ? (const void *)k_fwd : which == ACC_K_INV ? (const void *)k_inv
                                                                                  : (const void *)k_cbcenc;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, ACC_CU_THREADS, 0) != cudaSuccess)
        return 0;
    return n;
}

cudaError_t acc_cu_launch_fwd(const acc_kargs *a, int grid, cudaStream_t st)
{
    k_fwd<<<grid, ACC_CU_THREADS, 0, st>>>(*a);
    return cudaGetLastError();
}

cudaError_t acc_cu_launch_inv(const acc_kargs *a, int grid, cudaStream_t st)
{
    k_inv<<<grid, ACC_CU_THREADS, 0, st>>>(*a);
    return cudaGetLastError();
}

cudaError_t acc_cu_launch_cbcenc(const acc_kargs *a, cudaStream_t st)
{
    unsigned grid = (a->npieces + ACC_CU_THREADS - 1) / ACC_CU_THREADS;
    k_cbcenc<<<grid, ACC_CU_THREADS, 0, st>>>(*a);
    return cudaGetLastError();
}
