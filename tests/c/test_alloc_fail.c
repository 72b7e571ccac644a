/* tests/c/test_alloc_fail.c: allocation-failure injection into accelaes.so (from OPENSSL_MODULES).
 * Through CRYPTO_set_mem_functions the Nth allocation (N = 1, 2, ... until a run needs fewer) fails
 * once while the provider is loaded (with a cipher and the DRBG delegate used), while each cipher runs
 * init / update / dupctx / update / final both ways (GCM with AAD in pieces first and its tag; XTS
 * as one unit, dupctx, the unit again on both), and while the stitched TLS ciphers seal and open
 * a record. Each run must not crash, must never report wrong bytes as a success, and a step that fails
 * must leave an OpenSSL error queued (OpenSSL 3.0 itself raises none for its own allocations, so a
 * silent failure is accepted only when the failed allocation's stack never went through accelaes.so);
 * a cipher or record run must leave no block that accelaes code allocated (OpenSSL 3.0 leaks on its
 * own failure paths in OSSL_LIB_CTX_new, EVP_*_fetch and RAND, so the load runs only report them);
 * afterwards, with allocations succeeding again, everything works.
 *   --cold    no cipher runs before the injection (one-time set-ups then happen under it)
 *   --no-load the cipher and record runs only (the load runs are most of the time)
 *   --plain   no injection: one pass, ending with the provider unloaded and OPENSSL_cleanup
 *             (tests/system/test_valgrind.py runs this under valgrind)
 *   --no-gcm  the GCM ciphers left out of the plain pass (tests/system/test_valgrind.py: see there why)
 * The expected bytes come from OpenSSL's default provider in a library context of their own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

#define LEN (70000 + 5)       /* more than the inline threshold, not a whole number of blocks */
#define SPLIT 37              /* the first update: a partial block is held back */
#define MAX_N 200000
#define PAYLOAD 1000          /* TLS record payload */
#define NCIPH 14              /* ECB, CBC, CTR (0-8), GCM (9-11), XTS (12-13) */
#define IS_GCM(c) ((c) >= 9 && (c) < 12)
#define IS_XTS(c) ((c) >= 12)
#define AADLEN 100 /* GCM AAD, past the provider's first 64-byte AAD buffer */
#define NTLS 4

static int passed, failed;

static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    passed += ok != 0;
    if (!ok && ++failed <= 40) {
        va_start(ap, fmt);
        fputs("FAIL ", stdout);
        vprintf(fmt, ap);
        putchar('\n');
        va_end(ap);
    }
}

/* ======================== The allocator: test_alloc_fail_allocator.h ======================== */

#include "tests/c/test_alloc_fail_allocator.h"

/* ======================== One run's outcome ======================== */

static struct {
    int silent_steps, wrong;
    char silent[80], wrong_what[80];
} oc;

/* A step that fails must leave an error on the queue (then cleared for the next step). */
static int step(int ok, const char *what)
{
    if (!ok && ERR_peek_error() == 0 && oc.silent_steps++ == 0)
        snprintf(oc.silent, sizeof(oc.silent), "%s", what);
    ERR_clear_error();
    return ok;
}

/* A step that never reaches a provider (EVP_CIPHER_CTX_new, OSSL_LIB_CTX_new): OpenSSL 3.0 itself
 * queues no error when such an allocation fails, so none is asked for. */
static int step_lib(int ok)
{
    ERR_clear_error();
    return ok;
}

/* Bytes that a successful call reported must be the expected ones. */
static void same(const uint8_t *got, const uint8_t *want, size_t n, const char *what)
{
    if (memcmp(got, want, n) != 0 && oc.wrong++ == 0)
        snprintf(oc.wrong_what, sizeof(oc.wrong_what), "%s", what);
}

/* ======================== Fixtures and expected bytes ======================== */

static const char *const cnames[NCIPH] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB", "AES-128-CBC", "AES-192-CBC",
                                           "AES-256-CBC", "AES-128-CTR", "AES-192-CTR", "AES-256-CTR", "AES-128-GCM",
                                           "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS" };
