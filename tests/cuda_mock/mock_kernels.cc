/* tests/cuda_mock/mock_kernels.cc: the CPU emulation of the plugin's three AES kernels (the code of
 * accel/cuda/aes_core.h, as the GPU runs it, block by block with plain tables), queued on the mock's
 * streams (mock_cuda.cc), with the checks a launch must pass: pieces in running order, and memory the
 * device may reach (device memory, or host memory where pageable access is offered). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "accel/cuda/kernels.h"
#include "accel/gpu_plugin.h"
#include "tests/cuda_mock/mock_int.h"

/* ---- the kernels, block by block on the CPU (plain tables: sh = 0, lane = 0) ---- */

/* What every launch must satisfy: pieces in running order, inside the staging buffer's blocks. */
static void check_pieces(const acc_kargs &a)
{
    uint32_t at = 0;
    for (uint32_t i = 0; i < a.npieces; i++) {
        if (a.pieces[i].first != at)
            mock_die("piece list not in running block order");
        at += a.pieces[i].nblk;
    }
    if (at != a.nblocks)
        mock_die("nblocks is not the sum of the pieces");
}

static void store(uint4 *dst, const uint32_t w[4]) { memcpy(dst, w, 16); }

/* Every piece's input (not read by keystream-only CTR) and output: device memory, or pageable access. */
static void check_kernel_mem(const acc_kargs &a)
{
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        if (pc->op != ACC_GPU_CTR || !a.ks_only)
            mock_kernel_mem(a.in + pc->off, (size_t)pc->nblk * 16);
        mock_kernel_mem(a.out + pc->off, (size_t)pc->nblk * 16);
    }
}

static void run_fwd(const acc_kargs a)
{
    check_pieces(a);
    check_kernel_mem(a);
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
        uint64_t hi = (uint64_t)ACC_BSWAP(pc->iv[0]) << 32 | ACC_BSWAP(pc->iv[1]);
        uint64_t lo = (uint64_t)ACC_BSWAP(pc->iv[2]) << 32 | ACC_BSWAP(pc->iv[3]);
        for (uint32_t b = 0; b < pc->nblk; b++) {
            uint32_t w[4], o[4], s[4];
            if (pc->op != ACC_GPU_CTR || !a.ks_only)
                memcpy(w, a.in + pc->off + b, 16);
            if (pc->op == ACC_GPU_CTR) {
                acc_core_ctr_step(a.tables->te0, 0, 0, rk, pc->rounds, hi, lo, b, a.ks_only ? NULL : w, o);
            } else {
                acc_core_load(s, w);
                acc_core_enc(a.tables->te0, 0, 0, rk, pc->rounds, s);
                for (int k = 0; k < 4; k++)
                    o[k] = ACC_BSWAP(s[k]);
            }
            store(a.out + pc->off + b, o);
        }
    }
}

static void run_inv(const acc_kargs a)
{
    check_pieces(a);
    check_kernel_mem(a);
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *dk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE + 60;
        for (uint32_t b = 0; b < pc->nblk; b++) {
            uint32_t w[4], o[4], s[4], prev[4];
            memcpy(w, a.in + pc->off + b, 16);
            if (pc->op == ACC_GPU_CBC_DEC) {
                memcpy(prev, b ? (const uint32_t *)(a.in + pc->off + b - 1) : pc->iv, 16);
                acc_core_cbc_dec_step(a.tables->td0, a.tables->isbox, 0, 0, dk, pc->rounds, w, prev, o);
            } else {
                acc_core_load(s, w);
                acc_core_dec(a.tables->td0, a.tables->isbox, 0, 0, dk, pc->rounds, s);
                for (int k = 0; k < 4; k++)
                    o[k] = ACC_BSWAP(s[k]);
            }
            store(a.out + pc->off + b, o);
        }
    }
}

static void run_cbcenc(const acc_kargs a)
{
    check_kernel_mem(a);
    for (uint32_t i = 0; i < a.npieces; i++) {
        const acc_piece *pc = &a.pieces[i];
        const uint32_t *rk = a.rk + (size_t)pc->job * ACC_CU_RK_STRIDE;
        uint32_t *cv = a.chain + 4 * (size_t)pc->job, chain[4];
        if (pc->flags & ACC_PIECE_CHAIN)
            memcpy(chain, cv, 16);
        else
            acc_core_load(chain, pc->iv);
        acc_core_cbc_enc_run(a.tables->te0, 0, 0, rk, pc->rounds, (const uint32_t *)(a.in + pc->off),
                             (uint32_t *)(a.out + pc->off), pc->nblk, chain);
        memcpy(cv, chain, 16);
    }
}

int acc_cu_occupancy(int) { return 4; }

/* Queue one kernel: whether it is the one to fail is decided at launch, as CUDA reports it then or later. */
static cudaError_t launch(const acc_kargs *a, cudaStream_t st, void (*run)(const acc_kargs))
{
    acc_kargs k = *a;
    bool fails = mock_kernel_fails();
    return mock_enqueue(st, [k, fails, run] {
        if (mock_kernel_runs(fails))
            run(k);
    });
}

cudaError_t acc_cu_launch_fwd(const acc_kargs *a, int grid, cudaStream_t st)
{
    if (grid <= 0)
        mock_die("empty grid");
    return launch(a, st, run_fwd);
}

cudaError_t acc_cu_launch_inv(const acc_kargs *a, int grid, cudaStream_t st)
{
    if (grid <= 0)
        mock_die("empty grid");
    return launch(a, st, run_inv);
}

cudaError_t acc_cu_launch_cbcenc(const acc_kargs *a, cudaStream_t st)
{
    return launch(a, st, run_cbcenc);
}
