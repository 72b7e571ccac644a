/* accel/cpu/aes_y.h: what the ymm (VAES without AVX-512) code of vaes_y.c and xts_y.c shares: the
 * target, round keys broadcast to both lanes, and the loads and stores of a group's registers. */
#ifndef ACCELAES_AES_Y_H
#define ACCELAES_AES_Y_H

#include "accel/cpu/aes_x.h"

#define TGT_VY __attribute__((target("aes,sse4.1,ssse3,avx,avx2,vaes")))

#define YLD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define YST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
#define YKEY(rk, r) _mm256_broadcastsi128_si256(XKEY(rk, r))

/* Register j of n; the last one holds one block when rem != 0. */
TGT_VY INLINE __m256i yload(const uint8_t *p, int j, int n, int rem)
{
    p += 32 * j;
    return (j < n - 1 || rem == 0) ? YLD(p) : _mm256_zextsi128_si256(XLD(p));
}

TGT_VY INLINE void ystore(uint8_t *p, int j, int n, int rem, __m256i v)
{
    p += 32 * j;
    if (j < n - 1 || rem == 0)
        YST(p, v);
    else
        XST(p, _mm256_castsi256_si128(v));
}

TGT_VY INLINE __m256i y_last(__m256i y, __m256i k, int dec)
{
    return dec ? _mm256_aesdeclast_epi128(y, k) : _mm256_aesenclast_epi128(y, k);
}

#endif
