/* provider/batch.c: async-job batching into multi-buffer lanes (stub until filled in). */
#include "provider/batch.h"

int acc_batch_submit(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len)
{
    (void)ctx;
    (void)in;
    (void)out;
    (void)len;
    return 0;
}
