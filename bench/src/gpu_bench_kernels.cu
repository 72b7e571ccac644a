/* bench/src/gpu_bench_kernels.cu: kernel-only AES throughput on the GPU (device buffers, CUDA events) for
 * every mode and key size, pinned copy bandwidth, and a byte-for-byte check of every output vs EVP.
 * `gpu_kbench MiB copies` measures the copies only (one direction, both at once, pinning in place). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/cuda/kernels.h"
#include "accel/gpu_plugin.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); exit(2); } } while (0)

static int g_bad;

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void evp_ref(const char *mode, int bits, int enc, const uint8_t *key, const uint8_t *iv,
                    const uint8_t *in, uint8_t *out, size_t len)
{
    char name[32];
    snprintf(name, sizeof(name), "AES-%d-%s", bits, mode);
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, "provider=default");
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ol = 0, fl = 0;
    size_t done = 0;
    if (!c || !x || !EVP_CipherInit_ex2(x, c, key, iv, enc, NULL) || !EVP_CIPHER_CTX_set_padding(x, 0)) {
        fprintf(stderr, "EVP set-up failed for %s\n", name);
        exit(2);
    }
    while (done < len) {   /* EVP takes int lengths */
        size_t n = len - done > (1u << 30) ? (1u << 30) : len - done;
        if (!EVP_CipherUpdate(x, out + done, &ol, in + done, (int)n))
            exit(2);
        done += n;
    }
    EVP_CipherFinal_ex(x, out + done, &fl);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

static void verdict(const char *what, const uint8_t *got, const uint8_t *want, size_t len)
{
    int ok = memcmp(got, want, len) == 0;
    if (!ok)
        g_bad++;
    printf("    check %-40s %s\n", what, ok ? "identical to EVP" : "MISMATCH");
}

typedef struct ctx {
    size_t bytes;
    uint8_t *h_in, *h_out, *h_ref;
    uint4 *d_in, *d_out;
    acc_piece *d_pieces;
    uint32_t *d_rk, *d_chain;
    acc_core_tables tab, *d_tab;
    int sms, occ[3];
    cudaEvent_t e0, e1;
} ctx;

/* Launch the kernel for pieces already on the device; returns ms per launch (best of reps). */
static float time_launch(ctx *c, int kind, acc_kargs *a, int grid, int reps)
{
    float best = 1e30f;
    for (int r = 0; r < reps + 1; r++) {
        CK(cudaEventRecord(c->e0));
        if (kind == ACC_K_FWD) CK(acc_cu_launch_fwd(a, grid, 0));
        else if (kind == ACC_K_INV) CK(acc_cu_launch_inv(a, grid, 0));
        else CK(acc_cu_launch_cbcenc(a, 0));
        CK(cudaEventRecord(c->e1));
        CK(cudaEventSynchronize(c->e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, c->e0, c->e1));
        if (r > 0 && ms < best)   /* run 0 is a warm-up */
            best = ms;
    }
    return best;
}

static void report(const char *what, size_t bytes, float ms)
{
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("  %-44s %8.1f GB/s %9.1f Gbps  (%.3f ms for %zu MiB)\n", what, gbs, gbs * 8, ms, bytes >> 20);
}

static void keys_for(ctx *c, const uint8_t *key, int bits, size_t njobs)
{
    std::vector<uint32_t> rk(ACC_CU_RK_STRIDE * njobs);
    int rounds = acc_core_enc_keys(key, bits, rk.data());
    acc_core_dec_keys(rk.data(), rounds, rk.data() + 60);
    for (size_t j = 1; j < njobs; j++)
        memcpy(&rk[j * ACC_CU_RK_STRIDE], rk.data(), ACC_CU_RK_STRIDE * 4);
    CK(cudaMemcpy(c->d_rk, rk.data(), rk.size() * 4, cudaMemcpyHostToDevice));
}

