/* provider/cipher/cipher_block.c: the EVP semantics of the plain AES modes, written once for ECB, CBC
 * and CTR: update with the held-back block, PKCS#7 padding, final, CTR's num, the one-shot
 * EVP_Cipher, and their parameters. Whole blocks go to the policy (provider/route/policy.c). */
#include <limits.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/cipher/cipher_block.h"
#include "provider/base/compat.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "provider/cipher/tls.h"

/* ======================== Parameters ======================== */

/* A num the running release's default takes (provider/base/compat.h): below the reported block size
 * (CTR's is 1) where it checks; else any, but CTR's indexes the 16-byte keystream block, where
 * OpenSSL 3.0's default reads past it: refused at 16 and up, with our own reason. */
static int num_allowed(const acc_cipher_ctx *c, unsigned int u)
{
    if (acc_compat()->num_below_blocksize) {
        if (u < (c->mode == ACC_MODE_CTR ? 1u : ACC_AES_BLOCK))
            return 1;
        acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "num %u is not below the block size", u);
        return 0;
    }
    if (c->mode == ACC_MODE_CTR && u >= ACC_AES_BLOCK) {
        acc_raise(ACC_R_INVALID_PARAMETER, "num %u: CTR's num must be below 16", u);
        return 0;
    }
    return 1;
}

/* In the default provider's order (padding, use-bits, the TLS pair, num), so that a call with
 * several bad parameters fails on the same one, with its reason. */
int acc_block_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    acc_cipher_ctx *c = vctx;
    const OSSL_PARAM *p;
    unsigned int u;

    if (params == NULL)
        return 1;
    if (!acc_compat_unrepeated(params, acc_block_settable_ctx_params(vctx, NULL), ACC_DECODER_COMMON))
        return 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_PADDING)) != NULL) {
        if (!OSSL_PARAM_get_uint(p, &u))
            goto bad;
        c->pad = u ? 1 : 0;
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_USE_BITS)) != NULL && !OSSL_PARAM_get_uint(p, &u))
        goto bad;
    if (!acc_tls_set_ctx_params(c, params))
        return 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_NUM)) != NULL) {
        if (!OSSL_PARAM_get_uint(p, &u))
            goto bad;
        if (!num_allowed(c, u))
            return 0;
        c->num = u;
    }
    return 1;
bad:
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "parameter '%s' is not an unsigned integer", p->key);
    return 0;
}

/* In the default provider's order (ivlen, padding, iv, updated-iv, num, keylen, tls-mac). */
static int own_param(acc_cipher_ctx *c, OSSL_PARAM *p)
{
    return strcmp(p->key, OSSL_CIPHER_PARAM_TLS_MAC) == 0 ? acc_tls_get_mac(c, p) : 0;
}

int acc_block_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    static const char *const order[] = {
        OSSL_CIPHER_PARAM_IVLEN, OSSL_CIPHER_PARAM_PADDING, OSSL_CIPHER_PARAM_IV, OSSL_CIPHER_PARAM_UPDATED_IV,
        OSSL_CIPHER_PARAM_NUM, OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_TLS_MAC, NULL
    };

    return acc_cipher_get_ctx_params(vctx, params, order, own_param);
}

const OSSL_PARAM *acc_block_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, NULL),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, NULL, 0),
        OSSL_PARAM_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, NULL, 0),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

const OSSL_PARAM *acc_block_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM known[] = {
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_USE_BITS, NULL),
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_TLS_VERSION, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, NULL),
        OSSL_PARAM_END
    };
    (void)vctx; (void)provctx;
    return known;
}

/* ======================== Update and final ======================== */

/* Inlined into every caller: it is the whole of a small request's path. */
static inline __attribute__((always_inline)) int run_blocks(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out,
                                                            size_t len)
{
    /* Small requests: straight to the engine, counted in the context (see acct_bytes). */
    if (len < c->inline_below) {
        if (!acc_ctx_run(c, in, out, len / ACC_AES_BLOCK, c->iv))
            return acc_engine_fail(c, len);
        acc_cipher_count(c, len, 1);
        return 1;
    }
    return acc_policy_blocks(c, in, out, len);   /* raises its own error */
}

