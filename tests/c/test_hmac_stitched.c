/* tests/c/test_hmac_stitched.c: the stitched AES-CBC-HMAC-SHA1/SHA256 record code itself: under
 * valgrind, proof that the record check never branches on or indexes by the decrypted bytes
 * (ctgrind: they are marked undefined), its verdicts against a plain RFC 5246 check, and the three
 * encrypt paths (fused SHA-NI, interleaved, whole record) against OpenSSL. The ciphers through the
 * provider against the default provider: test_hmac_differential.c. */

/* The record code is compiled into this test a second time with its external names renamed: a
 * "cipher" that is the identity and marks its output secret stands in for the offload policy. */
#define acc_policy_blocks    ct_policy_blocks
#define acc_raise            ct_raise
#define acc_hmac_set_mac_key ct_hmac_set_mac_key
#define acc_hmac_set_aad     ct_hmac_set_aad
#define acc_hmac_cipher      ct_hmac_cipher
#define acc_hmac_sha1        ct_hmac_sha1
#define acc_hmac_sha256      ct_hmac_sha256
#define acc_hmac_stitch_usable ct_hmac_stitch_usable
#include "provider/cipher/cipher_hmac_record.c"
#undef acc_policy_blocks
#undef acc_raise
#undef acc_hmac_set_mac_key
#undef acc_hmac_set_aad
#undef acc_hmac_cipher
#undef acc_hmac_sha1
#undef acc_hmac_sha256
#undef acc_hmac_stitch_usable

#include <stdio.h>
#include <stdlib.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include "tests/c/valgrind_ct.h"

#include "tests/c/test_hmac_common.h"

/* ======================== Stand-ins for the constant-time build ======================== */

void ct_raise(int reason, const char *fmt, ...)
{
    (void)reason;
    (void)fmt;
}

/* Decrypting: the identity, its output marked secret. Encrypting (encrypt_paths): the real
 * engine, as the policy would run it inline. */
int ct_policy_blocks(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len)
{
    if (ctx->enc)
        return ctx->eng->cbc_enc(&ctx->ks, in, out, len / 16, ctx->iv);
    if (in != out)
        memmove(out, in, len);
    VALGRIND_MAKE_MEM_UNDEFINED(out, len);   /* decrypted bytes are secret */
    return 1;
}

/* encrypt_paths switches the fused SHA-NI loop off to reach the interleaved one. */
static int allow_fused;
int acc_hmac_stitch_usable(const acc_hmac_ctx *h);     /* the library's, under its own name */

int ct_hmac_stitch_usable(const acc_hmac_ctx *h)
{
    return allow_fused && acc_hmac_stitch_usable(h);
}

/* ======================== Constant time (and correctness) of the record check ======================== */

static void ct_one(const acc_sha_kind *kind, const EVP_MD *md, unsigned ver, size_t payload, size_t pad,
                   int damage)
{
    static uint8_t rec[MAXREC], orig[MAXREC];
    static acc_hmac_ctx h;
    size_t ms = kind->md_size, eiv = ver >= 0x0302 ? 16 : 0, len, got = 0;
    uint8_t mk[32], aad[13] = { 0, 0, 0, 0, 0, 0, 1, 2, 23, (uint8_t)(ver >> 8), (uint8_t)ver };
    int r, good;

    fill(mk, ms);
    fill(aad, 8);
    fill(rec, eiv);
    len = eiv + make_body(md, mk, ms, aad, rec + eiv, payload, pad, damage);
    if (len % 16 != 0)
        return;
    memcpy(orig, rec, len);
    aad[11] = (uint8_t)(len >> 8);
    aad[12] = (uint8_t)len;
    memset(&h, 0, sizeof(h));
    h.sha = kind;
    h.aes.mode = ACC_MODE_CBC;
    h.aes.op = ACC_OP_CBC_DEC;
    h.aes.key_set = 1;
    h.payload_len = ACC_HMAC_NO_PAYLOAD;
    ct_hmac_set_mac_key(&h, mk, ms);
    check(ct_hmac_set_aad(&h, aad, 13) == 1, "decrypt AAD accepted", "ct", (int)ver, len);
    r = ct_hmac_cipher(&h, rec, rec, len);
    /* The verdict leaves here: from now on the test may look at it. */
    VALGRIND_MAKE_MEM_DEFINED(&r, sizeof(r));
    VALGRIND_MAKE_MEM_DEFINED(rec, len);
    good = ref_verdict(md, mk, ms, aad, orig + eiv, len - eiv, &got);
    check(r == (good ? 1 : -1), good ? "a good record passes" : "a bad record fails", kind == &ct_hmac_sha1 ? "ct sha1" : "ct sha256", (int)ver, len);
    check(memcmp(rec + eiv, orig + eiv, len - eiv) == 0, "the payload is left in place", "ct", (int)ver, len);
}

