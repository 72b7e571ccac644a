/* tests/c/test_engine_fail.c: a failure inside the nested-EVP engine (accel/cpu/evp_engine.c, the
 * engine of CPUs without AES-NI) reaches the application as a failed EVP call with accelaes's
 * ACC_R_ENGINE_FAILURE, raised once, and never as success with wrong bytes.
 *
 * The fault: this binary defines EVP_CipherUpdate and EVP_CipherInit_ex2 itself, so the static copy
 * of the provider linked in here calls these (the application calls below use EVP_Encrypt*,
 * EVP_Decrypt* and EVP_Cipher, which do not go through them). Disarmed they pass straight to
 * libcrypto's; armed, an eligible call fails the way a real EVP call fails: run by libcrypto on a
 * blank context (no cipher set), or after writing garbage into the output, or succeeding but
 * reporting short output; or the IV re-initialisation fails. No hook is added to the module itself.
 *  - engine: each block function returns 0, wipes its output, leaves the IV / counter as it was,
 *    and the same key is right again on the next call;
 *  - provider (ACCELAES_FORCE_EVP_ENGINE=1, set here before it loads): update, final, EVP_Cipher,
 *    CTR's partial block, TLS records (tls.c, a stitched cipher), inline and split over the worker
 *    pool, including a failure on a pool thread alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include "accel/engine.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

extern OSSL_provider_init_fn OSSL_provider_init;

#include "tests/c/test_engine_fail_common.h"

/* ======================== References ======================== */

/* The operations as table indexes: acc_op (accel/engine.h) minus one. */
enum { ECB_ENC, ECB_DEC, CBC_ENC, CBC_DEC, CTR, NMODES };
_Static_assert(ECB_ENC + 1 == ACC_OP_ECB_ENC && CBC_DEC + 1 == ACC_OP_CBC_DEC && CTR + 1 == ACC_OP_CTR,
               "the test's modes follow acc_op");
static const char *const mode_name[NMODES] = { "ecb-enc", "ecb-dec", "cbc-enc", "cbc-dec", "ctr" };
static const char *const evp_name[NMODES] = { "AES-128-ECB", "AES-128-ECB", "AES-128-CBC",
                                              "AES-128-CBC", "AES-128-CTR" };

static int is_enc(int mode)
{
    return mode != ECB_DEC && mode != CBC_DEC;
}

/* OpenSSL's default provider, unpadded (the interposed functions are not on this path). */
static int reference(int mode, const uint8_t *key, const uint8_t *iv, const uint8_t *in,
                     uint8_t *out, size_t len)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, evp_name[mode], "provider=default");
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int enc = is_enc(mode), ol = 0, fl = 0, ok;

    ok = c != NULL && x != NULL
         && (enc ? EVP_EncryptInit_ex2(x, c, key, iv, NULL) : EVP_DecryptInit_ex2(x, c, key, iv, NULL))
         && EVP_CIPHER_CTX_set_padding(x, 0)
         && (enc ? EVP_EncryptUpdate(x, out, &ol, in, (int)len) : EVP_DecryptUpdate(x, out, &ol, in, (int)len))
         && (enc ? EVP_EncryptFinal_ex(x, out + ol, &fl) : EVP_DecryptFinal_ex(x, out + ol, &fl))
         && (size_t)(ol + fl) == len;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok;
}

/* ======================== The engine, called directly ======================== */

