/* accel/cpu/gcm_imb.c: the GCM engine on intel-ipsec-mb's GCM API (1.3 and 2.0; AES-NI / VAES
 * with PCLMULQDQ / VPCLMULQDQ): 2.7-5.7x the default provider per record on the bench machine
 * (bench/results/gcm-xts-baseline.md). */
#include "accel/gcm.h"

#ifdef HAVE_IPSECMB
#include <intel-ipsec-mb.h>
/* The split's hooks (below) use gcm_context_data's fields as checked for these releases only: on
 * another, this engine is not offered and GCM runs on the nested-EVP engine (correct, slower). */
#if (IMB_VERSION_NUM >= IMB_VERSION(1, 3, 0) && IMB_VERSION_NUM < IMB_VERSION(1, 4, 0)) \
    || (IMB_VERSION_NUM >= IMB_VERSION(2, 0, 0) && IMB_VERSION_NUM < IMB_VERSION(2, 1, 0))
#define ACC_IMB_GCM 1
#else
#warning "intel-ipsec-mb's gcm_context_data is not checked for this release: no ipsec-mb GCM engine"
#endif
#endif

#ifndef ACC_IMB_GCM

const acc_gcm_engine *acc_gcm_engine_imb(void)
{
    return NULL;
}

#else

#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include "accel/cpu/mb_int.h"
#include "accel/wipe.h"
#include "accel/cpu/gcm_dual.h"
#include "accel/mb.h"

/* The functions of one key size, taken from a manager at set_key. A manager is per thread and
 * freed with its thread, but the context may move to another thread: its function pointers
 * (code in libIPSec_MB, chosen for the CPU) stay valid, a manager pointer would not. Calling
 * them directly also saves the per-call thread-local lookup of the manager. */
typedef struct imb_gcm_fns {
    aes_gcm_init_var_iv_t init;
    aes_gcm_enc_dec_update_t enc, dec;
    aes_gcm_enc_dec_finalize_t enc_fin, dec_fin;
    ghash_t ghash;
} imb_gcm_fns;

typedef struct imb_gcm {
    struct gcm_key_data key;       /* first: 64-byte aligned within acc_gcm_state */
    struct gcm_context_data msg;
    imb_gcm_fns f;
    int enc;
    int zeroed;         /* restart_zero's message: the tag is unmasked at finish */
    uint8_t unmask[16]; /* E(K, 0), which finalize adds to such a message's GHASH */
} imb_gcm;

_Static_assert(sizeof(imb_gcm) <= sizeof(acc_gcm_state), "ipsec-mb's GCM state does not fit ACC_GCM_STATE_SIZE");
_Static_assert(sizeof(imb_gcm) <= ACC_GCM_SUB_SIZE, "ipsec-mb's GCM state does not fit gcm_dual.c's half");

static int imb_set_key(acc_gcm_state *s, const uint8_t *key, size_t keylen)
{
    imb_gcm *g = (imb_gcm *)s;
    IMB_MGR *m = acc_mb_aes_mgr();

    OPENSSL_cleanse(s, sizeof(imb_gcm));   /* its own bytes only (gcm_dual.h) */
    if (m == NULL)
        return 0;
    switch (keylen) {
    case 16:
        IMB_AES128_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm128_init_var_iv, m->gcm128_enc_update, m->gcm128_dec_update,
                              m->gcm128_enc_finalize, m->gcm128_dec_finalize, m->ghash };
        break;
    case 24:
        IMB_AES192_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm192_init_var_iv, m->gcm192_enc_update, m->gcm192_dec_update,
                              m->gcm192_enc_finalize, m->gcm192_dec_finalize, m->ghash };
        break;
    case 32:
        IMB_AES256_GCM_PRE(m, key, &g->key);
        g->f = (imb_gcm_fns){ m->gcm256_init_var_iv, m->gcm256_enc_update, m->gcm256_dec_update,
                              m->gcm256_enc_finalize, m->gcm256_dec_finalize, m->ghash };
        break;
    default:
        return 0;
    }
    acc_clear_vregs();      /* ipsec-mb leaves round keys and hash keys in vector registers */
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
    OPENSSL_cleanse(s, sizeof(imb_gcm));   /* its own bytes only (gcm_dual.h) */
}

static int imb_start(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen)
{
    static const uint8_t none[1];
    imb_gcm *g = (imb_gcm *)s;

    if (g->f.init == NULL || ivlen == 0)
        return 0;
    g->enc = enc;
    g->zeroed = 0;
    /* ipsec-mb's parameter checks refuse a NULL AAD even of length 0 */
    g->f.init(&g->key, &g->msg, iv, ivlen, aadlen > 0 ? aad : none, aadlen);
    acc_clear_vregs();
    return 1;
}

static int imb_update(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len)
{
    imb_gcm *g = (imb_gcm *)s;

    if (len == 0)
        return 1;
    (g->enc ? g->f.enc : g->f.dec)(&g->key, &g->msg, out, in, len);
    acc_clear_vregs();
    return 1;
}

