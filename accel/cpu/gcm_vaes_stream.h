/* accel/cpu/gcm_vaes_stream.h: the VAES GCM engine's stream (accel/gcm.h's interface), written once
 * for every width and included by each width's engine file (gcm_vaes.c: zmm, gcm_vaesy.c: ymm,
 * gcm_vaesx.c: xmm):
 * the message's stream (AAD, the partial block between updates of any split, the tag), the
 * split's hooks and the default's wiped state. The block work is in the width's kernels, the
 * representation in gcm_vaes_gf.h. Constant time: lengths are the only values that steer it; the
 * tag is compared in constant time.
 *
 * The including file defines, before including this file once:
 *   GS_TGT       the width's target attribute;
 *   GS(name)     the width's key type (GS(key)) and kernels and one-block helpers: GS(ghash),
 *                GS(blocks), GS(powers) (gcm_vaes.h's contracts), GS(encrypt1), GS(ghash1),
 *                GS(set_round_key)(k, r, rk), GS(load_tail)(p, n) (n of 1..16 bytes, zero above,
 *                nothing read beyond), GS(tag_equal)(t, tag, taglen) (taglen of 1..16, constant time);
 *   GS_API(name) the names of start, update and finish (gcm_dual.c calls the zmm ones directly);
 *   GS_NAME      the engine's name.
 * It defines the engine table gv_engine and gv_set_key / gv_cleanse (the including file's CPU
 * check and getter follow it). */
#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include "accel/gcm.h"
#include "accel/cpu/gcm_dual.h"

/* One message. */
typedef struct gv_msg {
    __m128i x;           /* the GHASH so far, R form */
    __m128i ctr;         /* the counter block of the next keystream block, bytes 12..15 reversed
                          * (a native 32-bit lane: a vector add is GCM's inc32, wrapping mod 2^32) */
    __m128i ek0;         /* E(K, J0), added to the tag; zero after restart_zero */
    uint8_t ks[16];      /* the keystream of the open partial block */
    uint8_t pb[16];      /* its ciphertext so far, hashed when the block is whole or at finish */
    uint64_t aadlen, datalen;
    unsigned plen;       /* bytes of the open partial block used (0: none open) */
    int enc;
} gv_msg;

typedef struct gv_state {
    GS(key) k;           /* first: aligned as the key data wants within acc_gcm_state */
    gv_msg m;
} gv_state;

_Static_assert(sizeof(gv_state) <= sizeof(acc_gcm_state), "the VAES GCM state does not fit ACC_GCM_STATE_SIZE");
_Static_assert(sizeof(gv_state) <= ACC_GCM_SUB_SIZE, "the VAES GCM state does not fit gcm_dual.c's half");

#define LD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))

/* ---- Key ---- */

/* The round keys broadcast into the key data, H = E(K, 0) and its powers. t and the locals here
 * are the only copies outside the state; t is cleansed by the caller. */
GS_TGT static void setup(GS(key) *k, const acc_aes_key *t)
{
    __m128i h;

    k->rounds = t->rounds;
    for (int r = 0; r <= t->rounds; r++)
        GS(set_round_key)(k, r, LD(t->enc + 16 * r));
    h = GS(encrypt1)(k, _mm_setzero_si128());
    GS(powers)(k, h);
    h = _mm_setzero_si128();
    __asm__ volatile("" : : "x"(h) : "memory");
}

static int gv_set_key(acc_gcm_state *s, const uint8_t *key, size_t keylen)
{
    gv_state *g = (gv_state *)s;
    const acc_engine *ni = acc_engine_aesni();
    acc_aes_key t;
    int ok;

    OPENSSL_cleanse(s, sizeof(gv_state));   /* its own bytes only (gcm_dual.h) */
    if (ni == NULL || (keylen != 16 && keylen != 24 && keylen != 32))
        return 0;
    ok = ni->set_key(&t, key, keylen, 1);
    if (ok)
        setup(&g->k, &t);
    OPENSSL_cleanse(&t, sizeof(t));
    return ok;
}

