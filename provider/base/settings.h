/* provider/base/settings.h: the settings of docs/DESIGN.md (openssl.cnf section + ACCELAES_* environment),
 * parsed once at provider init and kept in the provider context. */
#ifndef ACCELAES_SETTINGS_H
#define ACCELAES_SETTINGS_H

#include <stddef.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>

/* backend: auto, cpu, or a device backend asked for by its setting name (provider/route/backends.c),
 * stored as ACC_BACKEND_DEVICE + its index in that table (provider/route/backend.h names them). */
enum acc_backend { ACC_BACKEND_AUTO = 0, ACC_BACKEND_CPU = 1, ACC_BACKEND_DEVICE = 2 };

typedef struct acc_settings {
    int backend;          /* enum acc_backend, or ACC_BACKEND_DEVICE + a backend's index */
    int workers;          /* CPU units to use; 0 = all in the affinity set */
    size_t split_min;     /* bytes from which ECB/CTR/CBC-decrypt are split over the pool */
    int split_min_auto;   /* split_min was left on auto (the policy may then keep some modes whole) */
    size_t gpu_min;       /* bytes from which a request may go to the GPU; 0 = calibrate at first use */
    int shm;              /* -1 auto, 0 off, 1 on */
} acc_settings;

/* provider/route/settings.c: read the provider's openssl.cnf section through the core, then the
 * ACCELAES_* environment; 1 on success, 0 (with an error naming the setting) on a bad value. */
int acc_settings_read(acc_settings *s, const OSSL_CORE_HANDLE *handle,
                      OSSL_FUNC_core_get_params_fn *get_params);

#endif
