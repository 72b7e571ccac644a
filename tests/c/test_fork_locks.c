/* tests/c/test_fork_locks.c: every mutex of the provider is fork-safe. For each lock registered
 * with ACC_FORK_SAFE, another thread holds it while the main thread forks; the child must be able
 * to take it (a lock copied in the held state would hang the child for ever). Then the case the
 * issue found end to end: threads raising provider errors while the process forks, and each
 * child raising one of its own. A child that hangs is killed by alarm() and reported. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "scheduler/forksafe.h"

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                           printf(__VA_ARGS__); printf("\n"); } } while (0)

OSSL_provider_init_fn OSSL_provider_init;

typedef struct {
    pthread_mutex_t *m;
    int holding, release;
} holder;

static void *hold_thread(void *arg)
{
    holder *h = arg;
    pthread_mutex_lock(h->m);
    __atomic_store_n(&h->holding, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&h->release, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 100 * 1000 * 1000 };   /* fork waits this long for a HOLD lock */
        nanosleep(&ts, NULL);
        __atomic_store_n(&h->release, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(h->m);
    return NULL;
}

/* 0: the child took the lock; 1: timed out; 128+n: killed by signal n. */
static int fork_while_held(pthread_mutex_t *m)
{
    holder h = { m, 0, 0 };
    pthread_t th;
    if (pthread_create(&th, NULL, hold_thread, &h) != 0)
        return -1;
    while (!__atomic_load_n(&h.holding, __ATOMIC_ACQUIRE))
        sched_yield();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 3;
        _exit(pthread_mutex_timedlock(m, &dl) == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    pthread_join(th, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_each_lock(void)
{
    size_t n = acc_fork_lock_count();
    /* The locks this program links (prov.c, sched.c, pool.c, batch.c, evp_engine.c, gpu.c). */
    CHECK(n >= 8, "registered lock sets: %zu", n);
    for (size_t i = 0; i < n; i++) {
        const acc_fork_lock_reg *r = acc_fork_lock_at(i);
        for (size_t k = 0; k < r->n; k++) {
            int rc = fork_while_held(&r->m[k]);
            CHECK(rc == 0, "lock '%s'[%zu] (%s): child could not take it (%d)", r->name, k,
                  r->mode == ACC_FORK_HOLD ? "held over fork" : "reset in child", rc);
        }
    }
}

/* A provider error: bad padding on decrypt, raised through acc_raise (err_lock). */
static void raise_one(EVP_CIPHER *c)
{
    unsigned char key[16] = { 0 }, iv[16] = { 0 }, buf[32], out[64];
    int l = 0;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    memset(buf, 0x5a, sizeof(buf));
    if (ctx != NULL && EVP_DecryptInit_ex2(ctx, c, key, iv, NULL) && EVP_DecryptUpdate(ctx, out, &l, buf, 32))
        (void)EVP_DecryptFinal_ex(ctx, out + l, &l);
    EVP_CIPHER_CTX_free(ctx);
    ERR_clear_error();
}

static int stop_raising;

static void *raise_thread(void *arg)
{
    while (!__atomic_load_n(&stop_raising, __ATOMIC_ACQUIRE))
        raise_one(arg);
    return NULL;
}

static void test_errors_while_forking(EVP_CIPHER *c)
{
    pthread_t th[2];
    int hung = 0, made = 0, first = 0;
    for (int i = 0; i < 2; i++)
        made += pthread_create(&th[i], NULL, raise_thread, c) == 0;
    for (int round = 0; round < 200; round++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            raise_one(c);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && hung++ == 0)
            first = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    __atomic_store_n(&stop_raising, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < made; i++)
        pthread_join(th[i], NULL);
    CHECK(made == 2, "raising threads started");
    CHECK(hung == 0, "%d of 200 children hung or died raising an error after fork (first: %s %d)", hung,
          first >= 128 ? "signal" : "exit", first >= 128 ? first - 128 : first);
}

int main(void)
{
    OSSL_PROVIDER *pd, *pa;
    CHECK(OSSL_PROVIDER_add_builtin(NULL, "accelaes", OSSL_provider_init), "add builtin");
    pd = OSSL_PROVIDER_load(NULL, "default");
    pa = OSSL_PROVIDER_load(NULL, "accelaes");
    CHECK(pd != NULL && pa != NULL, "providers load");
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, "AES-128-CBC", "provider=accelaes");
    CHECK(c != NULL, "fetch AES-128-CBC from the static provider");
    test_each_lock();
#ifdef __SANITIZE_ADDRESS__
    /* gcc 12's ASan allocator takes no lock around fork: a child forked while another thread was
     * in malloc hangs in __sanitizer::SizeClassAllocator64::GetFromAllocator, accelaes or not. */
    printf("skipped under ASan: errors while forking (its allocator is not fork-safe)\n");
#else
    if (c != NULL)
        test_errors_while_forking(c);
#endif
    EVP_CIPHER_free(c);
    OSSL_PROVIDER_unload(pa);
    OSSL_PROVIDER_unload(pd);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
