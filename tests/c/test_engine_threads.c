/* tests/c/test_engine_threads.c: the inline AES engines with one key shared by several threads, each
 * with its own output (the split path does this), and fork while those threads are inside engine
 * calls. Every engine, and the xmm re-run, as tests/c/test_engine_common.h drives them. */
#include <pthread.h>
#include "tests/c/test_engine_common.h"

/* Several threads share one const key, each with its own output (the split path does this). */
typedef struct thr_arg {
    const acc_engine *e;
    const acc_aes_key *k;
    int mode, ok;
    uint8_t iv[16], in[16 * 200], want[16 * 200], out[16 * 200];
} thr_arg;

static pthread_barrier_t thr_start;

/* Many short calls (every mode is prefix-consistent, so n blocks must match the reference's
 * first n) give the threads many chances to meet inside one engine call. */
static void *thr_main(void *p)
{
    thr_arg *a = p;
    a->ok = 1;
    pthread_barrier_wait(&thr_start);
    for (size_t r = 0; r < 20000; r++) {
        uint8_t iv[16];
        size_t n = r % 16 ? 1 + r % 4 : 1 + (r * 7919) % 200;   /* mostly tiny: races show there */
        memcpy(iv, a->iv, 16);
        eng_run(a->e, a->k, a->mode, a->in, a->out, n, iv);
        a->ok &= memcmp(a->out, a->want, 16 * n) == 0;
    }
    return NULL;
}

/* Fork while the threads are inside engine calls: the child holds copies of whatever they had
 * taken, with nobody left to give it back, and must still finish (alarm: a hang fails). */
static void fork_while_busy(const acc_engine *e, const acc_aes_key *k, const thr_arg *a)
{
    for (int f = 0; f < 16; f++) {
        usleep(300);
        pid_t pid = fork();
        if (pid == 0) {
            uint8_t iv[16], out[16 * 200];
            alarm(10);
            for (int r = 0; r < 50; r++) {
                memcpy(iv, a->iv, 16);
                eng_run(e, k, a->mode, a->in, out, 200, iv);
                if (memcmp(out, a->want, sizeof(out)) != 0)
                    _exit(1);
            }
            _exit(0);
        }
        int status = -1;
        if (pid > 0)
            waitpid(pid, &status, 0);
        check(status == 0, e, "engine call in a child forked while threads held the key "
              "(wait status %d)", status);
    }
}

static void test_threads(const acc_engine *e)
{
    enum { T = 6 };
    static thr_arg a[T];
    pthread_t th[T];
    uint8_t key[16];
    acc_aes_key k;

    rnd_bytes(key, sizeof(key));
    memset(&k, 0, sizeof(k));
    if (!e->set_key(&k, key, 16, 0)) {
        check(0, e, "threads set_key");
        return;
    }
    for (int i = 0; i < T; i++) {
        a[i].e = e, a[i].k = &k, a[i].mode = i < 4 ? CBC_ENC : i == 4 ? CTR : CBC_DEC;
        rnd_bytes(a[i].iv, 16);
        rnd_bytes(a[i].in, sizeof(a[i].in));
        if (!reference(a[i].mode, key, 128, a[i].iv, a[i].in, a[i].want, 200))
            check(0, e, "threads reference");
    }
    pthread_barrier_init(&thr_start, NULL, T + 1);
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, thr_main, &a[i]);
    pthread_barrier_wait(&thr_start);
    fork_while_busy(e, &k, &a[T - 1]);
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        check(a[i].ok, e, "thread %d (%s) on a shared key", i, mode_name[a[i].mode]);
    }
    pthread_barrier_destroy(&thr_start);
    e->free_key(&k);
}

int main(int argc, char **argv)
{
    return engine_test_main(argc, argv, "test_engine_threads", test_threads);
}
