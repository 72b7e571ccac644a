/* tests/c/test_seccomp_child.c: a forked child enters a seccomp sandbox the way OpenSSH's
 * privilege-separation child does (a short allow-list, files refused with EACCES, anything else
 * kills the process) and then uses accelaes: every cipher and direction from 16 B to 1 MiB (GCM:
 * ciphertext and tag as the default's, the default's ciphertext opened, a wrong tag refused),
 * CBC-encrypt inside ASYNC jobs (the batch path), a failing call, and the counters. The child
 * must survive, match the default provider byte for byte, and its bytes must reach the shared
 * segment's totals. `test_seccomp_child files-readable` lets the child read files (so the
 * provider can see the filter in /proc/self/status) and still kills on everything else. */
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/async.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "scheduler/sched_int.h"

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                           printf(__VA_ARGS__); printf("\n"); } } while (0)

static const char *const names[] = {
    "AES-128-ECB", "AES-192-ECB", "AES-256-ECB", "AES-128-CBC", "AES-192-CBC", "AES-256-CBC", "AES-128-CTR",
    "AES-192-CTR", "AES-256-CTR", "AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS",
};
#define GCM_FIRST 9 /* names[9..11] are AEAD: a tag after final (encrypt), before it (decrypt) */
#define IS_GCM(c) ((c) >= GCM_FIRST && (c) < GCM_FIRST + 3)
#define NCIPH (sizeof(names) / sizeof(names[0]))
static const size_t sizes[] = { 16, 64, 256, 1024, 8192, 16384, 65536, 262144, 1048576 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXLEN (1048576 + 32)

static EVP_CIPHER *acc[NCIPH], *ref[NCIPH];
static unsigned char key[64], iv[16], *in, *out_a, *out_r; /* XTS: two different key halves */

typedef enum {
    FILES_REFUSED,     /* OpenSSH's: files refused with EACCES, anything outside the list kills */
    FILES_READABLE,    /* files allowed, so the provider can see the filter; the rest kills */
    ERRNO_SELF         /* no fork: the loading process itself, every other call refused with EPERM */
} sandbox_mode;

/* Allowed: what OpenSSH 9's seccomp sandbox allows that a cipher call can need. In ERRNO_SELF
 * also CPU discovery, so that the split path gets as far as starting threads (refused). */
static int enter_sandbox(sandbox_mode mode)
{
    static const int allow[] = {
        SCMP_SYS(brk), SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep), SCMP_SYS(close),
        SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(futex), SCMP_SYS(getpid),
        SCMP_SYS(getrandom), SCMP_SYS(gettimeofday), SCMP_SYS(madvise), SCMP_SYS(mmap),
        SCMP_SYS(mprotect), SCMP_SYS(mremap), SCMP_SYS(munmap), SCMP_SYS(nanosleep),
        SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(read), SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(write), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
    };
    scmp_filter_ctx f = seccomp_init(mode == ERRNO_SELF ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_KILL_PROCESS);
    int rc = f == NULL ? -1 : 0;
    if (rc == 0 && mode == ERRNO_SELF)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(sched_getaffinity), 0);
    for (size_t i = 0; rc == 0 && i < sizeof(allow) / sizeof(allow[0]); i++)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, allow[i], 0);
#ifdef __SANITIZE_ADDRESS__
    /* ASan's swapcontext interceptor (ASYNC jobs) asks for the signal stack: the runtime's own
     * call, not the provider's. */
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(sigaltstack), 0);
#endif
    uint32_t files = mode == FILES_READABLE ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EACCES);
    if (rc == 0)
        rc = seccomp_rule_add(f, files, SCMP_SYS(openat), 0);
    if (rc == 0)
        rc = seccomp_rule_add(f, files, SCMP_SYS(open), 0);
    if (rc == 0)
        rc = seccomp_load(f);
    seccomp_release(f);
    return rc;
}

/* tag: NULL, or GCM's 16-byte tag (got after an encryption's final, set before a decryption's). */
static int one_shot_tag(EVP_CIPHER *c, int enc, const unsigned char *src, size_t len, unsigned char *dst, size_t *outl,
                        unsigned char *tag)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0;
    int ok = ctx != NULL && EVP_CipherInit_ex2(ctx, c, key, iv, enc, NULL) && EVP_CIPHER_CTX_set_padding(ctx, 0)
        && EVP_CipherUpdate(ctx, dst, &l1, src, (int)len)
        && (tag == NULL || enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0)
        && EVP_CipherFinal_ex(ctx, dst + l1, &l2)
        && (tag == NULL || !enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0);
    EVP_CIPHER_CTX_free(ctx);
    *outl = (size_t)l1 + (size_t)l2;
    return ok;
}