/* Plain data: the byte copy is a whole copy. */
static int gv_copy(acc_gcm_state *dst, const acc_gcm_state *src)
{
    (void)dst;
    (void)src;
    return 1;
}

static void gv_cleanse(acc_gcm_state *s)
{
    OPENSSL_cleanse(s, sizeof(gv_state));   /* its own bytes only (gcm_dual.h) */
}

/* ---- Message ---- */

/* x = GHASH of len bytes (public: AAD or IV), the last block zero-padded as it is loaded. */
GS_TGT static inline void hash_bytes(const GS(key) *k, __m128i *x, const uint8_t *p, size_t len)
{
    if (len >= 16)   /* a TLS or speed record's 13 bytes: no call */
        GS(ghash)(k, x, p, len / 16);
    if (len % 16 != 0)
        *x = GS(ghash1)(k, *x, GS(load_tail)(p + (len & ~(size_t)15), len % 16));
}

/* GCM's 64-bit big-endian bit counts, a then c, as one block. */
GS_TGT static __m128i lengths_block(uint64_t a, uint64_t c)
{
    return _mm_set_epi64x((long long)__builtin_bswap64(c * 8), (long long)__builtin_bswap64(a * 8));
}

/* The message's fixed part: J0 (from a 96-bit IV, or hashed from any other), E(K, J0), and the
 * counter of the first data block, inc32(J0). */
GS_TGT static inline __attribute__((always_inline)) void start_iv(gv_state *g, const uint8_t *iv, size_t ivlen)
{
    gv_msg *m = &g->m;
    __m128i j0;

    if (ivlen == 12) {   /* IV || 0^31 || 1 loaded in place: no stack copy, whose 16-byte reload
                          * of three narrower stores would wait on store forwarding */
        j0 = _mm_or_si128(GS(load_tail)(iv, 12), _mm_set_epi32(0x01000000, 0, 0, 0));
    } else {
        __m128i x = _mm_setzero_si128();
        hash_bytes(&g->k, &x, iv, ivlen);
        x = GS(ghash1)(&g->k, x, lengths_block(0, ivlen));
        j0 = _mm_shuffle_epi8(x, GV_BSWAP());
    }
    m->ek0 = GS(encrypt1)(&g->k, j0);
    m->ctr = _mm_add_epi32(_mm_shuffle_epi8(j0, GV_CTR_SWAP()), _mm_set_epi32(1, 0, 0, 0));
}

static void msg_reset(gv_msg *m, int enc, size_t aadlen)
{
    m->x = _mm_setzero_si128();
    memset(m->ks, 0, sizeof(m->ks));
    memset(m->pb, 0, sizeof(m->pb));
    m->aadlen = aadlen;
    m->datalen = 0;
    m->plen = 0;
    m->enc = enc;
}

GS_TGT int GS_API(start)(acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen)
{
    gv_state *g = (gv_state *)s;

    if (ivlen == 0 || g->k.rounds == 0)
        return 0;
    msg_reset(&g->m, enc, aadlen);
    start_iv(g, iv, ivlen);
    hash_bytes(&g->k, &g->m.x, aad, aadlen);
    return 1;
}

/* Bytes into the open partial block: its keystream, its ciphertext kept for the hash. In place
 * is legal: each input byte is read before its output byte is written. */
static size_t partial(gv_msg *m, const uint8_t *in, uint8_t *out, size_t len)
{
    size_t n = 16 - m->plen < len ? 16 - m->plen : len;

    for (size_t i = 0; i < n; i++) {
        uint8_t a = in[i], c = (uint8_t)(a ^ m->ks[m->plen + i]);
        m->pb[m->plen + i] = m->enc ? c : a;
        out[i] = c;
    }
    m->plen += (unsigned)n;
    return n;
}

