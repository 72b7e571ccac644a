/* fuzz/fuzz_aead.c: the AEADs' own operations in the differential fuzzer (GCM, CCM): the IV length
 * (set before the IV), AAD (an update with a NULL output, in any pieces), the tag got after an
 * encryption's final and the tag set before a decryption's final, each compared with the default
 * provider; for CCM also the message length first (an update with NULL input and output) and the
 * tag length alone (a tag with a NULL buffer); and the model of the GCM IV state that keeps the
 * harness away from the random IV of an encryption begun without one. */
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include "fuzz/fuzz_diff.h"

size_t fz_ivlen(const fz_run *R, const fz_slot *s)
{
    if (!FZ_AEAD(R->mode))
        return 16;
    return s->ivlen != 0 ? s->ivlen : R->mode == FZ_CCM ? 7 : 12;
}

int fz_gcm_random_iv(const fz_run *R, const fz_slot *s)
{
    return R->mode == FZ_GCM && s->inited && s->enc && s->gcm == FZ_IV_UNSET;
}

void fz_gcm_advance(const fz_run *R, fz_slot *s, size_t n)
{
    if (R->mode != FZ_GCM)
        return;
    if (n == SIZE_MAX)
        s->gcm = FZ_IV_FINISHED;
    else if (n > 0 && s->gcm == FZ_IV_BUFFERED)
        s->gcm = FZ_IV_OPEN;
}

/* IV lengths: the default 12, the edges of the 128-byte IV buffer, and any other; CCM's nonce:
 * 7..13 and the lengths around them. */
static size_t pick_ivlen(const fz_run *R, fz_reader *r)
{
    static const size_t notable[] = { 0, 1, 11, 12, 13, 16, 17, 60, 127, 128, 129, 4096 };
    unsigned sel = fz_u8(r);

    if (R->mode == FZ_CCM)
        return (sel & 0x80) ? notable[sel % (sizeof(notable) / sizeof(notable[0]))] : 6 + sel % 9;
    if (sel & 0x80)
        return notable[sel % (sizeof(notable) / sizeof(notable[0]))];
    return 1 + sel % 128;
}

static void set_both(fz_run *R, fz_slot *s, const OSSL_PARAM *p, const char *what)
{
    int ok_d, ok_a;
    unsigned long err_a;

    fz_trace(R, "pair %d: %s", (int)(s - R->s), what);
    ERR_clear_error();
    ok_d = fz_set_params(&s->c[FZ_DEF], (OSSL_PARAM *)p);
    R->def_silent = !ok_d && ERR_peek_error() == 0;
    ERR_clear_error();
    ok_a = fz_set_params(&s->c[FZ_ACC], (OSSL_PARAM *)p);
    err_a = ERR_peek_error();
    if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        fz_params_apply(R, s, p);
        fz_check_state(R, s);
    }
}

static void op_ivlen(fz_run *R, fz_slot *s)
{
    size_t ivlen = pick_ivlen(R, &R->r);
    OSSL_PARAM p[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_construct_end() };

    R->opname = "AEAD ivlen";
    set_both(R, s, p, ivlen == fz_ivlen(R, s) ? "IV length as before" : "another IV length");
}

/* CCM: the message length first, an update with a NULL input and output. */
static void op_length(fz_run *R, fz_slot *s, size_t len)
{
    size_t outl_d = 0, outl_a = 0;
    int ok_d, ok_a;
    unsigned long err_a;

    R->opname = "CCM length";
    fz_trace(R, "pair %d: a message of %zu bytes", (int)(s - R->s), len);
    ERR_clear_error();
    ok_d = fz_update(&s->c[FZ_DEF], NULL, &outl_d, len, NULL, len);
    R->def_silent = !ok_d && ERR_peek_error() == 0;
    ERR_clear_error();
    ok_a = fz_update(&s->c[FZ_ACC], NULL, &outl_a, len, NULL, len);
    err_a = ERR_peek_error();
    if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        if (outl_d != outl_a)
            fz_diverge(R, "a length of %zu: default reports %zu, accelaes %zu", len, outl_d, outl_a);
        fz_check_state(R, s);
    }
}

