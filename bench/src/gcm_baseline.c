/* bench/src/gcm_baseline.c: groundwork for issue #18 (AES-GCM and AES-XTS), measured before any of it is
 * written: the cost of one record as `openssl speed -evp aes-128-gcm` drives it (IV, 13 bytes of AAD,
 * the payload, the tag) with OpenSSL's default provider and with intel-ipsec-mb's GCM API on the
 * same data, and one AES-XTS data unit with the default provider. Alternated rounds, the minimum
 * over them (as bench/src/evp_small.c does); the outputs of both GCMs are compared once per size. Where
 * accelaes loads (OPENSSL_MODULES), also its AES-128-CTR with a new IV per call: the EVP layer's cost
 * of a record (init with an IV, then the data) that any provider's GCM pays on top of the AES and GHASH.
 *
 * Build: make build/bench/gcm_baseline
 * Run:   OPENSSL_MODULES=build build/bench/gcm_baseline [-r ROUNDS] [BYTES...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#ifdef HAVE_IPSECMB
#include <intel-ipsec-mb.h>
#endif

#define MAXLEN 16384

static unsigned char key[32] = { 1, 2, 3 }, iv[16] = { 9, 8, 7 }, aad[13] = { 5 };
static unsigned char buf[2][MAXLEN + 64] __attribute__((aligned(64)));
static unsigned char tag[2][16];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One record through EVP, as speed's AEAD loop does it. */
static void evp_gcm(EVP_CIPHER_CTX *c, size_t len)
{
    int outl;

    EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv);
    EVP_EncryptUpdate(c, NULL, &outl, aad, sizeof(aad));
    EVP_EncryptUpdate(c, buf[0], &outl, buf[0], (int)len);
    EVP_EncryptFinal_ex(c, buf[0] + outl, &outl);
    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag[0]);
}

/* One AES-XTS data unit of len bytes (the IV is its tweak). */
static void evp_xts(EVP_CIPHER_CTX *c, size_t len)
{
    int outl;

    EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv);
    EVP_EncryptUpdate(c, buf[0], &outl, buf[0], (int)len);
}

/* accelaes's CTR with a new IV each call (the IV set as a GCM record sets it). */
static void acc_ctr(EVP_CIPHER_CTX *c, size_t len)
{
    int outl;

    EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv);
    EVP_EncryptUpdate(c, buf[0], &outl, buf[0], (int)len);
}

#ifdef HAVE_IPSECMB
static IMB_MGR *mgr;
static struct gcm_key_data gkey __attribute__((aligned(64)));

static void imb_gcm(size_t len)
{
    struct gcm_context_data ctx;

    IMB_AES128_GCM_INIT_VAR_IV(mgr, &gkey, &ctx, iv, 12, aad, sizeof(aad));
    IMB_AES128_GCM_ENC_UPDATE(mgr, &gkey, &ctx, buf[1], buf[1], len);
    IMB_AES128_GCM_ENC_FINALIZE(mgr, &gkey, &ctx, tag[1], 16);
}
#endif

static EVP_CIPHER_CTX *ctr;   /* accelaes's AES-128-CTR, or NULL */

static double timed(int which, EVP_CIPHER_CTX *gcm, EVP_CIPHER_CTX *xts, size_t len, long iters)
{
    double s = now_ns();

    for (long i = 0; i < iters; i++) {
        if (which == 0)
            evp_gcm(gcm, len);
        else if (which == 1)
            evp_xts(xts, len);
        else if (which == 3)
            acc_ctr(ctr, len);
#ifdef HAVE_IPSECMB
        else
            imb_gcm(len);
#endif
    }
    return (now_ns() - s) / (double)iters;
}

int main(int argc, char **argv)
{
    size_t sizes[16] = { 16, 64, 256, 1024, 8192, 16384 };
    int nsizes = 6, given = 0, rounds = 51, nways = 2, have_ipsecmb = 0;
    EVP_CIPHER *actr = NULL;
    EVP_CIPHER_CTX *gcm = EVP_CIPHER_CTX_new(), *xts = EVP_CIPHER_CTX_new();

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else {
            if (!given)
                nsizes = 0, given = 1;
            if (nsizes < 16 && strtoul(argv[i], NULL, 10) % 16 == 0 && strtoul(argv[i], NULL, 10) <= MAXLEN)
                sizes[nsizes++] = strtoul(argv[i], NULL, 10);
        }
    }
    if (gcm == NULL || xts == NULL || !EVP_EncryptInit_ex(gcm, EVP_aes_128_gcm(), NULL, key, iv)
        || !EVP_EncryptInit_ex(xts, EVP_aes_128_xts(), NULL, key, iv)) {
        fprintf(stderr, "cannot set up the default provider's GCM and XTS\n");
        return 1;
    }
#ifdef HAVE_IPSECMB
    if ((mgr = alloc_mb_mgr(0)) == NULL)
        return 1;
    init_mb_mgr_auto(mgr, NULL);
    IMB_AES128_GCM_PRE(mgr, key, &gkey);
    nways = 3;
    have_ipsecmb = 1;
    printf("intel-ipsec-mb %s, arch %d\n", imb_get_version_str(), (int)mgr->used_arch);
#endif
    if (OSSL_PROVIDER_load(NULL, "default") != NULL && OSSL_PROVIDER_load(NULL, "accelaes") != NULL
        && (actr = EVP_CIPHER_fetch(NULL, "AES-128-CTR", "provider=accelaes")) != NULL
        && (ctr = EVP_CIPHER_CTX_new()) != NULL && EVP_EncryptInit_ex(ctr, actr, NULL, key, iv))
        nways = 4;   /* way 2 is ipsec-mb's: without it, that way only costs a loop */
    printf("%d alternated rounds; ns per record (GCM: IV + 13 B AAD + payload + tag) or data unit (XTS), minimum\n",
           rounds);
    printf("%6s %14s %14s %16s %12s %20s\n", "bytes", "default GCM", "ipsec-mb GCM", "default/ipsec-mb", "default XTS",
           "accelaes CTR+new IV");
    for (int s = 0; s < nsizes; s++) {
        size_t len = sizes[s];
        long iters = (long)(20000 / (1 + len / 256));
        double best[4] = { 1e18, 1e18, 1e18, 1e18 };

        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < nways; k++) {
                int w = (r & 1) ? nways - 1 - k : k;
                double t = timed(w, gcm, xts, len, iters);
                best[w] = t < best[w] ? t : best[w];
            }
#ifdef HAVE_IPSECMB
        /* same key, IV, AAD and input: the same ciphertext and tag */
        memset(buf[0], 0x5a, len);
        memset(buf[1], 0x5a, len);
        evp_gcm(gcm, len);
        imb_gcm(len);
        if (memcmp(buf[0], buf[1], len) != 0 || memcmp(tag[0], tag[1], 16) != 0) {
            fprintf(stderr, "ipsec-mb's GCM differs from the default provider's at %zu bytes\n", len);
            return 1;
        }
#endif
        printf("%6zu %14.1f %14.1f %16.2f %12.1f %20.1f\n", len, best[0], have_ipsecmb ? best[2] : 0.0,
               have_ipsecmb ? best[0] / best[2] : 0.0, best[1], nways > 3 ? best[3] : 0.0);
    }
    EVP_CIPHER_CTX_free(gcm);
    EVP_CIPHER_CTX_free(xts);
    EVP_CIPHER_CTX_free(ctr);
    EVP_CIPHER_free(actr);
    return 0;
}
