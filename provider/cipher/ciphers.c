/* provider/cipher/ciphers.c: every cipher accelaes serves, in one static table, and the cipher query's answer
 * made from it once: its rows in the running release's form, then on OpenSSL 3.5+ the delegates of the
 * default's other AES ciphers. Adding a mode adds its line here (names in names.h, its dispatch tables
 * declared in algs.h). */
#include <pthread.h>
#include <openssl/crypto.h>
#include "provider/cipher/algs.h"
#include "provider/cipher/cipher_delegate.h"
#include "provider/base/names.h"
#include "scheduler/forksafe.h"

/* A cipher, and where a running libcrypto 3.5+ gets more functions, its dispatch table there (GCM's
 * pipelines: a 3.0 answer must not carry ids 3.0 does not know, decided at run time, not by headers). */
typedef struct {
    OSSL_ALGORITHM alg;
    const OSSL_DISPATCH *fns_35;
} cipher_row;

#define ROW(NAME, kbits, mode) { { ACC_NAMES_##NAME, ACC_PROPS, acc_aes##kbits##mode##_functions, NULL }, NULL }
#define ROW_35(NAME, kbits, mode)                                                               \
    { { ACC_NAMES_##NAME, ACC_PROPS, acc_aes##kbits##mode##_functions, NULL },                   \
      acc_aes##kbits##mode##_functions_35 }
/* the three key sizes of a mode, largest first as the default lists them */
#define ROWS3(MODE, mode) ROW(AES_256_##MODE, 256, mode), ROW(AES_192_##MODE, 192, mode), ROW(AES_128_##MODE, 128, mode)
#define ROWS3_35(MODE, mode)                                                                    \
    ROW_35(AES_256_##MODE, 256, mode), ROW_35(AES_192_##MODE, 192, mode), ROW_35(AES_128_##MODE, 128, mode)

static const cipher_row served[] = {
    ROWS3(ECB, ecb),
    ROWS3(CBC, cbc),
    ROWS3(CTR, ctr),
    ROWS3_35(GCM, gcm),
    ROW(AES_256_XTS, 256, xts), ROW(AES_128_XTS, 128, xts),
    ROWS3(CCM, ccm),
    ROW(AES_128_CBC_HMAC_SHA1, 128, cbc_hmac_sha1), ROW(AES_256_CBC_HMAC_SHA1, 256, cbc_hmac_sha1),
    ROW(AES_128_CBC_HMAC_SHA256, 128, cbc_hmac_sha256), ROW(AES_256_CBC_HMAC_SHA256, 256, cbc_hmac_sha256),
};
#define NSERVED (sizeof(served) / sizeof(served[0]))

/* The answers, sized from the table (and the delegates' pool, which says so itself when a release
 * has more), so that nothing can fall off the end. served_now: the rows as this release takes them,
 * the answer until the delegates exist; all_ciphers: those and the delegates, fixed once made. */
static OSSL_ALGORITHM served_now[NSERVED + 1];
static OSSL_ALGORITHM all_ciphers[NSERVED + ACC_DELEGATE_MAX + 1];
static int served_ready, all_ready;   /* atomic: that table is complete and fixed */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
/* held while the delegates are made (a provider load): reset in a child, which makes them again */
ACC_FORK_SAFE(&all_lock, 1, "cipher table", ACC_RANK_CIPHERS, ACC_FORK_RESET);

static void served_make(void)
{
    int v35 = OpenSSL_version_num() >= 0x30500000UL;

    for (size_t i = 0; i < NSERVED; i++) {
        served_now[i] = served[i].alg;
        if (v35 && served[i].fns_35 != NULL)
            served_now[i].implementation = served[i].fns_35;
    }
    __atomic_store_n(&served_ready, 1, __ATOMIC_RELEASE);   /* the end mark was zeroed from the start */
}

/* Where the delegates could not be made yet (the private default provider failed to load: an
 * allocation), the served ones alone, uncached, and the next query tries again. */
const OSSL_ALGORITHM *acc_cipher_query(int *no_cache)
{
    const OSSL_ALGORITHM *delegates;
    int ndel;

    if (__atomic_load_n(&all_ready, __ATOMIC_ACQUIRE))
        return all_ciphers;
    pthread_mutex_lock(&all_lock);
    if (!served_ready)
        served_make();
    if (!all_ready && (ndel = acc_cipher_delegates(served_now, &delegates)) >= 0) {
        for (size_t i = 0; i < NSERVED; i++)
            all_ciphers[i] = served_now[i];
        for (int i = 0; i < ndel; i++)
            all_ciphers[NSERVED + (size_t)i] = delegates[i];
        __atomic_store_n(&all_ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&all_lock);
    if (__atomic_load_n(&all_ready, __ATOMIC_ACQUIRE))
        return all_ciphers;
    *no_cache = 1;
    return served_now;
}
