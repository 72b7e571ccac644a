/* tests/c/test_async_common.h: what the async batching tests share: streams (a cipher context
 * filled here, its data and OpenSSL's output), job slots driven with ASYNC_start_job, and a
 * runner that gives each scenario a thread of its own. Included by test_async_*.c only. */
#ifndef ACCELAES_TEST_ASYNC_COMMON_H
#define ACCELAES_TEST_ASYNC_COMMON_H

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <openssl/async.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/engine.h"
#include "accel/mb.h"
#include "provider/route/batch.h"
#include "provider/route/cipher_ctx.h"

/* Each including test uses only some of these helpers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

static int passed, failed;

static void check(int cond, const char *what)
{
    if (cond) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL: %s\n", what);
    }
}

/* One stream: a cipher context, its data, the lengths of its updates, the reference. */
typedef struct stream {
    acc_cipher_ctx ctx;
    uint8_t key[32], iv0[16];
    uint8_t *in, *out, *ref;
    size_t total;
    size_t lens[8];
    int nupd, inplace;
    int batched, inline_runs, errors;   /* how each update went */
    int sleep_us_before;                /* timeout test: pause before the first update */
} stream;

static const acc_engine *eng;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t pick_len(void)
{
    switch (rand() % 8) {
    case 0:  return 16 * (size_t)(1 + rand() % 15);          /* under the batch minimum */
    case 1:  return 65536 + 16 * (size_t)(rand() % 300);     /* >= 64 KiB: mb runs it in pieces */
    case 2:  return 16 * (size_t)(1 + 2 * (rand() % 500));   /* odd block counts */
    default: return 16 * (size_t)(16 + rand() % 1024);
    }
}

static int stream_init(stream *s, int nupd, size_t fixed_len)
{
    static const size_t keylens[] = { 16, 24, 32 };
    EVP_CIPHER_CTX *c;
    int ol = 0, ok;
    const char *name;

    memset(s, 0, sizeof(*s));
    s->nupd = nupd;
    s->inplace = rand() % 2;
    for (int i = 0; i < nupd; i++) {
        s->lens[i] = fixed_len ? fixed_len : pick_len();
        s->total += s->lens[i];
    }
    s->ctx.keylen = keylens[rand() % 3];
    RAND_bytes(s->key, 32);
    RAND_bytes(s->iv0, 16);
    s->in = malloc(s->total);
    s->ref = malloc(s->total);
    s->out = s->inplace ? s->in : malloc(s->total);
    if (s->in == NULL || s->ref == NULL || s->out == NULL)
        return 0;
    RAND_bytes(s->in, (int)s->total);
    s->ctx.eng = eng;
    s->ctx.mode = ACC_MODE_CBC;
    s->ctx.enc = 1;
    s->ctx.op = ACC_OP_CBC_ENC;
    s->ctx.key_set = s->ctx.iv_set = 1;
    memcpy(s->ctx.rawkey, s->key, s->ctx.keylen);
    memcpy(s->ctx.iv, s->iv0, 16);
    memcpy(s->ctx.oiv, s->iv0, 16);
    if (!eng->set_key(&s->ctx.ks, s->key, s->ctx.keylen, 1))
        return 0;
    name = s->ctx.keylen == 16 ? "AES-128-CBC" : s->ctx.keylen == 24 ? "AES-192-CBC" : "AES-256-CBC";
    EVP_CIPHER *ciph = EVP_CIPHER_fetch(NULL, name, "provider=default");
    c = EVP_CIPHER_CTX_new();
    ok = ciph != NULL && c != NULL && EVP_EncryptInit_ex2(c, ciph, s->key, s->iv0, NULL)
         && EVP_CIPHER_CTX_set_padding(c, 0) && EVP_EncryptUpdate(c, s->ref, &ol, s->in, (int)s->total)
         && (size_t)ol == s->total;
    EVP_CIPHER_CTX_free(c);
    EVP_CIPHER_free(ciph);
    return ok;
}

static int stream_ok(const stream *s)
{
    /* The updated IV must be the last ciphertext block, as EVP continues from it. */
    return s->errors == 0 && memcmp(s->out, s->ref, s->total) == 0
           && memcmp(s->ctx.iv, s->ref + s->total - 16, 16) == 0;
}

static void stream_free(stream *s)
{
    eng->free_key(&s->ctx.ks);
    if (s->out != s->in)
        free(s->out);
    free(s->in);
    free(s->ref);
}