static void block_modes(ctx *c, int bits)
{
    uint8_t key[32], iv[16];
    RAND_bytes(key, sizeof(key));
    RAND_bytes(iv, sizeof(iv));
    iv[8] = iv[9] = iv[10] = iv[11] = 0xff;   /* the counter crosses a 2^32 carry within the buffer */
    keys_for(c, key, bits, 1);
    const struct { const char *name; int op, kind, ks; const char *mode; int enc; } m[] = {
        { "ECB-enc", ACC_GPU_ECB_ENC, ACC_K_FWD, 0, "ECB", 1 },
        { "ECB-dec", ACC_GPU_ECB_DEC, ACC_K_INV, 0, "ECB", 0 },
        { "CTR (in -> out)", ACC_GPU_CTR, ACC_K_FWD, 0, "CTR", 1 },
        { "CTR (keystream only)", ACC_GPU_CTR, ACC_K_FWD, 1, "CTR", 1 },
        { "CBC-dec", ACC_GPU_CBC_DEC, ACC_K_INV, 0, "CBC", 0 },
    };
    uint32_t nblk = (uint32_t)(c->bytes / 16);
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        acc_piece p = { 0, nblk, 0, 0, (uint8_t)m[i].op, (uint8_t)(bits / 32 + 6), 0, 0, { 0 } };
        memcpy(p.iv, iv, 16);
        CK(cudaMemcpy(c->d_pieces, &p, sizeof(p), cudaMemcpyHostToDevice));
        acc_kargs a = { c->d_pieces, 1, nblk, c->d_in, c->d_out, c->d_rk, c->d_chain, c->d_tab, m[i].ks };
        int grid = c->occ[m[i].kind] * c->sms;
        char what[96];
        snprintf(what, sizeof(what), "AES-%d %s", bits, m[i].name);
        report(what, c->bytes, time_launch(c, m[i].kind, &a, grid, 5));
        if (i == 2 && bits == 128) {   /* the grid choice: persistent blocks vs one thread per AES block */
            int full = (int)((nblk + ACC_CU_THREADS - 1) / ACC_CU_THREADS);
            snprintf(what, sizeof(what), "AES-%d %s, grid=%d (1 block/thread)", bits, m[i].name, full);
            report(what, c->bytes, time_launch(c, m[i].kind, &a, full, 5));
        }
        CK(cudaMemcpy(c->h_out, c->d_out, c->bytes, cudaMemcpyDeviceToHost));
        if (m[i].ks) {
            memset(c->h_ref, 0, c->bytes);
            evp_ref("CTR", bits, 1, key, iv, c->h_ref, c->h_ref, c->bytes);
        } else {
            evp_ref(m[i].mode, bits, m[i].enc, key, iv, c->h_in, c->h_ref, c->bytes);
        }
        verdict(what, c->h_out, c->h_ref, c->bytes);
    }
}

/* CBC-encrypt: S independent streams, one thread each, sharing the buffer. */
static void cbc_streams(ctx *c, int bits, uint32_t streams)
{
    uint8_t key[32];
    RAND_bytes(key, sizeof(key));
    keys_for(c, key, bits, streams);
    size_t per = (c->bytes / streams) & ~(size_t)15;
    std::vector<acc_piece> ps(streams);
    for (uint32_t s = 0; s < streams; s++) {
        acc_piece p = { s * (uint32_t)(per / 16), (uint32_t)(per / 16), s * (uint32_t)(per / 16), s,
                        ACC_GPU_CBC_ENC, (uint8_t)(bits / 32 + 6), 0, 0, { 0 } };
        RAND_bytes((uint8_t *)p.iv, 16);
        ps[s] = p;
    }
    CK(cudaMemcpy(c->d_pieces, ps.data(), streams * sizeof(acc_piece), cudaMemcpyHostToDevice));
    acc_kargs a = { c->d_pieces, streams, (uint32_t)(streams * (per / 16)), c->d_in, c->d_out, c->d_rk,
                    c->d_chain, c->d_tab, 0 };
    char what[96];
    snprintf(what, sizeof(what), "AES-%d CBC-enc, %u streams x %zu KiB", bits, streams, per >> 10);
    report(what, per * streams, time_launch(c, ACC_K_CBCENC, &a, 0, 2));
    CK(cudaMemcpy(c->h_out, c->d_out, per * streams, cudaMemcpyDeviceToHost));
    for (uint32_t s = 0; s < streams; s++)
        evp_ref("CBC", bits, 1, key, (const uint8_t *)ps[s].iv, c->h_in + (size_t)s * per, c->h_ref + (size_t)s * per, per);
    verdict(what, c->h_out, c->h_ref, per * streams);
}

