/* fuzz/fuzz_diff.c: libFuzzer target. An input is a program of operations (init, update, final,
 * EVP_Cipher, context copy, set/get params) run in lockstep on a context of OpenSSL's default
 * provider and one of accelaes; any difference in success, lengths or bytes aborts. Calls on which
 * the default provider itself is undefined go to accelaes alone, which must refuse them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include "fuzz/fuzz_diff.h"

#define MAX_OPS 64

int fz_selftest;      /* FUZZ_DIFF_SELFTEST=1: accelaes's output corrupted, so inputs must abort */
int fz_tracing;
static char shm_name[64];     /* our own scheduler segment, removed at exit and on a crash */

/* Sanitizer runtimes call this before they end the process (absent without sanitizers). */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void remove_shm(void)
{
    if (shm_name[0] != '\0')
        shm_unlink(shm_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ======================== Input and messages ======================== */

unsigned fz_u8(fz_reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

unsigned fz_u16(fz_reader *r)
{
    unsigned lo = fz_u8(r);

    return lo | fz_u8(r) << 8;
}

void fz_take(fz_reader *r, uint8_t *dst, size_t n)
{
    size_t k = n < r->n ? n : r->n;

    if (k > 0)
        memcpy(dst, r->p, k);
    memset(dst + k, 0, n - k);
    r->p += k;
    r->n -= k;
}

void fz_diverge(const fz_run *R, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "\nfuzz_diff: DIVERGENCE at operation %d (%s), %s, %s layer, accelaes instance %d:\n  ",
            R->op, R->opname, fz_cipher_name(R->cipher), R->raw ? "dispatch" : "EVP", R->inst);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    ERR_print_errors_fp(stderr);
    remove_shm();
    abort();
}

void fz_trace(const fz_run *R, const char *fmt, ...)
{
    va_list ap;

    if (!fz_tracing)
        return;
    fprintf(stderr, "trace: op %d %s: ", R->op, R->opname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

/* ======================== Context pairs ======================== */

static void slot_open(fz_run *R, fz_slot *s)
{
    for (int side = 0; side < 2; side++)
        if (!fz_ctx_new(&s->c[side], fz_impl_get(side, R->inst, R->cipher), R->raw))
            fz_diverge(R, "cannot allocate a %s context", side == FZ_DEF ? "default" : "accelaes");
    s->buffered = 0;
    s->tls = 0;
    s->tlsms = 0;
    s->tls_mac = 0;
}

static void slot_fresh(fz_run *R, fz_slot *s)
{
    for (int side = 0; side < 2; side++)
        fz_ctx_free(&s->c[side]);
    memset(s, 0, sizeof(*s));    /* direction 0: a new EVP_CIPHER_CTX's */
    slot_open(R, s);
}

void fz_resync(fz_run *R, fz_slot *s)
{
    for (int side = 0; side < 2; side++)
        fz_ctx_free(&s->c[side]);
    slot_open(R, s);
    ERR_clear_error();
    if (!s->inited) {
        s->enc = 0;              /* what a new EVP_CIPHER_CTX starts with */
        return;
    }
    for (int side = 0; side < 2; side++) {
        fz_ctx *c = &s->c[side];
        int ok;

        if (R->mode == FZ_XTS && s->enc && s->have_key && memcmp(s->key, s->key + R->keylen / 2, R->keylen / 2) == 0) {
            /* duplicate halves are refused on encryption: the key came in for decryption, and the
             * direction changed after it with no key (as the contexts were built) */
            ok = fz_init(c, 1, s->key, R->keylen, NULL, 16, 0, NULL)
                && fz_init(c, 0, NULL, R->keylen, s->have_iv ? s->iv : NULL, 16, 1, NULL);
        } else if (R->mode == FZ_CCM) {
            /* CCM: the nonce length before the key (the key's init fixes it) and the nonce */
            size_t ivlen = fz_ivlen(R, s);
            OSSL_PARAM p[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen),
                                OSSL_PARAM_construct_end() };

            ok = fz_init(c, 1, NULL, R->keylen, NULL, ivlen, s->enc, NULL)
                && (s->ivlen == 0 || fz_set_params(c, p))
                && fz_init(c, 0, s->have_key ? s->key : NULL, R->keylen, s->have_iv ? s->iv : NULL, ivlen, s->enc,
                           NULL);
        } else if (R->mode != FZ_GCM) {
            ok = fz_init(c, 1, s->have_key ? s->key : NULL, R->keylen, s->have_iv ? s->iv : NULL, 16, s->enc, NULL);
        } else {
            /* GCM: the IV length before the IV (init reads the IV with the context's length) */
            size_t ivlen = fz_ivlen(R, s);
            OSSL_PARAM p[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen),
                                OSSL_PARAM_construct_end() };

            ok = fz_init(c, 1, s->have_key ? s->key : NULL, R->keylen, NULL, ivlen, s->enc, NULL)
                && (s->ivlen == 0 || fz_set_params(c, p))
                && (!s->have_iv || fz_init(c, 0, NULL, R->keylen, s->iv, ivlen, s->enc, NULL));
        }
        if (!ok)
            fz_diverge(R, "rebuilding the %s context after a failed call failed",
                       side == FZ_DEF ? "default" : "accelaes");
    }
    s->gcm = s->have_iv ? FZ_IV_BUFFERED : FZ_IV_UNSET;
}

/* Whether a call reaches the provider: EVP refuses most calls on a context without a cipher
 * itself, some without raising an error. */
static int reaches_provider(const fz_run *R, const fz_slot *s)
{
    return R->raw || s->inited;
}

/* Both verdicts on a call; 1 when both succeeded. Both failing is agreement, provided accelaes
 * said why; the pair is then rebuilt, since a failed call may leave either half-changed. */
int fz_verdicts(fz_run *R, fz_slot *s, int ok_d, int ok_a, unsigned long err_a)
{
    int silent = R->def_silent && FZ_NEW_MODE(R->mode);

    R->def_silent = 0;
    fz_trace(R, "pair %d: default %d, accelaes %d", (int)(s - R->s), ok_d, ok_a);
    if (ok_d != ok_a)
        fz_diverge(R, "default %s, accelaes %s", ok_d ? "succeeded" : "failed", ok_a ? "succeeded" : "failed");
    if (ok_a)
        return 1;
    /* GCM/XTS: where the default fails without an error (a wrong tag at final, XTS keylen), so may
     * accelaes, which mirrors it; elsewhere accelaes must say why */
    if (err_a == 0 && reaches_provider(R, s) && !silent)
        fz_diverge(R, "accelaes failed without an error on the queue");
    fz_resync(R, s);
    return 0;
}

/* A call only accelaes got: it must refuse, with a reason; then both are rebuilt. */
void fz_refused(fz_run *R, fz_slot *s, int ok_a, const char *what)
{
    fz_trace(R, "pair %d: accelaes alone (%s): %d", (int)(s - R->s), what, ok_a);
    if (ok_a)
        fz_diverge(R, "accelaes accepted %s: it must refuse it", what);
    if (ERR_peek_error() == 0 && reaches_provider(R, s))
        fz_diverge(R, "accelaes refused %s without an error on the queue", what);
    fz_resync(R, s);
}

fz_slot *fz_pick_slot(fz_run *R)
{
    return &R->s[fz_u8(&R->r) % FZ_NSLOTS];
}

void fz_keep_last(fz_run *R, const uint8_t *out, size_t n)
{
    uint8_t *p = realloc(R->last, n + 1);

    if (p == NULL)
        fz_diverge(R, "out of memory");
    if (n > 0)
        memcpy(p, out, n);
    R->last = p;
    R->lastlen = n;
}

/* ======================== Init ======================== */

static void op_init(fz_run *R)
{
    fz_slot *s = fz_pick_slot(R);
    unsigned f = fz_u8(&R->r), g = R->raw ? fz_u8(&R->r) : 0;
    int with_cipher = (f >> 6) & 1, enc, eff;
    uint8_t key[64], iv[128];
    const uint8_t *k = NULL, *v = NULL, *kd;
    size_t keylen = R->keylen, ivlen = fz_ivlen(R, s);
    fz_params ps;
    const OSSL_PARAM *params = NULL;
    int ok_d, ok_a;
    unsigned long err_a;

    switch (f & 3) {
    case 0: enc = 1; break;
    case 1: enc = 0; break;
    case 2: enc = R->raw ? s->enc : -1; break;
    default: enc = !s->enc; break;
    }
    eff = enc < 0 ? s->enc : enc;
    if ((g & 7) >= 5) {          /* the dispatch layer: lengths EVP would never pass */
        if ((g & 7) != 6)
            keylen = fz_u8(&R->r) % 40;
        if ((g & 7) != 5)
            ivlen = fz_u8(&R->r) % 33;
    }
    memset(key, 0, sizeof(key));
    memset(iv, 0, sizeof(iv));
    switch ((f >> 2) & 3) {
    case 1: break;
    case 2: if (s->have_key) { memcpy(key, s->key, R->keylen); k = key; } break;
    default: fz_take(&R->r, key, keylen); k = key; break;
    }
    switch ((f >> 4) & 3) {
    case 1: break;
    case 2:
        if (s->have_iv) {
            memcpy(iv, s->iv, sizeof(iv));
            v = iv;
        }
        break;
    default: fz_take(&R->r, iv, 16); v = iv; break;
    }
    if (f & 0x80) {
        fz_params_build(&R->r, &ps);
        params = ps.p;
    }
    R->opname = "init";
    fz_trace(R, "pair %d: enc %d (was %d), key %s, iv %s, keylen %zu, ivlen %zu, %s, params %s",
             (int)(s - R->s), enc, s->enc, k ? "given" : "NULL", v ? "given" : "NULL", keylen, ivlen,
             with_cipher ? "with the cipher" : "same context", params ? "yes" : "no");
    ERR_clear_error();
    if (fz_params_acc_only(R, params)) {
        fz_refused(R, s, fz_init(&s->c[FZ_ACC], with_cipher, k, keylen, v, ivlen, enc, params),
                "init parameters the default provider would misuse");
        return;
    }
    /* With a NULL key the default keeps the schedule it made for the other direction and so
     * computes garbage; accelaes rebuilds it (documented). The default gets the key again. */
    kd = k;
    if (k == NULL && !with_cipher && eff != s->enc && s->have_key && !FZ_NEW_MODE(R->mode))
        kd = s->key;
    ok_d = fz_init(&s->c[FZ_DEF], with_cipher, kd, kd == k ? keylen : R->keylen, v, ivlen, enc, params);
    R->def_silent = !ok_d && ERR_peek_error() == 0;
    ERR_clear_error();
    ok_a = fz_init(&s->c[FZ_ACC], with_cipher, k, keylen, v, ivlen, enc, params);
    err_a = ERR_peek_error();
    if (with_cipher) {           /* a fresh provider context, whatever the outcome */
        s->have_key = s->have_iv = 0;
        s->tls = 0;
        s->tlsms = 0;
        s->tls_mac = 0;
        s->ivlen = 0;
        s->gcm = FZ_IV_UNSET;
        s->inited = 1;           /* EVP has the cipher now (a rebuild after failure gives it too) */
    }
    s->enc = eff;                /* EVP records the direction before it calls the provider */
    if (!fz_verdicts(R, s, ok_d, ok_a, err_a))
        return;
    s->inited = 1;
    if (k != NULL) {
        s->have_key = 1;
        memcpy(s->key, k, R->keylen);
    }
    if (v != NULL && R->mode != FZ_ECB) {
        s->have_iv = 1;
        memcpy(s->iv, v, sizeof(s->iv));
        if (R->mode == FZ_GCM) {
            s->gcm = FZ_IV_BUFFERED;
            if (R->raw && ivlen != fz_ivlen(R, s)) /* the dispatch layer sets the length given */
                s->ivlen = ivlen;
        }
    }
    s->buffered = 0;
    fz_params_apply(R, s, params);
    fz_check_state(R, s);
}

/* ======================== Copy, params, reset ======================== */

static void op_copy(fz_run *R)
{
    unsigned f = fz_u8(&R->r);
    fz_slot *src = &R->s[f % FZ_NSLOTS], *dst = &R->s[(f % FZ_NSLOTS + 1 + (f >> 4) % (FZ_NSLOTS - 1)) % FZ_NSLOTS];
    int ok[2];
    unsigned long err_a;

    R->opname = "copy";
    fz_trace(R, "pair %d to pair %d%s", (int)(src - R->s), (int)(dst - R->s),
             src->tls_mac ? " (TLS MAC held: accelaes alone)" : "");
    if (src->tls_mac) {
        /* The default's dupctx shares its TLS MAC buffer with the copy (a double free when both
         * are freed): only accelaes is copied, and the copy checked against its original. */
        fz_ctx tmp;

        ERR_clear_error();
        if (!fz_ctx_dup(&tmp, &src->c[FZ_ACC])) {
            if (ERR_peek_error() == 0)
                fz_diverge(R, "accelaes failed a copy without an error on the queue");
            return;
        }
        fz_check_copy(R, src, &tmp);
        fz_ctx_free(&tmp);
        return;
    }
    for (int side = 0; side < 2; side++)
        fz_ctx_free(&dst->c[side]);
    ERR_clear_error();
    ok[FZ_DEF] = fz_ctx_dup(&dst->c[FZ_DEF], &src->c[FZ_DEF]);
    ERR_clear_error();
    ok[FZ_ACC] = fz_ctx_dup(&dst->c[FZ_ACC], &src->c[FZ_ACC]);
    err_a = ERR_peek_error();
    if (ok[FZ_DEF] != ok[FZ_ACC])
        fz_diverge(R, "copy: default %d, accelaes %d", ok[FZ_DEF], ok[FZ_ACC]);
    if (!ok[FZ_ACC]) {
        if (err_a == 0)
            fz_diverge(R, "accelaes failed a copy without an error on the queue");
        slot_fresh(R, dst);
        return;
    }
    {
        fz_ctx keep[2] = { dst->c[0], dst->c[1] };
        *dst = *src;
        dst->c[0] = keep[0];
        dst->c[1] = keep[1];
    }
    fz_check_state(R, dst);
}

static void op_set_params(fz_run *R)
{
    fz_slot *s = fz_pick_slot(R);
    fz_params ps;
    int ok_d, ok_a;
    unsigned long err_a;

    R->opname = "set-params";
    fz_params_build(&R->r, &ps);
    fz_trace(R, "pair %d: first '%s'%s", (int)(s - R->s), ps.p[0].key, ps.p[1].key ? " and more" : "");
    ERR_clear_error();
    if (fz_params_acc_only(R, ps.p)) {
        fz_refused(R, s, fz_set_params(&s->c[FZ_ACC], ps.p), "parameters the default provider would misuse");
        return;
    }
    ok_d = fz_set_params(&s->c[FZ_DEF], ps.p);
    R->def_silent = !ok_d && ERR_peek_error() == 0;
    ERR_clear_error();
    ok_a = fz_set_params(&s->c[FZ_ACC], ps.p);
    err_a = ERR_peek_error();
    if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        fz_params_apply(R, s, ps.p);
        fz_check_state(R, s);
    }
}

/* ======================== Entry points ======================== */


int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    /* The scheduler's unit table: one of our own, never the user's /accelaes.<uid>. */
    if (getenv("ACCELAES_SHM_NAME") == NULL) {
        snprintf(shm_name, sizeof(shm_name), "/accelaes-fuzz-%ld", (long)getpid());
        setenv("ACCELAES_SHM_NAME", shm_name, 1);
        atexit(remove_shm);
        if (__sanitizer_set_death_callback != NULL)
            __sanitizer_set_death_callback(remove_shm);
    }
    fz_selftest = getenv("FUZZ_DIFF_SELFTEST") != NULL && strcmp(getenv("FUZZ_DIFF_SELFTEST"), "1") == 0;
    fz_tracing = getenv("FUZZ_DIFF_TRACE") != NULL && strcmp(getenv("FUZZ_DIFF_TRACE"), "1") == 0;
    if (!fz_setup()) {
        fprintf(stderr, "fuzz_diff: set-up failed\n");
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_run R;
    unsigned h;

    if (size < 2)
        return 0;
    memset(&R, 0, sizeof(R));
    R.r.p = data;
    R.r.n = size;
    h = fz_u8(&R.r);
    R.raw = h & 1;
    R.inst = (int)((h >> 1) % FZ_NINST);
    h = fz_u8(&R.r); /* 0x80 and up: GCM and XTS, 0xE0 and up CCM (the older ciphers kept their bytes) */
    if (h >= 0xE0)
        R.cipher = FZ_FIRST_CCM + (int)(h % 3);
    else
        R.cipher = (int)(h & 0x80 ? 9 + (h & 0x7F) % (FZ_FIRST_CCM - 9) : h % 9);
    R.mode = fz_cipher_mode(R.cipher);
    R.keylen = fz_cipher_keylen(R.cipher);
    R.opname = "start";
    if (!fz_impl_present(FZ_ACC, R.inst, R.cipher))
        fz_diverge(&R, "accelaes does not serve %s", fz_cipher_name(R.cipher));
    fz_trace(&R, "%s, %s layer, accelaes instance %d", fz_cipher_name(R.cipher), R.raw ? "dispatch" : "EVP",
             R.inst);
    for (int i = 0; i < FZ_NSLOTS; i++)
        slot_open(&R, &R.s[i]);
    while (R.r.n > 0 && R.op < MAX_OPS) {
        unsigned op = fz_u8(&R.r);

        R.op++;
        switch (op % 11) {
        case 0: op_init(&R); break;
        case 1: case 2: fz_op_data(&R, 0); break;
        case 3: fz_op_final(&R); break;
        case 4: fz_op_data(&R, 1); break;
        case 5: op_copy(&R); break;
        case 6: op_set_params(&R); break;
        case 7: R.opname = "get-params"; fz_op_get_params(&R, fz_pick_slot(&R)); break;
        case 8: R.opname = "reset"; slot_fresh(&R, fz_pick_slot(&R)); fz_trace(&R, "a fresh pair"); break;
        case 9:
            if (FZ_AEAD(R.mode))
                fz_op_aead(&R);
            else
                op_init(&R);
            break;
        default: fz_op_async(&R); break;
        }
    }
    for (int i = 0; i < FZ_NSLOTS; i++)
        for (int side = 0; side < 2; side++)
            fz_ctx_free(&R.s[i].c[side]);
    free(R.last);
    ERR_clear_error();
    return 0;
}