static int imb_finish(acc_gcm_state *s, uint8_t *tag, size_t taglen)
{
    imb_gcm *g = (imb_gcm *)s;
    uint8_t t[ACC_GCM_TAG_LEN];
    int ok;

    /* the common encryption: the tag straight to the caller (no copy to cleanse; a small record's
     * final is bound by such calls) */
    if (g->enc && !g->zeroed) {
        g->f.enc_fin(&g->key, &g->msg, tag, ACC_GCM_TAG_LEN);
        acc_clear_vregs();
        return 1;
    }
    (g->enc ? g->f.enc_fin : g->f.dec_fin)(&g->key, &g->msg, t, ACC_GCM_TAG_LEN);
    acc_clear_vregs();
    for (int i = 0; i < ACC_GCM_TAG_LEN; i++)
        t[i] ^= g->unmask[i] & (uint8_t)-g->zeroed;
    if (g->enc) {
        memcpy(tag, t, ACC_GCM_TAG_LEN);
        OPENSSL_cleanse(t, sizeof(t));
        return 1;
    }
    ok = taglen > 0 && taglen <= ACC_GCM_TAG_LEN && CRYPTO_memcmp(t, tag, taglen) == 0;
    OPENSSL_cleanse(t, sizeof(t));
    return ok;
}

/* ---- The split's hooks (accel/gcm.h, provider/cipher/gcm_split.c) ----
 * They read and write intel-ipsec-mb's struct gcm_context_data, whose layout is public
 * (intel-ipsec-mb.h: the same fields in 1.3 and 2.0) but whose meaning is the library's; checked
 * for 1.3.0 and 2.0 (SSE, AVX2 and AVX512/VAES code paths keep the one format, a context being
 * portable between init and update calls) and by tests/c/test_gcm_split.c and
 * tests/conformance/test_gcm_split.py:
 *  - aad_hash: the GHASH so far, byte-reversed (the assembly keeps it in the byte order it
 *    multiplies in); read and written.
 *  - current_counter: the counter block of the last block used, byte-reversed (so that its
 *    32-bit lane add is GCM's inc32); read, and moved on by the split's blocks.
 *  - in_length: the data bytes so far, which finalize hashes; moved on by the split's bytes.
 *  - partial_block_length: must be 0 (only then are the two above exactly "after whole blocks",
 *    and partial_block_enc_key is unused: it is read only while a partial block is pending).
 *    The provider splits only at block boundaries; a nonzero value refuses the split.
 *  - aad_length, orig_IV (J0, for the tag) and partial_block_enc_key are left as they are.
 * ipsec-mb's own update would leave exactly these values after the same blocks, so its later
 * updates and finalize cannot tell the difference. */
static void reverse16(uint8_t d[16], const uint8_t s[16])
{
    for (int i = 0; i < 16; i++)
        d[i] = s[15 - i];
}

static void imb_ghash(const acc_gcm_state *s, const uint8_t *in, size_t nblocks, uint8_t state[16])
{
    const imb_gcm *g = (const imb_gcm *)s;

    /* IMB_GHASH: the tag is both the state it starts from and the result, in GCM's byte order */
    if (nblocks > 0)
        g->f.ghash(&g->key, in, (uint64_t)nblocks * 16, state, 16);
    acc_clear_vregs();
}

static int imb_split_get(const acc_gcm_state *s, uint8_t ghash[16], uint8_t ctr[16], uint8_t h[16])
{
    const imb_gcm *g = (const imb_gcm *)s;
    static const uint8_t one[16] = { 0x80 };   /* the field's 1: GHASH(1) from zero is H */

    if (g->f.ghash == NULL || g->msg.partial_block_length != 0)
        return 0;
    reverse16(ghash, g->msg.aad_hash);
    reverse16(ctr, g->msg.current_counter);
    acc_gcm_inc32(ctr, 1);
    memset(h, 0, 16);
    imb_ghash(s, one, 1, h);
    return 1;
}

static void imb_split_put(acc_gcm_state *s, const uint8_t ghash[16], uint64_t nblocks)
{
    imb_gcm *g = (imb_gcm *)s;
    uint8_t c[16];

    reverse16(g->msg.aad_hash, ghash);
    reverse16(c, g->msg.current_counter);
    acc_gcm_inc32(c, nblocks);
    reverse16(g->msg.current_counter, c);
    g->msg.in_length += nblocks * 16;
}

/* A range as ipsec-mb's own stitched update over a message of its own: a context on the stack
 * with a zero GHASH, no lengths, no partial block, and the counter before the range's first
 * (update moves it on by inc32 before each block, as from init); orig_IV and aad_length, which
 * only finalize reads, stay zero and are never finalized. Its aad_hash is then the range's
 * GHASH from zero, byte-reversed. */
static void imb_split_range(const acc_gcm_state *s, const uint8_t ctr[16], const uint8_t *in, uint8_t *out,
                            size_t nblocks, uint8_t ghash[16])
{
    const imb_gcm *g = (const imb_gcm *)s;
    struct gcm_context_data m;
    uint8_t c[16];

    memset(&m, 0, sizeof(m));
    memcpy(c, ctr, 16);
    acc_gcm_inc32(c, UINT32_MAX);   /* minus one, mod 2^32 */
    reverse16(m.current_counter, c);
    (g->enc ? g->f.enc : g->f.dec)(&g->key, &m, out, in, (uint64_t)nblocks * 16);
    acc_clear_vregs();
    reverse16(ghash, m.aad_hash);
    OPENSSL_cleanse(&m, sizeof(m));
}

