/* tests/c/test_sched_common.h: what the scheduler tests share: the common includes, the CHECK
 * macro and its counters, the shared segment's name and sleep_us. Included by test_sched.c,
 * test_sched_mp.c, test_sched_pool.c and test_pool_ranges.c only, each of which defines _GNU_SOURCE
 * before it. */
#ifndef ACCELAES_TEST_SCHED_COMMON_H
#define ACCELAES_TEST_SCHED_COMMON_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "scheduler/sched_int.h"

/* Each including test uses only some of these helpers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

static int passed, failed;
#define CHECK(cond, ...) do { \
        if (cond) { passed++; } \
        else { failed++; printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
               printf(__VA_ARGS__); printf("\n"); } \
    } while (0)

/* The test's own scheduler segment (ACCELAES_SHM_NAME), set by its main. */
static char segname[128];

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

#pragma GCC diagnostic pop

#endif
