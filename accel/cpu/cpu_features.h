/* accel/cpu/cpu_features.h: what the CPU (and the OS, for the register state it saves) offers,
 * probed once per process and read by every engine and by the stitched ciphers alike, so that
 * two probes can never disagree about one machine. */
#ifndef ACCELAES_CPU_FEATURES_H
#define ACCELAES_CPU_FEATURES_H

enum {
    ACC_CPU_AESNI = 1u << 0, /* AES-NI with SSE4.1 and SSSE3 (the xmm engine's needs) */
    ACC_CPU_PCLMUL = 1u << 1,
    ACC_CPU_AVX2 = 1u << 2,
    ACC_CPU_SHA = 1u << 3,     /* SHA-NI */
    ACC_CPU_VAES512 = 1u << 4, /* VAES, AVX512F and AVX512BW, zmm state enabled by the OS */
    ACC_CPU_AVX512VL = 1u << 5,
    ACC_CPU_VPCLMUL = 1u << 6,
    ACC_CPU_AVX = 1u << 7,     /* AVX, ymm state enabled by the OS */
    ACC_CPU_AVX512F = 1u << 8, /* AVX512F, zmm state enabled by the OS */
    ACC_CPU_VAES256 = 1u << 9, /* VAES, AVX2 and VPCLMULQDQ on ymm, ymm state enabled (Zen 3) */
    ACC_CPU_PROBED = 1u << 31  /* set once the probe ran: 0 means not yet */
};

/* Written once by the probe (accel/cpu/cpu_features.c); read through acc_cpu_features(). */
extern unsigned acc_cpu_features_word;
unsigned acc_cpu_features_probe(void);

/* The ACC_CPU_* bits this CPU has (cpuid and xgetbv, asked once; thread-safe). After the first
 * call it is one load: the XTS engine asks it per data unit. */
static inline unsigned acc_cpu_features(void)
{
    unsigned f = __atomic_load_n(&acc_cpu_features_word, __ATOMIC_ACQUIRE);

    return f != 0 ? f : acc_cpu_features_probe();
}

static inline int acc_cpu_has(unsigned bits)
{
    return (acc_cpu_features() & bits) == bits;
}

#endif
