/* tests/c/test_hmac_differential.c: the stitched AES-CBC-HMAC-SHA1/SHA256 TLS ciphers through the
 * provider, accelaes against OpenSSL's default provider, driven as libssl drives them (records of
 * every version in streams, IVs, lengths, flags, parameters and refusals), with an independent
 * AES-CBC + HMAC oracle. The record code alone and its constant time: test_hmac_stitched.c. */
#include <stdio.h>
#include <stdlib.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "provider/cipher/cipher_hmac.h"
#include "tests/c/test_hmac_common.h"

extern OSSL_provider_init_fn OSSL_provider_init;

/* ======================== Differential: accelaes against the default provider ======================== */

static OSSL_LIB_CTX *lc;
static EVP_CIPHER *stitched[2][4], *plain[2];   /* plain: default AES-128/256-CBC, the oracle's */
static const char *names[4] = { "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA1",
                                "AES-128-CBC-HMAC-SHA256", "AES-256-CBC-HMAC-SHA256" };

/* A context as libssl sets one up: key and IV, the MAC key, then the version (as an int) and a
 * MAC size of 0 (tls_provider_set_tls_params). */
static EVP_CIPHER_CTX *tls_ctx(int p, int ci, int enc, const uint8_t *key, const uint8_t *iv,
                               const uint8_t *mk, size_t ms, int ver)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    size_t zero = 0;
    OSSL_PARAM prm[3];

    prm[0] = OSSL_PARAM_construct_int(OSSL_CIPHER_PARAM_TLS_VERSION, &ver);
    prm[1] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, &zero);
    prm[2] = OSSL_PARAM_construct_end();
    if (c == NULL || !EVP_CipherInit_ex(c, stitched[p][ci], NULL, key, iv, enc)
        || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_MAC_KEY, (int)ms, (void *)mk) <= 0
        || (ver != 0 && !EVP_CIPHER_CTX_set_params(c, prm))) {
        ERR_print_errors_fp(stderr);
        EVP_CIPHER_CTX_free(c);
        return NULL;
    }
    return c;
}

static int updated_iv(EVP_CIPHER_CTX *c, uint8_t iv[16])
{
    return EVP_CIPHER_CTX_get_updated_iv(c, iv, 16);
}

/* Plain AES-CBC with the given IV (the oracle's view of a record), no padding. */
static int raw_cbc(int ci, int enc, const uint8_t *key, const uint8_t *iv, const uint8_t *in, uint8_t *out,
                   size_t len)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l = 0, ok = c != NULL && EVP_CipherInit_ex(c, plain[ci & 1], NULL, key, iv, enc)
                    && EVP_CIPHER_CTX_set_padding(c, 0) && EVP_CipherUpdate(c, out, &l, in, (int)len);

    EVP_CIPHER_CTX_free(c);
    return ok && (size_t)l == len;
}

static size_t pick_payload(void)
{
    uint64_t r = rnd() % 100;

    return r < 50 ? rnd() % 80 : r < 85 ? rnd() % 2048 : r < 95 ? 16384 - rnd() % 300 : rnd() % 16385;
}

/* One stream per cipher and version: records encrypted by both providers (compared byte for byte
 * and opened by the oracle), decrypted by both (round trip), and crafted records - long padding,
 * damaged padding, MAC or payload, flipped ciphertext bits, short records - opened by both and
 * judged against the oracle. */