/* Everything but the common case: partial blocks, held-back blocks, TLS records. */
static __attribute__((noinline)) int block_update_general(acc_cipher_ctx *c, unsigned char *out, size_t *outl,
                                                          size_t outsize, const unsigned char *in, size_t inl)
{
    size_t total, produce, take;

    if (c->tlsversion > 0 && c->key_set)
        return acc_tls_update(c, out, outl, outsize, in, inl);
    /* EVP hands a negative int length down as SIZE_MAX - k: the sum below must not wrap. Refused
     * by the call check, as if all of it were due (it fails at the latest on the int-sized result). */
    if (inl > (size_t)INT_MAX)
        return acc_cipher_check_call(c, out, inl, outsize, in, inl);
    total = c->bufsz + inl;
    produce = total & ~(size_t)(ACC_AES_BLOCK - 1);
    /* Decrypting with padding: a stream ending on a block boundary keeps its last block
     * back, in case it is the last one and carries the padding Final must strip. */
    if (!c->enc && c->pad && produce == total && produce > 0)
        produce -= ACC_AES_BLOCK;
    if (!acc_cipher_check_call(c, out, produce, outsize, in, inl))
        return 0;
    *outl = produce;
    if (produce == 0) {
        if (inl > 0)
            memcpy(c->buf + c->bufsz, in, inl);
        c->bufsz += inl;
        return 1;
    }
    if (c->bufsz > 0) {
        take = ACC_AES_BLOCK - c->bufsz;
        memcpy(c->buf + c->bufsz, in, take);
        in += take;
        inl -= take;
        if (!run_blocks(c, c->buf, out, ACC_AES_BLOCK))
            return 0;
        out += ACC_AES_BLOCK;
        produce -= ACC_AES_BLOCK;
        c->bufsz = 0;
    }
    if (produce > 0 && !run_blocks(c, in, out, produce))
        return 0;
    in += produce;
    inl -= produce;
    if (inl > 0)
        memcpy(c->buf, in, inl);
    c->bufsz = inl;
    return 1;
}

int acc_block_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                     size_t inl)
{
    acc_cipher_ctx *c = vctx;

    /* The common case, kept small: whole blocks, nothing buffered, nothing to hold back. */
    if (c->bufsz == 0 && c->tlsversion == 0 && inl % ACC_AES_BLOCK == 0 && inl > 0 && (c->enc || !c->pad)) {
        if (!acc_cipher_check_call(c, out, inl, outsize, in, inl) || !run_blocks(c, in, out, inl))
            return 0;
        *outl = inl;
        return 1;
    }
    return block_update_general(c, out, outl, outsize, in, inl);
}

/* PKCS#7 check without branching on the pad bytes, so timing does not tell how wrong it was. */
static int unpad_block(const uint8_t *b, size_t *len)
{
    unsigned int pad = b[ACC_AES_BLOCK - 1], bad = 0;

    bad |= (unsigned int)((pad - 1) >> 8) & 1;          /* pad == 0 */
    bad |= (unsigned int)((16 - pad) >> 8) & 1;         /* pad > 16 */
    for (unsigned int i = 0; i < ACC_AES_BLOCK; i++) {
        unsigned int in_pad = ((i + pad - ACC_AES_BLOCK) >> 8) ^ 1;  /* i >= 16 - pad */
        bad |= in_pad & (unsigned int)((b[i] ^ pad) != 0);
    }
    *len = ACC_AES_BLOCK - (pad & 0x1f);
    return bad == 0;
}

