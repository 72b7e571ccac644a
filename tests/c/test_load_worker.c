/* tests/c/test_load_worker.c: the load and fault-injection worker of tests/system/test_faults.py and
 * tests/system/test_load.py. It loads the accelaes provider beside OpenSSL's default provider and runs
 * random work on T threads (nine ciphers; sizes for the inline, split and GPU paths; fragmented,
 * in-place, padded; CBC-encrypt from async jobs for the batch lanes), every output judged by the
 * default provider. Python cannot load the provider hard enough; this program can. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <openssl/async.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "scheduler/sched_int.h"
#include "tests/c/test_load_worker_sched.h"   /* --takeall and --layout */

#define NCIPHERS 9
#define ASYNC_MAX 16

static const char *const cipher_names[NCIPHERS] = {
    "AES-128-ECB", "AES-192-ECB", "AES-256-ECB", "AES-128-CBC", "AES-192-CBC",
    "AES-256-CBC", "AES-128-CTR", "AES-192-CTR", "AES-256-CTR",
};
enum { M_ECB = 0, M_CBC = 1, M_CTR = 2 };
enum { P_ONESHOT, P_FRAG, P_TINY, P_INPLACE, P_COUNT };
enum { SZ_SMALL, SZ_MEDIUM, SZ_LARGE, SZ_XL, SZ_COUNT };

static struct {
    int threads, async_pct, cipher;   /* cipher: -1 any, else the index of the only one */
    int oneshot;                       /* every operation one update (no fragments, not in place) */
    double seconds;
    uint64_t ops_per_thread, seed, corrupt_every;
    size_t max_size, size;             /* size: 0 random, else every request's length */
    const char *modules;               /* --modules: where the providers are (else $OPENSSL_MODULES) */
    EVP_CIPHER *acc[NCIPHERS], *ref[NCIPHERS];
    uint64_t deadline_ns;
} cfg = { 2, 5, -1, 0, 2.0, 0, 0, 0, 1u << 20, 0, NULL, { 0 }, { 0 }, 0 };

typedef struct worker {
    int id;
    uint64_t rng[4];
    uint64_t ops, bytes, mismatches, errors, async_jobs;
    uint64_t by_size[SZ_COUNT], by_cipher[NCIPHERS];
    uint8_t *p, *ca, *cr, *d;           /* plaintext, accelaes and reference ciphertext, decrypted */
    EVP_CIPHER_CTX *ta, *tr;            /* reused across operations: every op re-keys them */
    char first_failure[256];
} worker;