static const char *const tnames[NTLS] = {
    "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA1", "AES-128-CBC-HMAC-SHA256", "AES-256-CBC-HMAC-SHA256"
};
static uint8_t key[64], iv[16], mackey[32], pt[LEN], ct[NCIPH][LEN + 16], tag[NCIPH][16];
static int ctlen[NCIPH];
static uint8_t rec_pt[16 + PAYLOAD], rec_ct[NTLS][16 + PAYLOAD + 32 + 256];
static int rec_len[NTLS], have_tls;
static OSSL_LIB_CTX *ref_lib, *lib;                    /* the default provider's; accelaes's */
static OSSL_PROVIDER *ref_prov;
static EVP_CIPHER *ciph[NCIPH], *tciph[NTLS];

static int mac_size(int t) { return t < 2 ? 20 : 32; }

static void aad_of(uint8_t aad[13], size_t len)
{
    static const uint8_t head[11] = { 0, 0, 0, 0, 0, 0, 0, 7, 23, 3, 3 };   /* seq 7, TLS 1.2 data */
    memcpy(aad, head, 11);
    aad[11] = (uint8_t)(len >> 8);
    aad[12] = (uint8_t)len;
}

/* Sets x up as libssl sets up a TLS 1.2 record context; 0 (error queued) on failure. */
static int tls_init(EVP_CIPHER_CTX *x, EVP_CIPHER *c, int t, int enc)
{
    int ver = 0x0303;
    OSSL_PARAM prm[2] = { OSSL_PARAM_construct_int(OSSL_CIPHER_PARAM_TLS_VERSION, &ver), OSSL_PARAM_construct_end() };

    return EVP_CipherInit_ex2(x, c, key, iv, enc, NULL)
           && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_MAC_KEY, mac_size(t), mackey) > 0
           && EVP_CIPHER_CTX_set_params(x, prm);
}

/* Seals rec_pt (explicit IV + payload) into out; returns the record length, 0 on failure. */
static int tls_seal(EVP_CIPHER_CTX *x, uint8_t *out)
{
    uint8_t aad[13];
    int pad, ol = 0;

    aad_of(aad, sizeof(rec_pt));
    memcpy(out, rec_pt, sizeof(rec_pt));
    pad = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_TLS1_AAD, 13, aad);
    if (pad <= 0 || !EVP_CipherUpdate(x, out, &ol, out, (int)sizeof(rec_pt) + pad))
        return 0;
    return ol;
}

static int setup_reference(void)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok = x != NULL && (ref_lib = OSSL_LIB_CTX_new()) != NULL
             && (ref_prov = OSSL_PROVIDER_load(ref_lib, "default")) != NULL;

    for (size_t i = 0; i < sizeof(key); i++) /* XTS: the two halves differ */
        key[i] = (uint8_t)(i * 13 + 1), mackey[i % 32] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < 16; i++)
        iv[i] = (uint8_t)(0xf0 + i);                 /* CTR: the low counter bytes carry soon */
    for (size_t i = 0; i < LEN; i++)
        pt[i] = (uint8_t)(i * 31 + (i >> 8));
    for (size_t i = 0; i < sizeof(rec_pt); i++)
        rec_pt[i] = (uint8_t)(i * 5 + 9);
    for (int c = 0; ok && c < NCIPH; c++) {
        EVP_CIPHER *e = EVP_CIPHER_fetch(ref_lib, cnames[c], NULL);
        int l = 0, f = 0;
        ok = e != NULL && EVP_EncryptInit_ex2(x, e, key, iv, NULL)
            && (!IS_GCM(c) || EVP_EncryptUpdate(x, NULL, &l, pt, AADLEN)) && EVP_EncryptUpdate(x, ct[c], &l, pt, LEN)
            && EVP_EncryptFinal_ex(x, ct[c] + l, &f)
            && (!IS_GCM(c) || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag[c]) > 0);
        ctlen[c] = l + f;
        EVP_CIPHER_free(e);
    }
    have_tls = 1;
    for (int t = 0; ok && t < NTLS; t++) {
        EVP_CIPHER *e = EVP_CIPHER_fetch(ref_lib, tnames[t], NULL);
        EVP_CIPHER_CTX *r = EVP_CIPHER_CTX_new();
        rec_len[t] = e != NULL && r != NULL && tls_init(r, e, t, 1) ? tls_seal(r, rec_ct[t]) : 0;
        have_tls &= rec_len[t] > 0;
        EVP_CIPHER_CTX_free(r);
        EVP_CIPHER_free(e);
    }
    if (!have_tls)
        printf("note: the default provider offers no stitched TLS ciphers here: their runs are skipped\n");
    EVP_CIPHER_CTX_free(x);
    ERR_clear_error();
    return ok;
}

