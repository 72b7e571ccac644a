/* provider/base/err.c: the texts of accelaes's own reasons, registered once per process, and acc_raise.
 * A leaf (provider/base/err.h): libcrypto and libc only. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include "provider/base/err.h"

/* The texts of accelaes's own reasons. A code made with ACC_PROV_R is ERR_LIB_PROV's, and its text
 * is libcrypto's: it never reaches this table. */
static const OSSL_ITEM reason_strings[] = {
    { ACC_R_WRONG_FINAL_BLOCK_LENGTH, "wrong final block length" },
    { ACC_R_INVALID_PARAMETER, "invalid parameter" },
    { ACC_R_INVALID_SETTING, "invalid accelaes setting" },
    { ACC_R_TLS_RECORD, "invalid tls record" },
    { ACC_R_ENGINE_FAILURE, "aes engine failure" },
    { ACC_R_LENGTH_TOO_LARGE, "length too large" },
    { ACC_R_NULL_POINTER, "null pointer" },
    { ACC_R_MALLOC_FAILURE, "malloc failure" },
    { ACC_R_NOT_INITIALISED, "cipher not initialised" },
    { ACC_R_RAND_FAILURE, "random generator failure" },
    { ACC_R_PIPELINE, "invalid cipher pipeline operation" },
    { 0, NULL }
};

const OSSL_ITEM *acc_err_reason_strings(void)
{
    return reason_strings;
}

/* accelaes's own reasons go under one error library number for the whole process, its texts
 * registered once and never unloaded (the module is pinned). libcrypto gives every provider object
 * (each load of any provider, also the default in each new library context) the next number and
 * packs it into 8 bits: after 128 numbers a new load's number aliases a live load's, loads its texts
 * over the live one's and deletes them at its unload (ERR_unload_strings), so a long-lived load's
 * errors lost their reason text after many loads and unloads. Per-load texts (the core's
 * get_reason_strings) remain only where no number could be had here. */
#define OWN_NSTR (sizeof(reason_strings) / sizeof(reason_strings[0]))
static ERR_STRING_DATA own_strings[OWN_NSTR + 1];
static int own_lib;                     /* atomic: set once, then fixed */
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static void *own_core_fn;               /* acc_err_register's argument, for the once routine */
static acc_err_hook_fn *err_hook;       /* atomic */

/* Whether two functions come from the same loaded object (the core's libcrypto and this module's). */
static int same_object(void *a, void *b)
{
    Dl_info ia, ib;

    return dladdr(a, &ia) != 0 && dladdr(b, &ib) != 0 && ia.dli_fbase == ib.dli_fbase;
}

static void own_strings_register(void)
{
    Dl_info info;
    int lib = 0;

    /* libcrypto keeps pointers to these texts: only from a module pinned in memory (as sched.c
     * pins it); where the pin cannot be had (the code linked into a program), per-load texts stay */
    if (dladdr((void *)own_strings, &info) == 0 || info.dli_fname == NULL
        || (info.dli_fname[0] != '\0' && dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) == NULL))
        return;
    /* acc_raise then raises with this module's libcrypto: only where the core is that libcrypto */
    if (own_core_fn == NULL || !same_object(own_core_fn, (void *)ERR_new))
        return;
    /* a number whose low 8 bits alias one of OpenSSL's own libraries (< ERR_LIB_USER) is passed over */
    for (int tries = 0; tries < 256 && (lib & 0xff) < ERR_LIB_USER; tries++)
        lib = ERR_get_next_error_library();
    if ((lib & 0xff) < ERR_LIB_USER)
        return;
    own_strings[0].error = ERR_PACK(lib, 0, 0);
    own_strings[0].string = "accelaes";
    for (size_t i = 0; reason_strings[i].id != 0; i++) {
        own_strings[i + 1].error = ERR_PACK(lib, 0, reason_strings[i].id);
        own_strings[i + 1].string = reason_strings[i].ptr;
    }
    if (ERR_load_strings_const(own_strings))
        __atomic_store_n(&own_lib, lib, __ATOMIC_RELEASE);
}

int acc_err_register(void *core_fn)
{
    own_core_fn = core_fn;   /* read by the once routine only, on this thread or after it */
    pthread_once(&own_once, own_strings_register);
    return __atomic_load_n(&own_lib, __ATOMIC_ACQUIRE) != 0;
}

void acc_err_set_hook(acc_err_hook_fn *hook)
{
    __atomic_store_n(&err_hook, hook, __ATOMIC_RELEASE);
}

void acc_raise(int reason, const char *fmt, ...)
{
    int lib = __atomic_load_n(&own_lib, __ATOMIC_ACQUIRE);
    acc_err_hook_fn *hook;
    va_list ap;

    va_start(ap, fmt);
    if (lib != 0) {
        /* What the core's new_error and vset_error do for a code whose library bits are set
         * (core_vset_error): no handle is needed, so no load must be held alive meanwhile. */
        if (ERR_GET_LIB((unsigned long)reason) == 0)   /* not ACC_PROV_R's ERR_LIB_PROV */
            reason = (int)ERR_PACK(lib, 0, reason);
        ERR_new();
        ERR_vset_error(ERR_GET_LIB((unsigned long)reason), ERR_GET_REASON((unsigned long)reason), fmt, ap);
    } else if ((hook = __atomic_load_n(&err_hook, __ATOMIC_ACQUIRE)) != NULL) {
        hook(reason, fmt, ap);
    }
    va_end(ap);
}
