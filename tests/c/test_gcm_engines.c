/* tests/c/test_gcm_engines.c: every GCM engine this machine has (accel/gcm.h: accelaes's VAES
 * engine on zmm, ymm or xmm, intel-ipsec-mb, the nested default provider) against every other, at the engine
 * interface:
 *  - cross: a random message (key size, IV length 1..64, AAD 0..300 bytes, data 0..5000 bytes)
 *    encrypted on engine A in random pieces (1-byte pieces included, in place or not), decrypted on
 *    engine B in other pieces: the same ciphertext and tag as engine C's one-shot encryption, the
 *    plaintext back, and a tag with one bit flipped refused by B;
 *  - the counter's 32-bit wrap, which no IV can be searched for: the message moved on by split->put
 *    (the same GHASH and 2^32 - k blocks on both) to just before the low word wraps, then streamed
 *    across it on each width of accelaes's engine and on intel-ipsec-mb (the checked reference): same bytes, same
 *    tag, and each engine decrypts the other's;
 *  - the split hooks of each width of accelaes's engine against its own update: split->range over a range, combined
 *    with split->put, gives the bytes and tag of a plain update.
 * Run by tests/conformance/test_gcm_engines.py. ACCELAES_TEST_SEED varies the messages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "accel/gcm.h"
#include "accel/cpu/gcm_dual.h"

#include "tests/c/check.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void rnd(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)rnd64();
}

static size_t upto(size_t n)
{
    return (size_t)(rnd64() % (n + 1));
}

/* One engine's view of a message through update in random pieces; in place when inplace. */
static int stream(const acc_gcm_engine *e, acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len, int inplace,
                  int bytewise)
{
    if (inplace) {
        memmove(out, in, len);
        in = out;
    }
    for (size_t off = 0; off < len;) {
        size_t n = bytewise ? 1 : 1 + upto(len - off - 1 < 700 ? len - off - 1 : 700);
        if (!e->update(s, in + off, out + off, n))
            return 0;
        off += n;
    }
    return 1;
}

static acc_gcm_state sa, sb, sc;   /* 64-byte aligned (static) */

static void cross(const acc_gcm_engine *a, const acc_gcm_engine *b, const acc_gcm_engine *c, int round)
{
    static const size_t keylens[3] = { 16, 24, 32 };
    uint8_t key[32], iv[64], aad[300], tag_a[16], tag_c[16];
    size_t keylen = keylens[round % 3], ivlen = round % 4 ? 12 : 1 + upto(63), aadlen = upto(300);
    size_t len = round % 7 == 0 ? upto(40) : upto(5000);
    uint8_t *pt = malloc(len + 1), *ct = malloc(len + 1), *ref = malloc(len + 1), *back = malloc(len + 1);
    int bytewise = round % 11 == 0;

    rnd(key, sizeof(key)), rnd(iv, ivlen), rnd(aad, aadlen), rnd(pt, len);
    CHECK(a->set_key(&sa, key, keylen) && b->set_key(&sb, key, keylen) && c->set_key(&sc, key, keylen),
          "set_key %s %s %s", a->name, b->name, c->name);
    /* the reference: engine c, one update */
    CHECK(c->start(&sc, 1, iv, ivlen, aad, aadlen) && c->update(&sc, pt, ref, len) && c->finish(&sc, tag_c, 16),
          "%s one-shot", c->name);
    CHECK(a->start(&sa, 1, iv, ivlen, aad, aadlen) && stream(a, &sa, pt, ct, len, round & 1, bytewise)
          && a->finish(&sa, tag_a, 16), "%s streamed", a->name);
    CHECK(memcmp(ct, ref, len) == 0 && memcmp(tag_a, tag_c, 16) == 0,
          "round %d: %s encryption differs from %s (key %zu, iv %zu, aad %zu, len %zu)", round, a->name, c->name,
          keylen, ivlen, aadlen, len);
    CHECK(b->start(&sb, 0, iv, ivlen, aad, aadlen) && stream(b, &sb, ct, back, len, !(round & 1), 0)
          && b->finish(&sb, tag_a, 1 + round % 16), "round %d: %s refused %s's tag", round, b->name, a->name);
    CHECK(memcmp(back, pt, len) == 0, "round %d: %s decrypted %s's ciphertext wrongly", round, b->name, a->name);
    tag_a[round % 16] ^= (uint8_t)(1u << (round % 8));
    CHECK(b->start(&sb, 0, iv, ivlen, aad, aadlen) && b->update(&sb, ct, back, len) && !b->finish(&sb, tag_a, 16),
          "round %d: %s took a flipped tag", round, b->name);
    a->cleanse(&sa), b->cleanse(&sb), c->cleanse(&sc);
    free(pt), free(ct), free(ref), free(back);
}

