/* provider/cipher/cipher_hmac_multi.c: the TLS 1.1+ multiblock write of the stitched ciphers
 * (OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK_*). For a large SSL_write, libssl asks for 4 or 8 records
 * at once: each gets its own random explicit IV, sequence number and HMAC, and their AES-CBC
 * chains, serial within a record but independent of each other, run side by side in the
 * multi-buffer lanes (accel/mb.h).
 *
 * The records are laid out as the default provider lays them out (same split of the payload,
 * same headers, MACs and padding), so the stream on the wire differs only in the random IVs;
 * and the parameters answer as the default's do, failures included, since libssl falls back to
 * one record at a time on a refused AAD. */
#include <string.h>
#include <openssl/rand.h>
#include "accel/cpu/cpu_features.h"
#include "accel/mb.h"
#include "provider/cipher/cipher_hmac.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

#define BLK ACC_AES_BLOCK
#define HDR 5                     /* type, version, length */
#define AAD_LEN ACC_HMAC_AAD_LEN
#define V_TLS1_1 0x0302
#define MAX_RECS 8

/* A record's encrypted body: payload, MAC, padding, in whole blocks. */
static size_t body_len(size_t payload, size_t ms)
{
    return (payload + ms + BLK) & ~(size_t)(BLK - 1);
}

/* The payload of each of n records: n - 1 of `frag` bytes and a last one of `last`; moved by
 * one byte per record where the last record's MAC input would end just short of a hash block
 * (the default's rule, kept so that both cut a write into the same records). */
static void split(size_t len, unsigned int n, size_t *frag, size_t *last)
{
    *frag = len / n;
    *last = len - *frag * (n - 1);
    if (*last > *frag && (*last + AAD_LEN + 9) % 64 < n - 1) {
        (*frag)++;
        *last -= n - 1;
    }
}

size_t acc_hmac_mb_bufsize(const acc_hmac_ctx *h)
{
    return h->mb_max_frag == 0 ? 0 : HDR + BLK + body_len(h->mb_max_frag, h->sha->md_size);
}

/* The header and sequence number of the next records, and how many records in what output.
 * aad[11..12] is the payload length, or 0 to take len with interleave 4 or 8 (libssl's way). */
int acc_hmac_mb_aad(acc_hmac_ctx *h, const uint8_t *aad, size_t len, unsigned int interleave)
{
    size_t inp = (size_t)aad[11] << 8 | aad[12], frag, last, ms = h->sha->md_size;
    unsigned int n;

    if (!h->aes.enc || ((unsigned int)aad[9] << 8 | aad[10]) < V_TLS1_1)
        return 0;
    if (inp != 0) {
        if (inp < 4096)
            return 0;                   /* too short to pay: one record at a time */
        n = inp >= 8192 && acc_cpu_has(ACC_CPU_AVX2) ? 8 : 4;
    } else if (interleave / 4 == 1 || interleave / 4 == 2) {
        n = interleave / 4 * 4;         /* the default's rounding: 4 to 7 give 4, 8 to 11 give 8 */
        inp = len;
    } else {
        return 0;
    }
    split(inp, n, &frag, &last);
    memcpy(h->mb_aad, aad, AAD_LEN);
    h->mb_interleave = n;
    h->mb_packlen = (n - 1) * (HDR + BLK + body_len(frag, ms)) + HDR + BLK + body_len(last, ms);
    h->mb_aad_set = 1;
    return 1;
}

/* out + i: the 64-bit big-endian sequence number plus i */
static void seq_plus(uint8_t out[8], const uint8_t seq[8], unsigned int i)
{
    unsigned int carry = i;

    for (int k = 7; k >= 0; k--) {
        carry += seq[k];
        out[k] = (uint8_t)carry;
        carry >>= 8;
    }
}

/* HMAC(msg) into mac, with the key's states head and tail. */
static void record_mac(const acc_hmac_ctx *h, const uint8_t *msg, size_t len, uint8_t *mac)
{
    const acc_sha_kind *sha = h->sha;
    uint8_t inner[32];
    acc_sha_state md = h->head;

    sha->update(&md, msg, len);
    sha->final(inner, &md);
    md = h->tail;
    sha->update(&md, inner, sha->md_size);
    sha->final(mac, &md);
    OPENSSL_cleanse(inner, sizeof(inner));
    OPENSSL_cleanse(&md, sizeof(md));
}

/* CBC over every record's body, each from its own IV, once its MAC is in place: the lanes
 * where the AES-NI engine's key schedule can go to them, else one record after the other. */
static int encrypt_bodies(acc_hmac_ctx *h, acc_req *r, unsigned int n, size_t total)
{
    const acc_engine *e = h->aes.eng;

    if (acc_engine_has(e, ACC_CAP_NI_SCHEDULE) && acc_mb_available()) {
        /* no retry on the engine after a failure: bodies may be partly encrypted */
        if (!acc_mb_run(r, n))
            return acc_engine_fail(&h->aes, total);
        acc_sched_count(ACC_PATH_BATCH, total, n);
        return 1;
    }
    for (unsigned int i = 0; i < n; i++)
        if (!e->cbc_enc(acc_cipher_key(&h->aes), r[i].in, r[i].out, r[i].nblocks, r[i].iv))
            return acc_engine_fail(&h->aes, total);
    acc_sched_count(ACC_PATH_INLINE, total, n);
    return 1;
}

