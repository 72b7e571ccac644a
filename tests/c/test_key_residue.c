/* tests/c/test_key_residue.c: the child of tests/system/test_key_residue.py. It runs every mode (ECB, CBC, CTR,
 * GCM, XTS, the stitched CBC-HMAC ciphers) of one provider, small and large, both directions, and CBC
 * encryption in ASYNC jobs (the multi-buffer lanes), frees every context, wipes its own copy of each key,
 * prints "ready" and waits for stdin to close: meanwhile the test reads this process's memory (every
 * thread's stack, every heap) for the keys and their round keys. Keys come from splitmix64 (argv seed),
 * 64 bytes per slot, so the test knows them without this process ever printing one.
 * Usage: test_key_residue PROVIDER SEED [BIG [keep]]: BIG the large size in bytes (default 320 KiB); keep leaves
 * one AES-256-XTS context alive, unfreed, for the test to find. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/async.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

static int passed, failed;
static uint64_t sm;                     /* splitmix64 state */
static uint8_t key[64];                 /* the current slot's key bytes; wiped after each use */
static int nslot;
static OSSL_LIB_CTX *lib;
static const char *prov;

static void check(int cond, const char *what, const char *name, size_t len)
{
    if (cond) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "FAIL: %s (%s, %zu bytes)\n", what, name, len);
    ERR_print_errors_fp(stderr);
}

static uint64_t splitmix(void)
{
    uint64_t z = (sm += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The next slot's 64 key bytes; the test derives the same from the seed and the slot number. */
static void next_key(const char *name)
{
    for (int i = 0; i < 8; i++) {
        uint64_t v = splitmix();

        for (int b = 0; b < 8; b++)
            key[8 * i + b] = (uint8_t)(v >> (8 * b));
    }
    printf("slot %d %s\n", nslot++, name);
}

static EVP_CIPHER *fetch(const char *name)
{
    char props[64];

    snprintf(props, sizeof(props), "provider=%s", prov);
    return EVP_CIPHER_fetch(lib, name, props);
}

/* Data from a generator of its own, so that the key stream is the slots' alone. */
static void fill(uint8_t *p, size_t n)
{
    static uint64_t x = 88172645463325252ULL;

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

/* One cipher, one length, one direction; GCM with an AAD and its tag. Plain modes without padding. */
static int one(EVP_CIPHER *c, const char *name, int enc, const uint8_t *in, uint8_t *out, size_t len,
               uint8_t tag[16])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int gcm = strstr(name, "GCM") != NULL, ol = 0, fl = 0, ok;
    uint8_t iv[16] = { 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }, aad[20] = { 1 };

    ok = ctx != NULL && EVP_CipherInit_ex2(ctx, c, key, iv, enc, NULL) && EVP_CIPHER_CTX_set_padding(ctx, 0);
    if (ok && gcm && !enc)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0;
    if (ok && gcm)
        ok = EVP_CipherUpdate(ctx, NULL, &ol, aad, sizeof(aad));
    ok = ok && EVP_CipherUpdate(ctx, out, &ol, in, (int)len) && EVP_CipherFinal_ex(ctx, out + ol, &fl);
    if (ok && gcm && enc)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;
    EVP_CIPHER_CTX_free(ctx);
    return ok && (size_t)(ol + fl) == len;
}

/* A mode round trip at len bytes (rounded to blocks for ECB and CBC). */
static void mode(const char *name, size_t len, uint8_t *a, uint8_t *b, uint8_t *c)
{
    EVP_CIPHER *ci = fetch(name);
    uint8_t tag[16] = { 0 };

    if (strstr(name, "ECB") || strstr(name, "CBC"))
        len &= ~(size_t)15;
    next_key(name);
    fill(a, len);
    check(ci != NULL && one(ci, name, 1, a, b, len, tag) && one(ci, name, 0, b, c, len, tag)
          && memcmp(a, c, len) == 0, "round trip", name, len);
    OPENSSL_cleanse(key, sizeof(key));
    EVP_CIPHER_free(ci);
}

/* A stitched cipher: plain CBC without an AAD, then a TLS 1.2 record sealed and opened in place. */
static void stitched(const char *name, uint8_t *a, uint8_t *b)
{
    EVP_CIPHER *ci = fetch(name);
    size_t ms = strstr(name, "SHA256") ? 32 : 20, payload = 1000, len = 0;
    uint8_t iv[16] = { 3 }, aad[13] = { 0, 0, 0, 0, 0, 0, 0, 1, 23, 3, 3 };
    int ver = 0x0303, ok = ci != NULL, pad = 0, ol = 0;

    next_key(name);
    fill(a, 4096);
    for (int enc = 1; ok && enc >= 0; enc--) {
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        OSSL_PARAM prm[2] = { OSSL_PARAM_construct_int(OSSL_CIPHER_PARAM_TLS_VERSION, &ver), OSSL_PARAM_END };

        ok = ctx != NULL && EVP_CipherInit_ex(ctx, ci, NULL, key, iv, enc)
             && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_MAC_KEY, (int)ms, key + 32) > 0;
        if (ok && enc) {               /* plain CBC first, then the record */
            ok = EVP_CipherUpdate(ctx, b, &ol, a, 2048) && ol == 2048 && EVP_CIPHER_CTX_set_params(ctx, prm);
            aad[11] = (uint8_t)((16 + payload) >> 8), aad[12] = (uint8_t)(16 + payload);
            memcpy(b, a, 16 + payload);
            pad = ok ? EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_TLS1_AAD, 13, aad) : 0;
            ok = pad > 0 && EVP_CipherUpdate(ctx, b, &ol, b, (int)(16 + payload) + pad);
            len = (size_t)ol;
        } else if (ok) {
            ok = EVP_CIPHER_CTX_set_params(ctx, prm);
            aad[11] = (uint8_t)(len >> 8), aad[12] = (uint8_t)len;
            ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_TLS1_AAD, 13, aad) > 0
                 && EVP_CipherUpdate(ctx, b, &ol, b, (int)len) && (size_t)ol == payload
                 && memcmp(b + 16, a + 16, payload) == 0;
        }
        EVP_CIPHER_CTX_free(ctx);
    }
    check(ok, "TLS record sealed and opened", name, len);
    OPENSSL_cleanse(key, sizeof(key));
    EVP_CIPHER_free(ci);
}

