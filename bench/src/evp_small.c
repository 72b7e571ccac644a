/* bench/src/evp_small.c: the cost of one EVP_CipherUpdate at small sizes, the default provider against
 * accelaes in one process. Each measurement is many short rounds (ROUNDS x ITERS calls on one context,
 * in place, padding off, as `openssl speed -evp` calls it), the two providers taking turns round by round
 * (the order flips every round). On a shared machine the slow spells hit single rounds, so the minimum
 * over the rounds is the quiet machine's figure: it repeats to 0.01 ns from run to run where a mean of
 * a few long runs moves by percents. The median of the per-round ratios is printed too.
 *
 * Build: make build/bench/evp_small
 * Run:   OPENSSL_MODULES=build build/bench/evp_small [-r ROUNDS] [BYTES...]   (default 151 rounds; 16 64 256)
 *        OPENSSL_MODULES=build build/bench/evp_small -c AES-128-CBC:dec 16      (one cipher and direction)
 *        ... -o 16: the buffer 16 bytes past a 64-byte boundary (0..63; 0 by default), as malloc may place it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One cipher, direction and size: fills best[2] (min ns per call: default, accelaes) and returns the
 * median of the per-round ratios default / accelaes. */
static size_t buf_off;   /* -o: where the buffer starts past a 64-byte boundary */

static double measure(EVP_CIPHER *c[2], int dec, size_t len, int rounds, double best[2])
{
    static unsigned char key[64], iv[16], mem[2][16384 + 128] __attribute__((aligned(64)));
    unsigned char *buf[2] = { mem[0] + buf_off, mem[1] + buf_off };
    long iters = (long)(20000 / (1 + len / 256));
    EVP_CIPHER_CTX *ctx[2];
    double *ratio = malloc(sizeof(double) * (size_t)rounds);
    int outl;

    for (size_t i = 0; i < sizeof(key); i++) /* distinct halves: XTS refuses a duplicated key */
        key[i] = (unsigned char)(i + 1);
    for (int p = 0; p < 2; p++) {
        ctx[p] = EVP_CIPHER_CTX_new();
        EVP_CipherInit_ex2(ctx[p], c[p], key, iv, !dec, NULL);
        EVP_CIPHER_CTX_set_padding(ctx[p], 0);
        best[p] = 1e18;
    }
    for (int r = 0; r < rounds; r++) {
        double t[2];
        for (int k = 0; k < 2; k++) {
            int p = (r & 1) ? 1 - k : k;
            double s = now_ns();
            for (long i = 0; i < iters; i++)
                EVP_CipherUpdate(ctx[p], buf[p], &outl, buf[p], (int)len);
            t[p] = (now_ns() - s) / (double)iters;
            if (t[p] < best[p])
                best[p] = t[p];
        }
        ratio[r] = t[0] / t[1];
    }
    qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
    double med = ratio[rounds / 2];
    free(ratio);
    for (int p = 0; p < 2; p++)
        EVP_CIPHER_CTX_free(ctx[p]);
    return med;
}

int main(int argc, char **argv)
{
    static const char *all[] = { "AES-128-CTR:enc", "AES-128-CBC:enc", "AES-128-CBC:dec", "AES-128-ECB:enc",
                                 "AES-128-ECB:dec", "AES-256-CTR:enc", "AES-256-CBC:enc", "AES-256-CBC:dec",
                                 "AES-256-ECB:enc", "AES-128-XTS:enc", "AES-128-XTS:dec", "AES-256-XTS:enc",
                                 "AES-128-GCM:enc", "AES-128-GCM:dec" };
    const char *only = NULL;
    size_t sizes[16] = { 16, 64, 256 };
    int nsizes = 3, given = 0, rounds = 151;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            buf_off = strtoul(argv[++i], NULL, 10) % 64;
        else {
            if (!given)               /* sizes on the command line replace the defaults */
                nsizes = 0, given = 1;
            if (nsizes < 16)
                sizes[nsizes++] = strtoul(argv[i], NULL, 10);
        }
    }
    if (rounds < 1)
        rounds = 1;
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] == 0 || sizes[s] % 16 || sizes[s] > 16384) {
            fprintf(stderr, "sizes are multiples of 16 from 16 to 16384\n");
            return 2;
        }
    OSSL_PROVIDER_load(NULL, "default");
    if (OSSL_PROVIDER_load(NULL, "accelaes") == NULL) {
        fprintf(stderr, "cannot load accelaes (set OPENSSL_MODULES)\n");
        return 1;
    }
    printf("%d alternated rounds per line; ns per EVP_CipherUpdate, the minimum over the rounds; buffer at 64k+%zu\n",
           rounds, buf_off);
    printf("%-12s %4s %6s %10s %11s %9s %12s\n", "cipher", "dir", "bytes", "default ns", "accelaes ns",
           "min ratio", "median ratio");
    for (size_t n = 0; n < sizeof(all) / sizeof(all[0]); n++) {
        char name[32];
        const char *colon = strchr(all[n], ':');
        int dec = strcmp(colon + 1, "dec") == 0;

        if (only != NULL && strcmp(only, all[n]) != 0)
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(colon - all[n]), all[n]);
        EVP_CIPHER *c[2] = { EVP_CIPHER_fetch(NULL, name, "provider=default"),
                             EVP_CIPHER_fetch(NULL, name, "provider=accelaes") };
        if (c[0] == NULL || c[1] == NULL) {
            fprintf(stderr, "cannot fetch %s\n", name);
            return 1;
        }
        if (n == 0 || only != NULL) {  /* the first line would otherwise run on a cold CPU (clock, caches) */
            double warm[2];
            measure(c, dec, sizes[0], rounds, warm);
        }
        for (int s = 0; s < nsizes; s++) {
            double best[2], med = measure(c, dec, sizes[s], rounds, best);
            printf("%-12s %4s %6zu %10.2f %11.2f %9.3f %12.3f\n", name, dec ? "dec" : "enc", sizes[s], best[0],
                   best[1], best[0] / best[1], med);
        }
        EVP_CIPHER_free(c[0]);
        EVP_CIPHER_free(c[1]);
    }
    return 0;
}
