/* tests/c/test_exit_engine.c: a statically linked program that sets a legacy ENGINE as default for
 * everything (build/accelaes-test-engine.so, tests/fake_engine.c, loaded through "dynamic"), uses
 * accelaes (built in, OSSL_PROVIDER_add_builtin, activated by a configuration as
 * conf/accelaes.cnf does) for ciphers and RAND, loads and unloads accelaes in a second library
 * context while it goes on, then returns from main: OPENSSL_cleanup runs from atexit and frees the
 * ENGINE lock before it tears the configured providers down. The test is that the process exits 0.
 * --explicit-cleanup calls OPENSSL_cleanup before returning instead.
 * ACCELAES_TEST_ENGINE names the engine; else it is looked for beside the tests/ directory. */
#define OPENSSL_SUPPRESS_DEPRECATED   /* the ENGINE API, deprecated in 3.0 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/engine.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

OSSL_provider_init_fn OSSL_provider_init;   /* libaccelaes.a */

static int passed, failed;

static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "FAIL: %s\n", what);
    ERR_print_errors_fp(stderr);
}

/* A provider activated by a configuration is torn down by OPENSSL_cleanup; one loaded with
 * OSSL_PROVIDER_load and never unloaded is not (the caller's handle keeps it), and so would not
 * exercise the exit path at all. */
static const char conf_text[] =
    "openssl_conf = init\n[init]\nproviders = provs\nalg_section = algs\n"
    "[provs]\ndefault = act\naccelaes = act\n[act]\nactivate = 1\n"
    "[algs]\ndefault_properties = ?provider=accelaes\n";

static int providers_configure(void)
{
    char path[] = "/tmp/accelaes-exit-XXXXXX";
    int fd = mkstemp(path), ok;

    if (fd < 0)
        return 0;
    ok = write(fd, conf_text, strlen(conf_text)) == (ssize_t)strlen(conf_text);
    close(fd);
    ok = ok && OSSL_PROVIDER_add_builtin(NULL, "accelaes", OSSL_provider_init)
         && OSSL_LIB_CTX_load_config(NULL, path);
    unlink(path);
    return ok && OSSL_PROVIDER_available(NULL, "accelaes") && OSSL_PROVIDER_available(NULL, "default");
}

static ENGINE *engine_load(const char *argv0)
{
    char dflt[PATH_MAX], copy[PATH_MAX];
    const char *path = getenv("ACCELAES_TEST_ENGINE");
    ENGINE *e;

    if (path == NULL) {
        snprintf(copy, sizeof(copy), "%s", argv0);
        snprintf(dflt, sizeof(dflt), "%s/../accelaes-test-engine.so", dirname(copy));
        path = dflt;
    }
    if (access(path, R_OK) != 0) {
        printf("skipped: no test engine at %s (make build-only builds it)\n", path);
        exit(77);
    }
    e = ENGINE_by_id("dynamic");
    if (e != NULL && (!ENGINE_ctrl_cmd_string(e, "SO_PATH", path, 0)
                      || !ENGINE_ctrl_cmd_string(e, "LOAD", NULL, 0))) {
        ENGINE_free(e);
        e = NULL;
    }
    return e;
}

/* 4 KiB through `name` from accelaes and from the default provider: the same bytes. want_prov is
 * the provider that should end up doing it (NULL: the ENGINE, which takes over legacy-style). */