static int eng_call(const acc_engine *e, const acc_aes_key *k, int mode, const uint8_t *in,
                    uint8_t *out, size_t n, uint8_t iv[16])
{
    acc_req r = { (acc_op)(mode + 1), k, iv, in, out, n };   /* the provider's one dispatcher */

    return acc_engine_run(e, &r);
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

/* One block function, one kind of fault. The key has run a call before (from another IV), so its
 * context stands somewhere: the failing call continues from there (or, for the IV
 * re-initialisation fault, starts from a new IV), and the retry must not trust where the failed
 * call left the context. */
static void engine_case(const acc_engine *e, int mode, int kind, int inplace)
{
    enum { N = 40 };
    uint8_t key[16], iv0[16], iv[16], pt[16 * N], buf[16 * N], want[16 * N];
    const uint8_t *in = inplace ? buf : pt;
    const char *m = mode_name[mode], *kn = kind_name[kind], *ip = inplace ? "in place" : "out of place";
    acc_aes_key k;
    int r, n;

    fill(key, sizeof(key), 1u + (unsigned)mode);
    fill(iv, sizeof(iv), 2u + (unsigned)kind);
    fill(pt, sizeof(pt), 3u);
    memset(&k, 0, sizeof(k));
    if (!e->set_key(&k, key, sizeof(key), 0) || eng_call(e, &k, mode, pt, buf, N, iv) != 1) {
        check(0, "engine %s: set-up", m);
        return;
    }
    if (kind == F_INIT)
        fill(iv, sizeof(iv), 4u);
    memcpy(iv0, iv, 16);
    if (!reference(mode, key, iv0, pt, want, sizeof(pt))) {
        check(0, "engine %s: reference", m);
        return;
    }
    if (inplace)
        memcpy(buf, pt, sizeof(buf));
    else
        memset(buf, 0xa5, sizeof(buf));
    arm(kind, 0, 0);
    r = eng_call(e, &k, mode, in, buf, N, iv);
    n = disarm();
    ERR_clear_error();                      /* the nested call's own errors */
    check(n > 0, "engine %s, %s, %s: the fault fired", m, kn, ip);
    check(r == 0, "engine %s, %s, %s: returns 0 (got %d)", m, kn, ip, r);
    check(all_zero(buf, sizeof(buf)), "engine %s, %s, %s: the output is wiped", m, kn, ip);
    check(memcmp(iv, iv0, 16) == 0, "engine %s, %s, %s: the IV / counter is unchanged", m, kn, ip);

    /* Disarmed, the same call again: right. */
    if (inplace)
        memcpy(buf, pt, sizeof(buf));
    r = eng_call(e, &k, mode, in, buf, N, iv);
    check(r == 1 && memcmp(buf, want, sizeof(want)) == 0, "engine %s, %s, %s: the next call is right",
          m, kn, ip);
    e->free_key(&k);
}

static void engine_tests(void)
{
    const acc_engine *e = acc_engine_evp();

    for (int mode = 0; mode < NMODES; mode++)
        for (int kind = F_BLANK; kind < F_KINDS; kind++)
            for (int inplace = 0; inplace < 2; inplace++)
                if (kind != F_INIT || (mode != ECB_ENC && mode != ECB_DEC))   /* ECB has no IV */
                    engine_case(e, mode, kind, inplace);
}

/* ======================== Through the provider ======================== */

static OSSL_PROVIDER *prov_acc, *prov_def;
static EVP_CIPHER *acc_ciph[NMODES];
static EVP_CIPHER_CTX *acc_ctx(int mode, const uint8_t *key, const uint8_t *iv, int pad)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();

    if (x == NULL || !EVP_CipherInit_ex(x, acc_ciph[mode], NULL, key, mode < CBC_ENC ? NULL : iv, is_enc(mode))
        || !EVP_CIPHER_CTX_set_padding(x, pad)) {
        EVP_CIPHER_CTX_free(x);
        return NULL;
    }
    return x;
}

/* Long enough that the policy splits it over the pool (when it has more than one CPU unit). */
#define SPLIT_LEN (1 << 18)

/* Update (api 0) or EVP_Cipher (api 1) on len bytes, the fault armed. A fault that fired must fail
 * the call; one that did not (no pool thread took part) must leave it right. A pool-only fault, and
 * one after passes, are tried a few times: the pool may not take part in a given call (its adaptive
 * choice, scheduler/pool_adapt.c, can run a request whole on the caller, in one pass; seen once under
 * ASan in CI), and every try is checked. */