/* Both engines moved on to `before` blocks short of the low word's wrap; then len bytes. */
static void wrap(const acc_gcm_engine *v, const acc_gcm_engine *r, uint64_t before, size_t len, size_t keylen)
{
    uint8_t key[32], iv[12], aad[20], g[16], ctr_v[16], ctr_r[16], h[16], tv[16], tr[16];
    uint8_t *pt = malloc(len + 1), *cv = malloc(len + 1), *cr = malloc(len + 1), *back = malloc(len + 1);
    uint64_t skip;

    rnd(key, sizeof(key)), rnd(iv, 12), rnd(aad, 20), rnd(g, 16), rnd(pt, len);
    CHECK(v->set_key(&sa, key, keylen) && r->set_key(&sb, key, keylen), "set_key");
    CHECK(v->start(&sa, 1, iv, 12, aad, 20) && r->start(&sb, 1, iv, 12, aad, 20), "start");
    CHECK(v->split->get(&sa, g, ctr_v, h) && r->split->get(&sb, g, ctr_r, h) && memcmp(ctr_v, ctr_r, 16) == 0,
          "split->get: the counters differ");
    /* from the first data counter (low word 2) to `before` short of 2^32 */
    skip = (UINT64_C(1) << 32) - 2 - before;
    rnd(g, 16);
    v->split->put(&sa, g, skip);
    r->split->put(&sb, g, skip);
    CHECK(stream(v, &sa, pt, cv, len, 0, 0) && v->finish(&sa, tv, 16), "%s across the wrap", v->name);
    CHECK(stream(r, &sb, pt, cr, len, 1, 0) && r->finish(&sb, tr, 16), "%s across the wrap", r->name);
    CHECK(memcmp(cv, cr, len) == 0 && memcmp(tv, tr, 16) == 0,
          "%s and %s differ across the counter wrap (%llu blocks before it, %zu bytes, key %zu)", v->name, r->name,
          (unsigned long long)before, len, keylen);
    for (int dir = 0; dir < 2; dir++) {   /* each decrypts the other's */
        const acc_gcm_engine *e = dir ? r : v;
        acc_gcm_state *s = dir ? &sb : &sa;
        CHECK(e->start(s, 0, iv, 12, aad, 20), "start");
        e->split->put(s, g, skip);
        CHECK(stream(e, s, dir ? cv : cr, back, len, dir, 0) && e->finish(s, dir ? tv : tr, 16)
              && memcmp(back, pt, len) == 0, "%s decrypting across the wrap", e->name);
    }
    v->cleanse(&sa), r->cleanse(&sb);
    free(pt), free(cv), free(cr), free(back);
}

/* split->get / range / put (as provider/cipher/gcm_split.c uses them, one range) against a
 * plain update of the same message; decrypting, the tag is the one the plaintext encrypts to. */