GS_TGT static void close_block(gv_state *g)
{
    g->m.x = GS(ghash1)(&g->k, g->m.x, LD(g->m.pb));
    memset(g->m.pb, 0, sizeof(g->m.pb));
    memset(g->m.ks, 0, sizeof(g->m.ks));
    g->m.plen = 0;
}

GS_TGT int GS_API(update)(acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len)
{
    gv_state *g = (gv_state *)s;
    gv_msg *m = &g->m;
    size_t n;

    m->datalen += len;
    if (m->plen != 0) {
        n = partial(m, in, out, len);
        in += n, out += n, len -= n;
        if (m->plen < 16)
            return 1;
        close_block(g);
    }
    GS(blocks)(&g->k, &m->ctr, &m->x, in, out, len / 16, m->enc);
    n = len & ~(size_t)15;
    in += n, out += n, len -= n;
    if (len > 0) {   /* a new partial block: its keystream now, its hash when it is whole */
        ST(m->ks, GS(encrypt1)(&g->k, _mm_shuffle_epi8(m->ctr, GV_CTR_SWAP())));
        m->ctr = _mm_add_epi32(m->ctr, _mm_set_epi32(1, 0, 0, 0));
        partial(m, in, out, len);
    }
    return 1;
}

/* Encrypting, the tag straight to the caller; decrypting, the computed tag compared in constant time
 * and wiped. */
GS_TGT int GS_API(finish)(acc_gcm_state *s, uint8_t *tag, size_t taglen)
{
    gv_state *g = (gv_state *)s;
    gv_msg *m = &g->m;
    __m128i t;

    if (m->plen != 0)
        close_block(g);   /* pb is zero beyond plen */
    m->x = GS(ghash1)(&g->k, m->x, lengths_block(m->aadlen, m->datalen));
    t = _mm_xor_si128(_mm_shuffle_epi8(m->x, GV_BSWAP()), m->ek0);
    if (m->enc) {
        ST(tag, t);
        return 1;
    }
    if (taglen == 0 || taglen > ACC_GCM_TAG_LEN)
        return 0;
    /* taglen bytes compared at once (one test: constant time, as CRYPTO_memcmp); the computed
     * tag never leaves the register, so there is no copy to wipe */
    return GS(tag_equal)(t, tag, taglen);
}

static int gv_set_dir(acc_gcm_state *s, int enc)
{
    ((gv_state *)s)->m.enc = enc;
    return 1;
}

/* ---- The split's hooks (accel/gcm.h, provider/cipher/gcm_split.c) ----
 * The state is ours, so they read and write it directly: the split happens only between whole
 * blocks (no partial block open), where x and ctr are exactly "after these blocks". */

GS_TGT static int gv_split_get(const acc_gcm_state *s, uint8_t ghash[16], uint8_t ctr[16], uint8_t h[16])
{
    const gv_state *g = (const gv_state *)s;

    if (g->m.plen != 0)
        return 0;
    ST(ghash, _mm_shuffle_epi8(g->m.x, GV_BSWAP()));
    ST(ctr, _mm_shuffle_epi8(g->m.ctr, GV_CTR_SWAP()));
    ST(h, GS(encrypt1)(&g->k, _mm_setzero_si128()));
    return 1;
}

GS_TGT static void gv_split_ghash(const acc_gcm_state *s, const uint8_t *in, size_t nblocks, uint8_t state[16])
{
    __m128i x = _mm_shuffle_epi8(LD(state), GV_BSWAP());

    GS(ghash)(&((const gv_state *)s)->k, &x, in, nblocks);
    ST(state, _mm_shuffle_epi8(x, GV_BSWAP()));
}

GS_TGT static void gv_split_put(acc_gcm_state *s, const uint8_t ghash[16], uint64_t nblocks)
{
    gv_msg *m = &((gv_state *)s)->m;

    m->x = _mm_shuffle_epi8(LD(ghash), GV_BSWAP());
    m->ctr = _mm_add_epi32(m->ctr, _mm_set_epi32((int)(uint32_t)nblocks, 0, 0, 0));   /* inc32, mod 2^32 */
    m->datalen += nblocks * 16;
}