static void update_case(int mode, size_t len, int api, int on_pool_only, int n_skip)
{
    static uint8_t in[SPLIT_LEN], out[SPLIT_LEN + 16], want[SPLIT_LEN];
    const size_t whole = len & ~(size_t)15;
    uint8_t key[16], iv[16];
    char what[160];
    int fired_once = 0;

    snprintf(what, sizeof(what), "%s %s of %zu bytes, fault %s%s", mode_name[mode],
             api ? "EVP_Cipher" : "update", len, on_pool_only ? "on a pool thread" : "on any thread",
             n_skip ? " after passes" : "");
    fill(key, 16, 7u), fill(iv, 16, 8u), fill(in, len, 9u);
    if (!reference(mode, key, iv, in, want, whole)) {
        check(0, "%s: reference", what);
        return;
    }
    for (int t = 0; t < (on_pool_only || n_skip ? 50 : 1) && !fired_once; t++) {
        EVP_CIPHER_CTX *x = acc_ctx(mode, key, iv, 0);
        int ol = 0, r, n;

        if (x == NULL) {
            check(0, "%s: context", what);
            return;
        }
        arm(F_BLANK, on_pool_only, n_skip);
        if (api)
            r = EVP_Cipher(x, out, in, (unsigned int)len);
        else if (is_enc(mode))
            r = EVP_EncryptUpdate(x, out, &ol, in, (int)len);
        else
            r = EVP_DecryptUpdate(x, out, &ol, in, (int)len);
        n = disarm();
        if (n > 0)
            expect_failure(what, r, n);
        else
            check(r > 0 && memcmp(out, want, whole) == 0, "%s: no fault fired, and it is right", what);
        fired_once = n > 0;
        ERR_clear_error();
        EVP_CIPHER_CTX_free(x);
    }
    if (!fired_once && (on_pool_only || len >= SPLIT_LEN) && acc_sched_cpu_units() < 2)
        printf("skip: %s: one CPU unit, nothing is split\n", what);
    else
        check(fired_once, "%s: the fault fired", what);
}

/* Final with padding: encrypting (5 bytes held back), decrypting (the last block held back). */
static void final_case(int mode)
{
    uint8_t key[16], iv[16], pt[20], ct[48], out[64];
    EVP_CIPHER_CTX *x;
    char what[64];
    int ol = 0, r, n;

    snprintf(what, sizeof(what), "%s final", mode_name[mode]);
    fill(key, 16, 11u), fill(iv, 16, 12u), fill(pt, sizeof(pt), 13u);
    if (is_enc(mode)) {
        x = acc_ctx(mode, key, iv, 1);
        r = x != NULL && EVP_EncryptUpdate(x, out, &ol, pt, 5);
    } else {                                /* 32 bytes of padded ciphertext from accelaes itself */
        EVP_CIPHER_CTX *e = acc_ctx(mode - 1, key, iv, 1);
        int cl = 0, fl = 0;
        r = e != NULL && EVP_EncryptUpdate(e, ct, &cl, pt, 20) && EVP_EncryptFinal_ex(e, ct + cl, &fl);
        EVP_CIPHER_CTX_free(e);
        x = acc_ctx(mode, key, iv, 1);
        r = r && x != NULL && EVP_DecryptUpdate(x, out, &ol, ct, cl + fl) && ol == 16;
    }
    check(r, "%s: set-up", what);
    if (!r) {
        EVP_CIPHER_CTX_free(x);
        return;
    }
    arm(F_BLANK, 0, 0);
    r = is_enc(mode) ? EVP_EncryptFinal_ex(x, out + ol, &ol) : EVP_DecryptFinal_ex(x, out + ol, &ol);
    n = disarm();
    expect_failure(what, r, n);
    EVP_CIPHER_CTX_free(x);
}

/* A TLS 1.2 record, encrypted in place: through tls.c (AES-128-CBC with the TLS version set), or
 * through the stitched AES-128-CBC-HMAC-SHA1 (cipher_hmac_record.c). */
static void tls_case(int stitched)
{
    uint8_t key[16], iv[16], mk[20], rec[16 + 100 + 20 + 16] = { 0 }, aad[13] = { 0 };
    unsigned int ver = 0x0303;
    size_t mac = 0, len = 16 + 100;
    OSSL_PARAM prm[3] = { OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_TLS_VERSION, &ver),
                          OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, &mac), OSSL_PARAM_END };
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, stitched ? "AES-128-CBC-HMAC-SHA1" : "AES-128-CBC", "provider=accelaes");
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    const char *what = stitched ? "stitched AES-128-CBC-HMAC-SHA1 record" : "AES-128-CBC TLS record";
    int ok, ol = 0, r, n, pad = 0;

    fill(key, 16, 21u), fill(iv, 16, 22u), fill(mk, 20, 23u), fill(rec, len, 24u);
    aad[8] = 23, aad[9] = 3, aad[10] = 3, aad[11] = (uint8_t)(len >> 8), aad[12] = (uint8_t)len;
    ok = c != NULL && x != NULL && EVP_EncryptInit_ex(x, c, NULL, key, iv);
    if (stitched)
        ok = ok && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_MAC_KEY, 20, mk) > 0
             && EVP_CIPHER_CTX_set_params(x, prm) && (pad = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_TLS1_AAD, 13, aad)) > 0;
    else
        ok = ok && EVP_CIPHER_CTX_set_params(x, prm);
    check(ok, "%s: set-up", what);
    if (ok) {
        arm(F_BLANK, 0, 0);
        r = EVP_EncryptUpdate(x, rec, &ol, rec, (int)len + pad);
        n = disarm();
        expect_failure(what, r, n);
    }
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

