/* provider/cipher/cipher_hmac_record.c: one TLS record through a stitched AES-CBC-HMAC-SHA cipher:
 * HMAC, padding and AES-CBC (the engine, through the offload policy) to encrypt; to decrypt, the
 * padding and MAC check in constant time with respect to the padding length (Lucky 13). */

/* SHA1_Transform / SHA256_Transform (one compression, no counters) are deprecated in 3.0 but
 * exported; the constant-time MAC check needs exactly them. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <string.h>
#include <openssl/async.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include "provider/cipher/cipher_hmac.h"
#include "provider/base/ct.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

#define BLK ACC_AES_BLOCK
#define SHA_BLK 64                 /* SHA-1 and SHA-256 block */
#define MAX_MD 32
#define AAD_LEN ACC_HMAC_AAD_LEN
/* blocks that may end the inner hash: 255 bytes of padding + 8 of length + rounding */
#define SPAN_BLOCKS 6
/* encrypt: bytes hashed then encrypted per interleaved step */
#define STEP 64
#define V_TLS1_1 0x0302

/* The constant-time masks (acc_ct_lt, acc_ct_ge, acc_ct_eq, acc_ct_is_zero, acc_ct_barrier) are
 * provider/base/ct.h's, shared with tls.c. */

/* Errors as the default provider's stitched ciphers give them: a record its cipher function
 * refuses fails the update (or EVP_Cipher) with PROV_R_CIPHER_OPERATION_FAILED, whatever the
 * check was; a record header it refuses fails the parameter call with no error at all. */
#define RECORD_FAILED ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED)

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
 * corrected length back into it; libssl never reads it again). A header of the wrong size, or
 * one whose record cannot hold its explicit IV, is refused with no error raised: the default
 * provider raises none, and EVP_CIPHER_CTX_ctrl's caller sees the same 0 and empty queue. */
int acc_hmac_set_aad(acc_hmac_ctx *h, const uint8_t *p, size_t n)
{
    const size_t ms = h->sha->md_size;
    uint8_t aad[AAD_LEN];
    size_t len;

    if (n != AAD_LEN)
        return 0;
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
        if (len < BLK)
            return 0;
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
    return len == 0 || acc_policy_blocks(&h->aes, in, out, len);   /* which raises its own error */
}

/* Hash the payload and CBC-encrypt it in small steps, so that the CPU overlaps the SHA rounds
 * with the latency-bound CBC chain (what the default provider's stitched assembly does). The
 * AES-NI engine is called directly: per step, the policy's checks would cost more than they
 * could win on a record-sized request, which is never split or sent to the GPU. *done: how
 * many bytes from the record's start are encrypted; *hashed: where hashing got to. Returns the
 * engine's 1 or 0 (AES-NI cannot fail, but a record must not go out half-encrypted if one did). */
static int interleave(acc_hmac_ctx *h, uint8_t *out, size_t iv, size_t plen, size_t *hashed,
                      size_t *done)
{
    const acc_engine *e = h->aes.eng;
    const size_t whole = plen & ~(size_t)(BLK - 1);
    size_t d = 0;

    *hashed = iv;
    for (; whole - d >= STEP; d += STEP) {
        if (d + STEP > *hashed) {             /* plaintext is hashed before it is overwritten */
            h->sha->update(&h->md, out + *hashed, d + STEP - *hashed);
            *hashed = d + STEP;
        }
        if (!e->cbc_enc(acc_cipher_key(&h->aes), out + d, out + d, STEP / BLK, h->aes.iv))
            return 0;
    }
    *done = d;
    return 1;
}

