/* accel/cpu/engine_select.c: picks each kind of inline engine once per process, with one
 * chooser: the block engine (AES-NI, with VAES where available, else nested EVP) and the GCM
 * engine (accelaes's VAES engine, beside intel-ipsec-mb or on ymm, else ipsec-mb, else nested
 * EVP). Read once: the engine must not change under contexts that already hold its key schedules. */
#define _GNU_SOURCE   /* secure_getenv */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "accel/engine.h"
#include "accel/gcm.h"
#include "accel/cpu/gcm_dual.h"

/* A candidate: its name (as ACCELAES_*_ENGINE spells it) and its getter, NULL where the CPU or the
 * build lacks it. */
typedef struct {
    const char *name;
    const void *(*get)(void);
} candidate;

/* ACCELAES_FORCE_EVP_ENGINE=1 gives the fallback (nested EVP, always available). The variable
 * pick_var, when set and not empty, names one candidate (tests run each the machine has); one
 * that is not available here, or an unknown name, gives the fallback. Else the first candidate
 * available, in the order given. */
static const void *choose(const candidate *c, size_t n, const char *pick_var, const void *fallback)
{
    const char *force = secure_getenv("ACCELAES_FORCE_EVP_ENGINE");
    const char *pick = pick_var != NULL ? secure_getenv(pick_var) : NULL;
    const void *e = NULL;

    if (force != NULL && strcmp(force, "1") == 0)
        return fallback;
    for (size_t i = 0; i < n && e == NULL; i++)
        if (pick == NULL || *pick == '\0' || strcmp(pick, c[i].name) == 0)
            e = c[i].get();
    return e != NULL ? e : fallback;
}

static const void *get_aesni(void)
{
    return acc_engine_aesni();
}

static const void *get_gcm_imb(void)
{
    return acc_gcm_engine_imb();
}

static const void *get_gcm_dual(void)
{
    return acc_gcm_engine_dual();
}

static const void *get_gcm_vaes(void)
{
    return acc_gcm_engine_vaes();
}

static const void *get_gcm_vaesy(void)
{
    return acc_gcm_engine_vaesy();
}

static const void *get_gcm_vaesx(void)
{
    return acc_gcm_engine_vaesx();
}

static const acc_engine *g_default;

static void choose_default(void)
{
    static const candidate block[] = { { "aesni", get_aesni } };

    g_default = choose(block, sizeof(block) / sizeof(block[0]), NULL, acc_engine_evp());
}

const acc_engine *acc_engine_default(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_default);
    return g_default;
}

static const acc_gcm_engine *g_gcm_default;

/* Both where both exist, chosen per message (gcm_dual.c: the VAES engine's short start and finish for small
 * records, intel-ipsec-mb's bulk loop from 4 KiB, which on the Xeon this was measured on runs 0.81-0.95 of ECB
 * at 16 KiB against the VAES engine's 0.72-0.89: bench/results/releases-speed.md, bench/results/gcm-vaes.md);
 * else the ymm VAES engine (cores without AVX-512, where ipsec-mb has no VAES code of its own: on the
 * Zen 3 measured, AES-128 at 16 KiB 0.37-0.43 c/B against ipsec-mb's 0.81-1.02, and faster at every size, bench/results/gcm-ymm.md);
 * else the zmm VAES engine alone (a build without ipsec-mb on an AVX-512 core), else the same engine on
 * xmm (AES-NI and PCLMULQDQ, SSE only: gcm_vaesx.c; forced on the Zen 3 measured, AES-128 at 16 KiB
 * 0.70-0.79 c/B against ipsec-mb's 0.78-1.04, and faster records from 16 B, bench/results/gcm-xmm.md),
 * else ipsec-mb (a core with AES-NI but no PCLMULQDQ), else nested EVP. */
static void choose_gcm_default(void)
{
    static const candidate gcm[] = { { "dual", get_gcm_dual }, { "vaesy", get_gcm_vaesy }, { "vaes", get_gcm_vaes },
                                     { "vaesx", get_gcm_vaesx }, { "imb", get_gcm_imb } };

    g_gcm_default = choose(gcm, sizeof(gcm) / sizeof(gcm[0]), "ACCELAES_GCM_ENGINE", acc_gcm_engine_evp());
}

const acc_gcm_engine *acc_gcm_engine_default(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_gcm_default);
    return g_gcm_default;
}