static int one_shot(EVP_CIPHER *c, int enc, const unsigned char *src, size_t len, unsigned char *dst, size_t *outl)
{
    return one_shot_tag(c, enc, src, len, dst, outl, NULL);
}

/* GCM, one size: ciphertext and tag as the default's; the default's ciphertext and tag opened to
 * the plaintext; the same with one tag bit flipped refused (no plaintext is released). */
static int gcm_case(size_t c, size_t len)
{
    unsigned char ta[16], tr[16];
    size_t la = 0, lr = 0, ld = 0;
    int oa = one_shot_tag(acc[c], 1, in, len, out_a, &la, ta);
    int orf = one_shot_tag(ref[c], 1, in, len, out_r, &lr, tr);
    int ok = oa && orf && la == len && lr == len && memcmp(out_a, out_r, len) == 0 && memcmp(ta, tr, 16) == 0;
    ok = ok && one_shot_tag(acc[c], 0, out_r, len, out_a, &ld, tr) && ld == len && memcmp(out_a, in, len) == 0;
    tr[0] ^= 1;
    ok = ok && !one_shot_tag(acc[c], 0, out_r, len, out_a, &ld, tr);
    ERR_clear_error();
    return ok;
}

/* Every cipher, both directions, every size: accelaes against default; 1 if a case failed (each
 * failed case is printed). */
static int run_all(void)
{
    int bad = 0;
    for (size_t c = 0; c < NCIPH; c++)
        for (size_t s = 0; s < NSIZES; s++)
            for (int enc = 0; enc <= 1; enc++) {
                size_t la = 0, lr = 0;
                if (acc[c] == NULL || ref[c] == NULL) {
                    bad |= 1;
                    break;
                }
                if (IS_GCM(c)) {
                    if (enc && !gcm_case(c, sizes[s])) {
                        printf("FAIL %s %zu B (GCM)\n", names[c], sizes[s]);
                        bad |= 1;
                    }
                    continue;
                }
                int oa = one_shot(acc[c], enc, in, sizes[s], out_a, &la);
                int orf = one_shot(ref[c], enc, in, sizes[s], out_r, &lr);
                if (!oa || !orf || la != lr || memcmp(out_a, out_r, la) != 0) {
                    printf("FAIL %s %s %zu B: accelaes %d (%zu B), default %d (%zu B)\n", names[c],
                           enc ? "encrypt" : "decrypt", sizes[s], oa, la, orf, lr);
                    bad |= 1;
                }
            }
    fflush(stdout);
    return bad;
}

/* Every cipher, both directions, all sizes: the bytes a run_all() adds to the totals at least
 * (GCM: encrypt, decrypt and the refused decrypt). */
static uint64_t want_bytes(void)
{
    uint64_t want = 0;
    for (size_t s = 0; s < NSIZES; s++)
        want += 2 * NCIPH * sizes[s];
    return want;
}

static int async_job(void *arg)
{
    size_t *outl = *(size_t **)arg;   /* the job gets a copy of the argument block */
    return one_shot(acc[3], 1, in, 16384, out_a, outl);
}

/* CBC-encrypt of 16 KiB inside ASYNC jobs: where the batch path would take it. */
static int run_async(void)
{
    ASYNC_JOB *job = NULL;
    ASYNC_WAIT_CTX *w = ASYNC_WAIT_CTX_new();
    size_t la = 0, lr = 0, *pla = &la;
    int ret = 0, rc;
    if (w == NULL)
        return 0;
    for (int i = 0; i < 1000; i++) {
        rc = ASYNC_start_job(&job, w, &ret, async_job, &pla, sizeof(pla));
        if (rc != ASYNC_PAUSE)
            break;
    }
    ASYNC_WAIT_CTX_free(w);
    return ret == 1 && one_shot(ref[3], 1, in, 16384, out_r, &lr) && la == lr && memcmp(out_a, out_r, la) == 0;
}

/* Bad padding: a provider error is raised (err_lock, the error functions) and the call fails. */
static int run_failing(void)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    unsigned char buf[64];
    int l = 0;
    memset(buf, 0xa5, sizeof(buf));
    int ok = ctx != NULL && EVP_DecryptInit_ex2(ctx, acc[3], key, iv, NULL)
             && EVP_DecryptUpdate(ctx, out_a, &l, buf, 32);
    int fin = EVP_DecryptFinal_ex(ctx, out_a + l, &l);
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    EVP_CIPHER_CTX_free(ctx);
    return ok && fin == 0 && e != 0;
}

