/* accel/wipe.h: wiping key material the compiler put on the stack. OPENSSL_cleanse reaches only
 * objects we name; round keys that an inlined AES loop spilled (16 xmm registers hold no AES-256
 * schedule beside the data) sit in the frame of a function that has returned. A noinline
 * function zeroing a local array of its own clears that frame from the caller: call it right
 * after the spilling function returns, at the same stack depth. */
#ifndef ACCELAES_WIPE_H
#define ACCELAES_WIPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include "accel/cpu/cpu_features.h"

/* memset that stays: the asm claims to read the memory, so the stores are not dead. */
static inline void acc_wipe(void *p, size_t n)
{
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* Zeroes the ACC_SCRUB bytes below the caller's frame, where the callee it just left kept its
 * spills: the zmm functions of vaes.c have frames under 0x300 bytes, the SSE ones of aesni.c
 * under 0x100 (objdump -d: sub $N,%rsp and stores to (%rsp), the red zone included). Volatile
 * vector stores, not the rep stos GCC makes of a memset, whose start-up costs a 16-byte call
 * about as much as its AES. */
#define ACC_SCRUB 1024
#define ACC_SCRUB_SSE 256
static __attribute__((noinline, unused)) void acc_stack_scrub_sse(void)
{
    __m128i b[ACC_SCRUB_SSE / 16];
    volatile __m128i *v = b;

    for (int i = 0; i < ACC_SCRUB_SSE / 16; i++)
        v[i] = _mm_setzero_si128();
}

/* Round keys also stay in vector registers after an AES loop, and the next xsave writes every
 * register to the stack (the dynamic linker's lazy binding, _dl_runtime_resolve_xsavec; a signal
 * frame): OpenSSL's AES-NI assembly clears its registers for this reason, and so do we. Zeroing
 * idioms: no execution unit, a few cycles for all of them. acc_clear_xmm for SSE-only code;
 * acc_clear_zmm in AVX-512 code (VEX and EVEX zeroing clears each whole zmm register). */
#define ACC_PX(n) "pxor %%xmm" #n ", %%xmm" #n "\n\t"
#define ACC_VX(n) "vpxor %%xmm" #n ", %%xmm" #n ", %%xmm" #n "\n\t"
#define ACC_EX(n) "vpxord %%xmm" #n ", %%xmm" #n ", %%xmm" #n "\n\t"
#define ACC_LOW_REGS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
                     "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

static inline __attribute__((always_inline)) void acc_clear_xmm(void)
{
    __asm__ __volatile__(ACC_PX(0) ACC_PX(1) ACC_PX(2) ACC_PX(3) ACC_PX(4) ACC_PX(5) ACC_PX(6) ACC_PX(7)
                         ACC_PX(8) ACC_PX(9) ACC_PX(10) ACC_PX(11) ACC_PX(12) ACC_PX(13) ACC_PX(14) ACC_PX(15)
                         : : : ACC_LOW_REGS);
}

#define ACC_TGT_AVX512 __attribute__((target("avx,avx2,avx512f")))
static inline __attribute__((always_inline)) ACC_TGT_AVX512 void acc_clear_zmm(void)
{
    __asm__ __volatile__(ACC_VX(0) ACC_VX(1) ACC_VX(2) ACC_VX(3) ACC_VX(4) ACC_VX(5) ACC_VX(6) ACC_VX(7)
                         ACC_VX(8) ACC_VX(9) ACC_VX(10) ACC_VX(11) ACC_VX(12) ACC_VX(13) ACC_VX(14) ACC_VX(15)
                         ACC_EX(16) ACC_EX(17) ACC_EX(18) ACC_EX(19) ACC_EX(20) ACC_EX(21) ACC_EX(22) ACC_EX(23)
                         ACC_EX(24) ACC_EX(25) ACC_EX(26) ACC_EX(27) ACC_EX(28) ACC_EX(29) ACC_EX(30) ACC_EX(31)
                         : : : ACC_LOW_REGS, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                           "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}

/* For code built for no particular vector ISA around a library that picks one at run time
 * (intel-ipsec-mb): clears what the CPU has. */
static __attribute__((noinline, unused)) ACC_TGT_AVX512 void acc_clear_zmm_call(void)
{
    acc_clear_zmm();
}

static __attribute__((noinline, unused, target("avx"))) void acc_clear_ymm_call(void)
{
    _mm256_zeroall();
}

static inline __attribute__((unused)) void acc_clear_vregs(void)
{
    if (acc_cpu_has(ACC_CPU_AVX512F))
        acc_clear_zmm_call();
    else if (acc_cpu_has(ACC_CPU_AVX))
        acc_clear_ymm_call();
    else
        acc_clear_xmm();
}

/* The same in 16 zmm stores, after the zmm code of the VAES engine. */
static __attribute__((noinline, unused)) ACC_TGT_AVX512 void acc_stack_scrub_zmm(void)
{
    __m512i b[ACC_SCRUB / 64];
    volatile __m512i *v = b;

    for (int i = 0; i < ACC_SCRUB / 64; i++)
        v[i] = _mm512_setzero_si512();
}

#endif
