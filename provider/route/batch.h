/* provider/route/batch.h: async-job batching. Requests from OpenSSL ASYNC jobs on one thread are
 * gathered and run together in multi-buffer lanes (accel/mb.h). */
#ifndef ACCELAES_BATCH_H
#define ACCELAES_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "provider/route/cipher_ctx.h"

/* The longest a queued request waits for companions, in nanoseconds. */
#define ACC_BATCH_TIMEOUT_NS 50000

/* Called for a request of whole blocks (len a multiple of 16; in == out is legal).
 *  1: the caller runs inside an OpenSSL ASYNC job and batching pays for this op and size
 *     (CBC-encrypt of at least 256 bytes): the request was queued in the thread's batch,
 *     the job paused until the batch ran, and the request is done (ctx->iv updated, the
 *     bytes counted with acc_sched_count: ACC_PATH_BATCH, or ACC_PATH_INLINE where the
 *     batch held only this request).
 *  0: not taken; nothing was touched; the caller runs the request itself. Outside ASYNC
 *     jobs this is immediate: a lone request never waits.
 * -1: taken, but the multi-buffer run failed (an OpenSSL error is raised); out may be
 *     partly written, so the caller must fail the update. Check with `< 0`. */
int acc_batch_submit(acc_cipher_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len);

/* Takes ctx's waiting request, if any, out of its queue, on whichever thread it waits, so that
 * the batch never touches ctx or its buffers again (the application freed them: SSL_free of a
 * connection whose job is paused). Called when a context is freed or re-initialised; a job
 * resumed after that fails its update. Cheap when nothing waits. */
void acc_batch_cancel(acc_cipher_ctx *ctx);

#endif