/* The library number of accelaes's errors, from one it raises for sure with a reason of its own on
 * every release: a TLS version no record layer speaks (an update without a key raises ERR_LIB_PROV's
 * reason, as the default provider; OpenSSL 3.5.9's default refuses a CTR num of 16 too). */
static int learn_lib(void)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned int version = 0x9999;
    OSSL_PARAM prm[2] = { OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_TLS_VERSION, &version),
                          OSSL_PARAM_construct_end() };

    ERR_clear_error();
    if (x != NULL && EVP_EncryptInit_ex(x, acc_ciph[CTR], NULL, NULL, NULL) && !EVP_CIPHER_CTX_set_params(x, prm)
        && ERR_GET_REASON(ERR_peek_last_error()) == ACC_R_INVALID_PARAMETER)
        acc_lib = ERR_GET_LIB(ERR_peek_last_error());
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
    return acc_lib >= 0;
}

static void provider_tests(void)
{
    static const size_t sizes[] = { 64, 4096, SPLIT_LEN }; /* cipher_aes.c inline, policy inline, split */

    if (!OSSL_PROVIDER_add_builtin(NULL, "accelaes", OSSL_provider_init)
        || (prov_def = OSSL_PROVIDER_load(NULL, "default")) == NULL
        || (prov_acc = OSSL_PROVIDER_load(NULL, "accelaes")) == NULL) {
        check(0, "the providers load");
        ERR_print_errors_fp(stdout);
        return;
    }
    for (int m = 0; m < NMODES; m++)
        check((acc_ciph[m] = EVP_CIPHER_fetch(NULL, evp_name[m], "provider=accelaes")) != NULL,
              "accelaes offers %s", evp_name[m]);
    if (failed || !learn_lib()) {
        check(0, "an accelaes error to learn its library number from");
        return;
    }
    for (int m = 0; m < NMODES; m++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            update_case(m, sizes[i], 0, 0, 0);
        update_case(m, 4096, 1, 0, 0);
        if (m != CBC_ENC) {                  /* CBC encryption is serial: never split */
            update_case(m, SPLIT_LEN, 0, 1, 0);
            update_case(m, SPLIT_LEN, 0, 0, 3);
        }
    }
    update_case(CTR, 5, 0, 0, 0);            /* the keystream block alone */
    update_case(CTR, 4096 + 5, 1, 0, 1);     /* the blocks pass, the keystream block fails */
    final_case(ECB_ENC), final_case(ECB_DEC), final_case(CBC_ENC), final_case(CBC_DEC);
    tls_case(0), tls_case(1);
    for (int m = 0; m < NMODES; m++)
        EVP_CIPHER_free(acc_ciph[m]);
    OSSL_PROVIDER_unload(prov_acc);
    OSSL_PROVIDER_unload(prov_def);
}

int main(void)
{
    main_thread = pthread_self();
    /* Before anything reads them: the nested engine for the provider, splitting from 64 KiB in a
     * private unit table, and no GPU. */
    setenv("ACCELAES_FORCE_EVP_ENGINE", "1", 1);
    setenv("ACCELAES_SPLIT_MIN", "65536", 1);
    setenv("ACCELAES_SHM", "off", 1);
    setenv("ACCELAES_BACKEND", "cpu", 1);
    real_update = (update_fn *)dlsym(RTLD_NEXT, "EVP_CipherUpdate");
    real_init = (init_fn *)dlsym(RTLD_NEXT, "EVP_CipherInit_ex2");
    if (real_update == NULL || real_init == NULL) {
        printf("libcrypto's EVP_CipherUpdate / EVP_CipherInit_ex2 not found\n0 passed, 1 failed\n");
        return 1;
    }
    uint8_t b[32] = { 0 };
    int ol = 0;
    check(blank_update(b, &ol, b, 32) == 0, "libcrypto refuses an update on a blank context");
    ERR_clear_error();
    engine_tests();
    provider_tests();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