static void stream(int ci, int ver, int nrec)
{
    static uint8_t pt[MAXREC], buf[2][MAXREC], body[MAXREC], ct[MAXREC], check_pt[MAXREC];
    const char *nm = names[ci];
    const EVP_MD *md = ci < 2 ? EVP_sha1() : EVP_sha256();
    size_t ms = (size_t)EVP_MD_get_size(md), eiv = ver >= 0x0302 ? 16 : 0;
    uint8_t key[32], iv[16], mk[32], aad[13], civ[2][16], tmp[16];
    EVP_CIPHER_CTX *e[2], *d[2], *x[2];
    uint64_t seq_e = rnd() >> 8, seq_x = rnd() >> 8;

    fill(key, 32);
    fill(iv, 16);
    fill(mk, ms);
    for (int p = 0; p < 2; p++) {
        e[p] = tls_ctx(p, ci, 1, key, iv, mk, ms, ver);
        d[p] = tls_ctx(p, ci, 0, key, iv, mk, ms, ver);
        x[p] = tls_ctx(p, ci, 0, key, iv, mk, ms, ver);
    }
    if (!e[0] || !e[1] || !d[0] || !d[1] || !x[0] || !x[1]) {
        check(0, "context set-up", nm, ver, 0);
        goto done;
    }
    for (int r = 0; r < nrec; r++) {
        size_t payload = pick_payload(), len, got = 0;
        int pad[2], ol[2] = { 0, 0 }, ok[2], damage;

        /* ---- encrypt: both providers, then the oracle ---- */
        fill(pt, eiv + payload);
        aad_of(aad, seq_e, ver, eiv + payload);
        updated_iv(e[DEF], civ[0]);
        for (int p = 0; p < 2; p++) {
            uint8_t a[13];

            memcpy(a, aad, 13);
            memcpy(buf[p], pt, eiv + payload);
            pad[p] = EVP_CIPHER_CTX_ctrl(e[p], EVP_CTRL_AEAD_TLS1_AAD, 13, a);
            ok[p] = pad[p] > 0 && EVP_CipherUpdate(e[p], buf[p], &ol[p], buf[p], (int)(eiv + payload) + pad[p]);
        }
        check(pad[0] == pad[1], "encrypt: same AAD pad", nm, ver, payload);
        check(ok[0] && ok[1] && ol[0] == ol[1], "encrypt: both succeed, same length", nm, ver, payload);
        if (!(ok[0] && ok[1] && ol[0] == ol[1]))
            break;
        len = (size_t)ol[0];
        check(memcmp(buf[0], buf[1], len) == 0, "encrypt: same ciphertext", nm, ver, len);
        check(raw_cbc(ci, 0, key, civ[0], buf[ACC], check_pt, len)
              && memcmp(check_pt + eiv, pt + eiv, payload) == 0
              && ref_verdict(md, mk, ms, aad, check_pt + eiv, len - eiv, &got) && got == payload,
              "encrypt: the oracle finds payload, HMAC and padding", nm, ver, len);
        updated_iv(e[DEF], civ[0]);
        updated_iv(e[ACC], civ[1]);
        check(memcmp(civ[0], civ[1], 16) == 0, "encrypt: same updated IV", nm, ver, len);
        seq_e++;

        /* ---- round trip: both decrypt the record ---- */
        for (int p = 0; p < 2; p++) {
            aad_of(aad, seq_e - 1, ver, len);
            memcpy(ct, buf[ACC], len);
            pad[p] = EVP_CIPHER_CTX_ctrl(d[p], EVP_CTRL_AEAD_TLS1_AAD, 13, aad);
            ok[p] = EVP_CipherUpdate(d[p], ct, &ol[p], ct, (int)len);
            memcpy(buf[p], ct, len);
        }
        check(pad[0] == (int)ms && pad[1] == (int)ms, "decrypt: the AAD pad is the MAC size", nm, ver, len);
        check(ok[0] == 1 && ok[1] == 1 && ol[0] == (int)payload && ol[1] == (int)payload,
              "round trip: both open it, payload length", nm, ver, len);
        check(memcmp(buf[0], buf[1], len) == 0 && memcmp(buf[ACC] + eiv, pt + eiv, payload) == 0,
              "round trip: same buffer, the payload back", nm, ver, len);

        /* ---- crafted and damaged records ---- */
        payload = pick_payload() % 2000;
        damage = (int)(rnd() % 8) - 3;          /* -3..-1: good; 0..3 damaged body; 4 flipped ciphertext */
        {
            size_t pad0 = (32 - (eiv + payload + ms + 1) % 16) % 16, padl = pad0 + 16 * (rnd() % 16);

            if (padl > 255)
                padl = pad0;
            aad_of(aad, seq_x, ver, 0);
            fill(body, eiv);
            len = eiv + make_body(md, mk, ms, aad, body + eiv, payload, padl, damage < 0 || damage > 3 ? -1 : damage);
        }
        if (rnd() % 16 == 0)
            len = eiv + (rnd() % 3) * 16;       /* too short for IV, MAC and padding */
        updated_iv(x[DEF], civ[0]);
        updated_iv(x[ACC], civ[1]);
        check(memcmp(civ[0], civ[1], 16) == 0, "crafted: same IV before", nm, ver, len);
        if (len == 0 || !raw_cbc(ci, 1, key, civ[0], body, ct, len)) {
            check(len == 0, "oracle encryption", nm, ver, len);
            continue;
        }
        if (damage == 4)
            ct[rnd() % len] ^= (uint8_t)(1u << rnd() % 8);
        raw_cbc(ci, 0, key, civ[0], ct, check_pt, len);
        for (int p = 0; p < 2; p++) {
            aad_of(aad, seq_x, ver, len);
            memcpy(buf[p], ct, len);
            EVP_CIPHER_CTX_ctrl(x[p], EVP_CTRL_AEAD_TLS1_AAD, 13, aad);
            ol[p] = -1;
            ok[p] = EVP_CipherUpdate(x[p], buf[p], &ol[p], buf[p], (int)len);
        }
        {
            int good = len >= eiv + ms + 1 && ref_verdict(md, mk, ms, aad, check_pt + eiv, len - eiv, &got);

            check(ok[0] == good && ok[1] == good, good ? "crafted: a good record opens in both"
                                                        : "crafted: a bad record fails in both", nm, ver, len);
            if (good)
                check(ol[0] == (int)got && ol[1] == (int)got, "crafted: payload length", nm, ver, len);
        }
        check(memcmp(buf[0], buf[1], len) == 0, "crafted: same buffer after", nm, ver, len);
        updated_iv(x[DEF], civ[0]);
        updated_iv(x[ACC], civ[1]);
        check(memcmp(civ[0], civ[1], 16) == 0, "crafted: same IV after", nm, ver, len);
        seq_x++;
        /* a copy of the decrypt context carries on as the original (dupctx) */
        if (r == nrec / 2) {
            EVP_CIPHER_CTX *cp = EVP_CIPHER_CTX_new();

            check(cp != NULL && EVP_CIPHER_CTX_copy(cp, x[ACC]), "context copy", nm, ver, 0);
            EVP_CIPHER_CTX_free(x[ACC]);
            x[ACC] = cp;
            check(cp != NULL && updated_iv(cp, tmp) && memcmp(tmp, civ[0], 16) == 0, "copy keeps the IV", nm, ver, 0);
        }
    }
done:
    for (int p = 0; p < 2; p++) {
        EVP_CIPHER_CTX_free(e[p]);
        EVP_CIPHER_CTX_free(d[p]);
        EVP_CIPHER_CTX_free(x[p]);
    }
}

