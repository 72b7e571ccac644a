/* bench/src/gpu_bench.c: end-to-end throughput of a GPU plugin (the caller's malloc'd, pageable host buffers
 * in and out, by whatever path ACCELAES_CUDA_DMA picks) against OpenSSL's default provider on one core,
 * same run, same data; and against the project's own CPU engine (acc_engine_default); process CPU time
 * (all threads) per offloaded byte; several slots at once; every plugin output checked byte for byte
 * against the default provider. The `host` op measures the plugin's host team alone (copy and XOR over
 * host memory, 1..N threads): the ceiling of the staging side on this machine. Buffers are reused by
 * every run, or (`fresh`) malloc'd anew for each and freed after it, so that a registration cache sees
 * the same addresses come back over other pages. One `gpu-bench-result:` line per figure for scripts. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
/* The plugin's team and copy loops (plain C), built in here to measure them without a GPU. */
#include "accel/cuda/host_team.cu"

static const acc_gpu_plugin *pl;
static int g_bad;
static int g_fresh; /* buffers malloc'd anew for every run, and freed after it */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Process CPU time (all threads: the CUDA runtime's own included). */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double cpu_mhz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    double mhz = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
            break;
    if (f)
        fclose(f);
    return mhz;
}

static const char *mode_of(int op) { return op <= 2 ? "ECB" : op <= 4 ? "CBC" : "CTR"; }
static int enc_of(int op) { return op == ACC_GPU_ECB_ENC || op == ACC_GPU_CBC_ENC || op == ACC_GPU_CTR; }
static const char *name_of(int op)
{
    static const char *n[] = { "", "ECB-enc", "ECB-dec", "CBC-enc", "CBC-dec", "CTR" };
    return n[op];
}

/* The default provider on this thread: len bytes, one context. */
static void evp_run(int op, int bits, const uint8_t *key, const uint8_t *iv, const uint8_t *in, uint8_t *out, size_t len)
{
    static EVP_CIPHER *cache[6][3];   /* fetched once: a fetch per stream would bias the baseline */
    EVP_CIPHER **slot = &cache[op][(bits - 128) / 64];
    if (!*slot) {
        char name[32];
        snprintf(name, sizeof(name), "AES-%d-%s", bits, mode_of(op));
        *slot = EVP_CIPHER_fetch(NULL, name, "provider=default");
    }
    EVP_CIPHER *c = *slot;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ol;
    if (!c || !x || !EVP_CipherInit_ex2(x, c, key, op <= 2 ? NULL : iv, enc_of(op), NULL)
        || !EVP_CIPHER_CTX_set_padding(x, 0))
        exit(2);
    for (size_t done = 0; done < len;) {
        size_t n = len - done > (1u << 30) ? (1u << 30) : len - done;
        if (!EVP_CipherUpdate(x, out + done, &ol, in + done, (int)n))
            exit(2);
        done += n;
    }
    EVP_CIPHER_CTX_free(x);
}

