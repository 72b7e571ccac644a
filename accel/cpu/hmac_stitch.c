/* accel/cpu/hmac_stitch.c: the stitched ciphers' kernels: per 64 bytes, one SHA-1 or SHA-256 block
 * (SHA-NI) and four AES-CBC blocks (AES-NI), so that the SHA rounds run in the idle slots of the
 * latency-bound CBC chain. The record logic around them (what is hashed, the MAC state) is the
 * cipher's: provider/cipher/cipher_hmac_stitch.c, through accel/hmac_stitch.h. */
#include <string.h>
#include <immintrin.h>
#include <openssl/crypto.h>
#include "accel/cpu/cpu_features.h"
#include "accel/hmac_stitch.h"
#include "accel/wipe.h"

#define STITCH_TARGET __attribute__((target("sha,aes,sse4.1,ssse3")))

/* ======================== AES-CBC, four blocks ======================== */

typedef struct {
    __m128i rk[ACC_AES_MAXROUNDS + 1];
    int rounds;
} round_keys;

STITCH_TARGET static inline __m128i cbc_block(const round_keys *k, __m128i x, __m128i iv)
{
    x = _mm_xor_si128(_mm_xor_si128(x, iv), k->rk[0]);
    for (int r = 1; r < k->rounds; r++)
        x = _mm_aesenc_si128(x, k->rk[r]);
    return _mm_aesenclast_si128(x, k->rk[k->rounds]);
}

/* ======================== SHA-1 ======================== */

/* One group of four rounds: the message words of group g (from the four before it once g >= 4),
 * then E + W (E from the state before the previous group), then the rounds. */
#define W1(g) w[(g) & 3]
#define SHA1_GROUP(g, f)                                                                         \
    do {                                                                                         \
        if ((g) >= 4)                                                                            \
            W1(g) = _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32(W1((g) - 4), W1((g) - 3)), \
                                                     W1((g) - 2)), W1((g) - 1));                 \
        ew = (g) == 0 ? _mm_add_epi32(e0, W1(0)) : _mm_sha1nexte_epu32(prev, W1(g));             \
        prev = abcd;                                                                             \
        abcd = _mm_sha1rnds4_epu32(abcd, ew, (f));                                               \
    } while (0)

STITCH_TARGET static void sha1_cbc(uint32_t hs[5], const uint8_t *hin, uint8_t *aio, size_t n,
                                   const round_keys *k, uint8_t ivb[16])
{
    const __m128i bswap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)hs), 0x1B);
    __m128i e0 = _mm_set_epi32((int)hs[4], 0, 0, 0);
    __m128i iv = _mm_loadu_si128((const __m128i *)ivb);

    for (size_t i = 0; i < n; i++, hin += 64, aio += 64) {
        __m128i w[4], ew, prev, abcd0 = abcd, e00 = e0, p[4];

        /* Everything this step reads is read before it writes (hin may trail aio by 16). */
        for (int j = 0; j < 4; j++) {
            w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(hin + 16 * j)), bswap);
            p[j] = _mm_loadu_si128((const __m128i *)(aio + 16 * j));
        }
        SHA1_GROUP(0, 0); SHA1_GROUP(1, 0); SHA1_GROUP(2, 0); SHA1_GROUP(3, 0); SHA1_GROUP(4, 0);
        iv = cbc_block(k, p[0], iv);
        p[0] = iv;
        SHA1_GROUP(5, 1); SHA1_GROUP(6, 1); SHA1_GROUP(7, 1); SHA1_GROUP(8, 1); SHA1_GROUP(9, 1);
        iv = cbc_block(k, p[1], iv);
        p[1] = iv;
        SHA1_GROUP(10, 2); SHA1_GROUP(11, 2); SHA1_GROUP(12, 2); SHA1_GROUP(13, 2); SHA1_GROUP(14, 2);
        iv = cbc_block(k, p[2], iv);
        p[2] = iv;
        SHA1_GROUP(15, 3); SHA1_GROUP(16, 3); SHA1_GROUP(17, 3); SHA1_GROUP(18, 3); SHA1_GROUP(19, 3);
        iv = cbc_block(k, p[3], iv);
        p[3] = iv;
        e0 = _mm_sha1nexte_epu32(prev, e00);
        abcd = _mm_add_epi32(abcd, abcd0);
        for (int j = 0; j < 4; j++)
            _mm_storeu_si128((__m128i *)(aio + 16 * j), p[j]);
    }
    _mm_storeu_si128((__m128i *)hs, _mm_shuffle_epi32(abcd, 0x1B));
    hs[4] = (uint32_t)_mm_extract_epi32(e0, 3);
    _mm_storeu_si128((__m128i *)ivb, iv);
}

/* ======================== SHA-256 ======================== */

