/* tests/c/test_engine_fail_aead.c: failures inside the nested-EVP engines of GCM (accel/cpu/gcm_evp.c)
 * and XTS (evp_xts in accel/cpu/evp_engine.c) reach the application as a failed EVP call with
 * accelaes's ACC_R_ENGINE_FAILURE, raised once; the output is wiped (all zero), never wrong bytes
 * handed out as success; a GCM message whose data failed cannot be finished into a tag (final fails);
 * the next message or unit on the same context is right again. The fault is test_engine_fail.c's
 * (test_engine_fail_common.h): EVP_CipherUpdate / EVP_CipherInit_ex2 defined here, which the static
 * copy of the provider calls (the application below uses EVP_Encrypt* / EVP_Decrypt* only).
 * The ipsec-mb GCM engine (gcm_imb.c) has no failure to inject: ipsec-mb's GCM calls return void. */
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
#include "provider/route/prov.h"

extern OSSL_provider_init_fn OSSL_provider_init;

#include "tests/c/test_engine_fail_common.h"

#define LEN 4096

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

static EVP_CIPHER_CTX *ctx_of(const char *name, const char *prov, const uint8_t *key, const uint8_t *iv, int enc)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, prov);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok = c != NULL && x != NULL && EVP_CipherInit_ex(x, c, NULL, key, iv, enc);

    EVP_CIPHER_free(c);
    if (!ok) {
        EVP_CIPHER_CTX_free(x);
        return NULL;
    }
    return x;
}

/* The default's GCM: ciphertext and tag of (aad, pt). */
static int gcm_ref(const uint8_t *key, const uint8_t *iv, const uint8_t *aad, const uint8_t *pt, size_t len,
                   uint8_t *ct, uint8_t tag[16])
{
    EVP_CIPHER_CTX *x = ctx_of("AES-128-GCM", "provider=default", key, iv, 1);
    int l = 0,
        ok = x != NULL && EVP_EncryptUpdate(x, NULL, &l, aad, 20) && EVP_EncryptUpdate(x, ct, &l, pt, (int)len)
        && EVP_EncryptFinal_ex(x, ct + l, &l) && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;

    EVP_CIPHER_CTX_free(x);
    return ok;
}

/* One GCM message on accelaes, the fault armed at its data update (the nested start with its IV
 * init and AAD runs there too: F_INIT fails that). Then on the same context: final must fail; a
 * new message (the IV given again) must be right, with the right tag. */
static void gcm_case(int enc, int kind)
{
    static uint8_t pt[LEN], ct[LEN], out[LEN];
    uint8_t key[16], iv[12], aad[20], tag[16], got[16];
    char what[128];
    EVP_CIPHER_CTX *x;
    int l = 0, r, n;

    snprintf(what, sizeof(what), "AES-128-GCM %s, %s", enc ? "encrypt" : "decrypt", kind_name[kind]);
    fill(key, 16, 31u), fill(iv, 12, 32u), fill(aad, 20, 33u), fill(pt, LEN, 34u);
    if (!gcm_ref(key, iv, aad, pt, LEN, ct, tag)
        || (x = ctx_of("AES-128-GCM", "provider=accelaes", key, iv, enc)) == NULL) {
        check(0, "%s: set-up", what);
        return;
    }
    memset(out, 0x77, LEN);
    want_text = "GCM engine failed in ";
    r = (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, NULL, &l, aad, 20);
    check(r == 1, "%s: AAD", what);
    arm(kind, 0, 0);
    r = (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, out, &l, enc ? pt : ct, LEN);
    n = disarm();
    expect_failure(what, r, n);
    check(all_zero(out, LEN), "%s: the output is wiped", what);
    if (!enc)
        check(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0, "%s: tag set", what);
    r = (enc ? EVP_EncryptFinal_ex : EVP_DecryptFinal_ex)(x, out, &l);
    check(r <= 0, "%s: final after the failed data fails (returned %d)", what, r);
    if (enc && r > 0 && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, got) > 0)
        check(0, "%s: a tag was handed out for a message whose data failed", what);
    ERR_clear_error();
    /* the same context, the IV given again: a whole message, right */
    r = EVP_CipherInit_ex(x, NULL, NULL, NULL, iv, enc)
        && (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, NULL, &l, aad, 20)
        && (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, out, &l, enc ? pt : ct, LEN) && l == LEN;
    check(r && memcmp(out, enc ? ct : pt, LEN) == 0, "%s: the next message's bytes are right", what);
    if (r && !enc)
        r = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0;
    r = r && (enc ? EVP_EncryptFinal_ex : EVP_DecryptFinal_ex)(x, out + LEN, &l) > 0;
    if (r && enc)
        r = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, got) > 0 && memcmp(got, tag, 16) == 0;
    check(r, "%s: the next message's final and tag are right", what);
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
}

