/* provider/cipher/tls.c: TLS 1.0-1.2 (and SSL 3.0 / DTLS) CBC record handling, as libssl drives it
 * through OSSL_CIPHER_PARAM_TLS_VERSION / _TLS_MAC_SIZE / _TLS_MAC: one update = one record. */
#include <limits.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include "provider/base/ct.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "provider/cipher/tls.h"

/* Protocol version numbers as they travel on the wire (libssl passes its s->version). */
#define V_SSL3     0x0300
#define V_TLS1     0x0301
#define V_TLS1_1   0x0302
#define V_TLS1_2   0x0303
#define V_DTLS1    0xFEFF
#define V_DTLS1_2  0xFEFD
#define V_DTLS_BAD 0x0100  /* pre-RFC DTLS as OpenSSL still speaks it */

#define TLS_MAX_MAC   64   /* EVP_MAX_MD_SIZE: the largest HMAC a CBC suite can carry */
#define TLS_MAX_PAD  256   /* padding bytes including the length byte */
#define BLK ACC_AES_BLOCK

/* Constant-time: the padding length and so the MAC position are secret (Lucky 13, padding
 * oracles): every decision that depends on them is a mask (acc_ct_*, provider/base/ct.h), never a branch
 * or a memory index.
 *
 * Errors: the default provider answers every refused record, whatever the cause, with
 * PROV_R_CIPHER_OPERATION_FAILED (ciphercommon.c's TLS branch), and so does this file: libssl and
 * the applications above it see the same error. The printf detail says which check it was. */
#define RECORD_FAILED ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED)

static int version_known(unsigned int v)
{
    switch (v) {
    case V_SSL3: case V_TLS1: case V_TLS1_1: case V_TLS1_2:
    case V_DTLS1: case V_DTLS1_2: case V_DTLS_BAD:
        return 1;
    default:
        return 0;
    }
}

/* TLS 1.1 and later (and every DTLS) send a fresh explicit IV as the record's first block. */
static int version_explicit_iv(unsigned int v)
{
    return v != V_SSL3 && v != V_TLS1;
}

static void mac_release(acc_cipher_ctx *ctx)
{
    if (ctx->tlsmac != NULL && ctx->tlsmac_alloced) {
        OPENSSL_cleanse(ctx->tlsmac, ctx->tlsmacsize);
        OPENSSL_free(ctx->tlsmac);
    }
    ctx->tlsmac = NULL;
    ctx->tlsmac_alloced = 0;
}

/* ==== Decrypt: padding check and MAC extraction ==== */

/* Check the padding of rec[0..len) in constant time. Returns an all-ones mask when it is
 * good and sets *padl to the bytes to strip (length byte included); with bad padding the
 * mask is 0 and *padl is 0, so the caller keeps going as if there were none. */
static size_t check_padding(unsigned int version, const uint8_t *rec, size_t len,
                            size_t overhead, size_t *padl)
{
    size_t plen = rec[len - 1];
    size_t good = acc_ct_ge(len, overhead + plen);

    if (version == V_SSL3) {
        /* SSL 3.0 pads with arbitrary bytes, but never more than one block */
        good &= acc_ct_ge(BLK, plen + 1);
    } else {
        /* Every one of the plen+1 final bytes equals plen. Which bytes those are is secret,
         * so the last 256 (or all, when shorter) are always read and masked. */
        size_t n = len < TLS_MAX_PAD ? len : TLS_MAX_PAD;
        uint8_t diff = 0;

        for (size_t i = 0; i < n; i++) {
            /* the barrier on i stops gcc from deriving the load address from plen - i */
            uint8_t in_pad = (uint8_t)acc_ct_ge(plen, acc_ct_barrier(i));
            diff |= in_pad & (uint8_t)(rec[len - 1 - i] ^ plen);
        }
        good &= acc_ct_is_zero(diff);
    }
    *padl = good & (plen + 1);
    return good;
}

/* Copy the MAC that ends at rec[mac_end] out of rec[0..len) without letting mac_end (secret)
 * steer a branch or an address: every byte of the window it can lie in is read, the MAC is
 * gathered into a buffer rotated by an unknown amount, then rotated back with masks. With
 * good == 0 a random MAC is emitted instead, so that libssl's check fails in the same time. */