/* The project's inline engine (AES-NI / VAES) on this thread. */
static void eng_run(int op, int bits, const uint8_t *key, const uint8_t *iv, const uint8_t *in, uint8_t *out, size_t len)
{
    const acc_engine *e = acc_engine_default();
    acc_aes_key k;
    uint8_t v[16];
    memcpy(v, iv, 16);
    if (!e->set_key(&k, key, (size_t)bits / 8, op != ACC_GPU_ECB_DEC && op != ACC_GPU_CBC_DEC))
        exit(2);
    int ok;
    switch (op) {
    case ACC_GPU_ECB_ENC: ok = e->ecb_enc(&k, in, out, len / 16); break;
    case ACC_GPU_ECB_DEC: ok = e->ecb_dec(&k, in, out, len / 16); break;
    case ACC_GPU_CBC_ENC: ok = e->cbc_enc(&k, in, out, len / 16, v); break;
    case ACC_GPU_CBC_DEC: ok = e->cbc_dec(&k, in, out, len / 16, v); break;
    default: ok = e->ctr(&k, in, out, len / 16, v); break;
    }
    e->free_key(&k);
    if (!ok)
        exit(2);
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A cheap digest of a run's output, to compare every run with the first without a second buffer. */
static uint64_t fold(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull, w;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    return h;
}

/* reps + 1 plugin runs of one op (run 0 a warm-up, not counted), each into a zeroed output: wall times
 * into times[], process CPU summed into *cpu. Every run's output must equal the first's, and out holds
 * the last. 0 when all ran; else a line saying why. */
static int plugin_runs(acc_gpu_job *jobs, int streams, const acc_gpu_job *proto, size_t size, int reps, uint8_t *in,
                       uint8_t *out, double *times, double *cpu)
{
    size_t per = size / (size_t)streams;
    uint64_t sum0 = 0;
    for (int r = 0; r <= reps; r++) {
        uint8_t *bi = g_fresh ? malloc(size) : in, *bo = g_fresh ? malloc(size) : out;
        if (!bi || !bo)
            exit(2);
        if (g_fresh)
            memcpy(bi, in, size);
        memset(bo, 0, size); /* a run that writes nothing, or writes stale pages, must show */
        for (int s = 0; s < streams; s++) {
            jobs[s] = *proto;
            jobs[s].in = bi + s * per;
            jobs[s].out = bo + s * per;
            jobs[s].len = per;
        }
        double t0 = now_s(), c0 = cpu_s();
        int rc = pl->run(0, jobs, (size_t)streams);
        double t1 = now_s(), c1 = cpu_s();
        uint64_t sum = fold(bo, per * (size_t)streams);
        if (g_fresh) {
            memcpy(out, bo, size);
            free(bi);
            free(bo);
        }
        if (rc != 0 || (r > 0 && sum != sum0)) {
            printf("  %s AES-%d %zu MiB: %s\n", name_of(proto->op), proto->keybits, size >> 20,
                   rc ? pl->last_error() : "a run's output differs from the first run's");
            return -1;
        }
        sum0 = sum;
        if (r > 0) {   /* run 0 is a warm-up */
            times[r - 1] = t1 - t0;
            *cpu += c1 - c0;
        }
    }
    return 0;
}

/* One op at one size: `streams` jobs of size/streams bytes each in one run call (1 for the
 * block-parallel modes; many for CBC-encrypt, which is serial within a stream). */
static void one(int op, int bits, size_t size, int streams, int reps, uint8_t *in, uint8_t *out, uint8_t *ref)
{
    uint8_t key[32], iv[16];
    size_t per = size / (size_t)streams;
    acc_gpu_job *jobs = calloc((size_t)streams, sizeof(*jobs)), proto = { op, bits, key, { 0 }, 0, 0, 0, 0 };
    double cpu = 0, evp_best = 1e30, times[64];
    reps = reps > 64 ? 64 : reps;
    RAND_bytes(key, sizeof(key));
    RAND_bytes(iv, sizeof(iv));
    memcpy(proto.iv, iv, 16);
    if (!jobs || plugin_runs(jobs, streams, &proto, size, reps, in, out, times, &cpu)) {
        g_bad++;
        free(jobs);
        return;
    }
    qsort(times, (size_t)reps, sizeof(times[0]), cmp_double);
    double best = times[0];
    double eng_best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int s = 0; s < streams; s++)
            eng_run(op, bits, key, iv, in + s * per, ref + s * per, per);
        double t1 = now_s();
        for (int s = 0; s < streams; s++)
            evp_run(op, bits, key, iv, in + s * per, ref + s * per, per);
        double t2 = now_s();
        eng_best = t1 - t0 < eng_best ? t1 - t0 : eng_best;
        evp_best = t2 - t1 < evp_best ? t2 - t1 : evp_best;
    }
    int same = memcmp(out, ref, per * (size_t)streams) == 0;
    g_bad += !same;
    double bytes = (double)per * streams, mhz = cpu_mhz();
    double cpu_per_byte = cpu / reps / bytes;
    printf("  %-8s AES-%d %4zu MiB x%-5d: plugin %6.2f GB/s | default provider %5.2f GB/s (ratio %4.2f)"
           " | accelaes CPU engine %5.2f GB/s (ratio %4.2f) | plugin CPU %.3f ns/B (~%.2f cycles/B at %.0f MHz) | %s\n",
           name_of(op), bits, size >> 20, streams, bytes / best / 1e9, bytes / evp_best / 1e9, evp_best / best,
           bytes / eng_best / 1e9, eng_best / best, cpu_per_byte * 1e9, cpu_per_byte * mhz * 1e6, mhz,
           same ? "identical" : "MISMATCH");
    printf("gpu-bench-result: op=%s bits=%d mib=%zu streams=%d gbps=%.3f median_gbps=%.3f cpu_ns=%.4f dma=%s"
           " buffers=%s identical=%d\n",
           name_of(op), bits, size >> 20, streams, bytes / best / 1e9, bytes / times[reps / 2] / 1e9,
           cpu_per_byte * 1e9, env_or("ACCELAES_CUDA_DMA", "default"), g_fresh ? "fresh" : "reused", same);
    free(jobs);
}