static int load_accelaes(OSSL_LIB_CTX *l, OSSL_PROVIDER **p)
{
    return (*p = OSSL_PROVIDER_load(l, "accelaes")) != NULL;
}
/* ======================== The runs ======================== */

/* A fresh library context with accelaes alone: load, a cipher, the DRBG delegate, unload. */
static int run_load(void *arg)
{
    OSSL_LIB_CTX *l = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *p = NULL;
    EVP_CIPHER *c = NULL;
    EVP_CIPHER_CTX *x = NULL;
    uint8_t out[64], rnd[48];
    int ol = 0, ok;

    (void)arg;
    ok = step_lib(l != NULL) && step(load_accelaes(l, &p), "load accelaes")
         && step((c = EVP_CIPHER_fetch(l, "AES-256-CTR", "provider=accelaes")) != NULL, "fetch AES-256-CTR")
         && step_lib((x = EVP_CIPHER_CTX_new()) != NULL) && step(EVP_EncryptInit_ex2(x, c, key, iv, NULL), "init")
         && step(EVP_EncryptUpdate(x, out, &ol, pt, sizeof(out)), "update");
    if (ok)
        same(out, ct[8], (size_t)ol, "AES-256-CTR in a fresh context");
    ok = ok && step(RAND_bytes_ex(l, rnd, sizeof(rnd), 0) > 0, "RAND_bytes_ex through the DRBG delegate");
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    if (p != NULL)
        ok &= step(OSSL_PROVIDER_unload(p), "OSSL_PROVIDER_unload");
    OSSL_LIB_CTX_free(l);
    return ok;
}

/* XTS: one data unit, a context copy, then the unit again on both (the tweak does not move). */
static int run_xts(int c, int enc, uint8_t out[2][LEN + 32])
{
    const uint8_t *in = enc ? pt : ct[c], *want = enc ? ct[c] : pt;
    EVP_CIPHER_CTX *x[2] = { EVP_CIPHER_CTX_new(), NULL };
    int l = 0, f = 0,
        ok = step_lib(x[0] != NULL) && step(EVP_CipherInit_ex2(x[0], ciph[c], key, iv, enc, NULL), "init")
        && step(EVP_CipherUpdate(x[0], out[0], &l, in, LEN), "first unit");

    if (ok)
        same(out[0], want, (size_t)l, "first unit");
    ok = ok && step_lib((x[1] = EVP_CIPHER_CTX_new()) != NULL)
        && step(EVP_CIPHER_CTX_copy(x[1], x[0]), "EVP_CIPHER_CTX_copy (dupctx)");
    for (int k = 0; ok && k < 2; k++) {
        memset(out[k], 0, LEN);
        ok = step(EVP_CipherUpdate(x[k], out[k], &l, in, LEN), "second unit")
            && step(EVP_CipherFinal_ex(x[k], out[k] + l, &f), "final");
        if (ok && (l != LEN || f != 0) && oc.wrong++ == 0)
            snprintf(oc.wrong_what, sizeof(oc.wrong_what), "unit length %d + %d, want %d", l, f, LEN);
        if (ok)
            same(out[k], want, LEN, k ? "second unit, copy" : "second unit");
    }
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
    return ok;
}

