/* provider/route/xts_split.c: a large XTS data unit cut into ranges for the backends that take XTS
 * ranges (policy.c's acc_policy_ranges: the pool). Block j of a unit uses the
 * tweak T*x^j (T = E(k2, IV), GF(2^128) mod x^128 + x^7 + x^2 + x + 1, the tweak read as a
 * little-endian integer), so a range of whole blocks starting at block b runs as a unit of its
 * own whose tweak is T*x^b: its "IV" is D(k2, T*x^b), which the engine encrypts back. That keeps
 * every engine (xmm, VAES, nested EVP) behind its one xts function, for one AES decryption per
 * range. The partial last block steals from the whole block before it, so those two run last, on
 * the caller, as one short unit. Nothing here branches on the tweak or the data. */
#include <string.h>
#include <openssl/crypto.h>
#include "provider/route/xts_split.h"
#include "scheduler/sched.h"

/* Grains as the pool's block split's (split.c): at least 16 KiB, at most 256 of them, and a
 * multiple of 64 blocks so a range's start has no bits below 2^6 (fewer multiplications, see
 * tweak_at). */
#define XTS_GRAIN (16u * 1024u)
#define XTS_MAX_GRAINS 256

typedef struct {
    uint64_t lo, hi;
} gf128;

/* x^(2^i) for i = 0..19 (a unit has at most 2^20 blocks), computed offline by repeated squaring
 * (checked by the split tests: a wrong entry gives wrong ciphertext from that grain on). */
static const gf128 x_pow2[20] = {
    { 0x2, 0 }, { 0x4, 0 }, { 0x10, 0 }, { 0x100, 0 }, { 0x10000, 0 }, { 0x100000000ull, 0 },
    { 0, 1 }, /* x^64 */
    { 0x87, 0 }, /* x^128 */
    { 0x4015, 0 }, /* x^256 */
    { 0x10000111ull, 0 }, /* x^512 */
    { 0x0100000000010101ull, 0 }, /* x^1024 */
    { 0x0000000100010001ull, 0x0001000000000000ull }, /* x^2048 */
    { 0x0000000100000001ull, 0x0000008700000001ull }, /* x^4096 */
    { 0x0000000000000086ull, 0x000000000021caeaull }, /* x^8192 */
    { 0x00021cae93f7cfc8ull, 0 }, /* x^16384 */
    { 0x4105551550555040ull, 0x0000000401504454ull }, /* x^32768 */
    { 0x118fe6196978ef70ull, 0x1001001111110961ull }, /* x^65536 */
    { 0x93c692c775187987ull, 0x860140d2541486c6ull }, /* x^131072 */
    { 0xea618e11df04ea1eull, 0x8b69509b312d6501ull }, /* x^262144 */
    { 0xcad0352d30b311b4ull, 0xb715594eb7756558ull }, /* x^524288 */
};

static gf128 gf_load(const uint8_t b[16])
{
    gf128 v;
    uint64_t w[2];

    memcpy(w, b, 16); /* x86-64 and the other targets built are little-endian, as the tweak */
    v.lo = w[0];
    v.hi = w[1];
    return v;
}

static void gf_store(uint8_t b[16], gf128 v)
{
    uint64_t w[2] = { v.lo, v.hi };

    memcpy(b, w, 16);
}

/* t * x^k for 0 <= k <= 56: the k bits out of the top fold back times 0x87 (carry-less, below
 * 2^64), as xts.c's x_mulxk. No branch on t. */
static gf128 gf_mulxk(gf128 t, unsigned k)
{
    gf128 r;
    uint64_t o;

    if (k == 0)
        return t;
    o = t.hi >> (64 - k);
    r.hi = (t.hi << k) | (t.lo >> (64 - k));
    r.lo = (t.lo << k) ^ o ^ (o << 1) ^ (o << 2) ^ (o << 7);
    return r;
}

/* t * a, a public: a bit loop with masks, no branch or index on t. */
static gf128 gf_mul(gf128 t, gf128 a)
{
    gf128 r = { 0, 0 };

    for (int i = 0; i < 128; i++) {
        uint64_t m = 0 - (((i < 64 ? a.lo >> i : a.hi >> (i - 64))) & 1);
        r.lo ^= t.lo & m;
        r.hi ^= t.hi & m;
        t = gf_mulxk(t, 1);
    }
    return r;
}

