/* tests/c/test_engine_fail_common.h: the fault shared by test_engine_fail.c (the block engine and
 * the nine ciphers) and test_engine_fail_aead.c (GCM and XTS): EVP_CipherUpdate and EVP_CipherInit_ex2
 * defined in the test binary, so that the static copy of the provider linked in calls them (see
 * test_engine_fail.c), armed and disarmed by the test; and the checks of a failure it caused. */
#ifndef ACCELAES_TEST_ENGINE_FAIL_COMMON_H
#define ACCELAES_TEST_ENGINE_FAIL_COMMON_H

static int passed, failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    if (ok) {
        passed++;
        return;
    }
    if (++failed <= 40) {
        va_start(ap, fmt);
        fputs("FAIL ", stdout);
        vprintf(fmt, ap);
        putchar('\n');
        va_end(ap);
    }
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/* ======================== The fault ======================== */

enum { F_OFF, F_BLANK, F_GARBAGE, F_SHORT, F_INIT, F_KINDS };
static const char *const kind_name[F_KINDS] = { "off", "update on a blank context", "garbage out, update fails",
                                                "short output", "IV re-initialisation fails" };

/* Read from pool threads too, hence atomics. */
static int fault;     /* F_*: what an eligible call does */
static int pool_only; /* only calls on threads other than main's are eligible */
static int skip;      /* eligible calls that pass before every further one fails */
static int fired;     /* calls failed since arming */
static pthread_t main_thread;

typedef int update_fn(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);
typedef int init_fn(EVP_CIPHER_CTX *, const EVP_CIPHER *, const unsigned char *, const unsigned char *, int,
                    const OSSL_PARAM[]);
static update_fn *real_update;
static init_fn *real_init;

static void arm(int kind, int on_pool_only, int n_skip)
{
    __atomic_store_n(&fired, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pool_only, on_pool_only, __ATOMIC_RELAXED);
    __atomic_store_n(&skip, n_skip, __ATOMIC_RELAXED);
    __atomic_store_n(&fault, kind, __ATOMIC_RELEASE);
}

/* Returns how many calls failed while armed. */
static int disarm(void)
{
    __atomic_store_n(&fault, F_OFF, __ATOMIC_RELEASE);
    return __atomic_load_n(&fired, __ATOMIC_RELAXED);
}

/* A pool-only fault slows the caller's own pieces down: otherwise the caller may run every piece
 * before a sleeping helper has woken up (tens of microseconds), and no pool thread takes part. */
static int eligible(void)
{
    if (__atomic_load_n(&pool_only, __ATOMIC_RELAXED) && pthread_equal(pthread_self(), main_thread)) {
        usleep(2000);
        return 0;
    }
    if (__atomic_sub_fetch(&skip, 1, __ATOMIC_RELAXED) >= 0)
        return 0;
    __atomic_add_fetch(&fired, 1, __ATOMIC_RELAXED);
    return 1;
}

static int blank_update(unsigned char *out, int *outl, const unsigned char *in, int inl)
{
    EVP_CIPHER_CTX *blank = EVP_CIPHER_CTX_new();
    int r = blank != NULL && real_update(blank, out, outl, in, inl);

    EVP_CIPHER_CTX_free(blank);
    return r;
}

int EVP_CipherUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl)
{
    int k = __atomic_load_n(&fault, __ATOMIC_ACQUIRE), r;

    if ((k != F_BLANK && k != F_GARBAGE && k != F_SHORT) || !eligible())
        return real_update(ctx, out, outl, in, inl);
    if (k == F_BLANK)
        return blank_update(out, outl, in, inl);
    if (k == F_GARBAGE) {
        if (out != NULL) /* GCM's AAD: no output */
            memset(out, 0xee, (size_t)inl);
        *outl = inl;
        return 0;
    }
    r = real_update(ctx, out, outl, in, inl);
    *outl -= 16;
    return r;
}

int EVP_CipherInit_ex2(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, const unsigned char *key, const unsigned char *iv,
                       int enc, const OSSL_PARAM params[])
{
    if (__atomic_load_n(&fault, __ATOMIC_ACQUIRE) == F_INIT && eligible()) {
        EVP_CIPHER_CTX *blank = EVP_CIPHER_CTX_new();
        int r = blank != NULL && real_init(blank, NULL, NULL, iv, enc, NULL);

        EVP_CIPHER_CTX_free(blank);
        return r;
    }
    return real_init(ctx, cipher, key, iv, enc, params);
}

static int acc_lib = -1;                                           /* the library number accelaes's errors carry */
static const char *want_text = "the nested EVP engine failed in "; /* in accelaes's error */

/* Every error now queued is taken: exactly one is accelaes's, the last one, ACC_R_ENGINE_FAILURE,
 * and its text says what failed. (The nested EVP call's own errors may come first, when the piece
 * failed on this thread.) */
static void check_error(const char *what)
{
    unsigned long e, last = 0;
    const char *data;
    char text[256] = "";
    int flags, ours = 0;

    while ((e = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0) {
        ours += ERR_GET_LIB(e) == acc_lib;
        last = e;
        snprintf(text, sizeof(text), "%s", data != NULL && (flags & ERR_TXT_STRING) ? data : "");
    }
    check(ours == 1, "%s: one accelaes error queued (%d)", what, ours);
    check(ERR_GET_LIB(last) == acc_lib && ERR_GET_REASON(last) == ACC_R_ENGINE_FAILURE,
          "%s: the last error is accelaes's engine failure (lib %d reason %d)", what, ERR_GET_LIB(last),
          ERR_GET_REASON(last));
    check(strstr(text, want_text) != NULL, "%s: the reason says what failed: '%s'", what, text);
}

/* A call whose fault fired: r, what it returned (EVP_Cipher: the length or -1), says failure,
 * with the error. */
static void expect_failure(const char *what, int r, int n)
{
    check(n > 0, "%s: the fault fired", what);
    check(r <= 0, "%s: the call fails (returned %d)", what, r);
    check_error(what);
}

#endif