/* LeakSanitizer's end-of-process check stops the world with clone and ptrace, which the sandbox
 * forbids: under ASan the child runs it before entering the sandbox, which also skips it at exit. */
void __lsan_do_leak_check(void) __attribute__((weak));

static int sandboxed(sandbox_mode mode)
{
    if (__lsan_do_leak_check)
        __lsan_do_leak_check();
    if (enter_sandbox(mode) != 0)
        return 10;
    if (run_all() != 0)
        return 11;
    if (!run_async())
        return 12;
    if (!run_failing())
        return 13;
    return 0;
}

/* The segment's byte totals, through a mapping made once (before any sandbox). */
static uint64_t totals(void)
{
    static acc_shm_table *t;
    const char *why = NULL;
    char name[ACC_SHM_NAME_MAX + 1];
    if (t == NULL && acc_shm_name(name, sizeof(name)) == 0)
        t = acc_shm_attach(name, &why);
    uint64_t sum = 0;
    for (int p = 0; t != NULL && p < ACC_PATH_COUNT; p++)
        sum += ACC_LOAD(&t->hdr.bytes[p]);
    return sum;
}

/* The loading process enters a sandbox that refuses (EPERM) what it does not list: the split
 * path's threads and the batch's eventfd are refused, and the work must run inline, right. */
static void errno_self(void)
{
#ifdef __SANITIZE_ADDRESS__
    /* ASan warns about the first swapcontext (ASYNC jobs) into its log file, which the sandbox
     * would not let it open: have that happen before. */
    CHECK(run_async(), "async before the sandbox");
#endif
    uint64_t before = totals();
    int rc = sandboxed(ERRNO_SELF);
    CHECK(rc == 0, "in an EPERM sandbox: %d (10 sandbox, 11 bytes, 12 async, 13 error path)", rc);
    CHECK(totals() - before >= want_bytes(), "the bytes reached the totals: %llu",
          (unsigned long long)(totals() - before));
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "";
    sandbox_mode mode = strcmp(m, "files-readable") == 0 ? FILES_READABLE
                        : strcmp(m, "errno-self") == 0 ? ERRNO_SELF : FILES_REFUSED;
    OSSL_PROVIDER *pd = OSSL_PROVIDER_load(NULL, "default"), *pa = OSSL_PROVIDER_load(NULL, "accelaes");
    CHECK(pd != NULL && pa != NULL, "providers load (OPENSSL_MODULES names build/)");
    if (pa == NULL) {
        ERR_print_errors_fp(stdout);
        return 1;
    }
    in = malloc(MAXLEN);
    out_a = malloc(MAXLEN);
    out_r = malloc(MAXLEN);
    for (size_t i = 0; i < MAXLEN; i++)
        in[i] = (unsigned char)(i * 131 + 7);
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (unsigned char)(i * 37 + 11);
    memset(iv, 0xc3, sizeof(iv));
    for (size_t c = 0; c < NCIPH; c++) {
        acc[c] = EVP_CIPHER_fetch(NULL, names[c], "provider=accelaes");
        ref[c] = EVP_CIPHER_fetch(NULL, names[c], "provider=default");
        CHECK(acc[c] != NULL && ref[c] != NULL, "fetch %s", names[c]);
    }
    if (mode == ERRNO_SELF) {
        errno_self();
        printf("%d passed, %d failed\n", passed, failed);
        return failed != 0;
    }
    /* The parent works first, as a server would before forking: pool threads, counters. */
    CHECK(run_all() == 0, "parent: accelaes differs from default");
    CHECK(run_async(), "parent: async");
    uint64_t before = totals();
    CHECK(before > 0, "the parent's bytes are in the segment's totals");

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        exit(sandboxed(mode));   /* exit, as sshd's child does: atexit handlers run in the sandbox */
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        CHECK(0, "child killed by signal %d%s", WTERMSIG(st),
              WTERMSIG(st) == SIGSYS ? " (seccomp: the provider made a system call outside the list)" : "");
    else
        CHECK(WEXITSTATUS(st) == 0, "child exit %d (10 sandbox, 11 bytes, 12 async, 13 error path)",
              WEXITSTATUS(st));
    uint64_t want = want_bytes(), after = totals();
    CHECK(after - before >= want, "the child's bytes reached the totals: %llu new, want >= %llu",
          (unsigned long long)(after - before), (unsigned long long)want);
    for (size_t c = 0; c < NCIPH; c++) {
        EVP_CIPHER_free(acc[c]);
        EVP_CIPHER_free(ref[c]);
    }
    free(in);
    free(out_a);
    free(out_r);
    OSSL_PROVIDER_unload(pa);
    OSSL_PROVIDER_unload(pd);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