/* T * x^b for a block index b < 2^20 (public): the low six bits by two shifts (gf_mulxk takes
 * at most 56), each higher set bit by a multiplication with x^(2^i). */
static gf128 tweak_at(gf128 t, size_t b)
{
    t = gf_mulxk(gf_mulxk(t, (unsigned)(b & 31)), (unsigned)(b & 32));
    for (int i = 6; i < 20; i++)
        if ((b >> i) & 1)
            t = gf_mul(t, x_pow2[i]);
    return t;
}

typedef struct {
    const acc_engine *e;
    const acc_aes_key *k2;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks, grain_blocks;
    acc_xts_unit_fn *unit;
    void *arg;
    gf128 t0;
    int failed;
} xts_job;

/* The IV whose encryption under k2 is T*x^b: a piece starting at block b runs as its own unit. */
static int iv_at(const xts_job *j, size_t b, uint8_t iv[16])
{
    uint8_t t[16];
    int ok;

    gf_store(t, tweak_at(j->t0, b));
    ok = j->e->ecb_dec(j->k2, t, iv, 1);
    OPENSSL_cleanse(t, sizeof(t));
    return ok;
}

static void xts_range(void *arg, size_t first, size_t count)
{
    xts_job *j = arg;
    size_t b0 = first * j->grain_blocks, b1 = (first + count) * j->grain_blocks;
    uint8_t iv[16];
    int ok;

    if (b1 > j->nblocks)
        b1 = j->nblocks;
    ok = iv_at(j, b0, iv) && j->unit(j->arg, iv, j->in + 16 * b0, j->out + 16 * b0, 16 * (b1 - b0));
    OPENSSL_cleanse(iv, sizeof(iv));
    /* a pool thread cannot raise the caller's error: the caller does, after the run */
    if (!ok)
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

int acc_xts_split(const acc_policy *p, const acc_engine *e, const acc_aes_key *k2, const uint8_t iv[16],
                  const uint8_t *in, uint8_t *out, size_t len, acc_xts_unit_fn *unit, void *arg)
{
    xts_job j = { .e = e, .k2 = k2, .in = in, .out = out, .unit = unit, .arg = arg };
    size_t tail = len % 16 ? 16 + len % 16 : 0, ngrains;
    uint8_t t[16], tiv[16];
    acc_path path;
    int ok;

    if (len < 32 || !e->ecb_enc(k2, iv, t, 1))
        goto fail;
    j.t0 = gf_load(t);
    OPENSSL_cleanse(t, sizeof(t));
    j.nblocks = (len - tail) / 16;
    ngrains = len / XTS_GRAIN;
    ngrains = ngrains > XTS_MAX_GRAINS ? XTS_MAX_GRAINS : ngrains < 2 ? 2 : ngrains;
    j.grain_blocks = ((j.nblocks + ngrains - 1) / ngrains + 63) & ~(size_t)63;
    ngrains = (j.nblocks + j.grain_blocks - 1) / j.grain_blocks;
    if (acc_policy_ranges(p, ACC_RANGES_XTS, len, xts_range, &j, ngrains, (uint64_t)j.grain_blocks * 16, &path) < 0) {
        OPENSSL_cleanse(&j.t0, sizeof(j.t0));
        return -1;   /* nothing run: the caller runs the unit its own way */
    }
    ok = !__atomic_load_n(&j.failed, __ATOMIC_RELAXED); /* the pool's join orders the store */
    /* the stealing tail reads and writes only its own 16..31 bytes, after every range */
    if (ok && tail)
        ok = iv_at(&j, j.nblocks, tiv) && unit(arg, tiv, in + 16 * j.nblocks, out + 16 * j.nblocks, tail);
    OPENSSL_cleanse(tiv, sizeof(tiv));
    OPENSSL_cleanse(&j.t0, sizeof(j.t0));
    if (!ok)
        goto fail;
    acc_sched_count(path, len, 1);
    return 1;
fail:
    OPENSSL_cleanse(out, len);
    return 0;
}
