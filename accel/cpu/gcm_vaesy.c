/* accel/cpu/gcm_vaesy.c: accelaes's own GCM engine for cores with VAES and VPCLMULQDQ on ymm but no
 * AVX-512 (AMD Zen 3): the stream of gcm_vaes_stream.h on the ymm kernels (gcm_vaesy_k.c,
 * gcm_vaesy.h). Chosen first on such cores by acc_gcm_engine_default (engine_select.c). */
#include "accel/cpu/cpu_features.h"
#include "accel/cpu/gcm_vaesy.h"

#define GS_TGT TGT_GVY
#define GS(name) gvy_##name
#define GS_API(name) acc_gvy_##name
#define GS_NAME "vaes-gcm-ymm"
#include "accel/cpu/gcm_vaes_stream.h"

/* Asked once, by engine_select.c. VAES on ymm as the block engine found it (aesni.c: a core without
 * AVX-512, or ACCELAES_VAES=ymm; not with ACCELAES_NO_VAES=1), whose probe bit ACC_CPU_VAES256
 * includes VPCLMULQDQ; PCLMULQDQ for the one-block helpers. */
static int cpu_has_gcm_vaesy(void)
{
    return acc_engine_has(acc_engine_aesni(), ACC_CAP_YMM) && acc_cpu_has(ACC_CPU_VAES256 | ACC_CPU_PCLMUL);
}

const acc_gcm_engine *acc_gcm_engine_vaesy(void)
{
    return cpu_has_gcm_vaesy() ? &gv_engine : NULL;
}