static void ct_suite(int rounds)
{
    static const unsigned versions[] = { 0x0301, 0x0303 };

    for (int r = 0; r < rounds; r++)
        for (size_t v = 0; v < 2; v++)
            for (int k = 0; k < 2; k++) {
                const acc_sha_kind *kind = k ? &ct_hmac_sha256 : &ct_hmac_sha1;
                const EVP_MD *md = k ? EVP_sha256() : EVP_sha1();
                size_t eiv = versions[v] >= 0x0302 ? 16 : 0;

                for (size_t payload = 0; payload < 700; payload += payload < 80 ? 3 + r : 61) {
                    size_t pad0 = (32 - (eiv + payload + kind->md_size + 1) % 16) % 16;

                    for (size_t pad = pad0; pad <= 255; pad += pad < 48 ? 16 : 48)
                        for (int damage = -1; damage <= 3; damage++)
                            ct_one(kind, md, versions[v], payload, pad, damage);
                }
                ct_one(kind, md, versions[v], 16000, (32 - (eiv + 16000 + kind->md_size + 1) % 16) % 16 + 240, -1);
                ct_one(kind, md, versions[v], 16000, (32 - (eiv + 16000 + kind->md_size + 1) % 16) % 16, 1);
            }
}

static void encrypt_paths(void)
{
    static uint8_t rec[MAXREC], pt[MAXREC];
    static acc_hmac_ctx h;
    const acc_engine *engines[3] = { acc_engine_aesni(), acc_engine_aesni(), acc_engine_evp() };
    EVP_CIPHER *raw = EVP_CIPHER_fetch(NULL, "AES-128-CBC", "provider=default");
    const char *what[3] = { "fused", "interleaved", "whole record" };

    for (int path = 0; path < 3; path++) {
        if (engines[path] == NULL || raw == NULL)
            continue;
        allow_fused = path == 0;
        for (int k = 0; k < 2; k++)
            for (unsigned ver = 0x0301; ver <= 0x0303; ver++)
                for (size_t payload = 0; payload < 3000; payload += payload < 200 ? 7 : 331) {
                    const acc_sha_kind *kind = k ? &ct_hmac_sha256 : &ct_hmac_sha1;
                    const EVP_MD *md = k ? EVP_sha256() : EVP_sha1();
                    size_t ms = kind->md_size, eiv = ver >= 0x0302 ? 16 : 0, got = 0;
                    uint8_t key[16], iv[16], mk[32], aad[13], a2[13];
                    EVP_CIPHER_CTX *d = EVP_CIPHER_CTX_new();
                    size_t len;
                    int r, l = 0, ok;

                    fill(key, 16);
                    fill(iv, 16);
                    fill(mk, ms);
                    fill(rec, eiv + payload);
                    memcpy(pt, rec, eiv + payload);
                    aad_of(aad, rnd(), (int)ver, eiv + payload);
                    memset(&h, 0, sizeof(h));
                    h.sha = kind;
                    h.aes.eng = engines[path];
                    h.aes.mode = ACC_MODE_CBC;
                    h.aes.enc = 1;
                    h.aes.op = ACC_OP_CBC_ENC;
                    memcpy(h.aes.iv, iv, 16);
                    h.aes.key_set = engines[path]->set_key(&h.aes.ks, key, 16, 1);
                    h.payload_len = ACC_HMAC_NO_PAYLOAD;
                    kind->init(&h.head);
                    ct_hmac_set_mac_key(&h, mk, ms);
                    memcpy(a2, aad, 13);
                    r = h.aes.key_set && ct_hmac_set_aad(&h, a2, 13) == 1
                        && ct_hmac_cipher(&h, rec, rec, (eiv + payload + ms + 16) & ~(size_t)15) == 1;
                    len = (eiv + payload + ms + 16) & ~(size_t)15;
                    ok = r && d != NULL && EVP_DecryptInit_ex(d, raw, NULL, key, iv) && EVP_CIPHER_CTX_set_padding(d, 0)
                         && EVP_DecryptUpdate(d, rec, &l, rec, (int)len) && (size_t)l == len
                         && memcmp(rec + eiv, pt + eiv, payload) == 0
                         && ref_verdict(md, mk, ms, aad, rec + eiv, len - eiv, &got) && got == payload;
                    check(ok, what[path], k ? "encrypt sha256" : "encrypt sha1", (int)ver, payload);
                    EVP_CIPHER_CTX_free(d);
                    if (h.aes.key_set)
                        engines[path]->free_key(&h.aes.ks);
                }
    }
    allow_fused = 1;
    EVP_CIPHER_free(raw);
}

/* Algorithm parameters and flags as the default reports them (TLS1 multiblock included:
 * tests/c/test_tls_multiblock.c checks what it does). */
int main(void)
{
    const char *seed = getenv("ACCELAES_TEST_SEED");
    int under_vg = RUNNING_ON_VALGRIND;

    rng = seed != NULL ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ULL;
    if (rng == 0)
        rng = 1;
    printf("test_hmac_stitched: seed %llu\n", (unsigned long long)rng);
    /* Under valgrind only the record check runs: the rest proves nothing about timing. */
    ct_suite(under_vg ? 1 : 3);
    if (!under_vg) {
        encrypt_paths();
    }
    printf("test_hmac_stitched: %d passed, %d failed%s\n", passed, failed,
           under_vg ? " (under valgrind: secret-dependent branches or addresses would be reported above)"
                    : " (constant time not checked: run under valgrind for that)");
    return failed ? 1 : 0;
}