/* cudaHostRegister of one slice per thread: whether pinning a caller's buffer in place (instead of
 * staging it) scales with threads the way the staging copies do. */
typedef struct reg_arg {
    uint8_t *p;
    size_t len;
    cudaError_t e;
} reg_arg;

static void *reg_thread(void *p)
{
    reg_arg *r = (reg_arg *)p;
    r->e = cudaHostRegister(r->p, r->len, cudaHostRegisterDefault);
    return NULL;
}

static void register_threads(uint8_t *pg, size_t bytes)
{
    for (int n = 1; n <= 8; n *= 2) {
        double best = 1e30, best_un = 1e30;
        size_t slice = (bytes / n) & ~(size_t)4095;
        for (int r = 0; r < 3; r++) {
            reg_arg a[8];
            pthread_t th[8];
            double t0 = wall();
            for (int i = 0; i < n; i++) {
                a[i].p = pg + i * slice;
                a[i].len = slice;
                pthread_create(&th[i], NULL, reg_thread, &a[i]);
            }
            for (int i = 0; i < n; i++)
                pthread_join(th[i], NULL);
            double t1 = wall();
            for (int i = 0; i < n; i++)
                CK(a[i].e);
            for (int i = 0; i < n; i++)
                CK(cudaHostUnregister(a[i].p));
            double t2 = wall();
            best = t1 - t0 < best ? t1 - t0 : best;
            best_un = t2 - t1 < best_un ? t2 - t1 : best_un;
        }
        char what[96];
        snprintf(what, sizeof(what), "cudaHostRegister, %d threads (unregister serial)", n);
        report(what, slice * n, (float)(best * 1e3));
        snprintf(what, sizeof(what), "  then cudaHostUnregister of the %d slices", n);
        report(what, slice * n, (float)(best_un * 1e3));
    }
}

static void copies(ctx *c)
{
    float best_h2d = 1e30f, best_d2h = 1e30f, ms;
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(c->e0));
        CK(cudaMemcpyAsync(c->d_in, c->h_in, c->bytes, cudaMemcpyHostToDevice, 0));
        CK(cudaEventRecord(c->e1));
        CK(cudaEventSynchronize(c->e1));
        CK(cudaEventElapsedTime(&ms, c->e0, c->e1));
        best_h2d = r && ms < best_h2d ? ms : best_h2d;
        CK(cudaEventRecord(c->e0));
        CK(cudaMemcpyAsync(c->h_out, c->d_in, c->bytes, cudaMemcpyDeviceToHost, 0));
        CK(cudaEventRecord(c->e1));
        CK(cudaEventSynchronize(c->e1));
        CK(cudaEventElapsedTime(&ms, c->e0, c->e1));
        best_d2h = r && ms < best_d2h ? ms : best_d2h;
    }
    report("pinned host -> device copy", c->bytes, best_h2d);
    report("pinned device -> host copy", c->bytes, best_d2h);
    /* ECB and CBC-decrypt move data both ways at once: what the link gives per direction then. */
    cudaStream_t s2;
    cudaEvent_t e2;
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e2));
    float best_both = 1e30f;
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(c->e0, 0));
        CK(cudaStreamWaitEvent(s2, c->e0, 0));
        CK(cudaMemcpyAsync(c->d_in, c->h_in, c->bytes, cudaMemcpyHostToDevice, 0));
        CK(cudaMemcpyAsync(c->h_out, c->d_out, c->bytes, cudaMemcpyDeviceToHost, s2));
        CK(cudaEventRecord(e2, s2));
        CK(cudaStreamWaitEvent(0, e2, 0));
        CK(cudaEventRecord(c->e1, 0));
        CK(cudaEventSynchronize(c->e1));
        CK(cudaEventElapsedTime(&ms, c->e0, c->e1));
        best_both = r && ms < best_both ? ms : best_both;
    }
    report("pinned both ways at once, per direction", c->bytes, best_both);
    CK(cudaEventDestroy(e2));
    CK(cudaStreamDestroy(s2));
    /* What the staging copies are up against: the driver's own path for pageable memory, and
     * pinning a caller's buffer in place (cudaHostRegister), the alternative to staging. */
    uint8_t *pg = (uint8_t *)malloc(c->bytes);
    if (!pg)
        return;
    memset(pg, 1, c->bytes);
    double best_pg_h2d = 1e30, best_pg_d2h = 1e30, best_reg = 1e30, best_unreg = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = wall();
        CK(cudaMemcpy(c->d_in, pg, c->bytes, cudaMemcpyHostToDevice));
        double t1 = wall();
        CK(cudaMemcpy(pg, c->d_in, c->bytes, cudaMemcpyDeviceToHost));
        double t2 = wall();
        CK(cudaHostRegister(pg, c->bytes, cudaHostRegisterDefault));
        double t3 = wall();
        CK(cudaHostUnregister(pg));
        double t4 = wall();
        if (r) {
            best_pg_h2d = t1 - t0 < best_pg_h2d ? t1 - t0 : best_pg_h2d;
            best_pg_d2h = t2 - t1 < best_pg_d2h ? t2 - t1 : best_pg_d2h;
            best_reg = t3 - t2 < best_reg ? t3 - t2 : best_reg;
            best_unreg = t4 - t3 < best_unreg ? t4 - t3 : best_unreg;
        }
    }
    report("pageable host -> device copy (cudaMemcpy)", c->bytes, (float)(best_pg_h2d * 1e3));
    report("pageable device -> host copy (cudaMemcpy)", c->bytes, (float)(best_pg_d2h * 1e3));
    report("cudaHostRegister of a malloc'd buffer", c->bytes, (float)(best_reg * 1e3));
    report("cudaHostUnregister", c->bytes, (float)(best_unreg * 1e3));
    register_threads(pg, c->bytes);
    free(pg);
}

