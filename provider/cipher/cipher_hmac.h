/* provider/cipher/cipher_hmac.h: the stitched TLS ciphers AES-{128,256}-CBC-HMAC-SHA{1,256}: their
 * context, shared by the EVP surface (cipher_hmac.c) and the record code (cipher_hmac_record.c). */
#ifndef ACCELAES_CIPHER_HMAC_H
#define ACCELAES_CIPHER_HMAC_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/sha.h>
#include "provider/route/cipher_ctx.h"

#define ACC_HMAC_AAD_LEN 13             /* EVP_AEAD_TLS1_AAD_LEN: seq(8) type(1) version(2) length(2) */
#define ACC_HMAC_NO_PAYLOAD ((size_t)-1) /* no AAD pending: the next call is plain AES-CBC */

typedef union {
    SHA_CTX s1;
    SHA256_CTX s256;
} acc_sha_state;

typedef struct acc_sha_kind {
    size_t md_size;
    /* As the default provider: SHA-1's record decrypt takes a TLS 1.1+ record's first block as
     * the IV (refusing a short record before decrypting), SHA-256's decrypts it with the rest. */
    int iv_block_decrypted;
    void (*init)(acc_sha_state *s);
    void (*update)(acc_sha_state *s, const void *p, size_t n);
    void (*final)(uint8_t *md, acc_sha_state *s);
    void (*compress)(acc_sha_state *s, const uint8_t *block);   /* one block, counters untouched */
    void (*chain)(const acc_sha_state *s, uint32_t w[8]);       /* the chaining words */
} acc_sha_kind;

extern const acc_sha_kind acc_hmac_sha1, acc_hmac_sha256;

typedef struct acc_hmac_ctx {
    acc_cipher_ctx aes;        /* first: the key schedule in it wants the 64-byte alignment */
    const acc_sha_kind *sha;
    acc_sha_state head, tail;  /* after the HMAC inner / outer key block (plain init without a key) */
    acc_sha_state md;          /* encrypt: head + the record's AAD */
    size_t head_len;           /* bytes hashed into head: 64 with a MAC key, 0 without */
    size_t payload_len;        /* encrypt: the AAD's length field; decrypt: AAD_LEN; or NO_PAYLOAD */
    unsigned int aad_version;  /* encrypt: the version in the last AAD */
    uint8_t aad[ACC_HMAC_AAD_LEN]; /* decrypt: the last AAD */
    size_t aad_pad;            /* what OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD reports */
    unsigned int tlsversion;   /* OSSL_CIPHER_PARAM_TLS_VERSION; 0: not set */
    size_t strip_fixed;        /* decrypt with a TLS version: MAC (+ explicit IV) update strips */
    /* TLS1_MULTIBLOCK (cipher_hmac_multi.c) */
    size_t mb_max_frag;        /* MAX_SEND_FRAGMENT; 0: not set */
    size_t mb_packlen;         /* AAD_PACKLEN: output of the records the last AAD announced */
    size_t mb_enc_len;         /* ENC_LEN: output of the last multiblock encrypt */
    unsigned int mb_interleave; /* records per write: 4 or 8 */
    int mb_aad_set;
    uint8_t mb_aad[ACC_HMAC_AAD_LEN]; /* sequence number, type and version of the next records */
} acc_hmac_ctx;

/* provider/cipher/cipher_hmac_record.c */
/* OSSL_CIPHER_PARAM_AEAD_MAC_KEY: the HMAC key, kept as the hash states after its two pads. */
void acc_hmac_set_mac_key(acc_hmac_ctx *h, const uint8_t *key, size_t len);
/* OSSL_CIPHER_PARAM_AEAD_TLS1_AAD: the next record's header. 1, or 0 with no error raised (as the
 * default provider: a header it refuses fails the parameter call with an empty queue). */
int acc_hmac_set_aad(acc_hmac_ctx *h, const uint8_t *aad, size_t len);
/* One record when an AAD is pending, else plain AES-CBC; len a multiple of 16 or refused.
 * 1: done; 0: refused for a public reason (error raised); -1: bad MAC or padding (no error
 * raised: the verdict is secret until it leaves, so the caller raises it). */
int acc_hmac_cipher(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len);

/* provider/cipher/cipher_hmac_stitch.c: encrypting, hashing and AES-CBC fused in one loop (SHA-NI and
 * the AES-NI engine's key schedule). usable: this CPU and this context's engine allow it. */
int acc_hmac_stitch_usable(const acc_hmac_ctx *h);
/* The record's payload from out + iv (to plen) hashed into h->md and, from out, encrypted in
 * place in whole 64-byte steps. Returns the bytes encrypted; *hashed: where hashing stopped. */
size_t acc_hmac_stitch(acc_hmac_ctx *h, uint8_t *out, size_t iv, size_t plen, size_t *hashed);

/* provider/cipher/cipher_hmac_multi.c: 4 or 8 TLS 1.1+ records in one call, their CBC in the lanes.
 * bufsize: the most one record of MAX_SEND_FRAGMENT takes (0: not set). aad: 1, or 0 refused
 * (libssl then writes one record at a time). encrypt: bytes written, 0 on failure. */
size_t acc_hmac_mb_bufsize(const acc_hmac_ctx *h);
int acc_hmac_mb_aad(acc_hmac_ctx *h, const uint8_t *aad, size_t len, unsigned int interleave);
size_t acc_hmac_mb_encrypt(acc_hmac_ctx *h, uint8_t *out, const uint8_t *in, size_t len, unsigned int interleave);

#endif
