/* provider/route/xts_split.h: one XTS data unit cut into ranges for the backends
 * (provider/route/xts_split.c). */
#ifndef ACCELAES_XTS_SPLIT_H
#define ACCELAES_XTS_SPLIT_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"
#include "provider/route/policy.h"

/* Runs len bytes (whole blocks, or ending in a partial one) of a sub-unit whose first block's
 * tweak is E(k2, iv): 1 done, 0 failed with out wiped. Called from pool threads at once. */
typedef int acc_xts_unit_fn(void *arg, const uint8_t iv[16], const uint8_t *in, uint8_t *out, size_t len);

/* One data unit of len >= 32 bytes: ranges of whole blocks on the backends that take XTS ranges
 * (acc_policy_ranges under p), the ciphertext-stealing tail (last whole block and partial one) on
 * the caller afterwards. e and k2 (the tweak key, with both schedules) make the tweaks; unit runs
 * each piece. 1 done, 0 failed with all of out wiped (the caller raises the error), -1 declined
 * (nothing run or written: the caller runs the unit). Counts the bytes it ran (the backend's
 * path, or ACC_PATH_INLINE if the caller ran every range). */
int acc_xts_split(const acc_policy *p, const acc_engine *e, const acc_aes_key *k2, const uint8_t iv[16],
                  const uint8_t *in, uint8_t *out, size_t len, acc_xts_unit_fn *unit, void *arg);

#endif