/* Every record's MAC, then its CBC. The MAC input (13-byte header, payload) lies just before
 * each body (acc_hmac_mb_encrypt), so that MAC and CBC go to the lanes as one job per record;
 * without lanes (or without a MAC key, whose head state is not a key block's) one after the
 * other. */
static int macs_and_bodies(acc_hmac_ctx *h, acc_req *r, unsigned int n, const size_t plen[], size_t total)
{
    const size_t ms = h->sha->md_size;
    acc_mb_hmac_req m[MAX_RECS];
    uint32_t ipad[8] = { 0 }, opad[8] = { 0 };
    int done = -1;

    if (h->head_len > 0 && acc_engine_has(h->aes.eng, ACC_CAP_NI_SCHEDULE)) {
        h->sha->chain(&h->head, ipad);
        h->sha->chain(&h->tail, opad);
        for (unsigned int i = 0; i < n; i++) {
            m[i].msg = r[i].in - AAD_LEN;
            m[i].len = AAD_LEN + plen[i];
            m[i].tag = r[i].out + plen[i];
            m[i].cbc = r[i].out;
            m[i].nblocks = r[i].nblocks;
            m[i].iv = r[i].iv;
        }
        done = acc_mb_hmac_run(ms, ipad, opad, acc_cipher_key(&h->aes), m, n);
        OPENSSL_cleanse(ipad, sizeof(ipad));
        OPENSSL_cleanse(opad, sizeof(opad));
    }
    if (done == 0)
        return acc_engine_fail(&h->aes, total);
    if (done > 0) {
        acc_sched_count(ACC_PATH_BATCH, total, n);
        return 1;
    }
    for (unsigned int i = 0; i < n; i++)
        record_mac(h, r[i].in - AAD_LEN, AAD_LEN + plen[i], r[i].out + plen[i]);
    return encrypt_bodies(h, r, n, total);
}

/* The records of the last AAD from in[0..len) into out; returns the bytes written, 0 when
 * refused. out has room for the AAD's packlen (libssl sized it so; it cannot be checked). */
size_t acc_hmac_mb_encrypt(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len, unsigned int interleave)
{
    const size_t ms = h->sha->md_size;
    uint8_t ivs[MAX_RECS][BLK], chain[MAX_RECS][BLK], *body[MAX_RECS];
    acc_req r[MAX_RECS];
    size_t frag, last, at = 0, total = 0, plen[MAX_RECS];
    unsigned int n = interleave;

    if (!h->aes.key_set || !h->mb_aad_set || (n != 4 && n != 8) || len < n || out == NULL || in == NULL)
        return 0;
    split(len, n, &frag, &last);
    if ((n - 1) * (HDR + BLK + body_len(frag, ms)) + HDR + BLK + body_len(last, ms) > h->mb_packlen
        || (out < in + len && in < out + h->mb_packlen)) {
        acc_raise(ACC_R_INVALID_PARAMETER, "multiblock write of %zu bytes does not match its AAD", len);
        return 0;
    }
    if (RAND_bytes_ex(h->aes.prov->libctx, &ivs[0][0], (size_t)n * BLK, 0) <= 0)
        return 0;
    /* Each record's payload goes to its place in out with its MAC input header (sequence number
     * + i, type, version, payload length) in the 13 bytes before it, where header and IV go
     * once the MACs are done: one contiguous message per record for the MAC lanes. */
    for (unsigned int i = 0; i < n; i++, in += frag) {
        plen[i] = i + 1 == n ? last : frag;
        body[i] = out + at + HDR + BLK;
        memcpy(body[i], in, plen[i]);
        seq_plus(body[i] - AAD_LEN, h->mb_aad, i);
        memcpy(body[i] - AAD_LEN + 8, h->mb_aad + 8, 3);
        body[i][-2] = (uint8_t)(plen[i] >> 8);
        body[i][-1] = (uint8_t)plen[i];
        at += HDR + BLK + body_len(plen[i], ms);
    }
    memset(r, 0, sizeof(r));
    for (unsigned int i = 0; i < n; i++) {
        size_t blen = body_len(plen[i], ms);

        memset(body[i] + plen[i] + ms, (int)(blen - plen[i] - ms - 1), blen - plen[i] - ms);
        r[i].op = ACC_OP_CBC_ENC;
        r[i].key = acc_cipher_key(&h->aes);
        memcpy(chain[i], ivs[i], BLK);   /* the CBC may move it on; ivs[i] is sent */
        r[i].iv = chain[i];
        r[i].in = r[i].out = body[i];
        r[i].nblocks = blen / BLK;
        total += blen;
    }
    if (!macs_and_bodies(h, r, n, plen, total))
        at = 0;
    /* the MAC inputs' headers give way to the records' headers and explicit IVs */
    for (unsigned int i = 0; i < n && at > 0; i++) {
        uint8_t *rec = body[i] - HDR - BLK;
        size_t blen = body_len(plen[i], ms);

        memcpy(rec, h->mb_aad + 8, 3);
        rec[3] = (uint8_t)((BLK + blen) >> 8);
        rec[4] = (uint8_t)(BLK + blen);
        memcpy(rec + HDR, ivs[i], BLK);
    }
    OPENSSL_cleanse(ivs, sizeof(ivs));
    OPENSSL_cleanse(chain, sizeof(chain));
    return at;
}
