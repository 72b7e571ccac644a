/* accel/cpu/gcm_vaes_rounds.h: the GCM kernels' copies per key size, for the widths that share them (ymm:
 * gcm_vaesy_k.c, xmm: gcm_vaesx_k.c). GV_BY_ROUNDS(TGT, KEY) defines enc10 .. dec14, each the including
 * file's blocks_r(k, rounds, ctr, x, in, out, n, enc) with a constant round count (its rounds loop unrolled),
 * and by_rounds, which picks one by k->rounds and the direction. Internal to accel/cpu/. */
#ifndef ACCELAES_GCM_VAES_ROUNDS_H
#define ACCELAES_GCM_VAES_ROUNDS_H

#define GV_ONE_SIZE(TGT, KEY, r)                                                                           \
    TGT static __attribute__((noinline)) void enc##r(const KEY *k, __m128i *ctr, __m128i *x, const uint8_t *in, \
                                                     uint8_t *out, size_t n)                                 \
    { blocks_r(k, r, ctr, x, in, out, n, 1); }                                                            \
    TGT static __attribute__((noinline)) void dec##r(const KEY *k, __m128i *ctr, __m128i *x, const uint8_t *in, \
                                                     uint8_t *out, size_t n)                                 \
    { blocks_r(k, r, ctr, x, in, out, n, 0); }

#define GV_BY_ROUNDS(TGT, KEY)                                                                             \
    GV_ONE_SIZE(TGT, KEY, 10)                                                                              \
    GV_ONE_SIZE(TGT, KEY, 12)                                                                              \
    GV_ONE_SIZE(TGT, KEY, 14)                                                                              \
    TGT static inline __attribute__((always_inline)) void by_rounds(const KEY *k, __m128i *ctr, __m128i *x, \
        const uint8_t *in, uint8_t *out, size_t n, int enc)                                                \
    {                                                                                                      \
        switch (k->rounds) {                                                                               \
        case 10: (enc ? enc10 : dec10)(k, ctr, x, in, out, n); break;                                      \
        case 12: (enc ? enc12 : dec12)(k, ctr, x, in, out, n); break;                                      \
        default: (enc ? enc14 : dec14)(k, ctr, x, in, out, n); break;                                      \
        }                                                                                                  \
    }

#endif
