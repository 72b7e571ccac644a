/* bench/src/aes_limit.c: how close the inline engine comes to the core's AES issue limit.
 * Build: make build/bench/aes_limit    Run: build/bench/aes_limit [SIZE (16384)] [ROUNDS (15)]
 *
 * Three measurements, alternated ROUNDS times, best of each kept (a shared machine only ever makes
 * a run slower):
 *  - the core clock: a chain of dependent 64-bit adds retires one per cycle;
 *  - the issue limit: twelve independent chains of one VAES instruction on zmm registers (one per
 *    cycle on Zen 4, four blocks each), on ymm where the core has VAES without AVX-512 (Zen 3: two
 *    a cycle, two blocks each), or of AES-NI on xmm where there is no VAES;
 *  - the engine (acc_engine_default(), as the provider runs it) on SIZE bytes in place, per mode and
 *    key size.
 * An AES-k block takes `rounds` AES instructions (the whitening is an XOR), so the limit in cycles
 * per byte is rounds * (cycles per instruction) / (bytes per instruction). Prints c/B for both and
 * the engine's share of the limit; then GCM's (gcm_round) beside it and beside ECB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#include "accel/engine.h"
#include "accel/gcm.h"

#define TGT __attribute__((target("avx512f,vaes,aes,avx2")))

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* not charged for time spent descheduled */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ns per cycle: 4 dependent adds per iteration, one cycle each. A register operand, not an immediate:
 * Golden Cove (Sapphire Rapids) folds chains of immediate adds at rename, and read 6.8 GHz for ~2.6. */
static double ns_per_cycle(void)
{
    uint64_t n = 50000000, x = 0, one = 1;
    double t0 = now();
    __asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n sub $1, %1\n jnz 1b"
                     : "+r"(x), "+r"(n) : "r"(one));
    return (now() - t0) * 1e9 / (4.0 * 50000000);
}

/* ns per AES instruction over 12 independent chains, each in its own register (an array would live
 * on the stack, and store forwarding would lengthen every chain). */
#define CHAINS(T, ENC, SET, C)                                                             \
    do {                                                                                   \
        T k = SET(0x5a5a5a5a), a0 = SET(0), a1 = SET(1), a2 = SET(2), a3 = SET(3), a4 = SET(4), \
          a5 = SET(5), a6 = SET(6), a7 = SET(7), a8 = SET(8), a9 = SET(9), a10 = SET(10), a11 = SET(11); \
        for (long j = 0; j < n; j++) {                                                     \
            a0 = ENC(a0, k); a1 = ENC(a1, k); a2 = ENC(a2, k); a3 = ENC(a3, k);              \
            a4 = ENC(a4, k); a5 = ENC(a5, k); a6 = ENC(a6, k); a7 = ENC(a7, k);              \
            a8 = ENC(a8, k); a9 = ENC(a9, k); a10 = ENC(a10, k); a11 = ENC(a11, k);          \
            __asm__ volatile("" : "+" C(a0), "+" C(a1), "+" C(a2), "+" C(a3), "+" C(a4), "+" C(a5), \
                             "+" C(a6), "+" C(a7), "+" C(a8), "+" C(a9), "+" C(a10), "+" C(a11)); \
        }                                                                                  \
    } while (0)

/* lanes: 4 (VAES on zmm), 2 (VAES on ymm: cores without AVX-512) or 1 (AES-NI on xmm) */
TGT static double ns_per_aes(int lanes)
{
    long n = 20000000;
    double t0 = now();
    if (lanes == 4)
        CHAINS(__m512i, _mm512_aesenc_epi128, _mm512_set1_epi32, "v");
    else if (lanes == 2)
        CHAINS(__m256i, _mm256_aesenc_epi128, _mm256_set1_epi32, "x");
    else
        CHAINS(__m128i, _mm_aesenc_si128, _mm_set1_epi32, "x");
    return (now() - t0) * 1e9 / (12.0 * (double)n);
}

enum { M_CTR, M_ECB, M_CBCDEC, NMODES };
static const char *const mode_names[NMODES] = { "ctr", "ecb-enc", "cbc-dec" };

