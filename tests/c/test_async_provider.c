/* tests/c/test_async_provider.c: many ASYNC jobs encrypting through the accelaes provider
 * (build/accelaes.so, loaded with OSSL_PROVIDER_load; OPENSSL_MODULES names its folder):
 * CBC with and without padding, GCM (tag checked too) and XTS (one data unit per stream), several
 * updates of ragged lengths, every output checked against OpenSSL's default provider. Batching
 * must not change a byte; GCM and XTS do not batch, and their jobs must finish all the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/async.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

static int passed, failed;

static void check(int cond, const char *what)
{
    if (cond) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL: %s\n", what);
        ERR_print_errors_fp(stderr);
    }
}

enum { CBC, GCM, XTS };
#define NCIPH 8

typedef struct stream {
    EVP_CIPHER *ciph;          /* accelaes */
    EVP_CIPHER *ref;           /* default */
    int kind;                  /* CBC, GCM (a 16-byte tag after the output), XTS (one update) */
    uint8_t key[64], iv[16];
    uint8_t *in, *out, *want;
    size_t total, outlen, wantlen;
    size_t lens[6];
    int nupd, pad, ok;
} stream;

static size_t pick_len(void)
{
    switch (rand() % 6) {
    case 0:  return (size_t)(rand() % 40);                   /* tiny, ragged */
    case 1:  return 65536 + (size_t)(rand() % 3000);         /* over 64 KiB */
    default: return 768 + (size_t)(rand() % 17000);          /* batchable, ragged */
    }
}

static int encrypt_all(EVP_CIPHER *c, stream *s, uint8_t *dst, size_t *dlen)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    size_t off = 0, o = 0;
    int ol = 0, ok;

    ok = ctx != NULL && EVP_EncryptInit_ex2(ctx, c, s->key, s->iv, NULL)
         && EVP_CIPHER_CTX_set_padding(ctx, s->pad);
    for (int i = 0; ok && i < s->nupd; i++) {
        ok = EVP_EncryptUpdate(ctx, dst + o, &ol, s->in + off, (int)s->lens[i]);
        off += s->lens[i];
        o += (size_t)ol;
    }
    ok = ok && EVP_EncryptFinal_ex(ctx, dst + o, &ol);
    o += (size_t)ol;
    if (ok && s->kind == GCM) {
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, dst + o) > 0;
        o += 16;
    }
    *dlen = o;
    EVP_CIPHER_CTX_free(ctx);
    return ok;
}

static int job_fn(void *arg)
{
    stream *s = *(stream **)arg;

    s->ok = encrypt_all(s->ciph, s, s->out, &s->outlen);
    return s->ok;
}