/* ASYNC jobs, each a CBC encryption under its own key: what provider/route/batch.c runs in lanes. */
typedef struct job { EVP_CIPHER *c; uint8_t k[32]; uint8_t *in, *out; size_t len; int ok; } job;

static int job_fn(void *arg)
{
    job *j = *(job **)arg;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    uint8_t iv[16] = { 9 };
    int ol = 0;

    j->ok = ctx != NULL && EVP_EncryptInit_ex2(ctx, j->c, j->k, iv, NULL) && EVP_CIPHER_CTX_set_padding(ctx, 0)
            && EVP_EncryptUpdate(ctx, j->out, &ol, j->in, (int)j->len) && (size_t)ol == j->len;
    EVP_CIPHER_CTX_free(ctx);
    return j->ok;
}

static void lanes(const char *name, uint8_t *a, uint8_t *b)
{
    enum { NJ = 8 };
    job js[NJ];
    ASYNC_JOB *aj[NJ] = { NULL };
    ASYNC_WAIT_CTX *w[NJ];
    int live[NJ], nlive = 1, ret;
    EVP_CIPHER *ci = fetch(name);

    fill(a, 2048 * NJ);
    for (int i = 0; i < NJ; i++) {
        next_key(name);
        js[i] = (job){ .c = ci, .in = a + 2048 * i, .out = b + 2048 * i, .len = 2048 };
        memcpy(js[i].k, key, 32);
        OPENSSL_cleanse(key, sizeof(key));
        w[i] = ASYNC_WAIT_CTX_new();
        live[i] = ci != NULL && w[i] != NULL;
    }
    /* Round-robin resumes, as `openssl speed -async_jobs` does; bounded against a hang. */
    for (long spin = 0; nlive > 0 && spin < 10000000; spin++) {
        nlive = 0;
        for (int i = 0; i < NJ; i++) {
            job *jp = &js[i];

            if (live[i])
                live[i] = ASYNC_start_job(&aj[i], w[i], &ret, job_fn, &jp, sizeof(jp)) == ASYNC_PAUSE;
            nlive += live[i];
        }
    }
    for (int i = 0; i < NJ; i++) {
        check(js[i].ok, "ASYNC CBC job", name, js[i].len);
        OPENSSL_cleanse(js[i].k, sizeof(js[i].k));
        ASYNC_WAIT_CTX_free(w[i]);
    }
    EVP_CIPHER_free(ci);
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "AES-128-ECB", "AES-256-ECB", "AES-128-CBC", "AES-256-CBC",
        "AES-128-CTR", "AES-256-CTR", "AES-128-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS" };
    static const char *const stitch[] = { "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA1",
        "AES-128-CBC-HMAC-SHA256", "AES-256-CBC-HMAC-SHA256" };
    size_t big = argc > 3 ? strtoul(argv[3], NULL, 10) : 320 * 1024, sizes[3] = { 16, 1043, big + 9 };
    uint8_t *a, *b, *c;
    char line[16];

    if (argc < 3) {
        fprintf(stderr, "usage: %s PROVIDER SEED [BIG]\n", argv[0]);
        return 2;
    }
    prov = argv[1];
    sm = strtoull(argv[2], NULL, 10);
    lib = OSSL_LIB_CTX_new();
    a = malloc(big + 64), b = malloc(big + 64), c = malloc(big + 64);
    if (lib == NULL || a == NULL || b == NULL || c == NULL || OSSL_PROVIDER_load(lib, "default") == NULL
        || (strcmp(prov, "default") != 0 && OSSL_PROVIDER_load(lib, prov) == NULL)) {
        printf("cannot load %s\n0 passed, 1 failed\n", prov);
        return 1;
    }
    for (size_t m = 0; m < sizeof(modes) / sizeof(*modes); m++)
        for (int s = 0; s < 3; s++)
            mode(modes[m], sizes[s], a, b, c);
    for (size_t m = 0; m < sizeof(stitch) / sizeof(*stitch); m++) {
        EVP_CIPHER *ci = fetch(stitch[m]);

        if (ci != NULL)          /* the default provider has them only where the CPU has AES-NI */
            stitched(stitch[m], a, b);
        EVP_CIPHER_free(ci);
    }
    lanes("AES-128-CBC", a, b);
    lanes("AES-256-CBC", a, b);
    if (argc > 4 && strcmp(argv[4], "keep") == 0) {   /* the test's proof that its scan finds a schedule */
        EVP_CIPHER *x = fetch("AES-256-XTS");
        EVP_CIPHER_CTX *kept = EVP_CIPHER_CTX_new();

        next_key("AES-256-XTS");
        check(x != NULL && kept != NULL && EVP_EncryptInit_ex2(kept, x, key, key, NULL), "kept context", "XTS", 0);
        OPENSSL_cleanse(key, sizeof(key));
        EVP_CIPHER_free(x);
    }
    OPENSSL_cleanse(a, big + 64), OPENSSL_cleanse(b, big + 64), OPENSSL_cleanse(c, big + 64);
    free(a), free(b), free(c);
    printf("ready %d\n", nslot);
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin) != NULL)  /* the test reads our memory meanwhile */
        ;
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
