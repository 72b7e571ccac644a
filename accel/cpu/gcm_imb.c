/* accel/cpu/gcm_imb.c: the GCM engine on intel-ipsec-mb 1.3's GCM API (AES-NI / VAES with
 * PCLMULQDQ / VPCLMULQDQ): 2.7-5.7x the default provider per record on the bench machine
 * (bench/results/gcm-xts-baseline.md). */
#include "accel/gcm.h"

#ifndef HAVE_IPSECMB

const acc_gcm_engine *acc_gcm_engine_imb(void)
{
    return NULL;
}

#else

#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include <intel-ipsec-mb.h>
#include "accel/cpu/mb_int.h"
#include "accel/mb.h"

/* The functions of one key size, taken from a manager at set_key. A manager is per thread and
 * freed with its thread, but the context may move to another thread: its function pointers
 * (code in libIPSec_MB, chosen for the CPU) stay valid, a manager pointer would not. Calling
 * them directly also saves the per-call thread-local lookup of the manager. */
typedef struct imb_gcm_fns {
    aes_gcm_init_var_iv_t init;
    aes_gcm_enc_dec_update_t enc, dec;
    aes_gcm_enc_dec_finalize_t enc_fin, dec_fin;
} imb_gcm_fns;

typedef struct imb_gcm {
    struct gcm_key_data key;       /* first: 64-byte aligned within acc_gcm_state */
    struct gcm_context_data msg;
    imb_gcm_fns f;
    int enc;
} imb_gcm;

_Static_assert(sizeof(imb_gcm) <= sizeof(acc_gcm_state), "ipsec-mb's GCM state does not fit ACC_GCM_STATE_SIZE");

static int imb_set_key(acc_gcm_state *s, const uint8_t *key, size_t keylen)
{
    imb_gcm *g = (imb_gcm *)s;
    IMB_MGR *m = acc_mb_aes_mgr();

    OPENSSL_cleanse(s, sizeof(*s));
    if (m == NULL)
        return 0;
    switch (keylen) {
    case 16:
        IMB_AES128_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm128_init_var_iv, m->gcm128_enc_update, m->gcm128_dec_update,
                              m->gcm128_enc_finalize, m->gcm128_dec_finalize };
        break;
    case 24:
        IMB_AES192_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm192_init_var_iv, m->gcm192_enc_update, m->gcm192_dec_update,
                              m->gcm192_enc_finalize, m->gcm192_dec_finalize };
        break;
    case 32:
        IMB_AES256_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm256_init_var_iv, m->gcm256_enc_update, m->gcm256_dec_update,
                              m->gcm256_enc_finalize, m->gcm256_dec_finalize };
        break;
    default:
        return 0;
    }
    return imb_get_errno(m) == 0;
}

/* Plain data: the byte copy is a whole copy. */
static int imb_copy(acc_gcm_state *dst, const acc_gcm_state *src)
{
    (void)dst;
    (void)src;
    return 1;
}

static void imb_cleanse(acc_gcm_state *s)
{
    OPENSSL_cleanse(s, sizeof(*s));
}

static int imb_start(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen)
{
    static const uint8_t none[1];
    imb_gcm *g = (imb_gcm *)s;

    if (g->f.init == NULL || ivlen == 0)
        return 0;
    g->enc = enc;
    /* ipsec-mb's parameter checks refuse a NULL AAD even of length 0 */
    g->f.init(&g->key, &g->msg, iv, ivlen, aadlen > 0 ? aad : none, aadlen);
    return 1;
}

static int imb_update(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len)
{
    imb_gcm *g = (imb_gcm *)s;

    if (len == 0)
        return 1;
    (g->enc ? g->f.enc : g->f.dec)(&g->key, &g->msg, out, in, len);
    return 1;
}

static int imb_finish(acc_gcm_state *s, uint8_t *tag, size_t taglen)
{
    imb_gcm *g = (imb_gcm *)s;
    uint8_t t[ACC_GCM_TAG_LEN];
    int ok;

    if (g->enc) {
        g->f.enc_fin(&g->key, &g->msg, tag, ACC_GCM_TAG_LEN);
        return 1;
    }
    g->f.dec_fin(&g->key, &g->msg, t, ACC_GCM_TAG_LEN);
    ok = taglen > 0 && taglen <= ACC_GCM_TAG_LEN && CRYPTO_memcmp(t, tag, taglen) == 0;
    OPENSSL_cleanse(t, sizeof(t));
    return ok;
}

static const acc_gcm_engine imb_engine = {
    "intel-ipsec-mb", imb_set_key, imb_copy, imb_cleanse, imb_start, imb_update, imb_finish
};

const acc_gcm_engine *acc_gcm_engine_imb(void)
{
    /* the manager of the first caller's thread says whether this CPU has what ipsec-mb needs */
    return acc_mb_available() ? &imb_engine : NULL;
}

#endif
