/* fuzz/fuzz_side.c: loads OpenSSL's default provider and accelaes (linked in, registered with
 * OSSL_PROVIDER_add_builtin so that its code is instrumented) and drives a cipher context of
 * either through EVP or through the provider's own dispatch table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/core.h>
#include <openssl/err.h>
#include <openssl/provider.h>
#include "accel/engine.h"
#include "fuzz/fuzz_side.h"

extern OSSL_provider_init_fn OSSL_provider_init;

static const struct {
    const char *name;
    int mode;
    size_t keylen;
} ciphers[FZ_NCIPHERS] = {
    { "AES-128-ECB", FZ_ECB, 16 }, { "AES-192-ECB", FZ_ECB, 24 }, { "AES-256-ECB", FZ_ECB, 32 },
    { "AES-128-CBC", FZ_CBC, 16 }, { "AES-192-CBC", FZ_CBC, 24 }, { "AES-256-CBC", FZ_CBC, 32 },
    { "AES-128-CTR", FZ_CTR, 16 }, { "AES-192-CTR", FZ_CTR, 24 }, { "AES-256-CTR", FZ_CTR, 32 },
    { "AES-128-GCM", FZ_GCM, 16 }, { "AES-192-GCM", FZ_GCM, 24 }, { "AES-256-GCM", FZ_GCM, 32 },
    { "AES-128-XTS", FZ_XTS, 32 }, { "AES-256-XTS", FZ_XTS, 64 },
    { "AES-128-CCM", FZ_CCM, 16 }, { "AES-192-CCM", FZ_CCM, 24 }, { "AES-256-CCM", FZ_CCM, 32 },
};

/* Settings of each accelaes instance (ACCELAES_* environment at its OSSL_provider_init). */
static const char *const inst_env[FZ_NINST][3][2] = {
    { { "ACCELAES_BACKEND", "cpu" }, { "ACCELAES_SPLIT_MIN", "auto" }, { "ACCELAES_GPU_MIN", "auto" } },
    { { "ACCELAES_BACKEND", "cpu" }, { "ACCELAES_SPLIT_MIN", "16k" }, { "ACCELAES_GPU_MIN", "auto" } },
    { { "ACCELAES_BACKEND", "cuda" }, { "ACCELAES_SPLIT_MIN", "16k" }, { "ACCELAES_GPU_MIN", "4k" } },
};

static OSSL_LIB_CTX *libctx[FZ_NINST];
static fz_impl impls[2][FZ_NINST][FZ_NCIPHERS];

const char *fz_cipher_name(int cipher)
{
    return ciphers[cipher].name;
}

int fz_cipher_mode(int cipher)
{
    return ciphers[cipher].mode;
}

size_t fz_cipher_keylen(int cipher)
{
    return ciphers[cipher].keylen;
}

const fz_impl *fz_impl_get(int side, int inst, int cipher)
{
    return &impls[side][inst][cipher];
}

static int complete(const fz_impl *im)
{
    return im->evp != NULL && im->newctx != NULL && im->freectx != NULL && im->dupctx != NULL && im->einit != NULL
        && im->dinit != NULL && im->update != NULL && im->final != NULL && im->cipher != NULL
        && im->get_ctx_params != NULL && im->set_ctx_params != NULL;
}

int fz_impl_present(int side, int inst, int cipher)
{
    return complete(&impls[side][inst][cipher]);
}

/* The algorithm whose first name is `name`, from the provider's own query function. */
static const OSSL_DISPATCH *find_alg(OSSL_PROVIDER *prov, const char *name)
{
    const OSSL_DISPATCH *d = OSSL_PROVIDER_get0_dispatch(prov);
    OSSL_FUNC_provider_query_operation_fn *query = NULL;
    const OSSL_ALGORITHM *a;
    size_t n = strlen(name);
    int no_cache = 0;

    for (; d != NULL && d->function_id != 0; d++)
        if (d->function_id == OSSL_FUNC_PROVIDER_QUERY_OPERATION)
            query = OSSL_FUNC_provider_query_operation(d);
    if (query == NULL)
        return NULL;
    a = query(OSSL_PROVIDER_get0_provider_ctx(prov), OSSL_OP_CIPHER, &no_cache);
    for (; a != NULL && a->algorithm_names != NULL; a++)
        if (strncmp(a->algorithm_names, name, n) == 0
            && (a->algorithm_names[n] == '\0' || a->algorithm_names[n] == ':'))
            return a->implementation;
    return NULL;
}

