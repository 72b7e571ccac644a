/* tests/c/test_tls_ct.c: provider/cipher/tls.c's record unpadding against a plain reference, and -
 * under valgrind - proof that it never branches on or indexes by the decrypted bytes (ctgrind). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/c/valgrind_ct.h"

/* tls.c is compiled into this test with its external names renamed, so that neither the
 * provider's own objects nor the real offload policy are linked: the "cipher" below is the
 * identity, and what it outputs is marked secret (undefined) for memcheck. */
#define acc_policy_blocks      ct_policy_blocks
#define acc_raise              ct_raise
#define acc_tls_update         ct_tls_update
#define acc_tls_set_ctx_params ct_tls_set_ctx_params
#define acc_tls_get_mac        ct_tls_get_mac
#define acc_cipher_check_key   ct_check_key
#define acc_cipher_check_record_len ct_check_record_len
#define acc_tls_dup            ct_tls_dup
#define acc_tls_cleanup        ct_tls_cleanup
#include "provider/cipher/tls.c"

static int raised;

void ct_raise(int reason, const char *fmt, ...)
{
    (void)reason;
    (void)fmt;
    raised++;
}

/* The cipher core's checks, as plain as the record code needs them. */
int ct_check_key(const acc_cipher_ctx *c)
{
    if (!c->key_set)
        raised++;
    return c->key_set;
}

int ct_check_record_len(size_t inl)
{
    if (inl > (size_t)INT_MAX)
        raised++;
    return inl <= (size_t)INT_MAX;
}

int ct_policy_blocks(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len)
{
    if (in != out)
        memmove(out, in, len);
    /* With encrypt-then-MAC libssl has authenticated the ciphertext before decrypting it, so
     * the padding verdict may be acted on openly: only MAC-then-encrypt output is secret. */
    if (ctx->tlsmacsize > 0)
        VALGRIND_MAKE_MEM_UNDEFINED(out, len);
    return 1;
}

static int passed, failed;

static void check(int cond, const char *what, unsigned ver, size_t len, size_t ms, int pad)
{
    if (cond) {
        passed++;
        return;
    }
    if (++failed <= 20)
        fprintf(stderr, "FAIL: %s (version 0x%x, record %zu, mac %zu, pad %d)\n",
                what, ver, len, ms, pad);
}

/* The reference: the padding rules written directly, with branches (RFC 5246 6.2.3.2;
 * SSL 3.0 checks only the length byte and minimality). */
