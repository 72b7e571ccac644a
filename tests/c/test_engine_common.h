/* tests/c/test_engine_common.h: what the inline-engine tests share (test_engine.c, test_engine_threads.c):
 * the check counters, the seeded random source, one engine call, the default provider as the reference,
 * and the main that runs a test body on every engine, then again in an ACCELAES_NO_VAES=1 re-run
 * of the same binary (the engine reads it once per process). ACCELAES_TEST_SEED=N replays a run. */
#ifndef ACCELAES_TEST_ENGINE_COMMON_H
#define ACCELAES_TEST_ENGINE_COMMON_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <openssl/evp.h>
#include "accel/engine.h"
#include "accel/cpu/cpu_features.h"

/* Each including test uses only some of these helpers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

/* The operations as table indexes: acc_op (accel/engine.h) minus one. */
enum { ECB_ENC, ECB_DEC, CBC_ENC, CBC_DEC, CTR, NMODES };
_Static_assert(ECB_ENC + 1 == ACC_OP_ECB_ENC && CBC_DEC + 1 == ACC_OP_CBC_DEC && CTR + 1 == ACC_OP_CTR,
               "the test's modes follow acc_op");
static const char *const mode_name[NMODES] = { "ecb-enc", "ecb-dec", "cbc-enc", "cbc-dec", "ctr" };

static int passed, failed;

static void check(int cond, const acc_engine *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int cond, const acc_engine *e, const char *fmt, ...)
{
    va_list ap;
    if (cond) {
        passed++;
        return;
    }
    if (++failed <= 30) {
        fprintf(stderr, "FAIL [%s] ", e->name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
}

/* ---- small utilities ---- */

static uint64_t rng_state;

static uint64_t rnd(void)                          /* xorshift64*: reproducible from the seed */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static void rnd_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rnd() >> 56);
}

/* The test's own 128-bit big-endian increment, independent of the header's acc_ctr_add. */
static void ctr_inc(uint8_t c[16])
{
    for (int i = 15; i >= 0 && ++c[i] == 0; i--)
        ;
}

/* Engine calls that reported failure: none may (tests/c/test_engine_fail.c makes them fail).
 * Counted here, from any thread, and checked once per engine, not per call. */
static int eng_failures;

/* Run one engine call on a fresh key. */
static void eng_run(const acc_engine *e, const acc_aes_key *k, int mode, const uint8_t *in,
                    uint8_t *out, size_t n, uint8_t iv[16])
{
    /* through the project's one dispatcher, as the provider calls an engine */
    acc_req r = { (acc_op)(mode + 1), k, iv, in, out, n };
    int ok = acc_engine_run(e, &r);

    if (ok != 1)
        __atomic_add_fetch(&eng_failures, 1, __ATOMIC_RELAXED);
}

/* ---- the reference: OpenSSL's default provider ---- */

static int reference(int mode, const uint8_t *key, int keybits, const uint8_t *iv,
                     const uint8_t *in, uint8_t *out, size_t n)
{
    static EVP_CIPHER *cache[3][3];
    static const char *const m[3] = { "ECB", "CBC", "CTR" };
    int mi = mode <= ECB_DEC ? 0 : mode <= CBC_DEC ? 1 : 2, ki = keybits / 64 - 2, ol = 0, ok;
    char name[32];

    if (cache[mi][ki] == NULL) {
        snprintf(name, sizeof(name), "AES-%d-%s", keybits, m[mi]);
        cache[mi][ki] = EVP_CIPHER_fetch(NULL, name, "provider=default");
    }
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    ok = c != NULL && cache[mi][ki] != NULL
         && EVP_CipherInit_ex2(c, cache[mi][ki], key, mi ? iv : NULL, mode != ECB_DEC && mode != CBC_DEC, NULL)
         && EVP_CIPHER_CTX_set_padding(c, 0)
         && (n == 0 || (EVP_CipherUpdate(c, out, &ol, in, (int)(16 * n)) && (size_t)ol == 16 * n));
    EVP_CIPHER_CTX_free(c);
    return ok;
}

/* ---- the re-runs: this binary again, on a narrower engine (var=value picks it; want: its name) ---- */