/* The default's wiped state (accel/gcm.h): a zero context, whose finalize gives E(K, orig_IV = 0)
 * and is kept to be taken off the tag; the AAD's GHASH from zero (zero-padded, as GCM pads it);
 * the counter one before `first`, the counter block of the first data block (update moves it on
 * by inc32 before each block, as imb_split_range's). */
static int restart_at(acc_gcm_state *s, int enc, const uint8_t *aad, size_t aadlen, uint32_t first)
{
    imb_gcm *g = (imb_gcm *)s;
    uint8_t h[16] = { 0 }, last[16] = { 0 }, c[16] = { 0 };
    size_t whole = aadlen / 16;
    uint32_t before = first - 1; /* mod 2^32 */

    if (g->f.enc_fin == NULL || g->f.ghash == NULL)
        return 0;
    memset(&g->msg, 0, sizeof(g->msg));
    g->f.enc_fin(&g->key, &g->msg, g->unmask, ACC_GCM_TAG_LEN);
    acc_clear_vregs();
    memset(&g->msg, 0, sizeof(g->msg));
    imb_ghash(s, aad, whole, h);
    if (aadlen % 16 != 0) {
        memcpy(last, aad + 16 * whole, aadlen % 16);
        imb_ghash(s, last, 1, h);
    }
    reverse16(g->msg.aad_hash, h);
    g->msg.aad_length = aadlen;
    c[12] = (uint8_t)(before >> 24), c[13] = (uint8_t)(before >> 16), c[14] = (uint8_t)(before >> 8);
    c[15] = (uint8_t)before;
    reverse16(g->msg.current_counter, c);
    g->enc = enc;
    g->zeroed = 1;
    OPENSSL_cleanse(h, sizeof(h));
    OPENSSL_cleanse(last, sizeof(last));
    return 1;
}

/* Which counter block the running default provider's first data block takes after the wipe: its
 * code paths differ (OpenSSL 3.0's and 3.5's CTR32 path: block 0; 3.5's AVX-512 VAES path
 * increments before use: block 1), so it is asked, once per process, on a public key and zero
 * data, through the nested-EVP engine (which is the default itself); 0 where it cannot be asked. */
static uint32_t wiped_first;
static pthread_once_t wiped_once = PTHREAD_ONCE_INIT;

static void wiped_probe(void)
{
    static const uint8_t key[16] = { 0x61, 0x63, 0x63, 0x65, 0x6c, 0x61, 0x65, 0x73 };
    static const uint8_t zero[16];
    static acc_gcm_state r, m; /* 64-byte aligned, as ipsec-mb's key data must be; run once */
    const acc_gcm_engine *ref = acc_gcm_engine_evp();
    uint8_t want[16], got[16];

    if (ref != NULL && ref->set_key(&r, key, sizeof(key)) && ref->restart_zero(&r, 1, key, sizeof(key), NULL, 0)
        && ref->update(&r, zero, want, sizeof(want)) && imb_set_key(&m, key, sizeof(key)))
        for (uint32_t first = 0; first < 2; first++)
            if (restart_at(&m, 1, NULL, 0, first) && imb_update(&m, zero, got, sizeof(got))
                && memcmp(got, want, sizeof(got)) == 0) {
                wiped_first = first;
                break;
            }
    if (ref != NULL)
        ref->cleanse(&r);
    imb_cleanse(&m);
}

static int imb_restart_zero(acc_gcm_state *s, int enc, const uint8_t *key, size_t keylen, const uint8_t *aad,
                            size_t aadlen)
{
    (void)key;
    (void)keylen;
    pthread_once(&wiped_once, wiped_probe);
    return restart_at(s, enc, aad, aadlen, wiped_first);
}

/* enc and dec update share the context's format; finalize computes the same tag either way. */
static int imb_set_dir(acc_gcm_state *s, int enc)
{
    ((imb_gcm *)s)->enc = enc;
    return 1;
}

static const acc_gcm_split_ops imb_split = {
    .get = imb_split_get,
    .ghash = imb_ghash,
    .put = imb_split_put,
    .range = imb_split_range,
};

static const acc_gcm_engine imb_engine = {
    .name = "intel-ipsec-mb",
    .set_key = imb_set_key,
    .copy = imb_copy,
    .cleanse = imb_cleanse,
    .start = imb_start,
    .update = imb_update,
    .finish = imb_finish,
    .restart_zero = imb_restart_zero,
    .set_dir = imb_set_dir,
    .split = &imb_split,
};

const acc_gcm_engine *acc_gcm_engine_imb(void)
{
    /* the manager of the first caller's thread says whether this CPU has what ipsec-mb needs */
    return acc_mb_available() ? &imb_engine : NULL;
}

#endif
