/* tests/c/valgrind_ct.h: valgrind's client requests for the constant-time checks (ctgrind: secret bytes
 * marked undefined, so memcheck reports any branch on them or index by them). Without valgrind's headers
 * they do nothing: the reference checks still run, the constant-time part cannot. */
#ifndef ACCELAES_TEST_VALGRIND_CT_H
#define ACCELAES_TEST_VALGRIND_CT_H

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MAKE_MEM_UNDEFINED(p, n) ((void)(p), (void)(n))
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

#endif