/* ---- several callers at once: T threads, each on its own slot (t mod slots) ---- */
typedef struct conc_arg {
    int t, slot, gpu, reps;
    size_t len;
    uint8_t key[16], iv[16];
    uint8_t *in, *out;
    int rc;
} conc_arg;

static pthread_barrier_t g_bar;

static void *conc_thread(void *p)
{
    conc_arg *a = p;
    pthread_barrier_wait(&g_bar);
    for (int r = 0; r < a->reps; r++) {
        if (a->gpu) {
            acc_gpu_job j = { ACC_GPU_CTR, 128, a->key, { 0 }, a->in, a->out, a->len, 0 };
            memcpy(j.iv, a->iv, 16);
            a->rc |= pl->run(a->slot, &j, 1);
        } else {
            eng_run(ACC_GPU_CTR, 128, a->key, a->iv, a->in, a->out, a->len);
        }
    }
    return NULL;
}

static double conc_round(conc_arg *args, int n, int gpu)
{
    pthread_t th[16];
    pthread_barrier_init(&g_bar, NULL, (unsigned)n + 1);
    for (int t = 0; t < n; t++) {
        args[t].gpu = gpu;
        pthread_create(&th[t], NULL, conc_thread, &args[t]);
    }
    pthread_barrier_wait(&g_bar);
    double t0 = now_s();
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    double dt = now_s() - t0;
    pthread_barrier_destroy(&g_bar);
    return dt;
}

static void concurrent(int slots, size_t len)
{
    static const int counts[] = { 1, 2, 4, 8 };
    for (size_t c = 0; c < 4; c++) {
        int n = counts[c];
        conc_arg args[16];
        for (int t = 0; t < n; t++) {
            conc_arg *a = &args[t];
            memset(a, 0, sizeof(*a));
            a->t = t;
            a->slot = t % slots;
            a->reps = 3;
            a->len = len;
            RAND_bytes(a->key, 16);
            RAND_bytes(a->iv, 16);
            a->in = malloc(len);
            a->out = malloc(len);
            if (!a->in || !a->out)
                exit(2);
            RAND_bytes(a->in, (int)len);
            memset(a->out, 0, len);
        }
        conc_round(args, n, 1);   /* warm-up: first use of each slot */
        double g = conc_round(args, n, 1);
        int bad = 0;
        uint8_t *ref = malloc(len);
        for (int t = 0; t < n; t++) {
            eng_run(ACC_GPU_CTR, 128, args[t].key, args[t].iv, args[t].in, ref, len);
            bad |= args[t].rc != 0 || memcmp(ref, args[t].out, len) != 0;
        }
        double e = conc_round(args, n, 0);
        g_bad += bad;
        double total = (double)len * 3 * n;
        printf("  CTR AES-128, %d callers x %zu MiB on %d slots: plugin %6.2f GB/s total | accelaes CPU engine"
               " on %d threads %6.2f GB/s | %s\n", n, len >> 20, n < slots ? n : slots, total / g / 1e9, n,
               total / e / 1e9, bad ? "MISMATCH/FAILED" : "identical");
        for (int t = 0; t < n; t++) {
            free(args[t].in);
            free(args[t].out);
        }
        free(ref);
    }
}

/* ---- host side alone: the team's copy / XOR over host memory ---- */
typedef struct host_arg {
    uint8_t *dst;
    const uint8_t *a, *b;   /* b: XOR operand, or NULL for a copy */
    int nt;
} host_arg;

static void host_fn(void *p, size_t lo, size_t hi)
{
    host_arg *h = p;
    if (h->b)
        acc_hc_xor(h->dst + lo, h->a + lo, h->b + lo, hi - lo, h->nt);
    else
        acc_hc_copy(h->dst + lo, h->a + lo, hi - lo, h->nt);
}

