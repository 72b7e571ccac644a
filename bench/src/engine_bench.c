/* bench/src/engine_bench.c: the inline AES engine against OpenSSL's default provider, per mode, key
 * size and buffer size, as `openssl speed -evp` measures (one reused context, in place).
 * Build: gcc -O2 -I. -pthread -o build/engine_bench bench/src/engine_bench.c accel/cpu/aesni.c accel/cpu/evp_engine.c accel/cpu/engine_select.c -lcrypto
 * Run:   build/engine_bench [ms-per-measurement (default 20)] [aesni|evp] [mode: ecb-enc ... ctr]
 *        ACCELAES_NO_VAES=1 measures the xmm code instead of VAES. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/engine.h"

enum { ECB_ENC, ECB_DEC, CBC_ENC, CBC_DEC, CTR, NMODES };
static const char *const mode_name[NMODES] = { "ecb-enc", "ecb-dec", "cbc-enc", "cbc-dec", "ctr" };
static const size_t sizes[] = { 16, 64, 256, 1024, 8192, 16384, 1 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROUNDS 7                      /* alternations of the two measurements; medians reported */

/* Thread CPU time, not wall time: on a shared, loaded machine a measurement that loses the CPU
 * to another process is not charged for it. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    int mode, keybits;
    size_t len;
    uint8_t *buf, iv[16];
    const acc_engine *eng;
    acc_aes_key ks;
    EVP_CIPHER_CTX *ctx;
} job;

static void run_engine(job *j, size_t reps)
{
    const acc_engine *e = j->eng;
    size_t n = j->len / 16;
    int ok = 1;
    for (size_t r = 0; r < reps; r++) {
        switch (j->mode) {
        case ECB_ENC: ok &= e->ecb_enc(&j->ks, j->buf, j->buf, n); break;
        case ECB_DEC: ok &= e->ecb_dec(&j->ks, j->buf, j->buf, n); break;
        case CBC_ENC: ok &= e->cbc_enc(&j->ks, j->buf, j->buf, n, j->iv); break;
        case CBC_DEC: ok &= e->cbc_dec(&j->ks, j->buf, j->buf, n, j->iv); break;
        default:      ok &= e->ctr(&j->ks, j->buf, j->buf, n, j->iv); break;
        }
    }
    if (!ok) {                  /* a time for work that failed means nothing */
        fprintf(stderr, "engine_bench: the %s engine failed\n", e->name);
        exit(1);
    }
}

static void run_evp(job *j, size_t reps)
{
    int outl;
    for (size_t r = 0; r < reps; r++)
        EVP_CipherUpdate(j->ctx, j->buf, &outl, j->buf, (int)j->len);
}

/* GB/s of fn over about `ms` milliseconds; the clock is read once per batch of >= 64 KiB, so
 * reading it costs well under 1%. */
static double measure(job *j, void (*fn)(job *, size_t), double ms)
{
    size_t batch = j->len >= 65536 ? 1 : 65536 / j->len, bytes = 0;
    double t0 = now(), t;
    fn(j, batch);                                   /* warm the caches and the branch predictors */
    t0 = now();
    do {
        fn(j, batch);
        bytes += batch * j->len;
        t = now();
    } while (t - t0 < ms / 1e3);
    return (double)bytes / (t - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int setup(job *j, const acc_engine *e, int mode, int keybits, size_t len, uint8_t *buf)
{
    static const char *const m[3] = { "ECB", "CBC", "CTR" };
    int mi = mode <= ECB_DEC ? 0 : mode <= CBC_DEC ? 1 : 2, enc = mode != ECB_DEC && mode != CBC_DEC;
    uint8_t key[32];
    char name[32];

    snprintf(name, sizeof(name), "AES-%d-%s", keybits, m[mi]);
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, "provider=default");
    memset(j, 0, sizeof(*j));
    j->mode = mode, j->keybits = keybits, j->len = len, j->buf = buf, j->eng = e;
    RAND_bytes(key, sizeof(key));
    RAND_bytes(j->iv, 16);
    j->ctx = EVP_CIPHER_CTX_new();
    int ok = c != NULL && j->ctx != NULL
             && EVP_CipherInit_ex2(j->ctx, c, key, mi ? j->iv : NULL, enc, NULL)
             && EVP_CIPHER_CTX_set_padding(j->ctx, 0)
             && e->set_key(&j->ks, key, (size_t)keybits / 8, enc);
    EVP_CIPHER_free(c);
    return ok;
}

int main(int argc, char **argv)
{
    double ms = argc > 1 ? atof(argv[1]) : 20;
    const acc_engine *e = (argc > 2 && strcmp(argv[2], "evp") == 0) ? acc_engine_evp() : acc_engine_aesni();
    const char *only = argc > 3 ? argv[3] : NULL;
    uint8_t *buf = aligned_alloc(64, 1 << 20);

    if (e == NULL || buf == NULL || ms <= 0) {
        fprintf(stderr, "usage: %s [ms] [aesni|evp] [mode] (no AES-NI engine on this CPU?)\n", argv[0]);
        return 1;
    }
    RAND_bytes(buf, 1 << 20);
    printf("engine %s vs OpenSSL %s default provider (EVP_CipherUpdate, reused ctx, in place); "
           "GB/s (per thread CPU second), median of %d alternated runs of %.0f ms; ratio = median of the\n"
           "per-pair ratios\n", e->name, OpenSSL_version(OPENSSL_VERSION_STRING),
           ROUNDS, ms);
    printf("%-8s %4s %8s %9s %9s %7s\n", "mode", "key", "bytes", "engine", "openssl", "ratio");
    for (int mode = 0; mode < NMODES; mode++)
        for (int keybits = 128; keybits <= 256 && !(only && strcmp(only, mode_name[mode])); keybits += 64)
            for (size_t s = 0; s < NSIZES; s++) {
                job j;
                double a[ROUNDS], b[ROUNDS], r[ROUNDS];
                if (!setup(&j, e, mode, keybits, sizes[s], buf)) {
                    printf("%-8s %4d %8zu  set-up failed\n", mode_name[mode], keybits, sizes[s]);
                    EVP_CIPHER_CTX_free(j.ctx);
                    continue;
                }
                for (int i = 0; i < ROUNDS; i++) {
                    a[i] = measure(&j, run_engine, ms);
                    b[i] = measure(&j, run_evp, ms);
                    r[i] = a[i] / b[i];
                }
                qsort(a, ROUNDS, sizeof(double), cmp_double);
                qsort(b, ROUNDS, sizeof(double), cmp_double);
                qsort(r, ROUNDS, sizeof(double), cmp_double);
                printf("%-8s %4d %8zu %9.3f %9.3f %7.2f\n", mode_name[mode], keybits, sizes[s],
                       a[ROUNDS / 2], b[ROUNDS / 2], r[ROUNDS / 2]);
                fflush(stdout);
                e->free_key(&j.ks);
                EVP_CIPHER_CTX_free(j.ctx);
            }
    free(buf);
    return 0;
}