/* One stream, split by a context copy: both halves continue and finish on their own (GCM: the AAD
 * in two pieces first; the tag set before a decryption's final, compared after an encryption's). */
static int run_cipher(void *arg)
{
    static uint8_t out[2][LEN + 32];
    int c = (int)((long)arg >> 1), enc = (int)((long)arg & 1);
    if (IS_XTS(c))
        return run_xts(c, enc, out);
    const uint8_t *in = enc ? pt : ct[c], *want = enc ? ct[c] : pt;
    int inlen = enc ? LEN : ctlen[c], wantlen = enc ? ctlen[c] : LEN;
    EVP_CIPHER_CTX *x[2] = { EVP_CIPHER_CTX_new(), NULL };
    uint8_t got_tag[16];
    int l = 0,
        ok = step_lib(x[0] != NULL)
        && step(EVP_CipherInit_ex2(x[0], ciph[c], key, c < 3 ? NULL : iv, enc, NULL), "init")
        && (!IS_GCM(c)
            || (step(EVP_CipherUpdate(x[0], NULL, &l, pt, 40), "AAD")
                && step(EVP_CipherUpdate(x[0], NULL, &l, pt + 40, AADLEN - 40), "AAD")))
        && step(EVP_CipherUpdate(x[0], out[0], &l, in, SPLIT), "first update");

    if (ok) {
        same(out[0], want, (size_t)l, "first update");
        memcpy(out[1], out[0], (size_t)l);
        ok = step_lib((x[1] = EVP_CIPHER_CTX_new()) != NULL) && step(EVP_CIPHER_CTX_copy(x[1], x[0]), "EVP_CIPHER_CTX_copy (dupctx)");
    }
    for (int k = 0; ok && k < 2; k++) {
        int m = 0, f = 0;
        ok = step(EVP_CipherUpdate(x[k], out[k] + l, &m, in + SPLIT, inlen - SPLIT), "second update");
        if (ok)
            same(out[k] + l, want + l, (size_t)m, k ? "second update, copy" : "second update");
        if (ok && IS_GCM(c) && !enc)
            ok = step(EVP_CIPHER_CTX_ctrl(x[k], EVP_CTRL_AEAD_SET_TAG, 16, tag[c]) > 0, "set tag");
        ok = ok && step(EVP_CipherFinal_ex(x[k], out[k] + l + m, &f), "final");
        if (ok && IS_GCM(c) && enc
            && step(EVP_CIPHER_CTX_ctrl(x[k], EVP_CTRL_AEAD_GET_TAG, 16, got_tag) > 0, "get tag"))
            same(got_tag, tag[c], 16, k ? "tag, copy" : "tag");
        if (ok && l + m + f != wantlen && oc.wrong++ == 0)
            snprintf(oc.wrong_what, sizeof(oc.wrong_what), "length %d, want %d", l + m + f, wantlen);
        if (ok)
            same(out[k], want, (size_t)wantlen, k ? "whole stream, copy" : "whole stream");
    }
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
    return ok;
}

/* A record sealed by a context and its copy, then opened. */
static int run_tls(void *arg)
{
    static uint8_t buf[2][sizeof(rec_ct[0])];
    int t = (int)(long)arg, ol = 0, ok;
    EVP_CIPHER_CTX *x[2] = { EVP_CIPHER_CTX_new(), NULL }, *d = NULL;
    uint8_t aad[13];

    ok = step_lib(x[0] != NULL) && step(tls_init(x[0], tciph[t], t, 1), "record context")
         && step_lib((x[1] = EVP_CIPHER_CTX_new()) != NULL)
         && step(EVP_CIPHER_CTX_copy(x[1], x[0]), "EVP_CIPHER_CTX_copy (dupctx)");
    for (int k = 0; ok && k < 2; k++) {
        int n = tls_seal(x[k], buf[k]);
        ok = step(n > 0, "seal a record");
        if (ok && (n != rec_len[t] || memcmp(buf[k], rec_ct[t], (size_t)n) != 0) && oc.wrong++ == 0)
            snprintf(oc.wrong_what, sizeof(oc.wrong_what), "sealed record%s", k ? " (copy)" : "");
    }
    ok = ok && step_lib((d = EVP_CIPHER_CTX_new()) != NULL) && step(tls_init(d, tciph[t], t, 0), "record context to open");
    if (ok) {
        aad_of(aad, (size_t)rec_len[t]);
        memcpy(buf[0], rec_ct[t], (size_t)rec_len[t]);
        ok = step(EVP_CIPHER_CTX_ctrl(d, EVP_CTRL_AEAD_TLS1_AAD, 13, aad) > 0
                  && EVP_CipherUpdate(d, buf[0], &ol, buf[0], rec_len[t]), "open the record");
        if (ok)
            same(buf[0] + 16, rec_pt + 16, PAYLOAD, "opened payload");
    }
    EVP_CIPHER_CTX_free(d);
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
    return ok;
}

