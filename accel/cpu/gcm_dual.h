/* accel/cpu/gcm_dual.h: what the per-message engine choice (gcm_dual.c) needs of the two engines
 * it holds side by side: each one's state fits ACC_GCM_SUB_SIZE bytes (each engine checks), and
 * each one's set_key and cleanse wipe only its own state's bytes, so that two fit one
 * acc_gcm_state. */
#ifndef ACCELAES_GCM_DUAL_H
#define ACCELAES_GCM_DUAL_H

#include <stddef.h>
#include <stdint.h>

#define ACC_GCM_SUB_SIZE 1472   /* a multiple of 64: the second state stays 64-byte aligned */

/* The VAES engine for a message whose first update is small, ipsec-mb's for a large one; NULL
 * unless both are there. */
struct acc_gcm_engine;
struct acc_gcm_state;
/* The VAES engine's message calls (gcm_vaes.c), called by gcm_dual.c directly. */
int acc_gv_start(struct acc_gcm_state *s, int enc, const uint8_t *iv, size_t ivlen, const uint8_t *aad,
                 size_t aadlen);
int acc_gv_update(struct acc_gcm_state *s, const uint8_t *in, uint8_t *out, size_t len);
int acc_gv_finish(struct acc_gcm_state *s, uint8_t *tag, size_t taglen);
const struct acc_gcm_engine *acc_gcm_engine_dual(void);

#endif