static int ref_good(unsigned ver, const uint8_t *rec, size_t len, size_t ms)
{
    size_t p = rec[len - 1];

    if (len < 1 + ms + p)
        return 0;
    if (ver == V_SSL3)
        return p + 1 <= BLK;
    for (size_t i = 0; i <= p; i++)
        if (rec[len - 1 - i] != p)
            return 0;
    return 1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint8_t rnd8(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

/* Build one record body (after the explicit IV) of len bytes: payload, a MAC, then padding of
 * p+1 bytes, and corrupt it as asked: corrupt < 0 none, else flip padding byte number corrupt. */
static void make_body(uint8_t *b, size_t len, size_t ms, size_t p, int corrupt, unsigned ver)
{
    for (size_t i = 0; i < len; i++)
        b[i] = rnd8();
    (void)ms;
    for (size_t i = 0; i <= p && i < len; i++)
        b[len - 1 - i] = (ver == V_SSL3 && i > 0) ? rnd8() : (uint8_t)p;
    if (corrupt >= 0 && (size_t)corrupt <= p && (size_t)corrupt < len)
        b[len - 1 - corrupt] ^= (uint8_t)(1u << (corrupt % 8));
}

static void one(unsigned ver, size_t len, size_t ms, size_t p, int corrupt)
{
    static uint8_t rec[16 + 1024], orig[16 + 1024];
    acc_cipher_ctx ctx;
    size_t skip = version_explicit_iv(ver) ? BLK : 0, outl = 0;
    size_t ap;
    int ok, good;

    memset(&ctx, 0, sizeof(ctx));
    ctx.mode = ACC_MODE_CBC;
    ctx.key_set = 1;
    ctx.pad = 1;
    ctx.tlsversion = ver;
    ctx.tlsmacsize = ms;
    for (size_t i = 0; i < skip; i++)
        rec[i] = rnd8();
    make_body(rec + skip, len, ms, p, corrupt, ver);
    memcpy(orig, rec, skip + len);
    good = ref_good(ver, orig + skip, len, ms);
    ap = orig[skip + len - 1];   /* the padding length byte as it ended up */

    ok = ct_tls_update(&ctx, rec, &outl, skip + len, rec, skip + len);
    /* The verdict leaves the provider through outl, the MAC and libssl's MAC check: from
     * here on the test itself may look at them. */
    VALGRIND_MAKE_MEM_DEFINED(&ok, sizeof(ok));
    VALGRIND_MAKE_MEM_DEFINED(&outl, sizeof(outl));
    VALGRIND_MAKE_MEM_DEFINED(rec, sizeof(rec));
    if (ctx.tlsmac != NULL)
        VALGRIND_MAKE_MEM_DEFINED(ctx.tlsmac, ms);

    if (len < 1 + ms) {
        check(!ok, "a record too short for padding and MAC is refused", ver, len, ms, (int)p);
    } else if (ms == 0) {
        check(ok == good, "encrypt-then-MAC: the padding verdict is the return value", ver, len, ms, (int)p);
        if (ok && good)
                check(outl == len - ap - 1, "encrypt-then-MAC: payload length", ver, len, ms, (int)p);
    } else {
        check(ok == 1, "MAC-then-encrypt: the record goes on to the MAC check", ver, len, ms, (int)p);
        check(ctx.tlsmac != NULL && ctx.tlsmac_alloced, "MAC-then-encrypt: a MAC is given", ver, len, ms, (int)p);
        if (good) {
            check(outl == len - ap - 1 - ms, "good padding: payload length", ver, len, ms, (int)p);
            check(ctx.tlsmac != NULL && memcmp(ctx.tlsmac, orig + skip + outl, ms) == 0,
                  "good padding: the MAC is the record's", ver, len, ms, (int)p);
        } else {
            check(outl == len - ms, "bad padding: length as if unpadded", ver, len, ms, (int)p);
            check(ctx.tlsmac != NULL && memcmp(ctx.tlsmac, orig + skip + len - ms, ms) != 0,
                  "bad padding: the MAC is random, not the record's", ver, len, ms, (int)p);
        }
    }
    check(memcmp(rec + skip, orig + skip, outl <= len ? outl : len) == 0,
          "the payload is left in place", ver, len, ms, (int)p);
    ct_tls_cleanup(&ctx);
}

int main(void)
{
    static const unsigned versions[] = { V_SSL3, V_TLS1, V_TLS1_2, V_DTLS1_2 };
    static const size_t macs[] = { 0, 20, 32, 48 };
    int under_vg = RUNNING_ON_VALGRIND;
    int rounds = under_vg ? 1 : 4;

    for (int r = 0; r < rounds; r++)
        for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++)
            for (size_t m = 0; m < sizeof(macs) / sizeof(macs[0]); m++)
                for (size_t len = 16; len <= 400; len += (len < 96 ? 16 : 48)) {
                    size_t ms = macs[m];
                    /* every padding length the record can hold and one more, plus two
                     * impossible ones; each good, and with one padding byte damaged */
                    for (size_t p = 0; p <= 255 && p + ms <= len; p += (p < 20 ? 1 : 13)) {
                        one(versions[v], len, ms, p, -1);
                        one(versions[v], len, ms, p, (int)(p / 2));
                        one(versions[v], len, ms, p, 0);
                    }
                    one(versions[v], len, ms, 255, -1);
                }

    /* Publicly invalid requests are refused with an error raised. */
    {
        acc_cipher_ctx ctx;
        uint8_t buf[64] = { 0 }, other[64];
        size_t outl;
        int before = raised;

        memset(&ctx, 0, sizeof(ctx));
        ctx.mode = ACC_MODE_CBC;
        ctx.key_set = 1;
        ctx.pad = 1;
        ctx.tlsversion = V_TLS1_2;
        ctx.tlsmacsize = 20;
        check(!ct_tls_update(&ctx, other, &outl, 64, buf, 48), "in != out is refused", V_TLS1_2, 48, 20, -1);
        check(!ct_tls_update(&ctx, buf, &outl, 64, buf, 40), "a partial block is refused", V_TLS1_2, 40, 20, -1);
        check(!ct_tls_update(&ctx, buf, &outl, 64, buf, 16), "a record of only an IV is refused", V_TLS1_2, 16, 20, -1);
        check(!ct_tls_update(&ctx, buf, &outl, 64, buf, 0), "an empty record is refused", V_TLS1_2, 0, 20, -1);
        check(!ct_tls_update(&ctx, buf, &outl, 32, buf, 48), "a buffer smaller than the record is refused", V_TLS1_2, 48, 20, -1);
        ctx.pad = 0;
        check(!ct_tls_update(&ctx, buf, &outl, 64, buf, 48), "padding off is refused", V_TLS1_2, 48, 20, -1);
        ctx.pad = 1;
        ctx.enc = 1;
        check(!ct_tls_update(&ctx, buf, &outl, 47, buf, 32), "encrypt without room for the padding is refused", V_TLS1_2, 32, 20, -1);
        check(ct_tls_update(&ctx, buf, &outl, 48, buf, 32) && outl == 48, "encrypt pads a whole block", V_TLS1_2, 32, 20, 15);
        check(raised - before == 7, "each refusal raised an error", V_TLS1_2, 0, 0, -1);
        ct_tls_cleanup(&ctx);
    }

    printf("test_tls_ct: %d passed, %d failed%s\n", passed, failed,
           under_vg ? " (under valgrind: secret-dependent branches would be reported above)"
                    : " (constant time not checked: run under valgrind for that)");
    return failed ? 1 : 0;
}
