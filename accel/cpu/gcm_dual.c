/* accel/cpu/gcm_dual.c: the GCM engine chosen per message, by the length of its first data
 * update: accelaes's VAES engine (gcm_vaes.c) for small records, intel-ipsec-mb's (gcm_imb.c)
 * for large ones. On the Xeon measured (Debian 13, OpenSSL 3.5, thread CPU time against the
 * default provider, bench/results/releases-speed.md) the VAES engine's short start and finish win
 * up to about 4 KiB (decrypting 64 B: 1.00-1.03 of the default, ipsec-mb 0.80-0.83; 1-4 KiB
 * 1.09-1.13 against 1.03-1.04) and ipsec-mb's bulk loop from there (8-16 KiB encrypting: 1.09
 * against 0.86-0.89).
 *
 * Both engines hold the key (set_key sets both; each state is plain data, gcm_dual.h). A message
 * starts on the VAES engine (called directly: a small record pays one call more than on its
 * own), and moves to ipsec-mb's, started then from the same IV and AAD (the provider's message
 * buffers, unchanged until the first update), if its first update is large. A copy made before
 * that first update stays on the VAES engine (the pointers are the source context's). */
#include <string.h>
#include <openssl/crypto.h>
#include "accel/gcm.h"
#include "accel/cpu/gcm_dual.h"

/* From this many bytes in the first update, ipsec-mb's engine takes the message. */
#define DUAL_BULK 4096

typedef struct dual {
    uint8_t half[2][ACC_GCM_SUB_SIZE];   /* [0]: the VAES engine's state, [1]: ipsec-mb's */
    const uint8_t *iv, *aad;             /* the message's start, while fresh */
    size_t ivlen, aadlen;
    int enc;
    int which;                           /* the half the message runs on */
    int fresh;                           /* started, no update yet: it may still move */
} __attribute__((aligned(64))) dual;

_Static_assert(sizeof(dual) <= sizeof(acc_gcm_state), "two GCM engine states do not fit ACC_GCM_STATE_SIZE");

static const acc_gcm_engine *eng[2];

#define HALF(d, i) ((acc_gcm_state *)(void *)(d)->half[i])
#define CHALF(d, i) ((const acc_gcm_state *)(const void *)(d)->half[i])

/* The stack below this engine's frame, 16 KiB deep: both engines expand the key below it, and
 * intel-ipsec-mb 2.0's expansion (Debian 13) left two AES-128 round keys deeper than the engines' own
 * scrubs reach (tests/system/test_key_residue.py, vaes-inline, on trixie). Once per key, not per call. */
static __attribute__((noinline)) void deep_scrub(void)
{
    volatile uint64_t b[16384 / 8];

    for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
        b[i] = 0;
}

static int d_set_key(acc_gcm_state *s, const uint8_t *key, size_t keylen)
{
    dual *d = (dual *)s;
    int ok;

    d->which = d->fresh = 0;
    d->iv = d->aad = NULL;
    ok = eng[0]->set_key(HALF(d, 0), key, keylen) && eng[1]->set_key(HALF(d, 1), key, keylen);
    deep_scrub();
    return ok;
}

static void d_cleanse(acc_gcm_state *s)
{
    dual *d = (dual *)s;

    eng[0]->cleanse(HALF(d, 0));
    eng[1]->cleanse(HALF(d, 1));
    OPENSSL_cleanse(s, sizeof(*s));
}

static int d_copy(acc_gcm_state *dst, const acc_gcm_state *src)
{
    dual *d = (dual *)dst;

    d->fresh = 0;
    return eng[0]->copy(HALF(d, 0), CHALF((const dual *)src, 0)) && eng[1]->copy(HALF(d, 1), CHALF((const dual *)src, 1));
}

static int d_start(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen)
{
    dual *d = (dual *)s;

    d->enc = enc;
    d->iv = iv, d->ivlen = ivlen;
    d->aad = aad, d->aadlen = aadlen;
    d->which = 0;
    d->fresh = 1;
    return acc_gv_start(HALF(d, 0), enc, iv, ivlen, aad, aadlen);
}

