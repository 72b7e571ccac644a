/* accel/cpu/aes_z.h: what the zmm (VAES) code of vaes.c and xts.c shares: the round keys
 * broadcast to the four lanes of a register, and the loads and stores of a group's registers. */
#ifndef ACCELAES_AES_Z_H
#define ACCELAES_AES_Z_H

#include "accel/cpu/aes_x.h"

/* The round keys, each broadcast to the four lanes. */
typedef struct {
    __m512i k[ACC_AES_MAXROUNDS + 1];
} zsched;

TGT_VAES INLINE void zs_load(zsched *s, const uint8_t *rk, int rounds)
{
#pragma GCC unroll 15
    for (int r = 0; r <= rounds; r++)
        s->k[r] = _mm512_broadcast_i32x4(XKEY(rk, r));
}

/* Loads and stores of register j of n; the last one holds only rem blocks when rem != 0. The
 * partial one uses 256/128-bit moves, not masked ones: a masked store does not forward to a
 * later load, which costs dearly when the caller re-reads its buffer at once (openssl speed). */
TGT_VAES INLINE __m512i zload(const uint8_t *p, int j, int n, int rem)
{
    p += 64 * j;
    if (j < n - 1 || rem == 0)
        return _mm512_loadu_si512(p);
    if (rem == 1)
        return _mm512_zextsi128_si512(XLD(p));
    __m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return rem == 2 ? v : _mm512_inserti32x4(v, XLD(p + 32), 2);
}

TGT_VAES INLINE void zstore(uint8_t *p, int j, int n, int rem, __m512i v)
{
    p += 64 * j;
    if (j < n - 1 || rem == 0) {
        _mm512_storeu_si512(p, v);
    } else if (rem == 1) {
        XST(p, _mm512_castsi512_si128(v));
    } else {
        _mm256_storeu_si256((__m256i *)(void *)p, _mm512_castsi512_si256(v));
        if (rem == 3)
            XST(p + 32, _mm512_extracti32x4_epi32(v, 2));
    }
}

#endif
