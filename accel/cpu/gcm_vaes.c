/* accel/cpu/gcm_vaes.c: accelaes's own GCM engine for cores with VAES, VPCLMULQDQ and AVX-512
 * (accel/gcm.h's interface): the stream of gcm_vaes_stream.h on the zmm kernels (gcm_vaes_k.c,
 * gcm_vaes.h). Chosen ahead of intel-ipsec-mb by acc_gcm_engine_default (engine_select.c). */
#include "accel/cpu/cpu_features.h"
#include "accel/cpu/gcm_vaes.h"

#define GS_TGT TGT_GV
#define GS(name) gv_##name
#define GS_API(name) acc_gv_##name
#define GS_NAME "vaes-gcm"
#include "accel/cpu/gcm_vaes_stream.h"

/* Asked once, by engine_select.c. VAES on zmm as the block engine found it (aesni.c: CPU and OS, and ACCELAES_NO_VAES), plus
 * VPCLMULQDQ, PCLMULQDQ and AVX512VL, which this engine uses besides. */
static int cpu_has_gcm_vaes(void)
{
    return acc_engine_has(acc_engine_aesni(), ACC_CAP_ZMM)
        && acc_cpu_has(ACC_CPU_PCLMUL | ACC_CPU_AVX512VL | ACC_CPU_VPCLMUL);
}

const acc_gcm_engine *acc_gcm_engine_vaes(void)
{
    return cpu_has_gcm_vaes() ? &gv_engine : NULL;
}
