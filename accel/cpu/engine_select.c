/* accel/cpu/engine_select.c: picks the inline engine once per process: AES-NI (with VAES where
 * available) when the CPU has it, else nested EVP; ACCELAES_FORCE_EVP_ENGINE=1 forces EVP.
 * Likewise the GCM engine: accelaes's VAES engine, else intel-ipsec-mb, else nested EVP. */
#define _GNU_SOURCE   /* secure_getenv */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "accel/engine.h"
#include "accel/gcm.h"
#include "accel/cpu/gcm_dual.h"

static const acc_engine *g_default;

static void choose_default(void)
{
    const char *force = secure_getenv("ACCELAES_FORCE_EVP_ENGINE");
    const acc_engine *ni = acc_engine_aesni();

    if ((force != NULL && strcmp(force, "1") == 0) || ni == NULL)
        g_default = acc_engine_evp();
    else
        g_default = ni;
}

/* Read once: the engine must not change under contexts that already hold its key schedules. */
const acc_engine *acc_engine_default(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_default);
    return g_default;
}

static const acc_gcm_engine *g_gcm_default;

/* ACCELAES_GCM_ENGINE names one engine (tests run each the machine has); one that is not
 * available here, or an unknown name, gives the nested EVP engine, which always is. */
static void choose_gcm_default(void)
{
    const char *force = secure_getenv("ACCELAES_FORCE_EVP_ENGINE");
    const char *pick = secure_getenv("ACCELAES_GCM_ENGINE");
    const acc_gcm_engine *e;

    if (force != NULL && strcmp(force, "1") == 0)
        e = NULL;
    else if (pick != NULL && *pick != '\0')
        e = strcmp(pick, "vaes") == 0 ? acc_gcm_engine_vaes() : strcmp(pick, "imb") == 0 ? acc_gcm_engine_imb() : NULL;
    /* Both where both exist, chosen per message (gcm_dual.c: the VAES engine's short start and finish for
     * small records, ipsec-mb's bulk loop from 4 KiB: bench/results/releases-speed.md, bench/results/gcm-vaes.md);
     * else ipsec-mb, else the VAES engine. */
    else if ((e = acc_gcm_engine_dual()) == NULL && (e = acc_gcm_engine_imb()) == NULL)   /* per message: gcm_dual.c */
        e = acc_gcm_engine_vaes();
    g_gcm_default = e != NULL ? e : acc_gcm_engine_evp();
}

/* Read once, as the block engine: contexts hold the engine's key data. */
const acc_gcm_engine *acc_gcm_engine_default(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_gcm_default);
    return g_gcm_default;
}