static void host_side(uint8_t *in, uint8_t *out, uint8_t *other, size_t len)
{
    static const int counts[] = { 1, 2, 4, 8, 12, 16 };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("host team alone, %zu MiB, in chunk-sized tasks of 4 MiB as the pipeline issues them (GB/s of output):\n",
           len >> 20);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && counts[c] <= ncpu; c++) {
        acc_ht team;
        acc_ht_start(&team, counts[c], 200);
        double best[4] = { 1e30, 1e30, 1e30, 1e30 };
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 4; k++) {   /* copy, copy NT, XOR, XOR NT */
                host_arg h = { out, in, k >= 2 ? other : NULL, k & 1 };
                double t0 = now_s();
                for (size_t at = 0; at < len; at += 4u << 20) {
                    host_arg hc = h;
                    size_t n = len - at < (4u << 20) ? len - at : (4u << 20);
                    hc.dst += at;
                    hc.a += at;
                    hc.b = hc.b ? hc.b + at : NULL;
                    acc_ht_run(&team, n, host_fn, &hc);
                }
                double dt = now_s() - t0;
                best[k] = dt < best[k] ? dt : best[k];
            }
        acc_ht_stop(&team);
        printf("  %2d threads: copy %6.2f | copy NT %6.2f | XOR %6.2f | XOR NT %6.2f\n", counts[c],
               len / best[0] / 1e9, len / best[1] / 1e9, len / best[2] / 1e9, len / best[3] / 1e9);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN.so [ops: ctr,ecb,cbcdec,cbcenc,conc,host] [max MiB] [reused|fresh]\n",
                argv[0]);
        return 2;
    }
    const char *ops = argc > 2 ? argv[2] : "ctr,ecb,cbcdec,cbcenc";
    size_t maxmib = argc > 3 ? (size_t)atoi(argv[3]) : 256;
    g_fresh = argc > 4 && strcmp(argv[4], "fresh") == 0;
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    acc_gpu_entry_fn entry;
    if (!dl) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    *(void **)&entry = dlsym(dl, ACC_GPU_ENTRY);
    pl = entry ? entry() : NULL;
    acc_gpu_info info;
    char err[256];
    if (!pl || pl->abi != ACC_GPU_ABI_VERSION) {
        fprintf(stderr, "no plugin entry\n");
        return 2;
    }
    double t0 = now_s();
    if (pl->init(&info, err, sizeof(err)) != 0) {
        printf("plugin init failed: %s\n", err);
        return 3;
    }
    printf("plugin %s: %s, %d slots, NUMA node %d, init %.0f ms; DMA %s; CTR mode %s; host threads %s, NT from %s"
           " KiB, chunk %s KiB, streams %s; caller's buffers malloc'd (pageable), %s\n",
           pl->name, info.name, info.slots, info.numa_node, (now_s() - t0) * 1e3,
           env_or("ACCELAES_CUDA_DMA", "default"), env_or("ACCELAES_CUDA_CTR", "default"),
           env_or("ACCELAES_CUDA_HOST_THREADS", "default"), env_or("ACCELAES_CUDA_NT_KB", "default"),
           env_or("ACCELAES_CUDA_CHUNK_KB", "default"), env_or("ACCELAES_CUDA_STREAMS", "default"),
           g_fresh ? "fresh for every run" : "reused by every run");
    info.name[sizeof(info.name) - 1] = 0;
    printf("gpu-bench-device: %s\n", info.name);
    size_t big = maxmib << 20;
    uint8_t *in = malloc(big), *out = malloc(big), *ref = malloc(big);
    if (!in || !out || !ref)
        return 2;
    RAND_bytes(in, (int)(big > (1u << 30) ? (1u << 30) : big));
    memset(out, 0, big);
    memset(ref, 0, big);
    static const size_t mibs[] = { 1, 16, 256 };
    static const struct { const char *key; int op; } all[] = {
        { "ctr", ACC_GPU_CTR }, { "ecb", ACC_GPU_ECB_ENC }, { "cbcdec", ACC_GPU_CBC_DEC }
    };
    for (size_t o = 0; o < 3; o++) {
        if (!strstr(ops, all[o].key))
            continue;
        for (int bits = 128; bits <= 256; bits += 128)
            for (size_t i = 0; i < 3 && mibs[i] <= maxmib; i++)
                one(all[o].op, bits, mibs[i] << 20, 1, mibs[i] >= 256 ? 3 : mibs[i] >= 16 ? 8 : 30, in, out, ref);
    }
    if (strstr(ops, "host"))
        host_side(in, out, ref, big);
    if (strstr(ops, "conc"))
        concurrent(info.slots, (big < (64u << 20) ? big : (64u << 20)));
    if (strstr(ops, "cbcenc"))
        for (int streams = 1024; streams <= 16384; streams *= 4)
            one(ACC_GPU_CBC_ENC, 128, (big < (64u << 20) ? big : (64u << 20)), streams, 3, in, out, ref);
    printf("e2e bench: %s\n", g_bad ? "SOME RUNS FAILED OR DIFFERED" : "all outputs identical to the default provider");
    if (pl->shutdown)
        pl->shutdown();
    free(in);
    free(out);
    free(ref);
    dlclose(dl);
    return g_bad ? 1 : 0;
}
