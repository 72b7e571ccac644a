/* provider/base/ctx_alloc.h: 64-byte aligned cipher contexts from OpenSSL's allocator. */
#ifndef ACCELAES_CTX_ALLOC_H
#define ACCELAES_CTX_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/crypto.h>

/* Cipher contexts hold key schedules that the vector engines want 64-byte aligned. OpenSSL 3.0
 * has no aligned allocator, and posix_memalign would bypass CRYPTO_set_mem_functions (an
 * application's allocator; the failure injection of tests/c/test_alloc_fail.c): so the block
 * comes from OPENSSL_malloc, over-allocated, with its start kept just below the aligned pointer. */
static inline void *acc_ctx_alloc(size_t size)
{
    unsigned char *raw = OPENSSL_malloc(size + 64 + sizeof(void *));
    uintptr_t p;

    if (raw == NULL)
        return NULL;
    p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

/* Frees what acc_ctx_alloc returned (the caller cleanses it first). */
static inline void acc_ctx_free(void *p)
{
    if (p != NULL)
        OPENSSL_free(((void **)p)[-1]);
}

#endif
