/* bench/src/split_load.c: 1 MiB EVP_CipherUpdate requests through accelaes with the split on (the
 * default split_min) and off (split_min above the request), alternated in one process, each request
 * timed on its own. bench/scripts/split_load.sh runs it under background load; this program only measures.
 *
 * The two sides are two library contexts, each with its own accelaes instance: the provider reads
 * ACCELAES_SPLIT_MIN when it is loaded, so the "inline" context is loaded with it set above the
 * request size and the "split" context with it unset (or as -s says). Both share the process's
 * scheduler and pool, as two parts of one application would. Batches of -b requests alternate
 * between the sides until -t seconds per cipher have passed, so a slow spell falls on both.
 *
 * usage: split_load [-t SECONDS] [-b BATCH] [-z BYTES] [-s SPLIT_MIN] [-o] [-l LABEL] [CIPHER:enc|dec ...]
 *   default ciphers: aes-128-ctr:enc aes-128-ecb:enc aes-128-cbc:dec; -o: out of place (default in place,
 *   as openssl speed does). One line per cipher and side, then the split/inline ratios; no assertions. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

enum { SPLIT = 0, INLINE = 1 };
static const char *side_name[2] = { "split", "inline" };

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* k-th smallest of v[0..n) (reorders v). */
static uint64_t select_k(uint64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                uint64_t t = v[i]; v[i] = v[j]; v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return v[k];
    }
    return v[k];
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 95% bootstrap intervals of the split/inline ratios of the mean and the p99, resampling whole
 * rounds (one split batch and one inline batch, adjacent in time) so that the pairing is kept:
 * the spread shows what "within noise" means for this run. */
static void bootstrap(uint64_t *const lat[2], size_t rounds, size_t batch, double mean_ci[2], double p99_ci[2])
{
    enum { B = 200 };
    static double rm[B], rp[B];
    size_t n = rounds * batch;
    uint64_t *tmp = malloc(n * sizeof(*tmp));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    if (tmp == NULL || rounds < 2) {
        mean_ci[0] = mean_ci[1] = p99_ci[0] = p99_ci[1] = 0;
        free(tmp);
        return;
    }
    for (int b = 0; b < B; b++) {
        double mean[2], p99[2];
        size_t pick[4096], np = rounds < 4096 ? rounds : 4096;
        for (size_t r = 0; r < np; r++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            pick[r] = (size_t)(x % rounds);
        }
        for (int s = 0; s < 2; s++) {
            uint64_t sum = 0;
            size_t m = 0;
            for (size_t r = 0; r < np; r++)
                for (size_t k = 0; k < batch; k++) {
                    tmp[m] = lat[s][pick[r] * batch + k];
                    sum += tmp[m++];
                }
            mean[s] = (double)sum / (double)m;
            p99[s] = (double)select_k(tmp, m, (m * 99) / 100);
        }
        rm[b] = mean[0] / mean[1];
        rp[b] = p99[0] / p99[1];
    }
    qsort(rm, B, sizeof(double), cmp_dbl);
    qsort(rp, B, sizeof(double), cmp_dbl);
    mean_ci[0] = rm[B / 40];
    mean_ci[1] = rm[B - 1 - B / 40];
    p99_ci[0] = rp[B / 40];
    p99_ci[1] = rp[B - 1 - B / 40];
    free(tmp);
}

static OSSL_LIB_CTX *load_side(const char *split_min)
{
    OSSL_LIB_CTX *lc = OSSL_LIB_CTX_new();
    if (split_min != NULL)
        setenv("ACCELAES_SPLIT_MIN", split_min, 1);
    else
        unsetenv("ACCELAES_SPLIT_MIN");
    if (lc == NULL || OSSL_PROVIDER_load(lc, "accelaes") == NULL) {
        ERR_print_errors_fp(stderr);
        fprintf(stderr, "split_load: cannot load accelaes (OPENSSL_MODULES?)\n");
        exit(2);
    }
    unsetenv("ACCELAES_SPLIT_MIN");
    return lc;
}

typedef struct {
    uint64_t *lat;
    size_t n, cap;
} samples;

