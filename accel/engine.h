/* accel/engine.h: the one small interface behind which every AES engine sits.
 * The provider (provider/) owns EVP semantics; an engine only runs whole blocks. */
#ifndef ACCELAES_ENGINE_H
#define ACCELAES_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ACC_AES_BLOCK 16
#define ACC_AES_MAXROUNDS 14

/* A key schedule. Lives in the cipher context (process-private memory, never in
 * the shared segment) and is cleansed with acc_key_cleanse(). */
typedef struct acc_aes_key {
    /* enc: rounds+1 round keys as AES-NI's aesenc wants them.
     * dec: the equivalent-inverse-cipher keys (aesimc applied to the middle ones),
     *      in decryption order, as aesdec wants them. Only filled when asked for. */
    uint8_t enc[16 * (ACC_AES_MAXROUNDS + 1)] __attribute__((aligned(64)));
    uint8_t dec[16 * (ACC_AES_MAXROUNDS + 1)] __attribute__((aligned(64)));
    int rounds;        /* 10, 12 or 14 */
    int keybits;       /* 128, 192 or 256 */
    int has_dec;       /* dec[] valid */
    struct acc_evp_keyset *evp; /* nested-EVP engine only: its private EVP_CIPHER_CTXs (NULL otherwise) */
} acc_aes_key;

/* What an engine offers besides the block functions. Callers ask these, never which engine it is. */
enum {
    /* The schedule in acc_aes_key.enc/.dec is AES-NI's layout (aesenc order; dec with aesimc
     * applied), which intel-ipsec-mb's lanes and the stitched CBC-HMAC code read in place. */
    ACC_CAP_NI_SCHEDULE = 1u << 0,
    /* The block functions run on zmm registers (VAES): GCM's VAES engine pairs with it. */
    ACC_CAP_ZMM = 1u << 1,
    /* The block functions can fail (nested EVP calls); the others always return 1. */
    ACC_CAP_MAY_FAIL = 1u << 2,
    /* The block functions run on ymm registers (VAES without AVX-512): GCM's ymm VAES engine pairs with it. */
    ACC_CAP_YMM = 1u << 3
};

/* An engine: key set-up plus whole-block functions. All lengths are in blocks.
 *  - in == out is legal for every function; other overlaps are not.
 *  - cbc_*: iv is read and replaced by the IV to continue with (the last ciphertext block).
 *  - ctr:   ctr is the 128-bit big-endian counter block; it is advanced by nblocks with
 *           full 128-bit carry (as OpenSSL's ctr128_inc), wrapping at 2^128.
 *  - The block functions return 1 on success and 0 on failure. Only the nested-EVP engine can
 *    fail (an EVP call into the default provider failed); AES-NI always returns 1. On failure
 *    out (all nblocks) is wiped, never left holding plaintext or stale bytes, and iv / ctr are
 *    left unchanged: the caller must fail the whole request, and raise the error itself (an
 *    engine has no error queue of its own, and may run on a pool thread).
 * Functions are thread-safe for distinct outputs sharing one const key. */
typedef struct acc_engine {
    const char *name;
    /* enc_only: only the encryption schedule is needed (ECB/CBC encrypt, CTR).
     * Returns 1 on success, 0 on failure (bad key length, no memory). */
    int  (*set_key)(acc_aes_key *k, const uint8_t *key, size_t keylen, int enc_only);
    int  (*ecb_enc)(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks);
    int  (*ecb_dec)(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks);
    int  (*cbc_enc)(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t iv[16]);
    int  (*cbc_dec)(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t iv[16]);
    int  (*ctr)(const acc_aes_key *k, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t ctr[16]);
    /* XTS (IEEE 1619): one whole data unit of len >= 16 bytes, ciphertext stealing for a partial
     * last block. k1 is the data key (its decryption schedule when dec), k2 the tweak key
     * (encryption schedule), tweak the 16-byte IV, read only. Returns 1/0 as the block
     * functions above (on failure out is wiped). */
    int (*xts)(const acc_aes_key *k1, const acc_aes_key *k2, const uint8_t tweak[16], const uint8_t *in, uint8_t *out,
               size_t len, int dec);
    /* Copy a schedule (dupctx). Returns 1/0. */
    int  (*copy_key)(acc_aes_key *dst, const acc_aes_key *src);
    /* Cleanse and release a schedule. */
    void (*free_key)(acc_aes_key *k);
    unsigned caps; /* ACC_CAP_* */
} acc_engine;