/* One range in one stitched pass, with a counter and GHASH of its own (from zero). */
GS_TGT static void gv_split_range(const acc_gcm_state *s, const uint8_t ctr[16], const uint8_t *in, uint8_t *out,
                                  size_t nblocks, uint8_t ghash[16])
{
    const gv_state *g = (const gv_state *)s;
    __m128i c = _mm_shuffle_epi8(LD(ctr), GV_CTR_SWAP()), x = _mm_setzero_si128();

    GS(blocks)(&g->k, &c, &x, in, out, nblocks, g->m.enc);
    ST(ghash, _mm_shuffle_epi8(x, GV_BSWAP()));
}

/* ---- The default's wiped state (accel/gcm.h: restart_zero) ----
 * No E(K, J0) on the tag, the AAD hashed from zero, and the first data block's counter block the
 * all-zero block plus `wiped_first`: which one the running default provider takes differs between
 * its code paths (3.0's and 3.5's CTR32 path: 0; 3.5's AVX-512 path increments first: 1), so it is
 * asked once per process, on a public key and zero data, through the nested-EVP engine (the default
 * itself), and compared with E(K, 0) and E(K, 1); 0 where it cannot be asked. */
static uint32_t wiped_first;
static pthread_once_t wiped_once = PTHREAD_ONCE_INIT;

GS_TGT static void wiped_probe(void)
{
    static const uint8_t key[16] = { 0x61, 0x63, 0x63, 0x65, 0x6c, 0x61, 0x65, 0x73 };
    static const uint8_t zero[16];
    static acc_gcm_state r, m;   /* 64-byte aligned; run once */
    const acc_gcm_engine *ref = acc_gcm_engine_evp();
    uint8_t want[16], got[16];

    if (ref != NULL && ref->set_key(&r, key, sizeof(key)) && ref->restart_zero(&r, 1, key, sizeof(key), NULL, 0)
        && ref->update(&r, zero, want, sizeof(want)) && gv_set_key(&m, key, sizeof(key)))
        for (uint32_t first = 0; first < 2; first++) {
            ST(got, GS(encrypt1)(&((gv_state *)&m)->k, _mm_set_epi32((int)__builtin_bswap32(first), 0, 0, 0)));
            if (memcmp(got, want, sizeof(got)) == 0) {
                wiped_first = first;
                break;
            }
        }
    if (ref != NULL)
        ref->cleanse(&r);
    gv_cleanse(&m);
}

GS_TGT static int gv_restart_zero(acc_gcm_state *s, int enc, const uint8_t *key, size_t keylen, const uint8_t *aad,
                                  size_t aadlen)
{
    gv_state *g = (gv_state *)s;

    (void)key;
    (void)keylen;
    if (g->k.rounds == 0)
        return 0;
    pthread_once(&wiped_once, wiped_probe);
    msg_reset(&g->m, enc, aadlen);
    g->m.ek0 = _mm_setzero_si128();
    g->m.ctr = _mm_set_epi32((int)wiped_first, 0, 0, 0);
    hash_bytes(&g->k, &g->m.x, aad, aadlen);
    return 1;
}

static const acc_gcm_split_ops gv_split = {
    .get = gv_split_get,
    .ghash = gv_split_ghash,
    .put = gv_split_put,
    .range = gv_split_range,
};

static const acc_gcm_engine gv_engine = {
    .name = GS_NAME,
    .set_key = gv_set_key,
    .copy = gv_copy,
    .cleanse = gv_cleanse,
    .start = GS_API(start),
    .update = GS_API(update),
    .finish = GS_API(finish),
    .restart_zero = gv_restart_zero,
    .set_dir = gv_set_dir,
    .split = &gv_split,
};