static void add(samples *s, uint64_t v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->lat = realloc(s->lat, s->cap * sizeof(*s->lat));
        if (s->lat == NULL)
            exit(2);
    }
    s->lat[s->n++] = v;
}

typedef struct {
    double mean_us, p50_us, p99_us, max_us, gbs, rps;
} summary;

static summary summarise(samples *s, size_t bytes)
{
    summary r = { 0 };
    uint64_t sum = 0;
    if (s->n == 0)
        return r;
    qsort(s->lat, s->n, sizeof(*s->lat), cmp_u64);
    for (size_t i = 0; i < s->n; i++)
        sum += s->lat[i];
    r.mean_us = (double)sum / (double)s->n / 1e3;
    r.p50_us = (double)s->lat[s->n / 2] / 1e3;
    r.p99_us = (double)s->lat[(s->n * 99) / 100] / 1e3;
    r.max_us = (double)s->lat[s->n - 1] / 1e3;
    r.rps = (double)s->n / ((double)sum / 1e9);
    r.gbs = r.rps * (double)bytes / 1e9;
    return r;
}

static EVP_CIPHER_CTX *make_ctx(OSSL_LIB_CTX *lc, const char *name, int enc)
{
    static const unsigned char key[16] = { 0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                           0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c };
    /* A counter near a 64-bit wrap: the split's per-piece counters carry across it. */
    static const unsigned char iv[16] = { 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
                                          0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00 };
    EVP_CIPHER *ci = EVP_CIPHER_fetch(lc, name, "provider=accelaes");
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ci == NULL || ctx == NULL || !EVP_CipherInit_ex2(ctx, ci, key, iv, enc, NULL)) {
        ERR_print_errors_fp(stderr);
        fprintf(stderr, "split_load: cannot set up %s from accelaes\n", name);
        exit(2);
    }
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    EVP_CIPHER_free(ci);
    return ctx;
}

static int one(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, size_t len, uint64_t *ns)
{
    int outl = 0;
    uint64_t t0 = now_ns();
    int ok = EVP_CipherUpdate(ctx, out, &outl, in, (int)len);
    *ns = now_ns() - t0;
    return ok && (size_t)outl == len;
}

