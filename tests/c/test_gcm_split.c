/* tests/c/test_gcm_split.c: the pieces of the GCM split (provider/cipher/gcm_split.c) with crafted states,
 * where a whole message through the provider cannot reach them (a 2^32-block counter wrap needs a
 * J0 whose low word is near 0xffffffff, which no IV can be searched for):
 *  - acc_gf128_mul / acc_gf128_pow against a bitwise reference of GCM's product (SP 800-38D, Alg. 1);
 *  - acc_gcm_inc32 / acc_gcm_ctr32 across the low word's wrap against ECB over counter blocks built
 *    one by one (the upper 96 bits never change);
 *  - GHASH combined: GHASH(X1||X2) = GHASH(X1) * H^m2 xor GHASH(X2), with the engine's ghash;
 *  - the engine's split hooks end to end: a message whose ipsec-mb counter is crafted next to the
 *    wrap, continued once by ipsec-mb's own update and once by split->get, keystream and GHASH by
 *    ranges, combine, split->put, then ipsec-mb's update and finalize in both: same bytes, same tag.
 * Run by tests/conformance/test_gcm_split.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "accel/engine.h"
#include "accel/gcm.h"
#ifdef HAVE_IPSECMB
#include <intel-ipsec-mb.h>
#endif

#include "tests/c/check.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static void rnd(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        b[i] = (uint8_t)rng_state;
    }
}

/* SP 800-38D Algorithm 1, bit by bit: the reference, not fast. */
static void ref_mul(uint8_t x[16], const uint8_t y[16])
{
    uint8_t z[16] = { 0 }, v[16];

    memcpy(v, y, 16);
    for (int i = 0; i < 128; i++) {
        int lsb = v[15] & 1;

        if ((x[i / 8] >> (7 - i % 8)) & 1)
            for (int j = 0; j < 16; j++)
                z[j] ^= v[j];
        for (int j = 15; j > 0; j--)
            v[j] = (uint8_t)((v[j] >> 1) | (v[j - 1] << 7));
        v[0] >>= 1;
        if (lsb)
            v[0] ^= 0xe1;
    }
    memcpy(x, z, 16);
}

static void ref_ghash(uint8_t s[16], const uint8_t h[16], const uint8_t *in, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++) {
        for (int j = 0; j < 16; j++)
            s[j] ^= in[16 * b + j];
        ref_mul(s, h);
    }
}

static void test_gf128(void)
{
    uint8_t a[16], b[16], r1[16], r2[16], one[16] = { 0x80 };

    for (int t = 0; t < 2000; t++) {
        rnd(a, 16);
        rnd(b, 16);
        if (t == 0)
            memset(a, 0xff, 16), memset(b, 0xff, 16);   /* every reduction term at once */
        memcpy(r1, a, 16);
        memcpy(r2, a, 16);
        acc_gf128_mul(r1, b);
        ref_mul(r2, b);
        CHECK(memcmp(r1, r2, 16) == 0, "product %d differs from the reference", t);
    }
    memcpy(r1, a, 16);
    acc_gf128_mul(r1, one);
    CHECK(memcmp(r1, a, 16) == 0, "x * 1 != x");
    for (uint64_t e = 0; e < 40; e += 3) {
        memcpy(r2, one, 16);
        for (uint64_t i = 0; i < e; i++)
            ref_mul(r2, a);
        acc_gf128_pow(r1, a, e);
        CHECK(memcmp(r1, r2, 16) == 0, "a^%llu differs", (unsigned long long)e);
    }
    /* a^(2^32) = (a^(2^16))^(2^16): squarings only, a different path through pow */
    acc_gf128_pow(r1, a, UINT64_C(1) << 32);
    acc_gf128_pow(r2, a, UINT64_C(1) << 16);
    acc_gf128_pow(r2, r2, UINT64_C(1) << 16);
    CHECK(memcmp(r1, r2, 16) == 0, "a^(2^32) differs");
}

