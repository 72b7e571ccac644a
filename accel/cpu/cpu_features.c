/* accel/cpu/cpu_features.c: the one CPU probe (cpuid leaves 1 and 7, xgetbv), cached. */
#include <cpuid.h>
#include <pthread.h>
#include "accel/cpu/cpu_features.h"

unsigned acc_cpu_features_word;

/* zmm state must be enabled by the OS (XCR0: SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM), not just
 * present in the CPU; likewise ymm (SSE, AVX) for AVX2. */
static unsigned os_state(unsigned c1)
{
    unsigned lo, hi;

    if (!(c1 & bit_OSXSAVE))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

static void probe(void)
{
    unsigned a, b, c, d, c1, f = ACC_CPU_PROBED, xcr0;

    if (!__get_cpuid(1, &a, &b, &c1, &d)) {
        __atomic_store_n(&acc_cpu_features_word, f, __ATOMIC_RELEASE);
        return;
    }
    if ((c1 & bit_AES) && (c1 & bit_SSE4_1) && (c1 & bit_SSSE3))
        f |= ACC_CPU_AESNI;
    if (c1 & bit_PCLMUL)
        f |= ACC_CPU_PCLMUL;
    xcr0 = os_state(c1);
    if ((c1 & bit_AVX) && (xcr0 & 0x6) == 0x6)
        f |= ACC_CPU_AVX;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if (b & bit_SHA)
            f |= ACC_CPU_SHA;
        if ((b & bit_AVX2) && (xcr0 & 0x6) == 0x6)
            f |= ACC_CPU_AVX2;
        /* the VEX forms of VAES and VPCLMULQDQ need only the ymm state: cores without AVX-512
         * (AMD Zen 3) run two 256-bit AES instructions a cycle through them */
        if ((b & bit_AVX2) && (c & bit_VAES) && (c & bit_VPCLMULQDQ) && (xcr0 & 0x6) == 0x6
            && (f & ACC_CPU_AESNI) && (c1 & bit_PCLMUL))
            f |= ACC_CPU_VAES256;
        if ((xcr0 & 0xe6) == 0xe6) {
            if (b & bit_AVX512F)
                f |= ACC_CPU_AVX512F;
            if ((b & bit_AVX512F) && (b & bit_AVX512BW) && (c & bit_VAES))
                f |= ACC_CPU_VAES512;
            if (b & bit_AVX512VL)
                f |= ACC_CPU_AVX512VL;
            if (c & bit_VPCLMULQDQ)
                f |= ACC_CPU_VPCLMUL;
        }
    }
    __atomic_store_n(&acc_cpu_features_word, f, __ATOMIC_RELEASE);
}

unsigned acc_cpu_features_probe(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, probe);
    return __atomic_load_n(&acc_cpu_features_word, __ATOMIC_ACQUIRE);
}