/* plen: the record's payload length, explicit IV included, from the AAD. */
static int encrypt_record(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len, size_t plen)
{
    const acc_sha_kind *sha = h->sha;
    const size_t ms = sha->md_size;
    const size_t iv = h->aad_version >= V_TLS1_1 ? BLK : 0;
    const size_t want = (plen + ms + BLK) & ~(size_t)(BLK - 1);
    size_t done = 0, hashed = iv;
    uint8_t inner[MAX_MD];

    if (plen < iv || len != want) {
        acc_raise(RECORD_FAILED, "a %zu-byte TLS record with its MAC and padding takes %zu bytes, not %zu",
                  plen, want, len);
        return 0;
    }
    if (in != out)
        memmove(out, in, plen);
    /* Inside an ASYNC job the whole record goes to the policy, which may batch it with other
     * jobs' records in multi-buffer lanes; elsewhere, on AES-NI, hashing and AES run fused
     * (SHA-NI) or interleaved in small steps, and the rest of the record goes to the policy. */
    if (acc_engine_has(h->aes.eng, ACC_CAP_NI_SCHEDULE) && ASYNC_get_current_job() == NULL) {
        if (acc_hmac_stitch_usable(h))
            done = acc_hmac_stitch(h, out, iv, plen, &hashed);
        else if (!interleave(h, out, iv, plen, &hashed, &done))
            return acc_engine_fail(&h->aes, plen);
        acc_sched_count(ACC_PATH_INLINE, done, 0);
    }
    sha->update(&h->md, out + hashed, plen - hashed);
    sha->final(inner, &h->md);
    h->md = h->tail;
    sha->update(&h->md, inner, ms);
    sha->final(out + plen, &h->md);
    OPENSSL_cleanse(inner, sizeof(inner));
    memset(out + plen + ms, (int)(len - plen - ms - 1), len - plen - ms);
    return run_blocks(h, out + done, out + done, len - done);
}

