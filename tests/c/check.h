/* tests/c/check.h: the counting check of the C unit tests: CHECK(cond, fmt, ...) counts a pass, or counts a
 * failure and says where and why on stderr; the test ends with CHECK_SUMMARY(), the line its pytest runner
 * reads ("N passed, M failed") and an exit status that is nonzero on any failure. */
#ifndef ACCELAES_TESTS_CHECK_H
#define ACCELAES_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (cond) {                                                         \
            passed++;                                                       \
        } else {                                                            \
            failed++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

#define CHECK_SUMMARY() (printf("%d passed, %d failed\n", passed, failed), failed != 0)

#endif
