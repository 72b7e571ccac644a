/* tests/c/test_cuda_common.h: the pass/fail counters, check() and the summary line that the
 * CUDA host-side tests share. Included by test_cuda_host.c and test_cuda_team.c only. */
#ifndef ACCELAES_TEST_CUDA_COMMON_H
#define ACCELAES_TEST_CUDA_COMMON_H

#include <stdio.h>

static int g_pass, g_fail;

static void check(int ok, const char *what)
{
    if (ok) {
        g_pass++;
    } else {
        g_fail++;
        printf("FAIL: %s\n", what);
    }
}

/* The summary line the pytest runners read; the exit status: 1 when anything failed. */
static int check_report(void)
{
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

#endif