int acc_block_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    acc_cipher_ctx *c = vctx;
    uint8_t blk[ACC_AES_BLOCK];
    size_t n;

    if (!acc_cipher_check_key(c))
        return 0;
    if (c->tlsversion > 0) {
        /* as the default provider: every record is one whole update, there is nothing to finish */
        acc_raise(ACC_PROV_R(PROV_R_CIPHER_OPERATION_FAILED),
                  "Final on a TLS record context: records are never finalised");
        return 0;
    }
    if (c->enc) {
        if (c->pad) {
            memset(c->buf + c->bufsz, (int)(ACC_AES_BLOCK - c->bufsz), ACC_AES_BLOCK - c->bufsz);
        } else if (c->bufsz == 0) {
            *outl = 0;
            return 1;
        } else {
            acc_raise(ACC_PROV_R(PROV_R_WRONG_FINAL_BLOCK_LENGTH),
                      "%zu bytes left over with padding off: data must be a multiple of 16 bytes", c->bufsz);
            return 0;
        }
        if (!acc_cipher_check_call(c, out, ACC_AES_BLOCK, outsize, NULL, 0)
            || !run_blocks(c, c->buf, out, ACC_AES_BLOCK))
            return 0;
        c->bufsz = 0;
        *outl = ACC_AES_BLOCK;
        return 1;
    }
    if (c->bufsz != ACC_AES_BLOCK) {
        if (c->bufsz == 0 && !c->pad) {
            *outl = 0;
            return 1;
        }
        acc_raise(ACC_PROV_R(PROV_R_WRONG_FINAL_BLOCK_LENGTH),
                  "%zu bytes left over: ciphertext must be whole blocks%s",
                  c->bufsz, c->pad ? " (and at least one with padding)" : "");
        return 0;
    }
    if (!run_blocks(c, c->buf, blk, ACC_AES_BLOCK))
        return 0;
    n = ACC_AES_BLOCK;
    if (c->pad && !unpad_block(blk, &n)) {
        OPENSSL_cleanse(blk, sizeof(blk));
        c->bufsz = 0;
        acc_raise(ACC_PROV_R(PROV_R_BAD_DECRYPT), "the padding is not valid PKCS#7 (wrong key or corrupt data)");
        return 0;
    }
    if (!acc_cipher_check_call(c, out, n, outsize, NULL, 0)) {
        OPENSSL_cleanse(blk, sizeof(blk));
        return 0;
    }
    if (n > 0)                   /* a whole block of padding leaves nothing, and out may be NULL */
        memcpy(out, blk, n);
    OPENSSL_cleanse(blk, sizeof(blk));
    c->bufsz = 0;
    *outl = n;
    return 1;
}

/* CTR keeps OpenSSL's structure: buf is the keystream of the counter before iv, num how
 * much of it is used, so num set by a caller means exactly what it means to the default. */
static int ctr_run(acc_cipher_ctx *c, uint8_t *out, const uint8_t *in, size_t len)
{
    unsigned int n = c->num;
    size_t whole;

    while (n != 0 && len > 0) {
        *out++ = *in++ ^ c->buf[n];
        n = (n + 1) & (ACC_AES_BLOCK - 1);
        len--;
    }
    whole = len & ~(size_t)(ACC_AES_BLOCK - 1);
    if (whole > 0 && !run_blocks(c, in, out, whole))
        return 0;
    in += whole;
    out += whole;
    len -= whole;
    if (len > 0) {
        if (!c->eng->ecb_enc(acc_cipher_key(c), c->iv, c->buf, 1))
            return acc_engine_fail(c, ACC_AES_BLOCK);
        acc_ctr_add(c->iv, 1);
        for (size_t i = 0; i < len; i++)
            out[i] = in[i] ^ c->buf[i];
        n = (unsigned int)len;
        c->acct_bytes += len;
    }
    c->num = n;
    return 1;
}

int acc_stream_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                      size_t inl)
{
    acc_cipher_ctx *c = vctx;

    if (!acc_cipher_check_call(c, out, inl, outsize, in, inl))
        return 0;
    if (inl > 0 && !ctr_run(c, out, in, inl))
        return 0;
    *outl = inl;
    return 1;
}

int acc_stream_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    acc_cipher_ctx *c = vctx;

    (void)out; (void)outsize;
    if (!acc_cipher_check_key(c))
        return 0;
    *outl = 0;
    return 1;
}

/* EVP_Cipher: the caller's data as it is, no buffering and no padding (CTR: as an update). */
int acc_block_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize, const unsigned char *in,
                     size_t inl)
{
    acc_cipher_ctx *c = vctx;

    if (c->mode == ACC_MODE_CTR)
        return acc_stream_update(vctx, out, outl, outsize, in, inl);
    if (!acc_cipher_check_call(c, out, inl, outsize, in, inl))
        return 0;
    /* The default provider returns success here having left a partial ECB block as it was, or
     * written a whole CBC block for it: refused, with our own reason. */
    if (inl % ACC_AES_BLOCK != 0) {
        acc_raise(ACC_R_WRONG_FINAL_BLOCK_LENGTH, "EVP_Cipher on %s needs whole 16-byte blocks, got %zu bytes",
                  c->mode == ACC_MODE_CBC ? "CBC" : "ECB", inl);
        return 0;
    }
    if (inl > 0 && !run_blocks(c, in, out, inl))
        return 0;
    *outl = inl;
    return 1;
}