/* The job body: the stream's updates, each through the batch, or inline when not taken. */
static int job_fn(void *arg)
{
    stream *s = *(stream **)arg;
    size_t off = 0;

    if (s->sleep_us_before > 0)
        usleep((useconds_t)s->sleep_us_before);
    for (int i = 0; i < s->nupd; i++) {
        int r = acc_batch_submit(&s->ctx, s->in + off, s->out + off, s->lens[i]);

        if (r > 0) {
            s->batched++;
        } else if (r == 0) {
            s->inline_runs++;
            if (!eng->cbc_enc(&s->ctx.ks, s->in + off, s->out + off, s->lens[i] / 16, s->ctx.iv))
                s->errors++;
        } else {
            s->errors++;
        }
        off += s->lens[i];
    }
    return 1;
}

typedef struct jobslot {
    ASYNC_JOB *job;
    ASYNC_WAIT_CTX *wctx;
    stream *s;
    int live, pauses;
} jobslot;

static int start_or_resume(jobslot *j)
{
    int ret = 0, r = ASYNC_start_job(&j->job, j->wctx, &ret, job_fn, &j->s, sizeof(j->s));

    if (r == ASYNC_PAUSE) {
        j->pauses++;
        return 1;
    }
    j->live = 0;
    return r == ASYNC_FINISH && ret == 1 ? 0 : -1;
}

/* Drive n jobs round-robin, as `openssl speed -async_jobs` does, until all finish. */
static int drive(jobslot *js, int n)
{
    int live = 0, bad = 0;

    for (int i = 0; i < n; i++) {
        int r;

        js[i].live = 1;
        r = start_or_resume(&js[i]);
        live += r > 0;
        bad += r < 0;
    }
    while (live > 0) {
        for (int i = 0; i < n; i++) {
            int r;

            if (!js[i].live)
                continue;
            r = start_or_resume(&js[i]);
            if (r <= 0)
                live--;
            if (r < 0)
                bad++;
        }
    }
    return bad == 0;
}

/* n streams of one update of len bytes, each with a job slot and a wait context. */
static int jobs_open(stream *ss, jobslot *js, int n, size_t len)
{
    int ok = 1;

    memset(js, 0, (size_t)n * sizeof(*js));
    for (int i = 0; i < n; i++) {
        ok = stream_init(&ss[i], 1, len) && (js[i].wctx = ASYNC_WAIT_CTX_new()) != NULL && ok;
        js[i].s = &ss[i];
        js[i].live = 1;
    }
    return ok;
}

/* Resume what is still paused (bounded: a job waiting for ever fails, never hangs), free.
 * Returns 1 when every job finished. */
static int jobs_close(stream *ss, jobslot *js, int n)
{
    int ok = 1;

    for (int k = 0; k < 1000; k++)
        for (int i = 0; i < n; i++)
            if (js[i].live)
                start_or_resume(&js[i]);
    for (int i = 0; i < n; i++) {
        ok &= !js[i].live;
        ASYNC_WAIT_CTX_free(js[i].wctx);
        stream_free(&ss[i]);
    }
    return ok;
}

/* Each scenario runs on a thread of its own: the batch state (learned batch size, lone-job
 * streak) is per thread, so scenarios do not steer each other. */
static void *scenario_thread(void *arg)
{
    ((void (*)(void))arg)();
    OPENSSL_thread_stop();
    return NULL;
}

static void scenario(void (*fn)(void))
{
    pthread_t t;

    if (pthread_create(&t, NULL, scenario_thread, (void *)fn) != 0) {
        check(0, "pthread_create");
        return;
    }
    pthread_join(t, NULL);
}

/* Run the scenarios, each on a fresh thread; prints the summary line. */
static int async_test_main(void (*const *scenarios)(void), size_t n, unsigned default_seed)
{
    const char *env = getenv("TEST_SEED");
    unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10) : default_seed;

    eng = acc_engine_default();
    if (!acc_mb_available()) {
        printf("skipped: built without intel-ipsec-mb or no hardware AES for it (acc_mb_available() = 0)\n");
        printf("0 passed, 0 failed\n");
        return 0;
    }
    if (eng == NULL) {
        printf("no default engine\n0 passed, 1 failed\n");
        return 1;
    }
    srand(seed);
    printf("seed %u, engine %s, lanes %d\n", seed, eng->name, acc_mb_lanes());
    for (size_t i = 0; i < n; i++)
        scenario(scenarios[i]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#pragma GCC diagnostic pop

#endif