static void run_child(uint64_t seed, const char *prog, const char *var, const char *value, const char *want)
{
    char line[256], sseed[32], arg[64];
    int fd[2], p = 0, f = -1, status = 0;

    snprintf(sseed, sizeof(sseed), "%llu", (unsigned long long)seed);
    fflush(stdout);
    if (pipe(fd) != 0) {
        check(0, acc_engine_aesni(), "pipe for the %s re-run", want);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        setenv(var, value, 1);
        setenv("ACCELAES_FORCE_EVP_ENGINE", "1", 1);
        setenv("ACCELAES_TEST_SEED", sseed, 1);
        snprintf(arg, sizeof(arg), "--child=%s", want);
        execl("/proc/self/exe", prog, arg, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *fp = fdopen(fd[0], "r");
    while (fp != NULL && fgets(line, sizeof(line), fp) != NULL) {
        printf("  [%s re-run] %s", want, line);
        sscanf(line, "%d passed, %d failed", &p, &f);
    }
    if (fp != NULL)
        fclose(fp);
    waitpid(pid, &status, 0);
    passed += p;
    if (f < 0 || !WIFEXITED(status))
        check(0, acc_engine_aesni(), "%s re-run did not finish (status %d)", want, status);
    else if (f > 0)
        failed += f;
    else if (WEXITSTATUS(status) != 0)
        check(0, acc_engine_aesni(), "%s re-run exited with %d", want, WEXITSTATUS(status));
}

/* One engine through the test body; no engine call may have reported failure. */
static void run_engine(const acc_engine *e, void (*body)(const acc_engine *))
{
    int before = failed;
    __atomic_store_n(&eng_failures, 0, __ATOMIC_RELAXED);
    body(e);
    check(__atomic_load_n(&eng_failures, __ATOMIC_RELAXED) == 0, e, "%d engine calls returned failure",
          eng_failures);
    printf("engine %s: %s\n", e->name, failed == before ? "ok" : "FAILED");
}

/* The including test's main: body on the AES-NI engine (VAES where the CPU has it) and the nested-EVP
 * engine, then on each narrower engine the CPU has in a re-run of prog ("--child=NAME" marks a
 * re-run that must run on engine NAME): xmm below either VAES engine, ymm below zmm. */
static int engine_test_main(int argc, char **argv, const char *prog, void (*body)(const acc_engine *))
{
    const char *child = argc > 1 && strncmp(argv[1], "--child=", 8) == 0 ? argv[1] + 8 : NULL;
    const char *s = getenv("ACCELAES_TEST_SEED"), *force = getenv("ACCELAES_FORCE_EVP_ENGINE");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    const acc_engine *ni = acc_engine_aesni(), *evp = acc_engine_evp();
    int forced = force != NULL && strcmp(force, "1") == 0;

    rng_state = seed | 1;
    printf("seed %llu (replay: ACCELAES_TEST_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    if (!evp) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    if (ni != NULL)
        run_engine(ni, body);
    else
        printf("skip: AES-NI engine: this CPU has no AES-NI\n");
    if (child) {
        check(ni == NULL || strcmp(ni->name, child) == 0, evp, "the re-run for %s got %s", child,
              ni ? ni->name : "no engine");
    } else {
        run_engine(evp, body);
        if (ni != NULL && strcmp(ni->name, "aesni") != 0)
            run_child(seed, prog, "ACCELAES_NO_VAES", "1", "aesni");
        else
            printf("skip: xmm re-run: %s\n", ni ? "no VAES here, the xmm engine ran above" : "no AES-NI");
        if (ni != NULL && strcmp(ni->name, "aesni-vaes") == 0 && acc_cpu_has(ACC_CPU_VAES256))
            run_child(seed, prog, "ACCELAES_VAES", "ymm", "aesni-vaes-ymm");
        else
            printf("skip: ymm re-run: %s\n", ni && strcmp(ni->name, "aesni-vaes-ymm") == 0
                                                  ? "the ymm engine ran above" : "no VAES on zmm and ymm here");
    }
    check(acc_engine_default() == ((forced || child || !ni) ? evp : ni), evp,
          "acc_engine_default() is %s", acc_engine_default()->name);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#pragma GCC diagnostic pop

#endif