/* 8 bytes as a little-endian word: byte i of memory is bits 8i..8i+7 */
static inline uint64_t load_le(const uint8_t *p)
{
    uint64_t w;

    memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static inline void store_le(uint8_t *p, uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    memcpy(p, &w, 8);
}

/* The blocks of the inner hash that may end the message, header | payload | 0x80 | zeros |
 * bit length in the block that really ends it, built 8 bytes at a time with masks. span holds
 * the stream bytes from block `first` on, as they are in the record (public ranges only). */
static void mask_span(uint8_t *span, size_t nblk, size_t first, size_t vlen, size_t fin, uint64_t bits)
{
    for (size_t k = 0; k < nblk * SHA_BLK / 8; k++) {
        size_t p = first * SHA_BLK + 8 * k;
        size_t before = acc_ct_lt(vlen, p), after = acc_ct_ge(vlen, p + 8);
        size_t inside = ~before & ~after;                /* the message ends in this word */
        size_t d = (vlen - p) & inside & 7;              /* bytes of it kept */
        uint64_t keep = (uint64_t)after | ((uint64_t)inside & (((uint64_t)1 << (8 * d)) - 1));
        uint64_t w = (load_le(span + 8 * k) & keep) | ((uint64_t)inside & ((uint64_t)0x80 << (8 * d)));

        if (k % 8 == 7)                                  /* bytes 56..63: the big-endian bit length */
            w |= (uint64_t)acc_ct_eq(first + k / 8, fin) & __builtin_bswap64(bits);
        store_le(span + 8 * k, w);
    }
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
    const size_t nblk = (vmax + 8) / SHA_BLK + 1 - first; /* to the last block the longest needs */
    const size_t w0 = len - 1 - maxpad - ms;             /* first byte that may be MAC */
    size_t pad = rec[len - 1], good, plen, vlen, fin, shift, cnt = 0, diff = 0;
    uint8_t aad[AAD_LEN], span[SPAN_BLOCKS * SHA_BLK], inner[MAX_MD], mac[MAX_MD], rot[MAX_MD];
    uint32_t w[8], acc[8];
    acc_sha_state md;

    good = acc_ct_ge(maxpad, pad);
    pad = (pad & good) | (maxpad & ~good);
    plen = len - ms - 1 - pad;
    vlen = AAD_LEN + plen;
    fin = (vlen + 8) / SHA_BLK;                          /* the block with the bit length */
    memcpy(aad, h->aad, AAD_LEN - 2);
    aad[AAD_LEN - 2] = (uint8_t)(plen >> 8);
    aad[AAD_LEN - 1] = (uint8_t)plen;

    md = h->head;                                        /* head holds whole blocks only */
    if (first > 0) {                                     /* payload for every padding length */
        sha->update(&md, aad, AAD_LEN);
        sha->update(&md, rec, first * SHA_BLK - AAD_LEN);
    }
    memset(span, 0, sizeof(span));
    {
        size_t from = first * SHA_BLK, to = from + nblk * SHA_BLK;   /* stream positions */

        if (from < AAD_LEN)
            memcpy(span, aad + from, AAD_LEN - from);
        if (from < AAD_LEN + len) {
            size_t r0 = from > AAD_LEN ? from - AAD_LEN : 0, r1 = to - AAD_LEN < len ? to - AAD_LEN : len;

            memcpy(span + (r0 + AAD_LEN - from), rec + r0, r1 - r0);
        }
    }
    mask_span(span, nblk, first, vlen, fin, (uint64_t)(h->head_len + vlen) * 8);
    memset(acc, 0, sizeof(acc));
    for (size_t b = 0; b < nblk; b++) {
        uint32_t is_fin = (uint32_t)acc_ct_eq(first + b, fin);

        sha->compress(&md, span + b * SHA_BLK);
        sha->chain(&md, w);
        for (size_t k = 0; k < 8; k++)
            acc[k] |= w[k] & is_fin;
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
    for (size_t j = w0, end = plen + ms; j < len; j++) {
        /* hidden, or gcc counts the loop in j - end and derives the load address from it */
        size_t jh = acc_ct_barrier(j), in_pad = acc_ct_ge(jh, end);

        diff |= in_pad & (rec[j] ^ pad);
        rot[cnt] |= rec[j] & (uint8_t)(acc_ct_ge(jh, plen) & ~in_pad);
        if (++cnt == ms)
            cnt = 0;
    }
    /* The MAC's first byte is at rot[(plen - w0) mod ms]: the remainder by masked subtractions
     * of 8, 4, 2 and 1 times ms (plen - w0 <= 255 < 16 * ms), no division. */
    shift = plen - w0;
    for (size_t m = 8; m > 0; m >>= 1)
        shift -= acc_ct_ge(shift, m * ms) & (m * ms);
    /* Rotate rot[] left by shift (< ms <= 32) in five masked steps of 1, 2, 4, 8 and 16 bytes:
     * every byte is read at every step, whatever the shift. */
    for (unsigned int bit = 0; bit < 5; bit++) {
        const size_t step = (size_t)1 << bit;          /* < ms: ms is 20 or 32 */
        const uint64_t take = 0 - (uint64_t)((shift >> bit) & 1);
        uint8_t tmp[MAX_MD] = { 0 };

        memcpy(tmp, rot + step, ms - step);
        memcpy(tmp + ms - step, rot, step);
        for (size_t i = 0; i < MAX_MD; i += 8)
            store_le(rot + i, (load_le(tmp + i) & take) | (load_le(rot + i) & ~take));
    }
    for (size_t k = 0; k < ms; k++)
        diff |= rot[k] ^ mac[k];
    good &= acc_ct_is_zero(diff);
    OPENSSL_cleanse(&md, sizeof(md));
    OPENSSL_cleanse(span, sizeof(span));
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
        acc_raise(RECORD_FAILED, "TLS record of %zu bytes cannot hold %sa %zu-byte MAC and padding",
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
        acc_raise(RECORD_FAILED, "%zu bytes: whole 16-byte blocks are needed", len);
        return 0;
    }
    if (plen == ACC_HMAC_NO_PAYLOAD)
        return run_blocks(h, in, out, len);
    return h->aes.enc ? encrypt_record(h, out, in, len, plen) : decrypt_record(h, out, in, len);
}
