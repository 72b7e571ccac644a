/* provider/batch.h: async-job batching. Requests from OpenSSL ASYNC jobs on one thread are
 * gathered and run together in multi-buffer lanes (accel/mb.h). */
#ifndef ACCELAES_BATCH_H
#define ACCELAES_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "provider/cipher.h"

/* Called for a request of whole blocks (len a multiple of 16). If the caller runs inside an
 * OpenSSL ASYNC job and batching pays for this op/size, the request is queued in the
 * thread's batch, the job pauses until the batch is flushed, and 1 is returned with the
 * request done (ctx->iv updated). Otherwise 0 is returned, nothing was touched, and the
 * caller runs the request itself. */
int acc_batch_submit(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len);

#endif