static const uint32_t k256[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

/* One group of four rounds (two sha256rnds2); the state is kept as ABEF / CDGH. */
#define W2(g) w[(g) & 3]
#define SHA256_GROUP(g)                                                                          \
    do {                                                                                         \
        __m128i m;                                                                               \
        if ((g) >= 4)                                                                            \
            W2(g) = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(W2((g) - 4), W2((g) - 3)), \
                                                       _mm_alignr_epi8(W2((g) - 1), W2((g) - 2), 4)), \
                                         W2((g) - 1));                                           \
        m = _mm_add_epi32(W2(g), _mm_load_si128((const __m128i *)(k256 + 4 * (g))));             \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);                                             \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(m, 0x0E));                    \
    } while (0)

STITCH_TARGET static void sha256_cbc(uint32_t hs[8], const uint8_t *hin, uint8_t *aio, size_t n,
                                     const round_keys *k, uint8_t ivb[16])
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)hs), 0xB1);         /* CDAB */
    __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(hs + 4)), 0x1B); /* EFGH */
    __m128i abef = _mm_alignr_epi8(t, cdgh, 8);
    __m128i iv = _mm_loadu_si128((const __m128i *)ivb);

    cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
    for (size_t i = 0; i < n; i++, hin += 64, aio += 64) {
        __m128i w[4], abef0 = abef, cdgh0 = cdgh, p[4];

        for (int j = 0; j < 4; j++) {
            w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(hin + 16 * j)), bswap);
            p[j] = _mm_loadu_si128((const __m128i *)(aio + 16 * j));
        }
        SHA256_GROUP(0); SHA256_GROUP(1); SHA256_GROUP(2); SHA256_GROUP(3);
        iv = cbc_block(k, p[0], iv);
        p[0] = iv;
        SHA256_GROUP(4); SHA256_GROUP(5); SHA256_GROUP(6); SHA256_GROUP(7);
        iv = cbc_block(k, p[1], iv);
        p[1] = iv;
        SHA256_GROUP(8); SHA256_GROUP(9); SHA256_GROUP(10); SHA256_GROUP(11);
        iv = cbc_block(k, p[2], iv);
        p[2] = iv;
        SHA256_GROUP(12); SHA256_GROUP(13); SHA256_GROUP(14); SHA256_GROUP(15);
        iv = cbc_block(k, p[3], iv);
        p[3] = iv;
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
        for (int j = 0; j < 4; j++)
            _mm_storeu_si128((__m128i *)(aio + 16 * j), p[j]);
    }
    t = _mm_shuffle_epi32(abef, 0x1B);                                                /* FEBA */
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);                                             /* DCHG */
    _mm_storeu_si128((__m128i *)hs, _mm_blend_epi16(t, cdgh, 0xF0));                  /* DCBA */
    _mm_storeu_si128((__m128i *)(hs + 4), _mm_alignr_epi8(cdgh, t, 8));               /* HGFE */
    _mm_storeu_si128((__m128i *)ivb, iv);
}

/* ======================== Loading the key ======================== */

STITCH_TARGET static void load_keys(round_keys *k, const acc_aes_key *ks)
{
    k->rounds = ks->rounds;
    for (int r = 0; r <= ks->rounds; r++)
        k->rk[r] = _mm_load_si128((const __m128i *)(ks->enc + 16 * r));
}

/* ======================== The table ======================== */

/* The round keys are loaded into registers once per call and wiped after it: from the local copy
 * (OPENSSL_cleanse) and from the xmm registers the loop kept them in (accel/wipe.h). */
static void stitch_sha1(uint32_t hs[5], const uint8_t *hin, uint8_t *aio, size_t n, const acc_aes_key *ks,
                        uint8_t iv[16])
{
    round_keys k;

    load_keys(&k, ks);
    sha1_cbc(hs, hin, aio, n, &k, iv);
    OPENSSL_cleanse(&k, sizeof(k));
    acc_clear_xmm();
}

static void stitch_sha256(uint32_t hs[8], const uint8_t *hin, uint8_t *aio, size_t n, const acc_aes_key *ks,
                          uint8_t iv[16])
{
    round_keys k;

    load_keys(&k, ks);
    sha256_cbc(hs, hin, aio, n, &k, iv);
    OPENSSL_cleanse(&k, sizeof(k));
    acc_clear_xmm();
}

static const acc_stitch_kernels kernels = { stitch_sha1, stitch_sha256 };
/* SHA-NI and AES-NI (with SSE4.1 and SSSE3) from the one CPU probe (accel/cpu/cpu_features.c). */
const acc_stitch_kernels *acc_stitch_kernels_get(void)
{
    return acc_cpu_has(ACC_CPU_SHA | ACC_CPU_AESNI) ? &kernels : NULL;
}
