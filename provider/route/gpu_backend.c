/* provider/route/gpu_backend.c: the GPU plugin as a backend (provider/route/backend.h): a prefix of a large
 * parallel request on a scheduler GPU unit, through the glue in provider/route/gpu.c. */
#include <stdint.h>
#include "provider/route/backend.h"
#include "provider/route/cipher_ctx.h"
#include "provider/route/gpu.h"
#include "provider/route/prov.h"

/* With gpu_min on auto, only requests this large ask the GPU glue (which calibrates). */
#define GPU_AUTO_FLOOR (64u * 1024u)

static size_t gpu_min(const acc_settings *s, unsigned cap)
{
    (void)cap;
    return s->gpu_min != 0 ? s->gpu_min : GPU_AUTO_FLOOR;
}

/* The inline engine for the slices a request queued for the GPU runs meanwhile (provider/route/gpu.c). */
static int gpu_cpu_run(void *arg, const uint8_t *in, uint8_t *out, size_t nblocks, uint8_t iv[16])
{
    return acc_ctx_run(arg, in, out, nblocks, iv);
}

/* The GPU does a prefix; the policy has the CPU finish whatever it did not (a request that queued
 * for the GPU comes back finished, its tail run on this thread meanwhile). */
static size_t gpu_run(acc_cipher_ctx *c, const uint8_t *in, uint8_t *out, size_t len)
{
    acc_gpu_cpu cpu = { gpu_cpu_run, c };
    size_t done = acc_gpu_offload(&c->prov->settings, c->op, c->rawkey, c->keylen, c->iv, in, out, len, &cpu);

    if (done == ACC_GPU_CPU_FAILED) {
        acc_engine_fail(c, len);
        return ACC_BK_FAILED;
    }
    return done;
}

/* CBC-encrypt never: one request would be one GPU thread, far slower than one core. The plugin
 * ABI has block operations only, so no AEAD. */
const acc_backend acc_backend_gpu = {
    .name = "gpu",
    .setting = "cuda",
    .priority = 20,
    .caps = ACC_BK_PARALLEL | ACC_BK_DISJOINT | ACC_BK_DEVICE,
    .unit = ACC_UNIT_GPU,
    .path = ACC_PATH_GPU,
    .min_size = gpu_min,
    .run = gpu_run,
};