/* One XTS unit with the fault armed, then the next unit on the same context right. */
static void xts_case(int bits, int enc, int kind, size_t len)
{
    static uint8_t in[LEN + 7], want[LEN + 7], out[LEN + 7];
    uint8_t key[64], iv[16];
    const char *name = bits == 128 ? "AES-128-XTS" : "AES-256-XTS";
    char what[128];
    EVP_CIPHER_CTX *x, *d;
    int l = 0, r, n;

    snprintf(what, sizeof(what), "%s %s of %zu bytes, %s", name, enc ? "encrypt" : "decrypt", len, kind_name[kind]);
    fill(key, 64, 41u), fill(iv, 16, 42u), fill(in, len, 43u);
    d = ctx_of(name, "provider=default", key, iv, enc);
    r = d != NULL && EVP_CipherUpdate(d, want, &l, in, (int)len) && l == (int)len;
    EVP_CIPHER_CTX_free(d);
    if (!r || (x = ctx_of(name, "provider=accelaes", key, iv, enc)) == NULL) {
        check(0, "%s: set-up", what);
        return;
    }
    memset(out, 0x77, len);
    arm(kind, 0, 0);
    r = (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, out, &l, in, (int)len);
    n = disarm();
    /* cipher_xts.c raises the default's CIPHER_OPERATION_FAILED for any failed unit, not accelaes's
     * engine failure: the call fails with an error, and nothing of it is handed out */
    check(n > 0, "%s: the fault fired", what);
    check(r <= 0, "%s: the call fails (returned %d)", what, r);
    check(ERR_peek_error() != 0, "%s: an error is queued", what);
    check(all_zero(out, len), "%s: the output is wiped", what);
    ERR_clear_error();
    r = (enc ? EVP_EncryptUpdate : EVP_DecryptUpdate)(x, out, &l, in, (int)len) && l == (int)len;
    check(r && memcmp(out, want, len) == 0, "%s: the next unit is right", what);
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
}

int main(void)
{
    OSSL_PROVIDER *def = NULL, *acc = NULL;

    main_thread = pthread_self();
    /* before the provider reads them: the nested-EVP engines, no split, no shared segment, no GPU */
    setenv("ACCELAES_FORCE_EVP_ENGINE", "1", 1);
    setenv("ACCELAES_SPLIT_MIN", "1073741824", 1);
    setenv("ACCELAES_SHM", "off", 1);
    setenv("ACCELAES_BACKEND", "cpu", 1);
    real_update = (update_fn *)dlsym(RTLD_NEXT, "EVP_CipherUpdate");
    real_init = (init_fn *)dlsym(RTLD_NEXT, "EVP_CipherInit_ex2");
    if (real_update == NULL || real_init == NULL || !OSSL_PROVIDER_add_builtin(NULL, "accelaes", OSSL_provider_init)
        || (def = OSSL_PROVIDER_load(NULL, "default")) == NULL
        || (acc = OSSL_PROVIDER_load(NULL, "accelaes")) == NULL) {
        printf("set-up failed\n0 passed, 1 failed\n");
        return 1;
    }
    { /* accelaes's library number, from an error it raises with its own reason on every release: a
       * TLS version no record layer speaks (OpenSSL 3.5.9's default refuses a CTR num of 16 too) */
        EVP_CIPHER_CTX *x = ctx_of("AES-128-CTR", "provider=accelaes", NULL, NULL, 1);
        unsigned int version = 0x9999;
        OSSL_PARAM prm[2] = { OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_TLS_VERSION, &version),
                              OSSL_PARAM_construct_end() };

        ERR_clear_error();
        if (x != NULL && !EVP_CIPHER_CTX_set_params(x, prm)
            && ERR_GET_REASON(ERR_peek_last_error()) == ACC_R_INVALID_PARAMETER)
            acc_lib = ERR_GET_LIB(ERR_peek_last_error());
        ERR_clear_error();
        EVP_CIPHER_CTX_free(x);
        check(acc_lib >= 0, "an accelaes error to learn its library number from");
    }
    for (int enc = 0; enc < 2; enc++)
        for (int kind = F_BLANK; kind < F_KINDS; kind++) {
            gcm_case(enc, kind);
            xts_case(128, enc, kind, 100);
            xts_case(256, enc, kind, LEN + 7);
        }
    /* unloaded, as test_engine_fail.c does: LeakSanitizer (make test's ASan pass) reports them otherwise */
    OSSL_PROVIDER_unload(acc);
    OSSL_PROVIDER_unload(def);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