/* ---- xoshiro256**: fast, seeded, so a failure replays with the printed seed ---- */

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rnd(worker *w)
{
    uint64_t *s = w->rng, r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static uint64_t below(worker *w, uint64_t n)
{
    return n ? rnd(w) % n : 0;
}

static void fill(worker *w, uint8_t *buf, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rnd(w);
        memcpy(buf + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = rnd(w);
        memcpy(buf + i, &v, n - i);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fail(worker *w, int mismatch, const char *fmt, const char *name, size_t len, int enc, int pat)
{
    char line[256];
    snprintf(line, sizeof(line), "%s %s len=%zu %s pattern=%d thread=%d op=%llu seed=%llu", fmt, name, len,
             enc ? "enc" : "dec", pat, w->id, (unsigned long long)w->ops, (unsigned long long)cfg.seed);
    if (mismatch)
        w->mismatches++;
    else
        w->errors++;
    if (!w->first_failure[0])
        snprintf(w->first_failure, sizeof(w->first_failure), "%s", line);
    fprintf(stderr, "test_load_worker[%d]: %s\n", (int)getpid(), line);
    ERR_print_errors_fp(stderr);
}

/* A request size: most are small (inline), many medium, some past split_min and gpu_min. */
static size_t pick_size(worker *w, int *cls)
{
    uint64_t r = below(w, 100), m = cfg.max_size;
    if (cfg.size) {
        *cls = cfg.size <= 1024 ? SZ_SMALL : cfg.size <= 65536 ? SZ_MEDIUM : SZ_LARGE;
        return cfg.size;
    }
    if (r < 35 || m <= 1024) {
        *cls = SZ_SMALL;
        return 1 + below(w, m < 1024 ? m : 1024);
    }
    if (r < 65 || m <= 65536) {
        *cls = SZ_MEDIUM;
        return 1025 + below(w, (m < 65536 ? m : 65536) - 1024);
    }
    if (r < 92) {
        *cls = SZ_LARGE;
        return 65537 + below(w, m / 2 > 65536 ? m / 2 - 65536 : 1);
    }
    *cls = SZ_XL;
    return m / 2 + below(w, m / 2);
}

/* One whole EVP operation (init, updates in the pattern, final) into out; 1 ok, 0 failed. */
static int do_crypt(worker *w, EVP_CIPHER_CTX *ctx, const EVP_CIPHER *c, const uint8_t *key, const uint8_t *iv,
                    int enc, int pad, const uint8_t *in, size_t len, uint8_t *out, size_t *outlen, int pat)
{
    size_t o = 0, pos = 0;
    int n = 0;
    if (!EVP_CipherInit_ex2(ctx, c, key, iv, enc, NULL) || !EVP_CIPHER_CTX_set_padding(ctx, pad))
        return 0;
    if (pat == P_INPLACE) {
        memcpy(out, in, len);
        in = out;
    }
    while (pos < len) {
        size_t take = len - pos;
        if (pat == P_FRAG)
            take = 1 + below(w, take);
        else if (pat == P_TINY && below(w, 4) != 0)
            take = 1 + below(w, take < 40 ? take : 40);
        if (!EVP_CipherUpdate(ctx, out + o, &n, in + pos, (int)take))
            return 0;
        o += (size_t)n;
        pos += take;
    }
    if (!EVP_CipherFinal_ex(ctx, out + o, &n))
        return 0;
    *outlen = o + (size_t)n;
    return 1;
}

/* Encrypt with both providers and compare (output, updated IV, CTR num); then decrypt the
 * reference ciphertext with accelaes and compare with the plaintext. */
static void one_op(worker *w)
{
    int ci = cfg.cipher >= 0 ? cfg.cipher : (int)below(w, NCIPHERS), mode = ci / 3, cls;
    const char *name = cipher_names[ci];
    size_t len = pick_size(w, &cls), la = 0, lr = 0, ld = 0;
    uint8_t key[32], iv[16], iva[16], ivr[16];
    int pad = mode != M_CTR && below(w, 2) == 0;
    int pat = (int)below(w, P_COUNT), pat2 = (int)below(w, P_COUNT);
    if (cfg.oneshot)
        pat = pat2 = P_ONESHOT;
    if (mode != M_CTR && !pad)
        len = len < 16 ? 16 : len & ~(size_t)15;
    /* In place with padding grows the output past the input: not a layout EVP allows. */
    if (pad && pat == P_INPLACE)
        pat = P_ONESHOT;
    if (pad && pat2 == P_INPLACE)
        pat2 = P_ONESHOT;
    fill(w, key, sizeof(key));
    fill(w, iv, sizeof(iv));
    fill(w, w->p, len);
    const uint8_t *v = mode == M_ECB ? NULL : iv;
    w->by_size[cls]++;
    w->by_cipher[ci]++;

    if (!do_crypt(w, w->ta, cfg.acc[ci], key, v, 1, pad, w->p, len, w->ca, &la, pat)) {
        fail(w, 0, "accelaes encrypt failed:", name, len, 1, pat);
        return;
    }
    if (!do_crypt(w, w->tr, cfg.ref[ci], key, v, 1, pad, w->p, len, w->cr, &lr, P_ONESHOT)) {
        fail(w, 0, "default-provider encrypt failed:", name, len, 1, P_ONESHOT);
        return;
    }
    /* --corrupt N: a deliberate wrong byte every N ops proves that the judge can fail. */
    if (cfg.corrupt_every && (w->ops + 1) % cfg.corrupt_every == 0 && la > 0)
        w->ca[below(w, la)] ^= 0x40;
    if (la != lr || memcmp(w->ca, w->cr, la) != 0) {
        fail(w, 1, "ciphertext differs from the default provider's:", name, len, 1, pat);
        return;
    }
    if (mode != M_ECB) {
        if (!EVP_CIPHER_CTX_get_updated_iv(w->ta, iva, 16) || !EVP_CIPHER_CTX_get_updated_iv(w->tr, ivr, 16)
            || memcmp(iva, ivr, 16) != 0 || EVP_CIPHER_CTX_get_num(w->ta) != EVP_CIPHER_CTX_get_num(w->tr)) {
            fail(w, 1, "updated IV or num differs:", name, len, 1, pat);
            return;
        }
    }
    if (!do_crypt(w, w->ta, cfg.acc[ci], key, v, 0, pad, w->cr, lr, w->d, &ld, pat2)) {
        fail(w, 0, "accelaes decrypt failed:", name, lr, 0, pat2);
        return;
    }
    if (ld != len || memcmp(w->d, w->p, len) != 0) {
        fail(w, 1, "decryption does not give the plaintext back:", name, lr, 0, pat2);
        return;
    }
    w->bytes += 2 * len;
}

/* ---- CBC-encrypt from async jobs: the provider pauses them and runs the queue in lanes ---- */

typedef struct ajob {
    EVP_CIPHER_CTX *ctx;
    const EVP_CIPHER *c;
    uint8_t key[32], iv[16];
    const uint8_t *in;
    uint8_t *out;
    size_t len;
    int ok;
} ajob;

static int ajob_fn(void *arg)
{
    ajob *j = *(ajob **)arg;
    int n = 0, m = 0;
    j->ok = EVP_EncryptInit_ex2(j->ctx, j->c, j->key, j->iv, NULL) && EVP_CIPHER_CTX_set_padding(j->ctx, 0)
            && EVP_EncryptUpdate(j->ctx, j->out, &n, j->in, (int)j->len) && EVP_EncryptFinal_ex(j->ctx, j->out + n, &m)
            && (size_t)(n + m) == j->len;
    return j->ok;
}

static void async_round(worker *w)
{
    ajob jobs[ASYNC_MAX];
    ASYNC_JOB *aj[ASYNC_MAX] = { 0 };
    ASYNC_WAIT_CTX *wc[ASYNC_MAX] = { 0 };   /* OpenSSL 3.0's ASYNC_pause_job needs one */
    int k = 4 + (int)below(w, ASYNC_MAX - 3), done[ASYNC_MAX] = { 0 }, left = k, ci = 3 + (int)below(w, 3);
    size_t per = cfg.max_size / ASYNC_MAX / 2 < 16384 ? cfg.max_size / ASYNC_MAX / 2 : 16384, off = 0;
    if (per < 1024)
        per = 1024;
    for (int i = 0; i < k; i++) {
        jobs[i].c = cfg.acc[ci];
        jobs[i].ctx = EVP_CIPHER_CTX_new();
        jobs[i].len = (768 + below(w, per - 768 + 1)) & ~(size_t)15;
        fill(w, jobs[i].key, 32);
        fill(w, jobs[i].iv, 16);
        jobs[i].in = w->p + off;
        jobs[i].out = w->ca + off;
        fill(w, w->p + off, jobs[i].len);
        off += jobs[i].len;
        jobs[i].ok = 0;
        wc[i] = ASYNC_WAIT_CTX_new();
        if (jobs[i].ctx == NULL || wc[i] == NULL) {
            done[i] = 1;
            left--;
        }
    }
    /* Start every job, then resume the paused ones in turn until all have finished. */
    for (int guard = 0; left > 0 && guard < 100000; guard++) {
        for (int i = 0; i < k; i++) {
            if (done[i])
                continue;
            ajob *arg = &jobs[i];
            int ret = 0, r = ASYNC_start_job(&aj[i], wc[i], &ret, ajob_fn, &arg, sizeof(arg));
            if (r != ASYNC_PAUSE) {
                done[i] = 1;
                left--;
                if (r != ASYNC_FINISH)
                    jobs[i].ok = 0;
            }
        }
    }
    for (int i = 0; i < k; i++) {
        size_t lr = 0;
        if (!done[i]) {
            /* Still paused after 100000 resumes: a failure; its context stays with the job. */
            fail(w, 0, "async job never finished:", cipher_names[ci], jobs[i].len, 1, -1);
            continue;
        }
        if (jobs[i].ctx == NULL || wc[i] == NULL || !jobs[i].ok) {
            fail(w, 0, "async accelaes encrypt failed:", cipher_names[ci], jobs[i].len, 1, -1);
        } else if (!do_crypt(w, w->tr, cfg.ref[ci], jobs[i].key, jobs[i].iv, 1, 0, jobs[i].in, jobs[i].len, w->cr,
                          &lr, P_ONESHOT)) {
            fail(w, 0, "default-provider encrypt failed:", cipher_names[ci], jobs[i].len, 1, -1);
        } else if (lr != jobs[i].len || memcmp(w->cr, jobs[i].out, lr) != 0) {
            fail(w, 1, "async ciphertext differs from the default provider's:", cipher_names[ci], jobs[i].len, 1, -1);
        } else {
            w->bytes += jobs[i].len;
        }
        EVP_CIPHER_CTX_free(jobs[i].ctx);
        ASYNC_WAIT_CTX_free(wc[i]);
        OPENSSL_cleanse(jobs[i].key, sizeof(jobs[i].key));
    }
    w->async_jobs += (uint64_t)k;
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    while ((cfg.ops_per_thread == 0 || w->ops < cfg.ops_per_thread)
           && (cfg.ops_per_thread != 0 || now_ns() < cfg.deadline_ns)) {
        /* The async round packs up to 16 jobs into half of one buffer: it needs 32 KiB of it. */
        if (cfg.async_pct > 0 && cfg.max_size >= 32768 && below(w, 100) < (uint64_t)cfg.async_pct)
            async_round(w);
        else
            one_op(w);
        w->ops++;
    }
    ERR_clear_error();
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: test_load_worker [-t THREADS] [-s SECONDS | -n OPS_PER_THREAD] [-m MAX_SIZE]\n"
               "                        [-a ASYNC_PERCENT] [-S SEED] [--corrupt N] [--size N] [--cipher NAME]\n"
               "                        [--modules DIR] [--oneshot]\n"
               "       test_load_worker --takeall | --layout\n"
               "  Loads accelaes and default ($OPENSSL_MODULES) and runs random verified work; prints one\n"
               "  JSON line; exit 0 if every output matched, 1 if any differed or failed, 2 on set-up failure.\n"
               "  --size N makes every request N bytes; --cipher NAME uses only that cipher;\n"
               "  --oneshot makes every operation one update.\n"
               "  --corrupt N flips a byte of every N-th accelaes output (proves the judge can fail).\n"
               "  --takeall takes every CPU unit and GPU slot of the unit table, recovering dead owners'.\n");
}

/* The handles OSSL_PROVIDER_load returns hold references that OSSL_LIB_CTX_free does not drop. */
static OSSL_PROVIDER *prov_def, *prov_acc;

static int setup(OSSL_LIB_CTX **lc)
{
    *lc = OSSL_LIB_CTX_new();
    /* A setuid run (tests/system/test_faults.py) has no OPENSSL_MODULES: OpenSSL ignores it there. */
    if (*lc != NULL && cfg.modules != NULL && !OSSL_PROVIDER_set_default_search_path(*lc, cfg.modules))
        return 0;
    if (*lc == NULL || (prov_def = OSSL_PROVIDER_load(*lc, "default")) == NULL
        || (prov_acc = OSSL_PROVIDER_load(*lc, "accelaes")) == NULL) {
        fprintf(stderr, "test_load_worker: cannot load the providers (OPENSSL_MODULES=%s)\n",
                getenv("OPENSSL_MODULES") ? getenv("OPENSSL_MODULES") : "unset");
        ERR_print_errors_fp(stderr);
        return 0;
    }
    for (int i = 0; i < NCIPHERS; i++) {
        cfg.acc[i] = EVP_CIPHER_fetch(*lc, cipher_names[i], "provider=accelaes");
        cfg.ref[i] = EVP_CIPHER_fetch(*lc, cipher_names[i], "provider=default");
        if (cfg.acc[i] == NULL || cfg.ref[i] == NULL
            || strcmp(OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(cfg.acc[i])), "accelaes") != 0) {
            fprintf(stderr, "test_load_worker: cannot fetch %s from both providers\n", cipher_names[i]);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "corrupt", required_argument, NULL, 'c' }, { "takeall", no_argument, NULL, 'T' },
        { "modules", required_argument, NULL, 'M' }, { "oneshot", no_argument, NULL, 'O' }, { "size", required_argument, NULL, 'z' }, { "cipher", required_argument, NULL, 'C' },
        { "layout", no_argument, NULL, 'L' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    int opt;
    cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    while ((opt = getopt_long(argc, argv, "t:s:n:m:a:S:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 't': cfg.threads = atoi(optarg); break;
        case 's': cfg.seconds = atof(optarg); break;
        case 'n': cfg.ops_per_thread = strtoull(optarg, NULL, 0); break;
        case 'm': cfg.max_size = strtoull(optarg, NULL, 0); break;
        case 'a': cfg.async_pct = atoi(optarg); break;
        case 'S': cfg.seed = strtoull(optarg, NULL, 0); break;
        case 'c': cfg.corrupt_every = strtoull(optarg, NULL, 0); break;
        case 'z': cfg.size = strtoull(optarg, NULL, 0); break;
        case 'M': cfg.modules = optarg; break;
        case 'O': cfg.oneshot = 1; break;
        case 'C':
            for (int i = 0; i < NCIPHERS; i++)
                if (strcasecmp(optarg, cipher_names[i]) == 0)
                    cfg.cipher = i;
            if (cfg.cipher < 0) {
                usage(stderr);
                return 2;
            }
            break;
        case 'T': return takeall();
        case 'L': return layout();
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (cfg.size > cfg.max_size)
        cfg.max_size = cfg.size;
    if (optind != argc || cfg.threads < 1 || cfg.threads > 256 || cfg.max_size < 16 || cfg.max_size > (64u << 20)
        || cfg.async_pct < 0 || cfg.async_pct > 100) {
        usage(stderr);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    OSSL_LIB_CTX *lc = NULL;
    if (!setup(&lc))
        return 2;
    worker *ws = calloc((size_t)cfg.threads, sizeof(*ws));
    pthread_t *th = calloc((size_t)cfg.threads, sizeof(*th));
    if (ws == NULL || th == NULL)
        return 2;
    cfg.deadline_ns = now_ns() + (uint64_t)(cfg.seconds * 1e9);
    int started = 0;
    for (int i = 0; i < cfg.threads; i++) {
        worker *w = &ws[i];
        w->id = i;
        /* splitmix64 of seed and thread: distinct, reproducible streams */
        uint64_t z = cfg.seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        for (int k = 0; k < 4; k++) {
            z += 0x9e3779b97f4a7c15ull;
            uint64_t x = z;
            x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
            x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
            w->rng[k] = x ^ (x >> 31);
        }
        size_t cap = cfg.max_size + 64;
        w->p = malloc(cap);
        w->ca = malloc(cap);
        w->cr = malloc(cap);
        w->d = malloc(cap);
        w->ta = EVP_CIPHER_CTX_new();
        w->tr = EVP_CIPHER_CTX_new();
        if (!w->p || !w->ca || !w->cr || !w->d || !w->ta || !w->tr || pthread_create(&th[i], NULL, thread_main, w))
            break;
        started++;
    }
    uint64_t ops = 0, bytes = 0, mism = 0, errs = 0, ajobs = 0, sz[SZ_COUNT] = { 0 };
    const char *first = "";
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        worker *w = &ws[i];
        ops += w->ops;
        bytes += w->bytes;
        mism += w->mismatches;
        errs += w->errors;
        ajobs += w->async_jobs;
        for (int k = 0; k < SZ_COUNT; k++)
            sz[k] += w->by_size[k];
        if (!first[0])
            first = w->first_failure;
    }
    printf("{\"pid\": %d, \"seed\": %llu, \"threads\": %d, \"started\": %d, \"ops\": %llu, \"bytes\": %llu, "
           "\"mismatches\": %llu, \"errors\": %llu, \"async_jobs\": %llu, \"small\": %llu, \"medium\": %llu, "
           "\"large\": %llu, \"xl\": %llu, \"first_failure\": \"%s\"}\n",
           (int)getpid(), (unsigned long long)cfg.seed, cfg.threads, started, (unsigned long long)ops,
           (unsigned long long)bytes, (unsigned long long)mism, (unsigned long long)errs,
           (unsigned long long)ajobs, (unsigned long long)sz[0], (unsigned long long)sz[1],
           (unsigned long long)sz[2], (unsigned long long)sz[3], first);
    for (int i = 0; i < cfg.threads; i++) {
        EVP_CIPHER_CTX_free(ws[i].ta);
        EVP_CIPHER_CTX_free(ws[i].tr);
        free(ws[i].p);
        free(ws[i].ca);
        free(ws[i].cr);
        free(ws[i].d);
    }
    for (int i = 0; i < NCIPHERS; i++) {
        EVP_CIPHER_free(cfg.acc[i]);
        EVP_CIPHER_free(cfg.ref[i]);
    }
    free(ws);
    free(th);
    if (prov_acc != NULL)
        OSSL_PROVIDER_unload(prov_acc);
    if (prov_def != NULL)
        OSSL_PROVIDER_unload(prov_def);
    OSSL_LIB_CTX_free(lc);
    return started != cfg.threads ? 2 : mism || errs ? 1 : 0;
}