static int extract_mac(acc_cipher_ctx *ctx, const uint8_t *rec, size_t len, size_t mac_end,
                       size_t good)
{
    const size_t ms = ctx->tlsmacsize;
    const size_t mac_start = mac_end - ms;
    uint8_t rot[TLS_MAX_MAC], rnd[TLS_MAX_MAC], *out;
    size_t first = 0, shift = 0, j = 0, in_mac = 0;
    OSSL_LIB_CTX *lc = NULL;

    if (ctx->prov != NULL)
        lc = ctx->prov->priv_libctx != NULL ? ctx->prov->priv_libctx : ctx->prov->libctx;
    if (RAND_bytes_ex(lc, rnd, ms, 0) <= 0) {
        acc_raise(RECORD_FAILED, "no random MAC for a TLS record");
        return 0;
    }
    out = OPENSSL_malloc(ms);
    if (out == NULL) {
        acc_raise(RECORD_FAILED, "no memory for a TLS record's MAC");
        return 0;
    }

    /* The MAC starts at most 256 bytes (the longest padding) before its latest position. */
    if (len > ms + TLS_MAX_PAD)
        first = len - (ms + TLS_MAX_PAD);
    memset(rot, 0, sizeof(rot));
    for (size_t i = first; i < len; i++) {
        size_t starts = acc_ct_eq(i, mac_start);

        in_mac = (in_mac | starts) & acc_ct_lt(i, mac_end);
        shift |= j & starts;            /* where in rot[] the MAC's first byte went */
        rot[j] |= rec[i] & (uint8_t)in_mac;
        j++;
        j &= acc_ct_lt(j, ms);              /* j = (i - first) mod ms, without a division */
    }

    /* out[k] = rot[(shift + k) mod ms]: every rot[] byte is read for every k. */
    for (size_t k = 0; k < ms; k++) {
        uint8_t b = 0;

        for (size_t i = 0; i < ms; i++)
            b |= rot[i] & (uint8_t)acc_ct_eq(i, shift);
        out[k] = (uint8_t)((b & (uint8_t)good) | (rnd[k] & (uint8_t)~good));
        shift++;
        shift &= acc_ct_lt(shift, ms);
    }
    OPENSSL_cleanse(rot, sizeof(rot));
    ctx->tlsmac = out;
    ctx->tlsmac_alloced = 1;
    return 1;
}

/* rec/len: the decrypted record after the explicit IV. Sets *outl to the payload length. */
static int unpad_record(acc_cipher_ctx *ctx, const uint8_t *rec, size_t len, size_t *outl)
{
    const size_t ms = ctx->tlsmacsize;
    const size_t overhead = 1 + ms;      /* the padding length byte, then the MAC */
    size_t padl, good;

    /* Lengths are public: a record too short to hold padding and MAC is refused openly. */
    if (len < overhead) {
        acc_raise(RECORD_FAILED, "record of %zu bytes cannot hold padding and a %zu-byte MAC",
                  len, ms);
        return 0;
    }
    good = check_padding(ctx->tlsversion, rec, len, overhead, &padl);

    if (ms == 0) {
        /* Encrypt-then-MAC (or no MAC): libssl has already checked the MAC over the
         * ciphertext, so the padding verdict is no longer secret and may be acted on. */
        if (!good) {
            acc_raise(RECORD_FAILED, "bad TLS record padding");
            return 0;
        }
        *outl = len - padl;
        return 1;
    }
    if (!extract_mac(ctx, rec, len, len - padl, good))
        return 0;
    /* Bad padding keeps its bytes in the length, as OpenSSL does: the MAC check decides. */
    *outl = len - padl - ms;
    return 1;
}

/* ==== Encrypt: padding ==== */

static int pad_record(const acc_cipher_ctx *ctx, unsigned char *buf, size_t *len, size_t outsize)
{
    size_t n = BLK - (*len % BLK);       /* 1..16 bytes, the length byte included */
    uint8_t v = (uint8_t)(n - 1);

    if (outsize < *len + n) {
        acc_raise(RECORD_FAILED, "TLS record of %zu bytes needs %zu bytes with padding, buffer has %zu",
                  *len, *len + n, outsize);
        return 0;
    }
    if (ctx->tlsversion == V_SSL3)
        memset(buf + *len, 0, n - 1);   /* SSL 3.0: only the length byte is defined */
    else
        memset(buf + *len, v, n - 1);
    buf[*len + n - 1] = v;
    *len += n;
    return 1;
}

/* ==== The functions the cipher code calls ==== */