/* ns per byte of one engine call on len bytes in place. */
static double engine_ns_per_byte(const acc_engine *e, const acc_aes_key *k, int mode, uint8_t *buf, size_t len)
{
    uint8_t iv[16] = { 0 };
    size_t reps = (size_t)(64u << 20) / len + 1;
    double t0 = now();
    for (size_t i = 0; i < reps; i++) {
        if (mode == M_CTR)
            e->ctr(k, buf, buf, len / 16, iv);
        else if (mode == M_ECB)
            e->ecb_enc(k, buf, buf, len / 16);
        else
            e->cbc_dec(k, buf, buf, len / 16, iv);
    }
    return (now() - t0) * 1e9 / ((double)reps * (double)len);
}

/* XTS (bench/results/xts-limit.md): ns per byte of one data unit of len bytes in place, data key k (its
 * decryption schedule when dec) and tweak key k2, best of rounds; printed against the same limit. */
static double xts_ns_per_byte(const acc_engine *e, const acc_aes_key *k, const acc_aes_key *k2, int dec, uint8_t *buf,
                              size_t len)
{
    uint8_t iv[16] = { 1 };
    size_t reps = (size_t)(64u << 20) / len + 1;
    double t0 = now();
    for (size_t i = 0; i < reps; i++)
        e->xts(k, k2, iv, buf, buf, len, dec);
    return (now() - t0) * 1e9 / ((double)reps * (double)len);
}

static void xts_rows(const acc_engine *e, const uint8_t *key, uint8_t *buf, size_t len, int rounds, double cyc,
                     double aes, double bytes_per_instr)
{
    acc_aes_key k[2][2], k2[2]; /* [128/256][enc/dec] */
    double best[2][2] = { { 1e9, 1e9 }, { 1e9, 1e9 } };
    uint8_t tkey[32];
    for (int i = 0; i < 32; i++)
        tkey[i] = (uint8_t)(key[i] ^ 0xa5); /* the tweak key: another key */
    for (int s = 0; s < 2; s++)
        if (!e->set_key(&k[s][0], key, (size_t)(16 + 16 * s), 1) || !e->set_key(&k[s][1], key, (size_t)(16 + 16 * s), 0)
            || !e->set_key(&k2[s], tkey, (size_t)(16 + 16 * s), 1))
            return;
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < 2; s++)
            for (int d = 0; d < 2; d++) {
                double v = xts_ns_per_byte(e, &k[s][d], &k2[s], d, buf, len);
                best[s][d] = v < best[s][d] ? v : best[s][d];
            }
    for (int s = 0; s < 2; s++) {
        double lim = (10 + 4 * s) * aes / bytes_per_instr;
        for (int d = 0; d < 2; d++)
            printf("| AES-%d | xts-%s | %.4f | %.4f | %.2f | %.2f | %.1f%% |\n", 128 + 128 * s, d ? "dec" : "enc",
                   best[s][d] / cyc, lim / cyc, 1.0 / best[s][d], 1.0 / lim, 100.0 * lim / best[s][d]);
        e->free_key(&k[s][0]), e->free_key(&k[s][1]), e->free_key(&k2[s]);
    }
}

/* ---- GCM (acc_gcm_engine_default(): engine_select.c's choice;
 * ACCELAES_GCM_ENGINE=dual|vaesy|imb|vaesx|vaes|evp picks one): one message per call as a TLS record is (12-byte IV, 13 bytes of AAD, the tag), SIZE
 * bytes in place, encrypt and decrypt, alternated with the rest; best of ROUNDS. ---- */
static acc_gcm_state gcm_st[3];
static double gcm_best[3][2] = { { 1e9, 1e9 }, { 1e9, 1e9 }, { 1e9, 1e9 } };

static void gcm_round(const uint8_t *key, uint8_t *buf, size_t len)
{
    const acc_gcm_engine *g = acc_gcm_engine_default();
    static const uint8_t iv[12] = { 1, 2, 3 };
    size_t reps = (size_t)(64u << 20) / len + 1;
    uint8_t tag[16];

    for (int s = 0; s < 3; s++)
        for (int enc = 1; enc >= 0; enc--) {
            double t0, v;
            if (!g->set_key(&gcm_st[s], key, (size_t)(16 + 8 * s)))
                return;
            t0 = now();
            for (size_t i = 0; i < reps; i++) {
                g->start(&gcm_st[s], enc, iv, sizeof(iv), key, 13);
                g->update(&gcm_st[s], buf, buf, len);
                g->finish(&gcm_st[s], tag, sizeof(tag));
            }
            v = (now() - t0) * 1e9 / ((double)reps * (double)len);
            if (v < gcm_best[s][!enc])
                gcm_best[s][!enc] = v;
            g->cleanse(&gcm_st[s]);
        }
}