/* ======================== The injection loop ======================== */

/* strict_leaks: the run must leave no block of accelaes's behind (else they are only counted). */
static void inject(const char *what, int (*run)(void *), void *arg, int strict_leaks)
{
    long n;
    int ours = 0, cleanly = 0, absorbed = 0, libcrypto_silent = 0, leaky = 0;

    for (n = 1; n < MAX_N; n++) {
        int ok, base = n_ours;

        memset(&oc, 0, sizeof(oc));
        ERR_clear_error();
        __atomic_store_n(&fired, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&n_allocs, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&fail_at, n, __ATOMIC_RELAXED);
        __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
        ok = run(arg);
        __atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
        if (!__atomic_load_n(&fired, __ATOMIC_ACQUIRE)) {
            check(ok, "%s: with every allocation succeeding, a step failed", what);
            break;
        }
        ours += our_site(fired_at);
        if (strict_leaks)
            check(n_ours == base, "%s, allocation %ld (%s) failing: %d blocks allocated by accelaes left behind",
                  what, n, fired_at, n_ours - base);
        leaky += n_ours != base;
        ours_excused += strict_leaks ? 0 : n_ours - base;
        cleanly += !ok;
        absorbed += ok;
        check(oc.wrong == 0, "%s, allocation %ld (%s) failing: wrong bytes reported as a success: %s", what, n,
              fired_at, oc.wrong_what);
        if (oc.silent_steps != 0 && !stack_in_accelaes()) {
            libcrypto_silent++;
            continue;
        }
        check(oc.silent_steps == 0, "%s, allocation %ld (%s) failing: '%s' failed with no error queued", what, n,
              fired_at, oc.silent);
        if (oc.silent_steps != 0 && failed <= 40) {
            fflush(stdout);
            backtrace_symbols_fd(fired_stack, fired_depth, 1);
        }
    }
    check(n < MAX_N, "%s: still allocating after %d allocations", what, MAX_N);
    printf("%s: %ld allocations, each made to fail once (%d in accelaes code): %d runs failed, %d absorbed the "
           "failure; %d silent failures inside libcrypto alone; %d runs left accelaes blocks behind\n", what, n - 1,
           ours, cleanly, absorbed, libcrypto_silent, leaky);
    ERR_clear_error();
}

static int no_gcm;

/* Everything once with no injection; the stitched ciphers only where the default provider has them. */
static void plain_pass(const char *when)
{
    memset(&oc, 0, sizeof(oc));
    check(run_load(NULL) && oc.wrong == 0, "%s: load, cipher and DRBG delegate in a fresh library context", when);
    for (int c = 0; c < NCIPH; c++)
        for (int enc = 0; enc < 2 && !(no_gcm && IS_GCM(c)); enc++) {
            memset(&oc, 0, sizeof(oc));
            check(run_cipher((void *)(long)(c * 2 + enc)) && oc.wrong == 0, "%s: %s %s", when, cnames[c],
                  enc ? "encrypt" : "decrypt");
        }
    for (int t = 0; have_tls && t < NTLS; t++) {
        memset(&oc, 0, sizeof(oc));
        check(run_tls((void *)(long)t) && oc.wrong == 0, "%s: %s record", when, tnames[t]);
    }
    ERR_clear_error();
}