static void cipher_check(const char *name, const char *want_prov)
{
    static const unsigned char key[32] = { 1, 2, 3 }, iv[16] = { 4, 5, 6 };
    unsigned char in[4096], out[2][4096 + 32];
    int len[2] = { 0, 0 }, fin;
    char what[128];

    memset(in, 0x5a, sizeof(in));
    for (int i = 0; i < 2; i++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, i == 0 ? "provider=accelaes" : "provider=default");
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
        int ok = c != NULL && x != NULL && EVP_EncryptInit_ex2(x, c, key, iv, NULL)
                 && EVP_EncryptUpdate(x, out[i], &len[i], in, sizeof(in))
                 && EVP_EncryptFinal_ex(x, out[i] + len[i], &fin);
        if (ok && i == 0) {
            const OSSL_PROVIDER *p = EVP_CIPHER_get0_provider(EVP_CIPHER_CTX_get0_cipher(x));
            snprintf(what, sizeof(what), "%s is done by %s", name, want_prov ? want_prov : "the ENGINE");
            check(want_prov == NULL ? p == NULL
                                    : p != NULL && strcmp(OSSL_PROVIDER_get0_name(p), want_prov) == 0, what);
        }
        len[i] += ok ? fin : 0;
        snprintf(what, sizeof(what), "%s encrypts (%s)", name, i == 0 ? "accelaes" : "default");
        check(ok, what);
        EVP_CIPHER_CTX_free(x);
        EVP_CIPHER_free(c);
    }
    snprintf(what, sizeof(what), "%s: accelaes and default agree", name);
    check(len[0] == len[1] && len[0] > 0 && memcmp(out[0], out[1], (size_t)len[0]) == 0, what);
}

static int rand_is_accelaes(EVP_RAND_CTX *r)
{
    const OSSL_PROVIDER *p = r != NULL ? EVP_RAND_get0_provider(EVP_RAND_CTX_get0_rand(r)) : NULL;

    return p != NULL && strcmp(OSSL_PROVIDER_get0_name(p), "accelaes") == 0;
}

/* accelaes loaded in a library context of its own, its DRBG used (so it makes its private
 * context, whose CTR-DRBG the ENGINE now serves), then unloaded while the process goes on. */
static void load_use_unload(void)
{
    unsigned char buf[48];
    OSSL_LIB_CTX *lc = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *p = NULL;
    EVP_RAND *rand = NULL;
    EVP_RAND_CTX *r = NULL;

    check(lc != NULL && OSSL_PROVIDER_add_builtin(lc, "accelaes", OSSL_provider_init)
          && (p = OSSL_PROVIDER_load(lc, "accelaes")) != NULL, "accelaes loads in a second context");
    rand = EVP_RAND_fetch(lc, "CTR-DRBG", "provider=accelaes");
    r = rand != NULL ? EVP_RAND_CTX_new(rand, NULL) : NULL;
    check(r != NULL && EVP_RAND_instantiate(r, 0, 0, NULL, 0, NULL)
          && EVP_RAND_generate(r, buf, sizeof(buf), 0, 0, NULL, 0), "its DRBG generates");
    EVP_RAND_CTX_free(r);
    EVP_RAND_free(rand);
    check(p != NULL && OSSL_PROVIDER_unload(p), "accelaes unloads from the second context");
    OSSL_LIB_CTX_free(lc);
}

int main(int argc, char **argv)
{
    int explicit_cleanup = argc > 1 && strcmp(argv[1], "--explicit-cleanup") == 0;
    unsigned char buf[64];
    ENGINE *e, *ctr;

    check(providers_configure(), "providers configured (as conf/accelaes.cnf does)");
    e = engine_load(argv[0]);
    check(e != NULL && ENGINE_set_default(e, ENGINE_METHOD_ALL), "the test engine is set as default");
    ENGINE_free(e);
    ctr = ENGINE_get_cipher_engine(NID_aes_256_ctr);
    check(ctr != NULL, "the ENGINE serves AES-256-CTR (the CTR-DRBG's cipher)");
    ENGINE_finish(ctr);

    check(RAND_bytes(buf, sizeof(buf)) == 1 && RAND_priv_bytes(buf, sizeof(buf)) == 1, "RAND_bytes");
    check(rand_is_accelaes(RAND_get0_public(NULL)), "the public DRBG is accelaes's");
    cipher_check("AES-128-CTR", "accelaes");
    cipher_check("AES-256-CBC", "accelaes");
    cipher_check("AES-128-ECB", "accelaes");
    cipher_check("AES-128-CBC", NULL);
    load_use_unload();
    check(RAND_bytes(buf, sizeof(buf)) == 1, "RAND_bytes after the second context is gone");
    cipher_check("AES-128-CTR", "accelaes");

    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    if (explicit_cleanup)
        OPENSSL_cleanup();
    return failed != 0;
}