static inline int acc_engine_has(const acc_engine *e, unsigned caps)
{
    return e != NULL && (e->caps & caps) == caps;
}

/* accel/cpu/aesni.c: AES-NI (and VAES where the CPU has it). NULL if the CPU lacks AES-NI. */
const acc_engine *acc_engine_aesni(void);
/* accel/cpu/evp_engine.c: nested EVP calls into a private library context holding the
 * default provider; for CPUs without AES-NI. Always available. */
const acc_engine *acc_engine_evp(void);
/* The engine the inline path uses: AES-NI when present, else nested EVP.
 * ACCELAES_FORCE_EVP_ENGINE=1 in the environment forces the EVP engine (tests). */
const acc_engine *acc_engine_default(void);

/* Add n blocks to a 128-bit big-endian counter with full carry. */
static inline void acc_ctr_add(uint8_t ctr[16], uint64_t n)
{
    for (int i = 15; i >= 0 && n; i--) {
        uint64_t s = (uint64_t)ctr[i] + (n & 0xff);
        ctr[i] = (uint8_t)s;
        n = (n >> 8) + (s >> 8);
    }
}

/* ---- One numbering of the operations and one request, for every path and backend ----
 * The provider, the split, the lanes (accel/mb.h), the nested-EVP engine and the GPU glue all
 * speak acc_op; the GPU plugin's frozen ABI numbers are mapped from it in accel/gpu_plugin.h. */
typedef enum acc_op {
    ACC_OP_ECB_ENC = 1,
    ACC_OP_ECB_DEC,
    ACC_OP_CBC_ENC,
    ACC_OP_CBC_DEC,
    ACC_OP_CTR
} acc_op;
#define ACC_OP_COUNT 6   /* for arrays indexed by op (index 0 unused) */

/* Whole blocks of one operation. iv: the CBC IV or CTR counter to start from, replaced by the
 * one to continue with; NULL for ECB. in == out is legal; other overlaps are not. */
typedef struct acc_req {
    acc_op op;
    const acc_aes_key *key;
    uint8_t *iv;
    const uint8_t *in;
    uint8_t *out;
    size_t nblocks;
} acc_req;

static inline int acc_op_valid(int op)
{
    return op >= ACC_OP_ECB_ENC && op <= ACC_OP_CTR;
}

static inline int acc_op_has_iv(acc_op op)
{
    return op == ACC_OP_CBC_ENC || op == ACC_OP_CBC_DEC || op == ACC_OP_CTR;
}

/* The operation reads the decryption schedule (acc_aes_key.dec). */
static inline int acc_op_needs_dec(acc_op op)
{
    return op == ACC_OP_ECB_DEC || op == ACC_OP_CBC_DEC;
}

/* The IV or counter with which block k of a request starts, from the request's own iv0:
 * CTR counts on, CBC chains from the ciphertext block before k (decryption reads it from in,
 * so call it before an in-place run overwrites it; encryption from out, so after), ECB has none
 * (iv is left as it is). k = nblocks gives the iv to continue with after the request. */
static inline void acc_iv_at_block(acc_op op, const uint8_t iv0[16], const uint8_t *in, const uint8_t *out,
                                   size_t k, uint8_t iv[16])
{
    const uint8_t *src = iv0;

    if (!acc_op_has_iv(op))
        return;
    if (op == ACC_OP_CBC_DEC && k > 0)
        src = in + (k - 1) * ACC_AES_BLOCK;
    else if (op == ACC_OP_CBC_ENC && k > 0)
        src = out + (k - 1) * ACC_AES_BLOCK;
    if (src != iv)
        memcpy(iv, src, ACC_AES_BLOCK);
    if (op == ACC_OP_CTR)
        acc_ctr_add(iv, k);
}

/* Run a request on an engine: 1 done, 0 failed (as the block functions above). */
static inline int acc_engine_run(const acc_engine *e, const acc_req *r)
{
    switch (r->op) {
    case ACC_OP_ECB_ENC:
        return e->ecb_enc(r->key, r->in, r->out, r->nblocks);
    case ACC_OP_ECB_DEC:
        return e->ecb_dec(r->key, r->in, r->out, r->nblocks);
    case ACC_OP_CBC_ENC:
        return e->cbc_enc(r->key, r->in, r->out, r->nblocks, r->iv);
    case ACC_OP_CBC_DEC:
        return e->cbc_dec(r->key, r->in, r->out, r->nblocks, r->iv);
    case ACC_OP_CTR:
        return e->ctr(r->key, r->in, r->out, r->nblocks, r->iv);
    }
    return 0;
}

#endif
