/* accel/cpu/gcm_vaesx.c: accelaes's own GCM engine for cores with AES-NI and PCLMULQDQ but no VAES
 * (aesni-gcm): the stream of gcm_vaes_stream.h on the xmm kernels (gcm_vaesx_k.c, gcm_vaesx.h), SSE
 * only. acc_gcm_engine_default (engine_select.c) tries it after intel-ipsec-mb. */
#include "accel/cpu/cpu_features.h"
#include "accel/cpu/gcm_vaesx.h"

#define GS_TGT TGT_GVX
#define GS(name) gvx_##name
#define GS_API(name) acc_gvx_##name
#define GS_NAME "aesni-gcm"
#include "accel/cpu/gcm_vaes_stream.h"

/* AES-NI with SSE4.1 and SSSE3 (ACC_CPU_AESNI) and PCLMULQDQ; VAES or not (the engine is a
 * candidate on every core that has these, ACCELAES_NO_VAES does not concern it). */
const acc_gcm_engine *acc_gcm_engine_vaesx(void)
{
    return acc_cpu_has(ACC_CPU_AESNI | ACC_CPU_PCLMUL) ? &gv_engine : NULL;
}
