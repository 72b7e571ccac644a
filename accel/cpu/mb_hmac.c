/* accel/cpu/mb_hmac.c: many HMAC-SHA1 / HMAC-SHA256 messages under one key in intel-ipsec-mb's
 * lanes: the MACs of the stitched ciphers' multiblock records (provider/cipher/cipher_hmac_multi.c).
 *
 * Its own manager, not mb.c's: mb.c's is the widest one init_mb_mgr_auto picks (VAES lanes for
 * CBC), whose SHA runs in AVX-512 lanes; on a CPU with SHA-NI the SSE manager runs two SHA-NI
 * streams interleaved instead: nearly as fast as the AVX-512 lanes with 8 messages, twice as fast
 * with 4, and faster for SHA-256 (bench/results/engine-notes.md). */
#include "accel/mb.h"

#ifndef HAVE_IPSECMB

int acc_mb_hmac_run(size_t md_size, const uint32_t ipad[8], const uint32_t opad[8], const acc_aes_key *key,
                    acc_mb_hmac_req *r, size_t n)
{
    (void)md_size; (void)ipad; (void)opad; (void)key; (void)r; (void)n;
    return -1;
}

#else

#define NO_COMPAT_IMB_API_053   /* its old names (SHA1, SHA_256...) clash with OpenSSL's */
#include <string.h>
#include <intel-ipsec-mb.h>
#include "accel/cpu/mb_int.h"

/* ipsec-mb keeps lane lengths in 16 bits: longer messages are left to the caller. */
#define HMAC_MAX_LEN 65000u

/* The SSE manager where it has SHA-NI (see above), else the widest one; none without hardware AES. */
static IMB_MGR *make_hmac_mgr(void)
{
    IMB_MGR *m;

    if ((m = alloc_mb_mgr(0)) == NULL)
        return NULL;
    init_mb_mgr_sse(m);
    if (imb_get_errno(m) != 0 || !(m->features & IMB_FEATURE_SHANI)) {
        free_mb_mgr(m);
        if ((m = alloc_mb_mgr(0)) == NULL)
            return NULL;
        init_mb_mgr_auto(m, NULL);
    }
    if (imb_get_errno(m) != 0 || m->used_arch < IMB_ARCH_SSE) {
        free_mb_mgr(m);
        return NULL;
    }
    return m;
}

static IMB_MGR *hmgr_get(void)
{
    return acc_mb_mgr(ACC_MB_MGR_HMAC, make_hmac_mgr);
}

static int job_ok(const IMB_JOB *j)
{
    return j->status == IMB_STATUS_COMPLETED;
}

/* The job for r: hash first, then (with a key) the cipher, so the tag is in place before the
 * CBC that covers it runs. */
static void fill_job(IMB_JOB *j, size_t md_size, const uint32_t ipad[8], const uint32_t opad[8],
                     const acc_aes_key *key, const acc_mb_hmac_req *r)
{
    memset(j, 0, sizeof(*j));   /* recycled jobs keep fields from earlier use */
    j->cipher_mode = IMB_CIPHER_NULL;
    j->cipher_direction = IMB_DIR_ENCRYPT;
    j->chain_order = IMB_ORDER_HASH_CIPHER;
    if (key != NULL) {
        j->cipher_mode = IMB_CIPHER_CBC;
        j->enc_keys = key->enc;
        j->dec_keys = key->dec;
        j->key_len_in_bytes = (uint64_t)key->keybits / 8;
        j->cipher_start_src_offset_in_bytes = (uint64_t)(r->cbc - r->msg);   /* from src */
        j->dst = r->cbc;
        j->msg_len_to_cipher_in_bytes = (uint64_t)r->nblocks * 16;
        j->iv = r->iv;
        j->iv_len_in_bytes = 16;
    }
    j->hash_alg = md_size == 20 ? IMB_AUTH_HMAC_SHA_1 : IMB_AUTH_HMAC_SHA_256;
    j->src = r->msg;   /* the cipher's input is an offset from it: the message comes first */
    j->hash_start_src_offset_in_bytes = 0;
    j->msg_len_to_hash_in_bytes = r->len;
    j->auth_tag_output = r->tag;
    j->auth_tag_output_len_in_bytes = md_size;
    /* the chaining words in host order: ipsec-mb's own format for these (another would give
     * other MACs than the default's: test_tls_multiblock) */
    j->u.HMAC._hashed_auth_key_xor_ipad = (const uint8_t *)ipad;
    j->u.HMAC._hashed_auth_key_xor_opad = (const uint8_t *)opad;
}

int acc_mb_hmac_run(size_t md_size, const uint32_t ipad[8], const uint32_t opad[8], const acc_aes_key *key,
                    acc_mb_hmac_req *r, size_t n)
{
    IMB_MGR *m;
    IMB_JOB *j;
    int ok = 1;

    if (md_size != 20 && md_size != 32)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (r[i].len > HMAC_MAX_LEN || r[i].msg == NULL || r[i].tag == NULL
            || (key != NULL && (r[i].cbc == NULL || r[i].iv == NULL || r[i].cbc < r[i].msg
                                || r[i].nblocks > HMAC_MAX_LEN / 16)))
            return -1;
    if (key != NULL && key->keybits != 128 && key->keybits != 192 && key->keybits != 256)
        return -1;
    if ((m = hmgr_get()) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        fill_job(IMB_GET_NEXT_JOB(m), md_size, ipad, opad, key, &r[i]);
        for (j = IMB_SUBMIT_JOB(m); j != NULL; j = IMB_GET_COMPLETED_JOB(m))
            ok &= job_ok(j);
    }
    while ((j = IMB_FLUSH_JOB(m)) != NULL) {
        ok &= job_ok(j);
        while ((j = IMB_GET_COMPLETED_JOB(m)) != NULL)
            ok &= job_ok(j);
    }
    return ok;
}

#endif
