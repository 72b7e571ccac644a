/* provider/base/err.h: accelaes's error reasons and acc_raise, through which every failing call reports
 * what was wrong. A leaf: it includes nothing of accelaes's, so that every layer may raise. */
#ifndef ACCELAES_ERR_H
#define ACCELAES_ERR_H

#include <stdarg.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/err.h>
#include <openssl/proverr.h>

/* accelaes's own reason codes (the table in err.c gives each its text), for conditions the default
 * provider does not have: an engine that failed, a refused setting, the DRBG delegate, a request
 * the default provider would crash on or answer wrongly (NULL buffers, lengths past INT_MAX, a
 * CTR num past the keystream block, a partial block to EVP_Cipher). Where the default provider
 * has the condition, the call raises the default's reason instead (ACC_PROV_R). Each code here is
 * raised somewhere (tests/unit/test_reasons.py fails on one that is not). The numbers stay as they
 * were (they appear in logs and tests): 1-4, 6 and 7 were the default's conditions, retired. */
enum {
    ACC_R_WRONG_FINAL_BLOCK_LENGTH = 5,
    ACC_R_INVALID_PARAMETER = 8,
    ACC_R_INVALID_SETTING = 9,
    ACC_R_TLS_RECORD = 10,
    ACC_R_ENGINE_FAILURE = 11,
    ACC_R_LENGTH_TOO_LARGE = 12,
    ACC_R_NULL_POINTER = 13,
    ACC_R_MALLOC_FAILURE = 14,
    ACC_R_NOT_INITIALISED = 15,
    ACC_R_RAND_FAILURE = 16,
    ACC_R_PIPELINE = 17
};

/* The reason the default provider raises for the same call (PROV_R_..., or ERR_R_... as it raises
 * them under ERR_LIB_PROV): its library, code and text, for applications that act on them
 * (pyca/cryptography turns only ERR_LIB_PROV's wrong-final-block-length into ValueError, PHP and
 * Node show the library and text). The core's vset_error keeps the library packed in a code whose
 * library bits are not 0 (core_vset_error, crypto/provider_core.c), and the reason text then comes
 * from libcrypto's own ERR_LIB_PROV table. */
#define ACC_PROV_R(r) ((int)ERR_PACK(ERR_LIB_PROV, 0, (r)))

/* Raise an OpenSSL error with one of the reasons above, or ACC_PROV_R(reason), and printf-style
 * detail (which changes no reason text: it is there for whoever reads the whole error line).
 * Takes no lock: once the texts are registered for the process (acc_err_register), the error goes
 * straight onto the calling thread's queue; before that, through the entry layer's hook. */
void acc_raise(int reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* How an error reaches libcrypto where the process-wide texts could not be registered: through a
 * live load's core handle (provider/entry/prov.c), which the leaf cannot see. reason is as acc_raise's. */
typedef void acc_err_hook_fn(int reason, const char *fmt, va_list ap);
void acc_err_set_hook(acc_err_hook_fn *hook);

/* Registers the reason texts under one error library number for the whole process, once
 * (thread-safe), where the module is pinned and the core's error functions are this module's
 * libcrypto's (core_fn: one of them, as the core handed it). 1 when registered (acc_raise then
 * needs no core handle), 0 where the per-load texts (acc_err_reason_strings) must serve. */
int acc_err_register(void *core_fn);
const OSSL_ITEM *acc_err_reason_strings(void);

#endif
