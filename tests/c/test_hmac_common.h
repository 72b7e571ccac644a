/* tests/c/test_hmac_common.h: what the stitched-cipher C tests share (test_hmac_stitched.c,
 * test_hmac_differential.c): the check counter, a seeded generator, the plain RFC 5246 record
 * check and record maker that serve as the oracle, and the TLS AAD. Not a test of its own. */
#ifndef ACCELAES_TEST_HMAC_COMMON_H
#define ACCELAES_TEST_HMAC_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

enum { DEF = 0, ACC = 1 };
#define MAXREC (16 + 16384 + 32 + 256 + 16)
static int passed, failed;
static uint64_t rng;

static void check(int cond, const char *what, const char *ciph, int ver, size_t len)
{
    if (cond) {
        passed++;
        return;
    }
    if (++failed <= 30)
        fprintf(stderr, "FAIL: %s (%s, version 0x%x, %zu bytes, seed %llu)\n", what, ciph, ver, len,
                (unsigned long long)rng);
}

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rnd() >> 24);
}

/* The reference check, written plainly with branches: RFC 5246 6.2.3.2 on a decrypted body. */
static int ref_verdict(const EVP_MD *md, const uint8_t *mk, size_t mkl, const uint8_t *aad,
                       const uint8_t *body, size_t len, size_t *payload)
{
    size_t ms = (size_t)EVP_MD_get_size(md), pad = body[len - 1];
    uint8_t hdr_and_data[13 + MAXREC], mac[64];
    unsigned int ml = 0;

    if (len < ms + 1 + pad)
        return 0;
    for (size_t i = 0; i <= pad; i++)
        if (body[len - 1 - i] != pad)
            return 0;
    *payload = len - ms - 1 - pad;
    memcpy(hdr_and_data, aad, 11);
    hdr_and_data[11] = (uint8_t)(*payload >> 8);
    hdr_and_data[12] = (uint8_t)*payload;
    memcpy(hdr_and_data + 13, body, *payload);
    if (HMAC(md, mk, (int)mkl, hdr_and_data, 13 + *payload, mac, &ml) == NULL)
        return 0;
    return memcmp(mac, body + *payload, ms) == 0;
}

/* A record body = payload | HMAC | padding of pad+1 bytes; damage: -1 none, 0 a padding byte,
 * 1 the MAC, 2 the payload, 3 the length byte. Returns the body length. */
static size_t make_body(const EVP_MD *md, const uint8_t *mk, size_t mkl, const uint8_t *aad11,
                        uint8_t *body, size_t payload, size_t pad, int damage)
{
    size_t ms = (size_t)EVP_MD_get_size(md), len = payload + ms + pad + 1;
    uint8_t hd[13 + MAXREC];
    unsigned int ml;

    fill(body, payload);
    memcpy(hd, aad11, 11);
    hd[11] = (uint8_t)(payload >> 8);
    hd[12] = (uint8_t)payload;
    memcpy(hd + 13, body, payload);
    HMAC(md, mk, (int)mkl, hd, 13 + payload, body + payload, &ml);
    memset(body + payload + ms, (int)pad, pad + 1);
    if (damage == 0 && pad > 0)
        body[len - 2 - rnd() % pad] ^= (uint8_t)(1u << rnd() % 8);
    else if (damage == 1)
        body[payload + rnd() % ms] ^= (uint8_t)(1u << rnd() % 8);
    else if (damage == 2 && payload > 0)
        body[rnd() % payload] ^= (uint8_t)(1u << rnd() % 8);
    else if (damage == 3 || damage == 0)
        body[len - 1] ^= (uint8_t)(1u + rnd() % 255);
    return len;
}

static void aad_of(uint8_t aad[13], uint64_t seq, int ver, size_t len)
{
    for (int i = 0; i < 8; i++)
        aad[i] = (uint8_t)(seq >> (56 - 8 * i));
    aad[8] = 23;
    aad[9] = (uint8_t)(ver >> 8);
    aad[10] = (uint8_t)ver;
    aad[11] = (uint8_t)(len >> 8);
    aad[12] = (uint8_t)len;
}

#pragma GCC diagnostic pop

#endif