int main(int argc, char **argv)
{
    double seconds = 6.0;
    size_t batch = 8, size = 1u << 20;
    const char *split_min = NULL, *label = "";
    int out_of_place = 0, first_cipher = argc;
    static const char *const defaults[] = { "aes-128-ctr:enc", "aes-128-ecb:enc", "aes-128-cbc:dec" };

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "-t") == 0 && v) seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "-b") == 0 && v) batch = strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "-z") == 0 && v) size = strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "-s") == 0 && v) split_min = argv[++i];
        else if (strcmp(argv[i], "-l") == 0 && v) label = argv[++i];
        else if (strcmp(argv[i], "-o") == 0) out_of_place = 1;
        else if (argv[i][0] != '-') { first_cipher = i; break; }
        else {
            fprintf(stderr, "usage: split_load [-t S] [-b N] [-z BYTES] [-s SPLIT_MIN] [-o] [-l LABEL] [CIPHER:enc|dec ...]\n");
            return 2;
        }
    }
    if (size == 0 || size % 16 != 0 || size > (1u << 30) || batch == 0) {
        fprintf(stderr, "split_load: size must be a multiple of 16 up to 1 GiB, batch > 0\n");
        return 2;
    }
    char inline_min[32];
    snprintf(inline_min, sizeof(inline_min), "%zu", 2 * size);
    OSSL_LIB_CTX *lc[2];
    lc[SPLIT] = load_side(split_min);
    lc[INLINE] = load_side(inline_min);

    int ncipher = first_cipher < argc ? argc - first_cipher : 3;
    unsigned char *buf[2], *obuf[2];
    for (int s = 0; s < 2; s++) {
        buf[s] = aligned_alloc(64, size);
        obuf[s] = out_of_place ? aligned_alloc(64, size) : buf[s];
        if (buf[s] == NULL || obuf[s] == NULL)
            return 2;
    }
    int failed = 0;
    for (int ci = 0; ci < ncipher; ci++) {
        char name[64];
        snprintf(name, sizeof(name), "%s", first_cipher < argc ? argv[first_cipher + ci] : defaults[ci]);
        char *colon = strchr(name, ':');
        int enc = !(colon != NULL && strcmp(colon + 1, "dec") == 0);
        if (colon != NULL)
            *colon = '\0';
        EVP_CIPHER_CTX *ctx[2] = { make_ctx(lc[SPLIT], name, enc), make_ctx(lc[INLINE], name, enc) };
        samples smp[2] = { { 0 }, { 0 } };
        uint64_t ns;

        /* Same key, IV and data on both sides: the first request's outputs must agree. */
        for (int s = 0; s < 2; s++) {
            for (size_t k = 0; k < size; k++)
                buf[s][k] = (unsigned char)(k * 131u + 7u);
            if (!one(ctx[s], obuf[s], buf[s], size, &ns))
                failed = 1;
        }
        if (memcmp(obuf[SPLIT], obuf[INLINE], size) != 0) {
            fprintf(stderr, "split_load: %s: split and inline outputs differ\n", name);
            failed = 1;
        }
        /* From here both sides work on the same buffers, so that neither has better pages
         * (huge pages, cache sets) than the other. */
        unsigned char *tin = buf[SPLIT], *tout = obuf[SPLIT];
        for (int w = 0; w < 4; w++)                 /* warm-up: pool threads, page faults */
            for (int s = 0; s < 2; s++)
                failed |= !one(ctx[s], tout, tin, size, &ns);
        uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
        for (unsigned round = 0; now_ns() < end && !failed; round++) {
            for (int k = 0; k < 2; k++) {
                int s = (int)((round + (unsigned)k) & 1);   /* who goes first alternates too */
                for (size_t b = 0; b < batch; b++) {
                    if (!one(ctx[s], tout, tin, size, &ns)) {
                        failed = 1;
                        break;
                    }
                    add(&smp[s], ns);
                }
            }
        }
        if (failed) {
            ERR_print_errors_fp(stderr);
            fprintf(stderr, "split_load: %s failed\n", name);
            return 1;
        }
        size_t rounds = smp[SPLIT].n / batch < smp[INLINE].n / batch ? smp[SPLIT].n / batch : smp[INLINE].n / batch;
        double mean_ci[2], p99_ci[2];
        uint64_t *const lat[2] = { smp[SPLIT].lat, smp[INLINE].lat };
        bootstrap(lat, rounds, batch, mean_ci, p99_ci);   /* before summarise sorts them */
        summary r[2];
        for (int s = 0; s < 2; s++) {
            r[s] = summarise(&smp[s], size);
            printf("%-8s %-12s %s %-6s n=%-6zu %8.1f req/s %6.2f GB/s  mean %8.1f us  p50 %8.1f us  "
                   "p99 %8.1f us  max %9.1f us\n", label, name, enc ? "enc" : "dec", side_name[s], smp[s].n,
                   r[s].rps, r[s].gbs, r[s].mean_us, r[s].p50_us, r[s].p99_us, r[s].max_us);
        }
        printf("%-8s %-12s %s ratio split/inline: mean %.2f [%.2f-%.2f]  p50 %.2f  p99 %.2f [%.2f-%.2f]"
               "  (below 1: split faster; [95%% bootstrap])\n",
               label, name, enc ? "enc" : "dec", r[SPLIT].mean_us / r[INLINE].mean_us, mean_ci[0], mean_ci[1],
               r[SPLIT].p50_us / r[INLINE].p50_us, r[SPLIT].p99_us / r[INLINE].p99_us, p99_ci[0], p99_ci[1]);
        fflush(stdout);
        for (int s = 0; s < 2; s++) {
            EVP_CIPHER_CTX_free(ctx[s]);
            free(smp[s].lat);
        }
    }
    for (int s = 0; s < 2; s++) {
        if (obuf[s] != buf[s])
            free(obuf[s]);
        free(buf[s]);
        OSSL_LIB_CTX_free(lc[s]);
    }
    return 0;
}