int main(int argc, char **argv)
{
    ctx c;
    memset(&c, 0, sizeof(c));
    c.bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 256) << 20;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    c.sms = p.multiProcessorCount;
    for (int k = 0; k < 3; k++)
        c.occ[k] = acc_cu_occupancy(k);
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("device: %s, %d SMs, sm_%d%d, %.0f MHz; blocks/SM: fwd %d inv %d cbc-enc %d; buffer %zu MiB\n",
           p.name, c.sms, p.major, p.minor, clock_khz / 1e3, c.occ[0], c.occ[1], c.occ[2], c.bytes >> 20);
    acc_core_tables_init(&c.tab);
    CK(cudaMalloc(&c.d_tab, sizeof(c.tab)));
    CK(cudaMemcpy(c.d_tab, &c.tab, sizeof(c.tab), cudaMemcpyHostToDevice));
    CK(cudaHostAlloc(&c.h_in, c.bytes, 0));
    CK(cudaHostAlloc(&c.h_out, c.bytes, 0));
    c.h_ref = (uint8_t *)malloc(c.bytes);
    CK(cudaMalloc(&c.d_in, c.bytes));
    CK(cudaMalloc(&c.d_out, c.bytes));
    CK(cudaMalloc(&c.d_pieces, 65536 * sizeof(acc_piece)));
    CK(cudaMalloc(&c.d_rk, (size_t)65536 * ACC_CU_RK_STRIDE * 4));
    CK(cudaMalloc(&c.d_chain, (size_t)65536 * 16));
    CK(cudaEventCreate(&c.e0));
    CK(cudaEventCreate(&c.e1));
    if (!c.h_ref)
        return 2;
    RAND_bytes(c.h_in, (int)c.bytes);
    copies(&c);
    if (argc > 2 && !strcmp(argv[2], "copies"))
        return 0;
    CK(cudaMemcpy(c.d_in, c.h_in, c.bytes, cudaMemcpyHostToDevice));
    printf("kernel-only (device buffers, best of 5 after a warm-up):\n");
    for (int bits = 128; bits <= 256; bits += 64)
        block_modes(&c, bits);
    for (int bits = 128; bits <= 256; bits += 128)
        for (uint32_t s = 4096; s <= 65536; s *= 4)
            cbc_streams(&c, bits, s);
    printf("kernel bench: %s\n", g_bad ? "SOME OUTPUTS WRONG" : "all outputs identical to EVP");
    return g_bad ? 1 : 0;
}