/* Errors raised after many loads and unloads still name accelaes and their reason (the core handle
 * used to raise them must belong to a live load). */
static void check_error_strings(void)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    /* a TLS version no record layer speaks: accelaes's own reason on every release (a CTR num of 99
     * was, until OpenSSL 3.5.9's default refused it too, and accelaes with it) */
    unsigned int version = 0x9999;
    OSSL_PARAM prm[2] = { OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_TLS_VERSION, &version),
                          OSSL_PARAM_construct_end() };
    const char *reason = NULL;

    ERR_clear_error();
    if (x != NULL && EVP_EncryptInit_ex2(x, ciph[6], key, iv, NULL) && !EVP_CIPHER_CTX_set_params(x, prm))
        reason = ERR_reason_error_string(ERR_peek_last_error());
    check(reason != NULL && strcmp(reason, "invalid parameter") == 0,
          "an error raised after many loads and unloads has its reason string (got '%s')", reason ? reason : "none");
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
}

int main(int argc, char **argv)
{
    OSSL_PROVIDER *prov = NULL;
    int plain = 0, cold = 0, load = 1;

    /* Before anything allocates: OpenSSL refuses new functions after its first allocation. */
    fired_depth = backtrace(fired_stack, 32);       /* backtrace loads libgcc on its first call */
    if (!CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free)) {
        printf("FAIL cannot install the allocator\n0 passed, 1 failed\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        plain |= strcmp(argv[i], "--plain") == 0;
        cold |= strcmp(argv[i], "--cold") == 0;
        load &= strcmp(argv[i], "--no-load") != 0;
        no_gcm |= strcmp(argv[i], "--no-gcm") == 0;
    }
    if (!setup_reference() || (lib = OSSL_LIB_CTX_new()) == NULL || !load_accelaes(lib, &prov)) {
        ERR_print_errors_fp(stdout);
        printf("FAIL cannot set up the reference or load accelaes (is OPENSSL_MODULES set?)\n0 passed, 1 failed\n");
        return 1;
    }
    for (int c = 0; c < NCIPH; c++)
        check((ciph[c] = EVP_CIPHER_fetch(lib, cnames[c], "provider=accelaes")) != NULL, "fetch %s", cnames[c]);
    for (int t = 0; have_tls && t < NTLS; t++)
        check((tciph[t] = EVP_CIPHER_fetch(lib, tnames[t], "provider=accelaes")) != NULL, "fetch %s", tnames[t]);
    if (failed == 0) {
        if (!cold)
            plain_pass("before the injection");
        if (!plain) {
            for (int k = 0; k < 2 * NCIPH; k++) {
                char what[64];
                snprintf(what, sizeof(what), "%s %s", cnames[k / 2], k & 1 ? "encrypt" : "decrypt");
                inject(what, run_cipher, (void *)(long)k, 1);
            }
            for (int t = 0; have_tls && t < NTLS; t++)
                inject(tnames[t], run_tls, (void *)(long)t, 1);
            if (load)
                inject("load, fetch, encrypt, RAND_bytes, unload", run_load, NULL, 0);
            check(!ours_overflow, "more than %d blocks of accelaes's alive at once", MAX_OURS);
            plain_pass("after the injection");
            check_error_strings();
        }
    }
    for (int c = 0; c < NCIPH; c++)
        EVP_CIPHER_free(ciph[c]);
    for (int t = 0; t < NTLS; t++)
        EVP_CIPHER_free(tciph[t]);
    OSSL_PROVIDER_unload(prov);
    OSSL_LIB_CTX_free(lib);
    check(n_ours == ours_excused, "%d blocks allocated by accelaes still alive after its unload", n_ours - ours_excused);
    OSSL_PROVIDER_unload(ref_prov);
    OSSL_LIB_CTX_free(ref_lib);
    OPENSSL_cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);   /* LeakSanitizer ends the process without flushing */
    return failed != 0;
}