static void split_self(const acc_gcm_engine *v, size_t head, size_t nblocks, int enc)
{
    uint8_t key[16], iv[12], g[16], ctr[16], h[16], rg[16], t1[16], t2[16];
    size_t len = head + 16 * nblocks + 7, mid = head + 16 * nblocks;
    uint8_t *in = malloc(len), *o1 = malloc(len), *o2 = malloc(len);

    rnd(key, 16), rnd(iv, 12), rnd(in, len);
    CHECK(v->set_key(&sa, key, 16) && v->start(&sa, 1, iv, 12, key, 5), "start");
    if (enc) {
        CHECK(v->update(&sa, in, o1, len) && v->finish(&sa, t1, 16), "plain");
    } else {   /* o1: the plaintext whose encryption is in, with tag t1 */
        CHECK(v->start(&sa, 0, iv, 12, key, 5) && v->update(&sa, in, o1, len), "plain");
        CHECK(v->start(&sa, 1, iv, 12, key, 5) && v->update(&sa, o1, o2, len) && v->finish(&sa, t1, 16)
              && memcmp(o2, in, len) == 0, "plain round trip");
    }
    CHECK(v->start(&sa, enc, iv, 12, key, 5) && v->update(&sa, in, o2, head), "head");
    CHECK(v->split->get(&sa, g, ctr, h) == (head % 16 == 0), "split_get at %zu", head);
    if (head % 16 == 0) {
        v->split->range(&sa, ctr, in + head, o2 + head, nblocks, rg);
        acc_gf128_pow(h, h, nblocks);
        acc_gf128_mul(g, h);
        for (int i = 0; i < 16; i++)
            g[i] ^= rg[i];
        v->split->put(&sa, g, nblocks);
        CHECK(v->update(&sa, in + mid, o2 + mid, len - mid), "tail");
        memcpy(t2, t1, 16);
        CHECK(v->finish(&sa, t2, 16) == 1 && memcmp(o1, o2, len) == 0 && memcmp(t1, t2, 16) == 0,
              "split->range differs from update (head %zu, %zu blocks, enc %d)", head, nblocks, enc);
    }
    v->cleanse(&sa);
    free(in), free(o1), free(o2);
}

int main(void)
{
    /* the per-message choice (gcm_dual.c) is an engine of its own: crossed with the others too */
    const acc_gcm_engine *all[6] = { acc_gcm_engine_vaes(), acc_gcm_engine_vaesy(), acc_gcm_engine_vaesx(),
                                     acc_gcm_engine_imb(), acc_gcm_engine_evp(), acc_gcm_engine_dual() };
    const acc_gcm_engine *have[6], *imb = all[3];
    const char *seed = getenv("ACCELAES_TEST_SEED");
    int n = 0;

    if (seed != NULL)
        rng_state ^= strtoull(seed, NULL, 0) * 0x100000001b3u;
    for (int i = 0; i < 6; i++)
        if (all[i] != NULL)
            have[n++] = all[i];
    printf("engines:");
    for (int i = 0; i < n; i++)
        printf(" %s", have[i]->name);
    printf("\ndefault: %s\n", acc_gcm_engine_default()->name);
    for (int round = 0; round < 60; round++)
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                cross(have[a], have[b], have[(a + b + round) % n], round);
    for (int w = 0; w < 3; w++) {   /* each width of accelaes's engine: zmm, ymm, xmm */
        const acc_gcm_engine *v = all[w];
        if (v == NULL)
            continue;
        if (imb != NULL) {
            static const uint64_t before[] = { 0, 1, 3, 5, 15, 16, 17, 40 };
            for (size_t i = 0; i < sizeof(before) / sizeof(before[0]); i++)
                for (size_t k = 16; k <= 32; k += 8)
                    wrap(v, imb, before[i], 16 * (before[i] + 3) + (before[i] % 7) + upto(300), k);
        } else {
            printf("the counter wrap not checked on %s: no intel-ipsec-mb GCM engine\n", v->name);
        }
        for (int enc = 0; enc < 2; enc++)
            for (size_t head = 0; head < 40; head += 8)
                split_self(v, head, 1 + upto(70), enc);
    }
    if (all[0] == NULL && all[1] == NULL && all[2] == NULL)
        printf("skipped: no accelaes GCM engine on this CPU\n");
    return CHECK_SUMMARY();
}
