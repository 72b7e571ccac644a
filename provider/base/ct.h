/* provider/base/ct.h: constant-time masks for TLS records (tls.c, cipher_hmac_record.c).
 * All ones or zero. Where a padding length, and so a MAC position, is secret (Lucky 13, padding
 * oracles), every decision that depends on it is one of these masks, never a branch or a memory
 * index. Inline rather than out of line: they sit in per-byte loops. Arguments stay below 2^63
 * (record lengths always do). */
#ifndef ACCELAES_CT_H
#define ACCELAES_CT_H

#include <stddef.h>

/* Hide a mask from the optimiser: knowing a value is 0 or all ones, gcc turns a masked loop
 * into an early exit or a select into a branch (test_tls_ct caught it doing so). */
static inline size_t acc_ct_barrier(size_t m)
{
    __asm__("" : "+r"(m));
    return m;
}

/* all ones if a < b, else 0 */
static inline size_t acc_ct_lt(size_t a, size_t b)
{
    return acc_ct_barrier((size_t)0 - ((a - b) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t acc_ct_ge(size_t a, size_t b)
{
    return ~acc_ct_lt(a, b);
}

static inline size_t acc_ct_is_zero(size_t a)
{
    return acc_ct_barrier((size_t)0 - ((~a & (a - 1)) >> (sizeof(size_t) * 8 - 1)));
}

static inline size_t acc_ct_eq(size_t a, size_t b)
{
    return acc_ct_is_zero(a ^ b);
}

#endif
