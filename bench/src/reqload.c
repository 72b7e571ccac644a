/* bench/src/reqload.c: a fixed volume of cipher work split over N client processes in requests of S bytes, for the
 * "fixed total volume, varied request size x processes" benchmark. Prints one JSON object on stdout:
 * wall time for the whole volume and each process's own time (for fairness). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One client: its own provider load, one context, one buffer reused for every request (as a server would). */
static int client(const char *prov, const char *cipher, int enc, size_t size, unsigned long long bytes,
                  int go_fd, int res_fd)
{
    char propq[128], c;
    unsigned char key[32], iv[16], *in = malloc(size), *out = malloc(size + 32);
    EVP_CIPHER *ci;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int outl;
    double t0, t1;

    snprintf(propq, sizeof(propq), "provider=%s", prov);
    if (OSSL_PROVIDER_load(NULL, prov) == NULL || OSSL_PROVIDER_load(NULL, "default") == NULL ||
        (ci = EVP_CIPHER_fetch(NULL, cipher, propq)) == NULL || ctx == NULL || in == NULL || out == NULL) {
        fprintf(stderr, "reqload: cannot set up %s from provider %s\n", cipher, prov);
        return 1;
    }
    if (RAND_bytes(key, sizeof(key)) != 1 || RAND_bytes(iv, sizeof(iv)) != 1 ||
        RAND_bytes(in, (int)size) != 1 || !EVP_CipherInit_ex2(ctx, ci, key, iv, enc, NULL))
        return 1;
    EVP_CIPHER_CTX_set_padding(ctx, 0); /* decrypting random data: no padding check wanted */
    if (read(go_fd, &c, 1) != 1) /* start together */
        return 1;
    t0 = now();
    for (unsigned long long done = 0; done < bytes; done += size)
        if (!EVP_CipherUpdate(ctx, out, &outl, in, (int)size))
            return 1;
    t1 = now();
    dprintf(res_fd, "%ld %.6f %.6f %llu\n", (long)getpid(), t0, t1, bytes);
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(ci);
    free(in);
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    const char *prov = "default", *cipher = "aes-128-cbc";
    unsigned long long total = 256ULL << 20, each;
    size_t size = 16384;
    int procs = 1, enc = 1, go[2], res[2], failed = 0, first = 1;
    double t0, start = 0, end = 0;
    char line[256];
    FILE *rf;

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--provider") == 0 && v)
            prov = argv[++i];
        else if (strcmp(argv[i], "--cipher") == 0 && v)
            cipher = argv[++i];
        else if (strcmp(argv[i], "--total") == 0 && v)
            total = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--size") == 0 && v)
            size = strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--procs") == 0 && v)
            procs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--decrypt") == 0)
            enc = 0;
        else {
            fprintf(stderr, "usage: reqload [--provider P] [--cipher C] [--decrypt] [--total BYTES] [--size S]"
                            " [--procs N]\n");
            return 2;
        }
    }
    if (procs < 1 || size < 16 || size % 16 != 0 || size > (1u << 30) || total < size) {
        fprintf(stderr, "reqload: need procs >= 1, size a multiple of 16, total >= size\n");
        return 2;
    }
    each = (total / (unsigned long long)procs + size - 1) / size * size;
    signal(SIGPIPE, SIG_IGN);
    if (pipe(go) < 0 || pipe(res) < 0)
        return 1;
    for (int i = 0; i < procs; i++) {
        pid_t pid = fork();

        if (pid < 0)
            return 1;
        if (pid == 0) {
            close(go[1]);
            close(res[0]);
            _exit(client(prov, cipher, enc, size, each, go[0], res[1]));
        }
    }
    close(go[0]);
    close(res[1]);
    usleep(200000); /* let every client load its provider before the clock starts */
    t0 = now();
    for (int i = 0; i < procs; i++)
        if (write(go[1], "g", 1) != 1) /* a client that failed to start: reported below */
            break;
    close(go[1]);
    printf("{\"provider\": \"%s\", \"cipher\": \"%s\", \"enc\": %d, \"procs\": %d, \"size\": %zu, "
           "\"bytes_per_proc\": %llu, \"per_proc_s\": [", prov, cipher, enc, procs, size, each);
    rf = fdopen(res[0], "r");
    while (rf != NULL && fgets(line, sizeof(line), rf) != NULL) {
        long pid;
        double a, b;
        unsigned long long n;

        if (sscanf(line, "%ld %lf %lf %llu", &pid, &a, &b, &n) != 4)
            continue;
        printf("%s%.6f", first ? "" : ", ", b - a);
        if (first || a < start)
            start = a;
        if (first || b > end)
            end = b;
        first = 0;
    }
    for (int i = 0; i < procs; i++) {
        int st;

        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    printf("], \"wall_s\": %.6f, \"ok\": %s}\n", first ? now() - t0 : end - start, failed ? "false" : "true");
    return failed;
}
