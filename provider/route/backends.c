/* provider/route/backends.c: the backends, one line each (provider/route/backend.h). The index is the bit in
 * acc_policy_paths; the order of trying is the descriptors' priority, not this order. */
#include "provider/route/backend.h"

_Static_assert(ACC_BK_COUNT <= ACC_BACKENDS_MAX, "acc_policy holds ACC_BACKENDS_MAX backends");

const acc_backend *const acc_backends[ACC_BK_COUNT] = {
    [ACC_BK_LANES] = &acc_backend_lanes,   /* intel-ipsec-mb multi-buffer lanes, async jobs' CBC-encrypt */
    [ACC_BK_GPU] = &acc_backend_gpu,       /* the GPU plugin (accelaes-cuda.so) on scheduler GPU units */
    [ACC_BK_POOL] = &acc_backend_pool,     /* split over idle CPU units plus the caller */
    [ACC_BK_INLINE] = &acc_backend_inline, /* the caller's thread, the inline engine: whatever is left */
};
