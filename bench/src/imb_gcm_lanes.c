/* bench/src/imb_gcm_lanes.c: does intel-ipsec-mb run GCM in multi-buffer lanes, as it runs CBC
 * encryption? A job that waits in a lane for companions comes back NULL from submit; a job the
 * library runs at once comes back itself, completed. Issue #18 asks for lanes across async jobs
 * "where the library offers it": this answers for the installed library.
 * Build: make build/bench/imb_gcm_lanes     Run: build/bench/imb_gcm_lanes */
#include <stdio.h>
#include <string.h>
#ifdef HAVE_IPSECMB
#include <intel-ipsec-mb.h>

static struct gcm_key_data gkey __attribute__((aligned(64)));
static uint32_t ek[4 * 15] __attribute__((aligned(16))), dk[4 * 15] __attribute__((aligned(16)));
static uint8_t key[16] = { 1 }, iv[16] = { 2 }, aad[13] = { 3 }, buf[256] = { 4 }, tag[16];

static IMB_JOB *job(IMB_MGR *m, int gcm)
{
    IMB_JOB *j = IMB_GET_NEXT_JOB(m);

    memset(j, 0, sizeof(*j));
    j->cipher_direction = IMB_DIR_ENCRYPT;
    j->chain_order = IMB_ORDER_CIPHER_HASH;
    j->key_len_in_bytes = 16;
    j->src = buf;
    j->dst = buf;
    j->msg_len_to_cipher_in_bytes = sizeof(buf);
    j->iv = iv;
    if (gcm) {
        j->cipher_mode = IMB_CIPHER_GCM;
        j->hash_alg = IMB_AUTH_AES_GMAC;
        j->enc_keys = j->dec_keys = &gkey;
        j->msg_len_to_hash_in_bytes = sizeof(buf);
        j->iv_len_in_bytes = 12;
        j->u.GCM.aad = aad;
        j->u.GCM.aad_len_in_bytes = sizeof(aad);
        j->auth_tag_output = tag;
        j->auth_tag_output_len_in_bytes = sizeof(tag);
    } else {
        j->cipher_mode = IMB_CIPHER_CBC;
        j->hash_alg = IMB_AUTH_NULL;
        j->enc_keys = ek;
        j->dec_keys = dk;
        j->iv_len_in_bytes = 16;
    }
    return j;
}

int main(void)
{
    IMB_MGR *m = alloc_mb_mgr(0);

    if (m == NULL)
        return 1;
    init_mb_mgr_auto(m, NULL);
    IMB_AES128_GCM_PRE(m, key, &gkey);
    IMB_AES_KEYEXP_128(m, key, ek, dk);
    printf("intel-ipsec-mb %s, arch %d\n", imb_get_version_str(), (int)m->used_arch);
    for (int gcm = 1; gcm >= 0; gcm--) {
        IMB_JOB *j = job(m, gcm), *r = IMB_SUBMIT_JOB(m);
        printf("%-14s submit returned %s\n", gcm ? "AES-128-GCM:" : "AES-128-CBC:",
               r == NULL ? "NULL: the job waits in a lane for companions"
               : r == j && r->status == IMB_STATUS_COMPLETED ? "the job itself, completed: run at once, no lanes"
                                                              : "another job");
        while (IMB_FLUSH_JOB(m) != NULL)
            ;
    }
    free_mb_mgr(m);
    return 0;
}
#else
int main(void)
{
    puts("built without intel-ipsec-mb");
    return 0;
}
#endif