static int fill_impl(fz_impl *im, OSSL_LIB_CTX *lc, OSSL_PROVIDER *prov, const char *pname, int cipher)
{
    const OSSL_DISPATCH *d = find_alg(prov, ciphers[cipher].name);
    char props[64];

    snprintf(props, sizeof(props), "provider=%s", pname);
    im->evp = EVP_CIPHER_fetch(lc, ciphers[cipher].name, props);
    im->provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
    for (; d != NULL && d->function_id != 0; d++) {
        switch (d->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: im->newctx = OSSL_FUNC_cipher_newctx(d); break;
        case OSSL_FUNC_CIPHER_FREECTX: im->freectx = OSSL_FUNC_cipher_freectx(d); break;
        case OSSL_FUNC_CIPHER_DUPCTX: im->dupctx = OSSL_FUNC_cipher_dupctx(d); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: im->einit = OSSL_FUNC_cipher_encrypt_init(d); break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT: im->dinit = OSSL_FUNC_cipher_decrypt_init(d); break;
        case OSSL_FUNC_CIPHER_UPDATE: im->update = OSSL_FUNC_cipher_update(d); break;
        case OSSL_FUNC_CIPHER_FINAL: im->final = OSSL_FUNC_cipher_final(d); break;
        case OSSL_FUNC_CIPHER_CIPHER: im->cipher = OSSL_FUNC_cipher_cipher(d); break;
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: im->get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(d); break;
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: im->set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(d); break;
        default: break;
        }
    }
    if (!complete(im)) {
        fprintf(stderr, "fuzz_diff: %s from %s: missing EVP cipher or dispatch functions\n",
                ciphers[cipher].name, pname);
        return 0;
    }
    return 1;
}

/* Loads accelaes into lc with the instance's settings in the environment for its init. */
static OSSL_PROVIDER *load_acc(OSSL_LIB_CTX *lc, int inst)
{
    OSSL_PROVIDER *p;

    for (int i = 0; i < 3; i++)
        setenv(inst_env[inst][i][0], inst_env[inst][i][1], 1);
    p = OSSL_PROVIDER_load(lc, "accelaes");
    for (int i = 0; i < 3; i++)
        unsetenv(inst_env[inst][i][0]);
    return p;
}

/* The fake GPU plugin (tests/fake_gpu_plugin.c) sits in build/, one level above this program. */
static void point_at_fake_gpu(void)
{
    char exe[4096], path[4200];
    ssize_t n;
    char *slash;

    if (getenv("ACCELAES_GPU_PLUGIN") != NULL)
        return;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return;
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/../accelaes-fakegpu.so", exe);
    if (access(path, R_OK) == 0)
        setenv("ACCELAES_GPU_PLUGIN", path, 1);
    else
        fprintf(stderr, "fuzz_diff: %s not found (make build-only): instance 2 runs on the CPU\n", path);
}

int fz_setup(void)
{
    OSSL_PROVIDER *def = NULL;

    point_at_fake_gpu();
    for (int inst = 0; inst < FZ_NINST; inst++) {
        OSSL_PROVIDER *acc, *d;

        libctx[inst] = OSSL_LIB_CTX_new();
        if (libctx[inst] == NULL
            || !OSSL_PROVIDER_add_builtin(libctx[inst], "accelaes", OSSL_provider_init)
            || (d = OSSL_PROVIDER_load(libctx[inst], "default")) == NULL
            || (acc = load_acc(libctx[inst], inst)) == NULL) {
            fprintf(stderr, "fuzz_diff: cannot load the providers (instance %d)\n", inst);
            ERR_print_errors_fp(stderr);
            return 0;
        }
        if (inst == 0)
            def = d;
        for (int c = 0; c < FZ_NCIPHERS; c++) {
            if (inst == 0 && !fill_impl(&impls[FZ_DEF][0][c], libctx[0], def, "default", c))
                return 0;
            impls[FZ_DEF][inst][c] = impls[FZ_DEF][0][c];
            /* CCM came after the rest: where accelaes lacks it, only CCM inputs fail (fz_impl_present).
             * FUZZ_DIFF_CCM_REFERENCE=1 gives that side the default's own CCM instead, which checks the
             * harness's CCM handling: the default against itself must never diverge. */
            if (!fill_impl(&impls[FZ_ACC][inst][c], libctx[inst], acc, "accelaes", c)) {
                if (c < FZ_FIRST_CCM)
                    return 0;
                if (getenv("FUZZ_DIFF_CCM_REFERENCE") != NULL)
                    impls[FZ_ACC][inst][c] = impls[FZ_DEF][0][c];
            }
        }
    }
    fprintf(stderr, "fuzz_diff: accelaes inline engine: %s (ACCELAES_NO_VAES=1 and "
            "ACCELAES_FORCE_EVP_ENGINE=1 choose the others)\n", acc_engine_default()->name);
    return 1;
}