int acc_tls_update(acc_cipher_ctx *ctx, unsigned char *out, size_t *outl, size_t outsize,
                   const unsigned char *in, size_t inl)
{
    size_t skip;

    if (ctx == NULL || outl == NULL) {
        acc_raise(ACC_R_NULL_POINTER, "TLS record update without a context");
        return 0;
    }
    *outl = 0;
    if (!acc_cipher_check_key(ctx))
        return 0;
    if (in == NULL || in != out || outsize < inl || !ctx->pad) {
        acc_raise(RECORD_FAILED, "a TLS record is processed in place (in == out), with padding on and "
                  "room for it (%zu bytes, buffer %zu)", inl, outsize);
        return 0;
    }
    /* EVP hands a negative int length down as SIZE_MAX - k (and the output size as that plus
     * 16, which can wrap below it, refused just above as by the default): no record comes near
     * INT_MAX, and padding must not wrap. The default goes on with such a length; not here. */
    if (!acc_cipher_check_record_len(inl))
        return 0;
    /* Records on ECB (which the default provider pads and unpads too) are refused, with our own
     * reason: no TLS suite uses them. The version was checked when it was set. */
    if (ctx->mode != ACC_MODE_CBC || !version_known(ctx->tlsversion)) {
        acc_raise(ACC_R_TLS_RECORD, "TLS record handling needs CBC and a known version (0x%x)",
                  ctx->tlsversion);
        return 0;
    }
    /* The previous record's MAC is gone once another record goes through. */
    mac_release(ctx);

    if (ctx->enc) {
        if (!pad_record(ctx, out, &inl, outsize))
            return 0;
    } else if (inl % BLK != 0) {
        acc_raise(RECORD_FAILED, "TLS record of %zu bytes is not a whole number of blocks", inl);
        return 0;
    }
    skip = (!ctx->enc && version_explicit_iv(ctx->tlsversion)) ? BLK : 0;
    if (inl < skip + BLK) {
        acc_raise(RECORD_FAILED, "TLS record of %zu bytes is too short", inl);
        return 0;
    }
    if (!acc_policy_blocks(ctx, in, out, inl))
        return 0;                           /* the policy raised the error */
    ctx->updated = 1;
    if (ctx->enc) {
        *outl = inl;
        return 1;
    }
    /* As the default provider does: the payload stays at out + skip; *outl is its length. */
    return unpad_record(ctx, out + skip, inl - skip, outl);
}

int acc_tls_set_ctx_params(acc_cipher_ctx *ctx, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;

    if (params == NULL)
        return 1;
    /* A version no CBC record layer speaks, and a MAC larger than any digest, are refused here,
     * with our own reason: the default provider takes them, pads records with the one and trusts
     * the other when it decrypts (tests/error_rows_tls.py lists these). */
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION);
    if (p != NULL) {
        unsigned int v;

        if (!OSSL_PARAM_get_uint(p, &v))
            goto bad;
        if (v != 0 && !version_known(v)) {
            acc_raise(ACC_R_INVALID_PARAMETER, "%s 0x%x is not a CBC record version", p->key, v);
            return 0;
        }
        ctx->tlsversion = v;
    }
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_MAC_SIZE);
    if (p != NULL) {
        size_t ms;

        if (!OSSL_PARAM_get_size_t(p, &ms))
            goto bad;
        if (ms > TLS_MAX_MAC) {
            acc_raise(ACC_R_INVALID_PARAMETER, "%s %zu exceeds %d", p->key, ms, TLS_MAX_MAC);
            return 0;
        }
        /* A MAC of the old size must not be read with the new one. */
        mac_release(ctx);
        ctx->tlsmacsize = ms;
    }
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "%s is not an unsigned integer", p->key);
    return 0;
}

int acc_tls_get_mac(acc_cipher_ctx *ctx, OSSL_PARAM *p)
{
    return OSSL_PARAM_set_octet_ptr(p, ctx->tlsmac, ctx->tlsmacsize);
}

int acc_tls_dup(acc_cipher_ctx *dst, const acc_cipher_ctx *src)
{
    /* dst starts as a byte copy of src: never let both own one buffer. */
    dst->tlsmac = NULL;
    dst->tlsmac_alloced = 0;
    if (src->tlsmac == NULL || !src->tlsmac_alloced)
        return 1;
    dst->tlsmac = OPENSSL_memdup(src->tlsmac, src->tlsmacsize);
    if (dst->tlsmac == NULL)
        return 0;                       /* the caller raises the one error, as the default's dupctx */
    dst->tlsmac_alloced = 1;
    return 1;
}

void acc_tls_cleanup(acc_cipher_ctx *ctx)
{
    if (ctx != NULL)
        mac_release(ctx);
}
