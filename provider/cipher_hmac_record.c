/* provider/cipher_hmac_record.c: one TLS record through a stitched AES-CBC-HMAC-SHA cipher:
 * HMAC, padding and AES-CBC (the engine, through the offload policy) to encrypt; to decrypt, the
 * padding and MAC check in constant time with respect to the padding length (Lucky 13). */

/* SHA1_Transform / SHA256_Transform (one compression, no counters) are deprecated in 3.0 but
 * exported; the constant-time MAC check needs exactly them. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include "provider/cipher.h"
#include "provider/cipher_hmac.h"
#include "provider/prov.h"

#define BLK ACC_AES_BLOCK
#define SHA_BLK 64                 /* SHA-1 and SHA-256 block */
#define MAX_MD 32
#define AAD_LEN ACC_HMAC_AAD_LEN
#define V_TLS1_1 0x0302

/* ======================== Constant-time masks ========================
 * all ones / zero; the barrier hides from gcc that a value is a mask, so that it cannot turn a
 * masked select back into a branch. Arguments stay below 2^63 (record lengths). */

static inline size_t mask_hide(size_t m)
{
    __asm__("" : "+r"(m));
    return m;
}

static inline size_t mask_lt(size_t a, size_t b)
{
    return mask_hide((size_t)0 - ((a - b) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t mask_ge(size_t a, size_t b)
{
    return ~mask_lt(a, b);
}

static inline size_t mask_zero(size_t a)
{
    return mask_hide((size_t)0 - ((~a & (a - 1)) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t mask_eq(size_t a, size_t b)
{
    return mask_zero(a ^ b);
}

/* ======================== The two hashes ======================== */

static void s1_init(acc_sha_state *s) { SHA1_Init(&s->s1); }
static void s1_update(acc_sha_state *s, const void *p, size_t n) { SHA1_Update(&s->s1, p, n); }
static void s1_final(uint8_t *md, acc_sha_state *s) { SHA1_Final(md, &s->s1); }
static void s1_compress(acc_sha_state *s, const uint8_t *b) { SHA1_Transform(&s->s1, b); }
static void s1_chain(const acc_sha_state *s, uint32_t w[8])
{
    w[0] = s->s1.h0; w[1] = s->s1.h1; w[2] = s->s1.h2; w[3] = s->s1.h3; w[4] = s->s1.h4;
}

static void s256_init(acc_sha_state *s) { SHA256_Init(&s->s256); }
static void s256_update(acc_sha_state *s, const void *p, size_t n) { SHA256_Update(&s->s256, p, n); }
static void s256_final(uint8_t *md, acc_sha_state *s) { SHA256_Final(md, &s->s256); }
static void s256_compress(acc_sha_state *s, const uint8_t *b) { SHA256_Transform(&s->s256, b); }
static void s256_chain(const acc_sha_state *s, uint32_t w[8])
{
    memcpy(w, s->s256.h, 8 * sizeof(uint32_t));
}

const acc_sha_kind acc_hmac_sha1 = { 20, 0, s1_init, s1_update, s1_final, s1_compress, s1_chain };
const acc_sha_kind acc_hmac_sha256 = { 32, 1, s256_init, s256_update, s256_final, s256_compress, s256_chain };

/* ======================== Key and record header ======================== */

void acc_hmac_set_mac_key(acc_hmac_ctx *h, const uint8_t *key, size_t len)
{
    const acc_sha_kind *sha = h->sha;
    uint8_t k[SHA_BLK];

    memset(k, 0, sizeof(k));
    if (len > SHA_BLK) {          /* HMAC: a key longer than a block is hashed first */
        sha->init(&h->md);
        sha->update(&h->md, key, len);
        sha->final(k, &h->md);
    } else if (len > 0) {
        memcpy(k, key, len);
    }
    for (size_t i = 0; i < SHA_BLK; i++)
        k[i] ^= 0x36;
    sha->init(&h->head);
    sha->update(&h->head, k, SHA_BLK);
    for (size_t i = 0; i < SHA_BLK; i++)
        k[i] ^= 0x36 ^ 0x5c;
    sha->init(&h->tail);
    sha->update(&h->tail, k, SHA_BLK);
    h->head_len = SHA_BLK;
    OPENSSL_cleanse(k, sizeof(k));
}

/* Encrypting, the header's length field counts a TLS 1.1+ explicit IV, which the MAC does not
 * cover; decrypting, the payload length is known only after the padding check, so the header
 * is kept for then. The caller's buffer is not written to (the default provider writes the
 * corrected length back into it; libssl never reads it again). */
int acc_hmac_set_aad(acc_hmac_ctx *h, const uint8_t *p, size_t n)
{
    const size_t ms = h->sha->md_size;
    uint8_t aad[AAD_LEN];
    size_t len;

    if (n != AAD_LEN) {
        acc_raise(ACC_R_INVALID_PARAMETER, "TLS AAD of %zu bytes, expected %d", n, AAD_LEN);
        return 0;
    }
    len = (size_t)p[11] << 8 | p[12];
    if (!h->aes.enc) {
        memcpy(h->aad, p, AAD_LEN);
        h->payload_len = AAD_LEN;
        h->aad_pad = ms;
        return 1;
    }
    memcpy(aad, p, AAD_LEN);
    h->aad_version = (unsigned int)p[9] << 8 | p[10];
    if (h->aad_version >= V_TLS1_1) {
        if (len < BLK) {
            acc_raise(ACC_R_TLS_RECORD, "TLS record of %zu bytes cannot hold its explicit IV", len);
            return 0;
        }
        len -= BLK;
        aad[11] = (uint8_t)(len >> 8);
        aad[12] = (uint8_t)len;
    }
    h->payload_len = (size_t)p[11] << 8 | p[12];
    h->md = h->head;
    h->sha->update(&h->md, aad, AAD_LEN);
    h->aad_pad = ((len + ms + BLK) & ~(size_t)(BLK - 1)) - len;
    return 1;
}

/* ======================== Records ======================== */

static int run_blocks(acc_hmac_ctx *h, const uint8_t *in, uint8_t *out, size_t len)
{
    if (len > 0 && !acc_policy_blocks(&h->aes, in, out, len)) {
        acc_raise(ACC_R_ENGINE_FAILURE, "processing %zu bytes failed", len);
        return 0;
    }
    return 1;
}

/* plen: the record's payload length, explicit IV included, from the AAD. */
static int encrypt_record(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len, size_t plen)
{
    const acc_sha_kind *sha = h->sha;
    const size_t ms = sha->md_size;
    const size_t iv = h->aad_version >= V_TLS1_1 ? BLK : 0;
    const size_t want = (plen + ms + BLK) & ~(size_t)(BLK - 1);
    uint8_t inner[MAX_MD];

    if (plen < iv || len != want) {
        acc_raise(ACC_R_TLS_RECORD, "a %zu-byte TLS record with its MAC and padding takes %zu bytes, not %zu",
                  plen, want, len);
        return 0;
    }
    if (in != out)
        memmove(out, in, plen);
    sha->update(&h->md, out + iv, plen - iv);
    sha->final(inner, &h->md);
    h->md = h->tail;
    sha->update(&h->md, inner, ms);
    sha->final(out + plen, &h->md);
    OPENSSL_cleanse(inner, sizeof(inner));
    memset(out + plen + ms, (int)(len - plen - ms - 1), len - plen - ms);
    return run_blocks(h, out, out, len);
}

/* The check of a decrypted record rec[0..len) = payload | MAC | padding, len >= ms + 1.
 * The padding length, hence the payload length and the MAC's place, is secret: nothing here
 * branches on it or uses it in an address. The inner hash runs over as many blocks as the longest
 * payload needs, keeping the state after the block that really ends the message; the record's
 * MAC is gathered rotated by an unknown amount and compared through masks. Returns all ones for
 * good padding and a matching MAC, else 0. */
static size_t verify_record(const acc_hmac_ctx *h, const uint8_t *rec, size_t len)
{
    const acc_sha_kind *sha = h->sha;
    const size_t ms = sha->md_size;
    const size_t maxpad = len - ms - 1 > 255 ? 255 : len - ms - 1;
    const size_t vmax = AAD_LEN + len - ms - 1;          /* longest header + payload */
    const size_t first = (vmax - maxpad) / SHA_BLK;      /* first block the shortest one ends in */
    const size_t last = (vmax + 8) / SHA_BLK;            /* last block the longest one needs */
    size_t pad = rec[len - 1], good, plen, vlen, fin, bits, shift = 0, cnt = 0, diff = 0;
    uint8_t aad[AAD_LEN], block[SHA_BLK], inner[MAX_MD], mac[MAX_MD], rot[MAX_MD];
    uint32_t w[8], acc[8];
    acc_sha_state md;

    good = mask_ge(maxpad, pad);
    pad = (pad & good) | (maxpad & ~good);
    plen = len - ms - 1 - pad;
    vlen = AAD_LEN + plen;
    fin = (vlen + 8) / SHA_BLK;                          /* the block with the bit length */
    bits = (h->head_len + vlen) * 8;
    memcpy(aad, h->aad, AAD_LEN - 2);
    aad[AAD_LEN - 2] = (uint8_t)(plen >> 8);
    aad[AAD_LEN - 1] = (uint8_t)plen;

    md = h->head;                                        /* head holds whole blocks only */
    if (first > 0) {                                     /* payload for every padding length */
        sha->update(&md, aad, AAD_LEN);
        sha->update(&md, rec, first * SHA_BLK - AAD_LEN);
    }
    memset(acc, 0, sizeof(acc));
    for (size_t b = first; b <= last; b++) {
        size_t is_fin = mask_eq(b, fin);

        for (size_t i = 0; i < SHA_BLK; i++) {
            size_t pos = b * SHA_BLK + i;
            uint8_t v = pos < AAD_LEN ? aad[pos] : pos - AAD_LEN < len ? rec[pos - AAD_LEN] : 0;

            v &= (uint8_t)mask_lt(pos, vlen);
            v |= (uint8_t)mask_eq(pos, vlen) & 0x80;
            if (i >= SHA_BLK - 8)
                v |= (uint8_t)is_fin & (uint8_t)(bits >> (8 * (SHA_BLK - 1 - i)));
            block[i] = v;
        }
        sha->compress(&md, block);
        sha->chain(&md, w);
        for (size_t k = 0; k < 8; k++)
            acc[k] |= w[k] & (uint32_t)is_fin;
    }
    for (size_t k = 0; k < ms / 4; k++) {
        inner[4 * k] = (uint8_t)(acc[k] >> 24);
        inner[4 * k + 1] = (uint8_t)(acc[k] >> 16);
        inner[4 * k + 2] = (uint8_t)(acc[k] >> 8);
        inner[4 * k + 3] = (uint8_t)acc[k];
    }
    md = h->tail;
    sha->update(&md, inner, ms);
    sha->final(mac, &md);

    /* Every byte that may be MAC or padding: the padding bytes must equal pad, the MAC bytes
     * go to rot[] at (position - window start) mod ms. */
    memset(rot, 0, sizeof(rot));
    for (size_t j = len - 1 - maxpad - ms; j < len; j++) {
        size_t in_mac = mask_ge(j, plen) & mask_lt(j, plen + ms);

        diff |= mask_ge(j, plen + ms) & (rec[j] ^ pad);
        rot[cnt] |= rec[j] & (uint8_t)in_mac;
        shift |= cnt & mask_eq(j, plen);
        if (++cnt == ms)
            cnt = 0;
    }
    for (size_t k = 0; k < ms; k++) {
        uint8_t b = 0;

        for (size_t i = 0; i < ms; i++)
            b |= rot[i] & (uint8_t)mask_eq(i, shift);
        diff |= b ^ mac[k];
        shift = (shift + 1) & mask_lt(shift + 1, ms);
    }
    good &= mask_zero(diff);
    OPENSSL_cleanse(&md, sizeof(md));
    OPENSSL_cleanse(block, sizeof(block));
    OPENSSL_cleanse(inner, sizeof(inner));
    OPENSSL_cleanse(mac, sizeof(mac));
    OPENSSL_cleanse(rot, sizeof(rot));
    OPENSSL_cleanse(acc, sizeof(acc));
    OPENSSL_cleanse(w, sizeof(w));
    return good;
}

static int decrypt_record(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len)
{
    const size_t ms = h->sha->md_size;
    const size_t iv = ((unsigned int)h->aad[9] << 8 | h->aad[10]) >= V_TLS1_1 ? BLK : 0;

    if (h->sha->iv_block_decrypted && !run_blocks(h, in, out, len))
        return 0;
    if (len < iv + ms + 1) {
        acc_raise(ACC_R_TLS_RECORD, "TLS record of %zu bytes cannot hold %sa %zu-byte MAC and padding",
                  len, iv ? "an explicit IV, " : "", ms);
        return 0;
    }
    if (!h->sha->iv_block_decrypted) {
        if (iv > 0)
            memcpy(h->aes.iv, in, BLK);
        if (!run_blocks(h, in + iv, out + iv, len - iv))
            return 0;
    }
    /* all ones -> 1, zero -> -1, without a branch on the verdict */
    return (int)(verify_record(h, out + iv, len - iv) & 2) - 1;
}

int acc_hmac_cipher(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len)
{
    size_t plen = h->payload_len;

    h->payload_len = ACC_HMAC_NO_PAYLOAD;      /* an AAD serves one record */
    if (len % BLK != 0) {
        acc_raise(ACC_R_WRONG_FINAL_BLOCK_LENGTH, "%zu bytes: whole 16-byte blocks are needed", len);
        return 0;
    }
    if (plen == ACC_HMAC_NO_PAYLOAD)
        return run_blocks(h, in, out, len);
    return h->aes.enc ? encrypt_record(h, out, in, len, plen) : decrypt_record(h, out, in, len);
}