static void run(int njobs, EVP_CIPHER *const ciphs[NCIPH], EVP_CIPHER *const refs[NCIPH], const int kinds[NCIPH])
{
    stream *ss = calloc((size_t)njobs, sizeof(*ss));
    ASYNC_JOB **jobs = calloc((size_t)njobs, sizeof(*jobs));
    ASYNC_WAIT_CTX **w = calloc((size_t)njobs, sizeof(*w));
    int *live = calloc((size_t)njobs, sizeof(*live));
    int nlive = 0, good = 0, bad = 0, ret;
    char what[128];

    if (ss == NULL || jobs == NULL || w == NULL || live == NULL) {
        check(0, "allocation");
        return;
    }
    for (int i = 0; i < njobs; i++) {
        stream *s = &ss[i];
        int k = rand() % NCIPH;

        s->ciph = ciphs[k];
        s->ref = refs[k];
        s->kind = kinds[k];
        s->pad = rand() % 2;
        /* XTS: each update is a data unit of its own, at least one block: one update */
        s->nupd = s->kind == XTS ? 1 : 1 + rand() % 6;
        for (int u = 0; u < s->nupd; u++) {
            s->lens[u] = pick_len();
            if (s->kind == XTS && s->lens[u] < 16)
                s->lens[u] += 16;
            s->total += s->lens[u];
        }
        if (!s->pad && s->kind == CBC) {
            /* Without padding the whole stream must be whole blocks. */
            size_t fix = (16 - s->total % 16) % 16;

            s->lens[s->nupd - 1] += fix;
            s->total += fix;
        }
        RAND_bytes(s->key, 64); /* XTS: two different halves (but for a 2^-128 chance) */
        RAND_bytes(s->iv, 16);
        s->in = malloc(s->total + 1);
        s->out = malloc(s->total + 48);
        s->want = malloc(s->total + 48);
        w[i] = ASYNC_WAIT_CTX_new();
        if (s->in == NULL || s->out == NULL || s->want == NULL || w[i] == NULL
            || !RAND_bytes(s->in, (int)s->total + 1)
            || !encrypt_all(s->ref, s, s->want, &s->wantlen)) {
            check(0, "set-up");
            return;
        }
    }
    for (int i = 0; i < njobs; i++) {
        stream *sp = &ss[i];
        int r = ASYNC_start_job(&jobs[i], w[i], &ret, job_fn, &sp, sizeof(sp));

        live[i] = r == ASYNC_PAUSE;
        nlive += live[i];
        bad += r == ASYNC_ERR || r == ASYNC_NO_JOBS;
    }
    /* Round-robin resumes, as `openssl speed -async_jobs` does; bounded against a hang. */
    for (long spins = 0; nlive > 0 && spins < 10000000; spins++) {
        for (int i = 0; i < njobs; i++) {
            stream *sp = &ss[i];
            int r;

            if (!live[i])
                continue;
            r = ASYNC_start_job(&jobs[i], w[i], &ret, job_fn, &sp, sizeof(sp));
            if (r != ASYNC_PAUSE) {
                live[i] = 0;
                nlive--;
                bad += r != ASYNC_FINISH;
            }
        }
    }
    for (int i = 0; i < njobs; i++)
        good += ss[i].ok && ss[i].outlen == ss[i].wantlen && memcmp(ss[i].out, ss[i].want, ss[i].outlen) == 0;
    snprintf(what, sizeof(what), "%d jobs through the provider: all finished (%d stuck, %d errors)", njobs, nlive, bad);
    check(nlive == 0 && bad == 0, what);
    snprintf(what, sizeof(what), "%d jobs through the provider: %d of %d outputs equal OpenSSL's", njobs, good, njobs);
    check(good == njobs, what);
    for (int i = 0; i < njobs; i++) {
        free(ss[i].in);
        free(ss[i].out);
        free(ss[i].want);
        ASYNC_WAIT_CTX_free(w[i]);
    }
    free(ss);
    free(jobs);
    free(w);
    free(live);
}

int main(void)
{
    static const char *names[NCIPH] = { "AES-128-CBC", "AES-192-CBC", "AES-256-CBC", "AES-128-GCM",
                                        "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS" };
    static const int kinds[NCIPH] = { CBC, CBC, CBC, GCM, GCM, GCM, XTS, XTS };
    unsigned seed = (unsigned)(getenv("TEST_SEED") ? strtoul(getenv("TEST_SEED"), NULL, 10) : 777u);
    OSSL_LIB_CTX *lib = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *acc = NULL, *def = NULL;
    EVP_CIPHER *ciphs[NCIPH] = { NULL }, *refs[NCIPH] = { NULL };

    if (lib == NULL || (def = OSSL_PROVIDER_load(lib, "default")) == NULL) {
        printf("cannot set up a library context\n0 passed, 1 failed\n");
        return 1;
    }
    acc = OSSL_PROVIDER_load(lib, "accelaes");
    if (acc == NULL) {
        printf("skipped: the accelaes provider cannot be loaded (build build/accelaes.so and set "
               "OPENSSL_MODULES=build)\n0 passed, 0 failed\n");
        return 0;
    }
    for (int k = 0; k < NCIPH; k++) {
        ciphs[k] = EVP_CIPHER_fetch(lib, names[k], "provider=accelaes");
        refs[k] = EVP_CIPHER_fetch(lib, names[k], "provider=default");
        if (ciphs[k] == NULL || refs[k] == NULL) {
            printf("cannot fetch %s\n0 passed, 1 failed\n", names[k]);
            return 1;
        }
    }
    srand(seed);
    printf("seed %u\n", seed);
    run(16, ciphs, refs, kinds);
    run(37, ciphs, refs, kinds);
    run(3, ciphs, refs, kinds);
    run(1, ciphs, refs, kinds);
    for (int k = 0; k < NCIPH; k++) {
        EVP_CIPHER_free(ciphs[k]);
        EVP_CIPHER_free(refs[k]);
    }
    OSSL_PROVIDER_unload(acc);
    OSSL_PROVIDER_unload(def);
    OSSL_LIB_CTX_free(lib);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