/* The three encrypt paths - fused SHA-NI loop, interleaved engine calls, whole record through
 * the policy (an engine other than AES-NI) - each judged by the oracle. Not under valgrind,
 * which has no SHA-NI. */
static void params(int ci)
{
    const char *nm = names[ci];
    unsigned long fd = EVP_CIPHER_get_flags(stitched[DEF][ci]), fa = EVP_CIPHER_get_flags(stitched[ACC][ci]);

    check(fa == fd, "flags: the default's", nm, 0, 0);
    check((fa & EVP_CIPH_FLAG_AEAD_CIPHER) != 0, "flags: AEAD, which libssl keys on", nm, 0, 0);
    check(EVP_CIPHER_get_mode(stitched[ACC][ci]) == EVP_CIPH_CBC_MODE, "mode CBC", nm, 0, 0);
    check(EVP_CIPHER_get_key_length(stitched[ACC][ci]) == EVP_CIPHER_get_key_length(stitched[DEF][ci])
          && EVP_CIPHER_get_iv_length(stitched[ACC][ci]) == 16 && EVP_CIPHER_get_block_size(stitched[ACC][ci]) == 16,
          "key, IV and block lengths", nm, 0, 0);
}

/* Without an AAD the ciphers are plain AES-CBC (EVP_CipherUpdate and EVP_Cipher), and the
 * requests libssl never makes are refused by both. */