static void test_inc32_keystream(void)
{
    const acc_engine *eng = acc_engine_default();
    acc_aes_key k;
    uint8_t key[16], c0[16], c[16], blocks[16 * 9], in[16 * 9], out[16 * 9], ref[16 * 9];
    static const uint32_t starts[] = { 0xfffffffbu, 0xffffffffu, 0, 0x7fffffffu };

    memset(&k, 0, sizeof(k));
    rnd(key, 16);
    CHECK(eng->set_key(&k, key, 16, 1), "key");
    memcpy(c, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00", 16);
    acc_gcm_inc32(c, 0xffffffffu);
    acc_gcm_inc32(c, 2);
    CHECK(memcmp(c, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x01", 16) == 0,
          "inc32 carried out of the low word");
    for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++) {
        rnd(c0, 12);
        c0[12] = (uint8_t)(starts[s] >> 24), c0[13] = (uint8_t)(starts[s] >> 16);
        c0[14] = (uint8_t)(starts[s] >> 8), c0[15] = (uint8_t)starts[s];
        memcpy(c, c0, 16);
        for (int b = 0; b < 9; b++, acc_gcm_inc32(c, 1))
            memcpy(blocks + 16 * b, c, 16);
        CHECK(memcmp(blocks + 16 * 8, c0, 12) == 0, "upper 96 bits moved");
        rnd(in, sizeof(in));
        CHECK(eng->ecb_enc(&k, blocks, ref, 9), "ecb");
        for (size_t i = 0; i < sizeof(ref); i++)
            ref[i] ^= in[i];
        CHECK(acc_gcm_ctr32(eng, &k, in, out, 9, c0), "ctr32");
        CHECK(memcmp(out, ref, sizeof(ref)) == 0, "keystream from low word %08x differs", starts[s]);
        memcpy(out, in, sizeof(in));   /* in place */
        CHECK(acc_gcm_ctr32(eng, &k, out, out, 9, c0) && memcmp(out, ref, sizeof(ref)) == 0,
              "in-place keystream from %08x differs", starts[s]);
    }
    eng->free_key(&k);
}

#ifdef HAVE_IPSECMB
/* gcm_imb.c's state, restated to craft its counter: the key data first, the message after it. */
typedef struct {
    struct gcm_key_data key;
    struct gcm_context_data msg;
} imb_view;

/* Continue `s` by n blocks of `in` as the split does, in `parts` ranges combined. */
static int split_like(const acc_gcm_engine *ge, acc_gcm_state *s, const acc_engine *eng, const acc_aes_key *k,
                      int enc, const uint8_t *in, uint8_t *out, size_t n, size_t parts, int stitched)
{
    uint8_t st[16], ctr[16], h[16], hm[16];
    size_t per = (n + parts - 1) / parts;

    if (!ge->split->get(s, st, ctr, h))
        return 0;
    for (size_t b = 0; b < n; b += per) {
        size_t m = n - b < per ? n - b : per;
        uint8_t part[16] = { 0 }, c[16];

        memcpy(c, ctr, 16);
        acc_gcm_inc32(c, b);
        if (stitched) {   /* the engine's one-pass range (ipsec-mb's update on a context of its own) */
            ge->split->range(s, c, in + 16 * b, out + 16 * b, m, part);
            goto combine;
        }
        if (!enc)
            ge->split->ghash(s, in + 16 * b, m, part);
        if (!acc_gcm_ctr32(eng, k, in + 16 * b, out + 16 * b, m, c))
            return 0;
        if (enc)
            ge->split->ghash(s, out + 16 * b, m, part);
    combine:
        acc_gf128_pow(hm, h, m);
        acc_gf128_mul(st, hm);
        for (int j = 0; j < 16; j++)
            st[j] ^= part[j];
    }
    ge->split->put(s, st, n);
    return 1;
}

static void test_engine_split(void)
{
    const acc_gcm_engine *ge = acc_gcm_engine_imb();
    const acc_engine *eng = acc_engine_default();
    static acc_gcm_state a, b;
    acc_aes_key k;
    enum { N = 40, TAIL = 7 };
    uint8_t key[32], iv[12], aad[21], pt[16 * N + TAIL], ca[sizeof(pt)], cb[sizeof(pt)], ta[16], tb[16];
    uint8_t h[16], s0[16], x[16 * 8], g1[16], g2[16], g12[16], hm[16], ctr[16];
    static const uint32_t lows[] = { 0xffffffe0u, 0xfffffff0u, 0xffffffffu, 0xfffffffeu, 5 };

    if (ge == NULL) {
        printf("(no intel-ipsec-mb GCM engine on this CPU: its split hooks not tested)\n");
        return;
    }
    _Static_assert(sizeof(imb_view) <= sizeof(acc_gcm_state), "view");
    for (size_t t = 0; t < sizeof(lows) / sizeof(lows[0]) * 8; t++) {
        size_t keylen = t % 2 ? 32 : 16;
        int enc = (t / 4) % 2 == 0, stitched = (t / 2) % 2;
        imb_view *v;

        rnd(key, keylen);
        rnd(iv, sizeof(iv));
        rnd(aad, sizeof(aad));
        rnd(pt, sizeof(pt));
        memset(&k, 0, sizeof(k));
        CHECK(ge->set_key(&a, key, keylen) && eng->set_key(&k, key, keylen, 1), "keys");
        CHECK(ge->start(&a, enc, iv, sizeof(iv), aad, sizeof(aad)), "start");
        /* craft: the counter's low word (big-endian bytes 12..15; byte-reversed in ipsec-mb) */
        v = (imb_view *)&a;
        v->msg.current_counter[0] = (uint8_t)lows[t / 8];
        v->msg.current_counter[1] = (uint8_t)(lows[t / 8] >> 8);
        v->msg.current_counter[2] = (uint8_t)(lows[t / 8] >> 16);
        v->msg.current_counter[3] = (uint8_t)(lows[t / 8] >> 24);
        CHECK(ge->update(&a, pt, ca, 32), "two blocks first");
        memcpy(&b, &a, sizeof(a));
        memcpy(cb, ca, 32);
        /* a: ipsec-mb all the way; b: the split for N-4 blocks, then ipsec-mb for the rest */
        CHECK(ge->update(&a, pt + 32, ca + 32, sizeof(pt) - 32), "ipsec-mb update");
        CHECK(split_like(ge, &b, eng, &k, enc, pt + 32, cb + 32, N - 4, 3, stitched), "split");
        CHECK(ge->update(&b, pt + 16 * (N - 2), cb + 16 * (N - 2), sizeof(pt) - 16 * (N - 2)), "tail");
        CHECK(memcmp(ca, cb, sizeof(ca)) == 0, "bytes differ (low word %08x, %s, %s)", lows[t / 8], enc ? "enc" : "dec",
              stitched ? "stitched" : "ctr32+ghash");
        /* every field ipsec-mb keeps (hash, counter, lengths, the pending partial block) alike */
        CHECK(memcmp(&((imb_view *)&a)->msg, &((imb_view *)&b)->msg, sizeof(struct gcm_context_data)) == 0,
              "message states differ (low word %08x, %s)", lows[t / 8], enc ? "enc" : "dec");
        CHECK(ge->split->get(&b, g1, ctr, h) == 0, "a pending partial block must refuse the split");
        if (enc) {
            CHECK(ge->finish(&a, ta, 16) && ge->finish(&b, tb, 16), "finish");
            CHECK(memcmp(ta, tb, 16) == 0, "tags differ (low word %08x)", lows[t / 8]);
        }
        eng->free_key(&k);
        ge->cleanse(&a);
        ge->cleanse(&b);
    }
    /* the combine law with the engine's ghash, from a nonzero state */
    CHECK(ge->set_key(&a, key, 16) && ge->start(&a, 1, iv, 12, aad, 0), "key");
    CHECK(ge->split->get(&a, s0, ctr, h), "get");
    rnd(x, sizeof(x));
    rnd(s0, 16);
    memcpy(g12, s0, 16);
    ge->split->ghash(&a, x, 8, g12);
    memcpy(g1, s0, 16);
    ref_ghash(g1, h, x, 8);
    CHECK(memcmp(g1, g12, 16) == 0, "the engine's ghash is not GHASH");
    memcpy(g1, s0, 16);
    ge->split->ghash(&a, x, 3, g1);
    memset(g2, 0, 16);
    ge->split->ghash(&a, x + 48, 5, g2);
    acc_gf128_pow(hm, h, 5);
    acc_gf128_mul(g1, hm);
    for (int j = 0; j < 16; j++)
        g1[j] ^= g2[j];
    CHECK(memcmp(g1, g12, 16) == 0, "GHASH(X1)*H^m2 ^ GHASH(X2) != GHASH(X1||X2)");
    ge->cleanse(&a);
}
#else
static void test_engine_split(void)
{
    printf("(built without intel-ipsec-mb: no GCM engine with split hooks)\n");
}
#endif

int main(void)
{
    test_gf128();
    test_inc32_keystream();
    test_engine_split();
    return CHECK_SUMMARY();
}
