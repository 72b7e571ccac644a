/* bench/src/pipeline.c: OpenSSL 3.5's cipher pipeline API against separate EVP calls, AES-128-GCM encryption:
 * a batch of N messages (each with its 12-byte IV and 13 bytes of AAD, as a TLS record has) under one key,
 *   pipe     accelaes, EVP_CipherPipelineEncryptInit (same key, N new IVs) + one AAD update + one data
 *            update + final + one "pipeline-tag" get for the whole batch;
 *   acc      accelaes, N x (EVP_EncryptInit_ex2 with the IV, AAD update, update, final, tag get);
 *   default  the default provider, the same N separate calls.
 * The three take turns round by round (the order rotates), and the minimum per batch over the rounds is the
 * quiet machine's figure; the ratios are of those minima. The 3.5 functions are looked up at run time, so the
 * program builds on 3.0's headers and says so where the running libcrypto has no pipeline API.
 *
 * Build: make build/bench/pipeline
 * Run:   OPENSSL_MODULES=build build/bench/pipeline [-r ROUNDS] [BYTES...]   (default 41 rounds; 1024 16384) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

typedef int pinit_fn(EVP_CIPHER_CTX *, const EVP_CIPHER *, const unsigned char *, size_t, size_t,
                     const unsigned char **, size_t);
typedef int pupdate_fn(EVP_CIPHER_CTX *, unsigned char **, size_t *, const size_t *, const unsigned char **,
                       const size_t *);
typedef int pfinal_fn(EVP_CIPHER_CTX *, unsigned char **, size_t *, const size_t *);

static pinit_fn *p_einit;
static pupdate_fn *p_update;
static pfinal_fn *p_final;

#define MAXN 32
#define AADLEN 13
static unsigned char key[16], ivs[MAXN][12], aad[MAXN][AADLEN], tags[MAXN][16];
static unsigned char *in[MAXN], *out[MAXN];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One batch through the pipeline API; ctx already holds the cipher (cipher NULL keeps it and its key). */
static int batch_pipe(EVP_CIPHER_CTX *ctx, size_t n, size_t len)
{
    const unsigned char *iv[MAXN], *a[MAXN], *src[MAXN];
    unsigned char *tp[MAXN], **tpp = tp;
    size_t alen[MAXN], dlen[MAXN], outl[MAXN], osz[MAXN];
    OSSL_PARAM prm[2] = { OSSL_PARAM_END, OSSL_PARAM_END };

    for (size_t i = 0; i < n; i++) {
        ivs[i][11]++;
        iv[i] = ivs[i], a[i] = aad[i], src[i] = in[i], tp[i] = tags[i];
        alen[i] = AADLEN, dlen[i] = len, osz[i] = len;
    }
    prm[0] = OSSL_PARAM_construct_octet_ptr("pipeline-tag", (void **)&tpp, 16);
    return p_einit(ctx, NULL, key, sizeof(key), n, iv, 12) && p_update(ctx, NULL, outl, NULL, a, alen)
        && p_update(ctx, out, outl, osz, src, dlen) && p_final(ctx, out, outl, osz)
        && EVP_CIPHER_CTX_get_params(ctx, prm);
}

/* The same batch as N separate messages on one context (the key kept, a new IV each). */
static int batch_separate(EVP_CIPHER_CTX *ctx, size_t n, size_t len)
{
    int outl;

    for (size_t i = 0; i < n; i++) {
        ivs[i][11]++;
        if (!EVP_EncryptInit_ex2(ctx, NULL, NULL, ivs[i], NULL) || !EVP_EncryptUpdate(ctx, NULL, &outl, aad[i], AADLEN)
            || !EVP_EncryptUpdate(ctx, out[i], &outl, in[i], (int)len) || !EVP_EncryptFinal_ex(ctx, out[i] + len, &outl)
            || !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tags[i]))
            return 0;
    }
    return 1;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* best[3]: min ns per batch of pipe, acc, default; returns 0 on a failed call. */