/* Rows as the engine table's, and each direction's share of ECB's speed (the measure). */
static void gcm_print(double cyc, double aes, double bytes_per_instr, double ecb[3])
{
    printf("| key | GCM (%s) | c/B | limit c/B | GB/s | share of limit | of ECB |\n", acc_gcm_engine_default()->name);
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 2; d++) {
            double lim = (s * 2 + 10) * aes / bytes_per_instr;
            printf("| AES-%d | gcm-%s | %.4f | %.4f | %.2f | %.1f%% | %.2f |\n", 128 + 64 * s, d ? "dec" : "enc",
                   gcm_best[s][d] / cyc, lim / cyc, 1.0 / gcm_best[s][d], 100.0 * lim / gcm_best[s][d],
                   ecb[s] / gcm_best[s][d]);
        }
}

/* The widest AES instruction the core has, in blocks (ns_per_aes). */
static int aes_lanes(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("vaes"))
        return 1;
    return __builtin_cpu_supports("avx512f") ? 4 : __builtin_cpu_supports("avx2") ? 2 : 1;
}

int main(int argc, char **argv)
{
    size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 16384;
    int rounds = argc > 2 ? atoi(argv[2]) : 15, lanes = aes_lanes();
    const acc_engine *e = acc_engine_default();
    static const int keybytes[3] = { 16, 24, 32 };
    acc_aes_key ks[3];
    uint8_t key[32];
    uint8_t *buf = aligned_alloc(64, (len + 63) & ~(size_t)63);
    double cyc = 1e9, aes = 1e9, eng[3][NMODES];

    if (len < 16 || len % 16 || buf == NULL || e == NULL || rounds < 1) {
        fprintf(stderr, "usage: aes_limit [SIZE: a multiple of 16] [ROUNDS]\n");
        return 2;
    }
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    memset(buf, 0x3c, len);
    for (int s = 0; s < 3; s++) {
        if (!e->set_key(&ks[s], key, (size_t)keybytes[s], 0))
            return 1;
        for (int m = 0; m < NMODES; m++)
            eng[s][m] = 1e9;
    }
    for (int r = 0; r < rounds; r++) {
        double v;
        if ((v = ns_per_cycle()) < cyc) cyc = v;
        if ((v = ns_per_aes(lanes)) < aes) aes = v;
        for (int s = 0; s < 3; s++)
            for (int m = 0; m < NMODES; m++)
                if ((v = engine_ns_per_byte(e, &ks[s], m, buf, len)) < eng[s][m])
                    eng[s][m] = v;
        gcm_round(key, buf, len);
    }
    double bytes_per_instr = 16.0 * lanes;
    printf("engine %s, %zu bytes in place, best of %d rounds\n", e->name, len, rounds);
    printf("core clock %.2f GHz; one %s AES instruction per %.2f cycles (%.3f ns) = %.0f bytes per cycle "
           "per round\n", 1.0 / cyc, lanes == 4 ? "zmm VAES" : lanes == 2 ? "ymm VAES" : "xmm AES-NI", aes / cyc, aes, bytes_per_instr * cyc / aes);
    printf("| key | mode | engine c/B | limit c/B | engine GB/s | limit GB/s | share of limit |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int s = 0; s < 3; s++) {
        int nr = keybytes[s] / 4 + 6;
        double lim = nr * aes / bytes_per_instr;          /* ns per byte */
        for (int m = 0; m < NMODES; m++)
            printf("| AES-%d | %s | %.4f | %.4f | %.2f | %.2f | %.1f%% |\n", keybytes[s] * 8, mode_names[m],
                   eng[s][m] / cyc, lim / cyc, 1.0 / eng[s][m], 1.0 / lim, 100.0 * lim / eng[s][m]);
    }
    if (e->xts != NULL)
        xts_rows(e, key, buf, len, rounds, cyc, aes, bytes_per_instr);
    gcm_print(cyc, aes, bytes_per_instr, (double[3]){ eng[0][M_ECB], eng[1][M_ECB], eng[2][M_ECB] });
    for (int s = 0; s < 3; s++)
        e->free_key(&ks[s]);
    free(buf);
    return 0;
}
