/* bench/src/evp_records.c: default provider against accelaes in one process, taking turns, the thread's CPU time
 * per call (so that the other processes of a shared machine count less than in openssl speed's wall clock);
 * the minimum over the rounds. A GCM cipher runs openssl speed's AEAD record with one key: the IV, (a tag to
 * check,) 13 bytes of AAD, the payload, final (and the tag got); any other cipher one EVP_CipherUpdate per call
 * (XTS: one data unit). bench/results/releases-speed.md uses it.
 *
 * Build: make build/bench/evp_records
 * Run:   OPENSSL_MODULES=build build/bench/evp_records CIPHER enc|dec ROUNDS BYTES... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

static unsigned char key[64] = { 1, 2, 3 }, iv[16] = { 2 }, aad[13] = { 3 }, tag[16], buf[1 << 17];

static double cpu_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* n calls of len bytes; ns per call */
static double run(EVP_CIPHER_CTX *x, int aead, int dec, long n, int len)
{
    double t0 = cpu_ns();
    int outl;

    for (long i = 0; i < n; i++) {
        if (!aead) {
            EVP_CipherUpdate(x, buf, &outl, buf, len);
            continue;
        }
        EVP_CipherInit_ex(x, NULL, NULL, NULL, iv, -1);
        if (dec)
            EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag);
        EVP_CipherUpdate(x, NULL, &outl, aad, sizeof(aad));
        EVP_CipherUpdate(x, buf, &outl, buf, len);
        EVP_CipherFinal_ex(x, buf + outl, &outl); /* a decryption's tag does not match: both providers alike */
        if (!dec)
            EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag);
    }
    return (cpu_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    static const char *const props[2] = { "provider=default", "provider=accelaes" };
    EVP_CIPHER_CTX *x[2];
    int dec, rounds, aead;

    if (argc < 5 || (dec = strcmp(argv[2], "dec") == 0, rounds = atoi(argv[3])) <= 0) {
        fprintf(stderr, "usage: %s CIPHER enc|dec ROUNDS BYTES...\n", argv[0]);
        return 2;
    }
    aead = strstr(argv[1], "GCM") != NULL || strstr(argv[1], "gcm") != NULL;
    if (OSSL_PROVIDER_load(NULL, "default") == NULL || OSSL_PROVIDER_load(NULL, "accelaes") == NULL) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, argv[1], props[k]);

        x[k] = EVP_CIPHER_CTX_new();
        if (c == NULL || x[k] == NULL || !EVP_CipherInit_ex(x[k], c, NULL, key, iv, !dec)) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
        EVP_CIPHER_free(c);
    }
    printf("%s %s, %d alternated rounds, thread CPU ns per call, minimum\n%8s %11s %11s %6s\n", argv[1], argv[2],
           rounds, "bytes", "default", "accelaes", "ratio");
    for (int a = 4; a < argc; a++) {
        int len = atoi(argv[a]);
        long n = 4000000 / (len + 100) + 10;
        double best[2] = { 1e30, 1e30 };

        if (len <= 0 || len > (int)sizeof(buf) - 16)
            continue;
        run(x[0], aead, dec, n, len);
        run(x[1], aead, dec, n, len);
        for (int r = 0; r < rounds; r++)
            for (int k0 = 0; k0 < 2; k0++) {
                int k = (k0 + r) & 1; /* each side goes first in turn */
                double t = run(x[k], aead, dec, n, len);

                best[k] = t < best[k] ? t : best[k];
            }
        printf("%8d %11.1f %11.1f %6.2f\n", len, best[0], best[1], best[0] / best[1]);
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++)
        EVP_CIPHER_CTX_free(x[k]);
    return 0;
}