/* AAD: EVP_CipherUpdate (or the dispatch update) with a NULL output. */
static void op_aad(fz_run *R, fz_slot *s, unsigned f)
{
    size_t inl = (f & 0x10) ? fz_u16(&R->r) % 5000 : fz_u8(&R->r) % 80, outl_d = 0, outl_a = 0;
    unsigned seed = fz_u16(&R->r);
    int ok_d, ok_a, rand_iv = fz_gcm_random_iv(R, s);
    unsigned long err_a;
    uint8_t *aad;

    if (((f >> 5) & 3) == 1) /* the default's last output as AAD: its length */
        inl = R->lastlen;
    if (R->mode == FZ_CCM && ((f >> 5) & 3) == 3) {
        op_length(R, s, inl);
        return;
    }
    aad = malloc(inl + 1);
    R->opname = "AEAD AAD";
    if (aad == NULL)
        fz_diverge(R, "out of memory");
    fz_fill(R, aad, inl, (f >> 5) & 3, seed);
    fz_trace(R, "pair %d: %zu bytes of AAD%s", (int)(s - R->s), inl, rand_iv ? " (random IV)" : "");
    ERR_clear_error();
    ok_d = fz_update(&s->c[FZ_DEF], NULL, &outl_d, inl, aad, inl);
    R->def_silent = !ok_d && ERR_peek_error() == 0;
    ERR_clear_error();
    ok_a = fz_update(&s->c[FZ_ACC], NULL, &outl_a, inl, aad, inl);
    err_a = ERR_peek_error();
    if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        if (outl_d != outl_a)
            fz_diverge(R, "%zu bytes of AAD: default reports %zu, accelaes %zu", inl, outl_d, outl_a);
        if (rand_iv) {
            fz_resync(R, s); /* the two IVs drawn differ: rebuilt */
        } else {
            fz_gcm_advance(R, s, inl);
            fz_check_state(R, s);
        }
    }
    free(aad);
}

/* The tag, got into a buffer of 0..17 bytes (valid after an encryption's final, 1..16). */
static void op_tag_get(fz_run *R, fz_slot *s)
{
    uint8_t tag[2][32];
    size_t len = fz_u8(&R->r) % 18;
    OSSL_PARAM p[2][2];
    int ok[2];

    R->opname = "AEAD tag get";
    fz_trace(R, "pair %d: %zu bytes", (int)(s - R->s), len);
    memset(tag, 0x5A, sizeof(tag));
    for (int side = 0; side < 2; side++) {
        p[side][0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag[side], len);
        p[side][1] = OSSL_PARAM_construct_end();
        ERR_clear_error();
        ok[side] = fz_get_params(&s->c[side], p[side]);
    }
    ERR_clear_error(); /* a refused get changes nothing: no rebuild */
    if (fz_selftest && ok[FZ_ACC] && len > 0)
        tag[FZ_ACC][0] ^= 1; /* a planted difference: proves that the tag comparison can fail */
    if (ok[FZ_DEF] != ok[FZ_ACC])
        fz_diverge(R, "tag get (%zu bytes): default %d, accelaes %d", len, ok[FZ_DEF], ok[FZ_ACC]);
    if (ok[FZ_DEF] && (p[0][0].return_size != p[1][0].return_size || memcmp(tag[0], tag[1], sizeof(tag[0])) != 0))
        fz_diverge(R, "tag get (%zu bytes): the tags differ (return size %zu, accelaes %zu)", len, p[0][0].return_size,
                   p[1][0].return_size);
    if (ok[FZ_DEF] && len > 0)
        memcpy(R->tag, tag[FZ_DEF], len < 16 ? len : 16);
}

/* The tag set (before a decryption's final): the default's last tag got, or it with a bit flipped,
 * from the input, or zeros; 0..17 bytes. */
static void op_tag_set(fz_run *R, fz_slot *s, unsigned f)
{
    uint8_t tag[32];
    size_t len = fz_u8(&R->r) % 18;
    OSSL_PARAM p[2];

    R->opname = "AEAD tag set";
    memset(tag, 0, sizeof(tag));
    switch ((f >> 4) & 3) {
    case 0:
        memcpy(tag, R->tag, 16);
        break;
    case 1:
        memcpy(tag, R->tag, 16);
        tag[fz_u8(&R->r) % 16] ^= 1 << (f >> 6);
        break;
    case 2:
        fz_take(&R->r, tag, len);
        break;
    default:
        break;
    }
    /* CCM, zeros: the tag length alone, a NULL buffer (what an encryption sets) */
    p[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG,
                                             R->mode == FZ_CCM && ((f >> 4) & 3) == 3 ? NULL : tag, len);
    p[1] = OSSL_PARAM_construct_end();
    set_both(R, s, p, p[0].data == NULL ? "a tag length" : "a tag");
}

void fz_op_aead(fz_run *R)
{
    fz_slot *s = fz_pick_slot(R);
    unsigned f = fz_u8(&R->r);

    switch (f & 3) {
    case 0:
        op_ivlen(R, s);
        break;
    case 1:
        op_aad(R, s, f);
        break;
    case 2:
        op_tag_get(R, s);
        break;
    default:
        op_tag_set(R, s, f);
        break;
    }
}