static int measure(EVP_CIPHER_CTX *ctx[3], size_t n, size_t len, int rounds, double best[3], double med[3])
{
    long iters = (long)(400000 / (n * (len + 256)));
    double *t = calloc((size_t)rounds * 3, sizeof(double));

    if (iters < 2)
        iters = 2;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++) {
            int w = (r + k) % 3;
            double s = now_ns();
            for (long i = 0; i < iters; i++)
                if (!(w == 0 ? batch_pipe(ctx[0], n, len) : batch_separate(ctx[w], n, len))) {
                    free(t);
                    return 0;
                }
            t[w * rounds + r] = (now_ns() - s) / (double)iters;
        }
    for (int w = 0; w < 3; w++) {
        qsort(t + w * rounds, (size_t)rounds, sizeof(double), cmp_double);
        best[w] = t[w * rounds];
        med[w] = t[w * rounds + rounds / 2];
    }
    free(t);
    return 1;
}

static int setup(EVP_CIPHER_CTX *ctx[3])
{
    EVP_CIPHER *acc = EVP_CIPHER_fetch(NULL, "AES-128-GCM", "provider=accelaes");
    EVP_CIPHER *def = EVP_CIPHER_fetch(NULL, "AES-128-GCM", "provider=default");
    const unsigned char *iv[1] = { ivs[0] };

    if (acc == NULL || def == NULL)
        return 0;
    for (int k = 0; k < 3; k++)
        ctx[k] = EVP_CIPHER_CTX_new();
    return p_einit(ctx[0], acc, key, sizeof(key), 1, iv, 12) && EVP_EncryptInit_ex2(ctx[1], acc, key, ivs[0], NULL)
        && EVP_EncryptInit_ex2(ctx[2], def, key, ivs[0], NULL);
}

int main(int argc, char **argv)
{
    size_t sizes[8] = { 1024, 16384 }, nsizes = 2, ns[] = { 1, 4, 8, 16, 32 };
    int rounds = 41, a = 1;
    EVP_CIPHER_CTX *ctx[3];

    if (a + 1 < argc && strcmp(argv[a], "-r") == 0)
        rounds = atoi(argv[a + 1]), a += 2;
    if (a < argc)
        for (nsizes = 0; a < argc && nsizes < 8; a++)
            sizes[nsizes++] = (size_t)atol(argv[a]);
    p_einit = (pinit_fn *)dlsym(RTLD_DEFAULT, "EVP_CipherPipelineEncryptInit");
    p_update = (pupdate_fn *)dlsym(RTLD_DEFAULT, "EVP_CipherPipelineUpdate");
    p_final = (pfinal_fn *)dlsym(RTLD_DEFAULT, "EVP_CipherPipelineFinal");
    if (p_einit == NULL || p_update == NULL || p_final == NULL) {
        printf("%s has no cipher pipeline API (3.5+): nothing to measure\n", OpenSSL_version(OPENSSL_VERSION));
        return 0;
    }
    if (!OSSL_PROVIDER_load(NULL, "default") || !OSSL_PROVIDER_load(NULL, "accelaes") || !setup(ctx)) {
        fprintf(stderr, "set-up failed (OPENSSL_MODULES=build?)\n");
        return 1;
    }
    for (size_t i = 0; i < MAXN; i++) {
        in[i] = aligned_alloc(64, 16384 + 64), out[i] = aligned_alloc(64, 16384 + 64);
        memset(in[i], (int)i, 16384 + 64);
    }
    printf("%s, AES-128-GCM encrypt, %d rounds, min ns per batch (median); GB/s of data\n",
           OpenSSL_version(OPENSSL_VERSION), rounds);
    printf("%6s %3s | %9s %9s %9s | %7s %7s %7s | %9s %9s\n", "bytes", "N", "pipe", "acc", "default", "pipe", "acc",
           "default", "pipe/acc", "pipe/def");
    for (size_t s = 0; s < nsizes; s++)
        for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
            double best[3], med[3], bytes = (double)(ns[j] * sizes[s]);

            if (sizes[s] > 16384 || !measure(ctx, ns[j], sizes[s], rounds, best, med)) {
                fprintf(stderr, "failed at N=%zu, %zu bytes\n", ns[j], sizes[s]);
                return 1;
            }
            printf("%6zu %3zu | %9.0f %9.0f %9.0f | %7.2f %7.2f %7.2f | %9.2f %9.2f   (median ratios %.2f %.2f)\n",
                   sizes[s], ns[j], best[0], best[1], best[2], bytes / best[0], bytes / best[1], bytes / best[2],
                   best[1] / best[0], best[2] / best[0], med[1] / med[0], med[2] / med[0]);
        }
    return 0;
}