/* A fresh message with a large first update: ipsec-mb's from its start. */
static int bulk(dual *d)
{
    d->fresh = 0;
    d->which = 1;
    return eng[1]->start(HALF(d, 1), d->enc, d->iv, d->ivlen, d->aad, d->aadlen);
}

static int d_update(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len)
{
    dual *d = (dual *)s;

    if (d->fresh) {
        d->fresh = 0;
        if (len >= DUAL_BULK && !bulk(d))
            return 0;
    }
    return d->which == 0 ? acc_gv_update(HALF(d, 0), in, out, len) : eng[1]->update(HALF(d, 1), in, out, len);
}

static int d_finish(acc_gcm_state *s, uint8_t *tag, size_t taglen)
{
    dual *d = (dual *)s;

    d->fresh = 0;
    return d->which == 0 ? acc_gv_finish(HALF(d, 0), tag, taglen) : eng[1]->finish(HALF(d, 1), tag, taglen);
}

/* The split comes with a large update, before it when the message is fresh: it moves here (on
 * the caller's thread; the state is the caller's context's, not const). */
static int d_split_get(const acc_gcm_state *s, uint8_t ghash[16], uint8_t ctr[16], uint8_t h[16])
{
    dual *d = (dual *)(void *)(uintptr_t)s;

    if (d->fresh && !bulk(d))
        return 0;
    return eng[d->which]->split->get(CHALF(d, d->which), ghash, ctr, h);
}
static void d_ghash(const acc_gcm_state *s, const uint8_t *in, size_t nblocks, uint8_t state[16])
{
    const dual *d = (const dual *)s;

    eng[d->which]->split->ghash(CHALF(d, d->which), in, nblocks, state);
}

static void d_split_put(acc_gcm_state *s, const uint8_t ghash[16], uint64_t nblocks)
{
    dual *d = (dual *)s;

    eng[d->which]->split->put(HALF(d, d->which), ghash, nblocks);
}

static void d_split_range(const acc_gcm_state *s, const uint8_t ctr[16], const uint8_t *in, uint8_t *out,
                          size_t nblocks, uint8_t ghash[16])
{
    const dual *d = (const dual *)s;

    eng[d->which]->split->range(CHALF(d, d->which), ctr, in, out, nblocks, ghash);
}

/* Rare (a key given in the middle of a message): the VAES engine. */
static int d_restart_zero(acc_gcm_state *s, int enc, const uint8_t *key, size_t keylen, const uint8_t *aad,
                          size_t aadlen)
{
    dual *d = (dual *)s;

    d->enc = enc;
    d->which = d->fresh = 0;
    return eng[0]->restart_zero(HALF(d, 0), enc, key, keylen, aad, aadlen);
}

static int d_set_dir(acc_gcm_state *s, int enc)
{
    dual *d = (dual *)s;

    d->enc = enc;
    return eng[d->which]->set_dir(HALF(d, d->which), enc);
}

static const acc_gcm_split_ops d_split = {
    .get = d_split_get,
    .ghash = d_ghash,
    .put = d_split_put,
    .range = d_split_range,
};

static const acc_gcm_engine dual_engine = {
    .name = "vaes-gcm+intel-ipsec-mb",
    .set_key = d_set_key,
    .copy = d_copy,
    .cleanse = d_cleanse,
    .start = d_start,
    .update = d_update,
    .finish = d_finish,
    .restart_zero = d_restart_zero,
    .set_dir = d_set_dir,
    .split = &d_split,
};

/* Both engines, or NULL (engine_select.c then takes the one there is). */
const acc_gcm_engine *acc_gcm_engine_dual(void)
{
    if ((eng[0] = acc_gcm_engine_vaes()) == NULL || (eng[1] = acc_gcm_engine_imb()) == NULL)
        return NULL;
    return &dual_engine;
}