static void plain_and_refused(int ci)
{
    static uint8_t in[4096], out[2][4096];
    const char *nm = names[ci];
    size_t ms = ci < 2 ? 20 : 32;
    uint8_t key[32], iv[16], mk[32], aad[13];
    int ol[2], ok[2];

    fill(key, 32);
    fill(iv, 16);
    fill(mk, 32);
    fill(in, sizeof(in));
    for (int enc = 0; enc <= 1; enc++) {
        EVP_CIPHER_CTX *c[2];

        for (int p = 0; p < 2; p++)
            c[p] = tls_ctx(p, ci, enc, key, iv, mk, ms, 0);
        for (int p = 0; p < 2; p++) {
            ok[p] = c[p] != NULL && EVP_CipherUpdate(c[p], out[p], &ol[p], in, 1024)
                    && EVP_Cipher(c[p], out[p] + 1024, in + 1024, 2048) == 2048;
        }
        check(ok[0] && ok[1] && ol[0] == ol[1] && memcmp(out[0], out[1], 3072) == 0, "plain CBC: same output", nm, enc, 3072);
        for (int p = 0; p < 2; p++)
            ok[p] = EVP_CipherUpdate(c[p], out[p], &ol[p], in, 40);
        check(!ok[0] && !ok[1], "a partial block is refused", nm, enc, 40);
        aad_of(aad, 1, 0x0303, 100);
        check(EVP_CIPHER_CTX_ctrl(c[DEF], EVP_CTRL_AEAD_TLS1_AAD, 12, aad) <= 0
              && EVP_CIPHER_CTX_ctrl(c[ACC], EVP_CTRL_AEAD_TLS1_AAD, 12, aad) <= 0, "a 12-byte AAD is refused", nm, enc, 12);
        if (enc) {
            aad_of(aad, 1, 0x0303, 10);        /* shorter than its explicit IV */
            check(EVP_CIPHER_CTX_ctrl(c[DEF], EVP_CTRL_AEAD_TLS1_AAD, 13, aad) <= 0
                  && EVP_CIPHER_CTX_ctrl(c[ACC], EVP_CTRL_AEAD_TLS1_AAD, 13, aad) <= 0,
                  "an AAD length below the explicit IV is refused", nm, enc, 10);
            aad_of(aad, 1, 0x0303, 100);
            for (int p = 0; p < 2; p++)
                ok[p] = EVP_CIPHER_CTX_ctrl(c[p], EVP_CTRL_AEAD_TLS1_AAD, 13, aad) > 0
                        && EVP_CipherUpdate(c[p], out[p], &ol[p], in, 160);
            check(!ok[0] && !ok[1], "a record longer than its AAD says is refused", nm, enc, 160);
        }
        for (int p = 0; p < 2; p++)
            EVP_CIPHER_CTX_free(c[p]);
    }
    {
        size_t bad = 7;
        OSSL_PARAM prm[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_KEYLEN, &bad), OSSL_PARAM_END };
        EVP_CIPHER_CTX *c = tls_ctx(ACC, ci, 1, key, iv, mk, ms, 0x0303);

        ERR_clear_error();
        check(c != NULL && !EVP_CIPHER_CTX_set_params(c, prm) && ERR_peek_error() != 0,
              "a wrong key length is refused with an error", nm, 0, 0);
        prm[0] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_MAC_KEY, &bad);
        check(c != NULL && !EVP_CIPHER_CTX_set_params(c, prm), "a MAC key that is no octet string is refused", nm, 0, 0);
        EVP_CIPHER_CTX_free(c);
        c = EVP_CIPHER_CTX_new();
        check(c != NULL && EVP_CipherInit_ex(c, stitched[ACC][ci], NULL, NULL, NULL, 1)
              && !EVP_CipherUpdate(c, out[0], &ol[0], in, 64), "no key: refused", nm, 0, 0);
        EVP_CIPHER_CTX_free(c);
        ERR_clear_error();
    }
}

static int differential(void)
{
    static const int versions[] = { 0x0301, 0x0302, 0x0303 };
    OSSL_PROVIDER *pd, *pa;

    lc = OSSL_LIB_CTX_new();
    if (lc == NULL || !OSSL_PROVIDER_add_builtin(lc, "accelaes", OSSL_provider_init)
        || (pd = OSSL_PROVIDER_load(lc, "default")) == NULL || (pa = OSSL_PROVIDER_load(lc, "accelaes")) == NULL) {
        fprintf(stderr, "FAIL: cannot load the providers\n");
        ERR_print_errors_fp(stderr);
        return 0;
    }
    plain[0] = EVP_CIPHER_fetch(lc, "AES-128-CBC", "provider=default");
    plain[1] = EVP_CIPHER_fetch(lc, "AES-256-CBC", "provider=default");
    for (int ci = 0; ci < 4; ci++) {
        stitched[DEF][ci] = EVP_CIPHER_fetch(lc, names[ci], "provider=default");
        stitched[ACC][ci] = EVP_CIPHER_fetch(lc, names[ci], "provider=accelaes");
        if (stitched[ACC][ci] == NULL) {
            fprintf(stderr, "FAIL: accelaes does not offer %s\n", names[ci]);
            return 0;
        }
    }
    if (stitched[DEF][0] == NULL || plain[0] == NULL || plain[1] == NULL) {
        /* The default provider offers the stitched ciphers only on CPUs with AES-NI. */
        printf("test_hmac_differential: SKIP differential part: the default provider has no %s on this CPU\n", names[0]);
    } else {
        for (int ci = 0; ci < 4; ci++) {
            params(ci);
            plain_and_refused(ci);
            for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++)
                stream(ci, versions[v], 120);
        }
    }
    for (int ci = 0; ci < 4; ci++) {
        EVP_CIPHER_free(stitched[DEF][ci]);
        EVP_CIPHER_free(stitched[ACC][ci]);
    }
    EVP_CIPHER_free(plain[0]);
    EVP_CIPHER_free(plain[1]);
    OSSL_PROVIDER_unload(pa);
    OSSL_PROVIDER_unload(pd);
    OSSL_LIB_CTX_free(lc);
    return 1;
}

int main(void)
{
    const char *seed = getenv("ACCELAES_TEST_SEED");

    rng = seed != NULL ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ULL;
    if (rng == 0)
        rng = 1;
    printf("test_hmac_differential: seed %llu\n", (unsigned long long)rng);
    if (!differential())
        failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