/* ======================== Contexts ======================== */

int fz_ctx_new(fz_ctx *c, const fz_impl *impl, int raw)
{
    memset(c, 0, sizeof(*c));
    c->raw = raw;
    c->impl = impl;
    if (raw)
        c->alg = impl->newctx(impl->provctx);
    else
        c->evp = EVP_CIPHER_CTX_new();
    return c->alg != NULL || c->evp != NULL;
}

void fz_ctx_free(fz_ctx *c)
{
    if (c->alg != NULL)
        c->impl->freectx(c->alg);
    EVP_CIPHER_CTX_free(c->evp);
    c->alg = NULL;
    c->evp = NULL;
}

int fz_ctx_dup(fz_ctx *dst, const fz_ctx *src)
{
    *dst = *src;
    dst->alg = NULL;
    dst->evp = NULL;
    if (src->raw) {
        dst->alg = src->alg != NULL ? src->impl->dupctx(src->alg) : NULL;
        return dst->alg != NULL;
    }
    if ((dst->evp = EVP_CIPHER_CTX_new()) == NULL)
        return 0;
    if (!EVP_CIPHER_CTX_copy(dst->evp, src->evp)) {
        EVP_CIPHER_CTX_free(dst->evp);
        dst->evp = NULL;
        return 0;
    }
    return 1;
}

int fz_init(fz_ctx *c, int with_cipher, const unsigned char *key, size_t keylen,
            const unsigned char *iv, size_t ivlen, int enc, const OSSL_PARAM params[])
{
    if (!c->raw)
        return EVP_CipherInit_ex2(c->evp, with_cipher ? c->impl->evp : NULL, key, iv, enc, params);
    if (with_cipher) {
        fz_ctx_free(c);
        if ((c->alg = c->impl->newctx(c->impl->provctx)) == NULL)
            return 0;
    }
    return (enc ? c->impl->einit : c->impl->dinit)(c->alg, key, keylen, iv, ivlen, params);
}

int fz_update(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl)
{
    int ol = 0, ok;

    *outl = 0;
    if (c->raw)
        return c->impl->update(c->alg, out, outl, outsize, in, inl);
    ok = EVP_CipherUpdate(c->evp, out, &ol, in, (int)inl);
    *outl = ok && ol > 0 ? (size_t)ol : 0;
    return ok;
}

int fz_final(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize)
{
    int ol = 0, ok;

    *outl = 0;
    if (c->raw)
        return c->impl->final(c->alg, out, outl, outsize);
    ok = EVP_CipherFinal_ex(c->evp, out, &ol);
    *outl = ok && ol > 0 ? (size_t)ol : 0;
    return ok;
}

int fz_cipher(fz_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl)
{
    int r;

    *outl = 0;
    if (c->raw)
        return c->impl->cipher(c->alg, out, outl, outsize, in, inl);
    /* EVP_Cipher on a provided cipher: the length written, or -1 */
    r = EVP_Cipher(c->evp, out, in, (unsigned int)inl);
    if (r < 0)
        return 0;
    *outl = (size_t)r;
    return 1;
}

int fz_set_params(fz_ctx *c, const OSSL_PARAM params[])
{
    if (c->raw)
        return c->impl->set_ctx_params(c->alg, params);
    return EVP_CIPHER_CTX_set_params(c->evp, params);
}

int fz_get_params(fz_ctx *c, OSSL_PARAM params[])
{
    if (c->raw)
        return c->impl->get_ctx_params(c->alg, params);
    return EVP_CIPHER_CTX_get_params(c->evp, params);
}
