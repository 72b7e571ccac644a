/* tests/c/test_alloc_fail_allocator.h: test_alloc_fail.c's allocator for CRYPTO_set_mem_functions: it fails
 * the fail_at-th allocation after arming, remembers where (file:line and the stack), and tracks the blocks
 * that accelaes code (by OPENSSL_FILE) holds, so a run can be judged for leaks. Included once, by
 * test_alloc_fail.c, after it defines _GNU_SOURCE (dladdr). */
#ifndef ACCELAES_TEST_ALLOC_FAIL_ALLOCATOR_H
#define ACCELAES_TEST_ALLOC_FAIL_ALLOCATOR_H

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fail_at;             /* which allocation since arming fails; 0: none */
static long n_allocs;            /* allocations since arming */
static int armed, fired;
static char fired_at[200];       /* file:line of the allocation that failed */
static void *fired_stack[32];    /* and its stack, printed for a silent failure */
static int fired_depth;

static int count_and_fail(const char *file, int line)
{
    if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE)
        || __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED) != __atomic_load_n(&fail_at, __ATOMIC_RELAXED))
        return 0;
    snprintf(fired_at, sizeof(fired_at), "%s:%d", file != NULL ? file : "?", line);
    fired_depth = backtrace(fired_stack, 32);
    __atomic_store_n(&fired, 1, __ATOMIC_RELEASE);
    return 1;
}

/* Blocks that accelaes code allocated (by OPENSSL_FILE) and has not freed yet: a handful at a time. */
#define MAX_OURS 4096
static void *ours[MAX_OURS];
static int n_ours, ours_overflow, ours_excused;   /* excused: left by load runs (see inject) */
static pthread_mutex_t ours_lock = PTHREAD_MUTEX_INITIALIZER;

static int our_site(const char *file)
{
    return file != NULL && (strstr(file, "provider/") != NULL || strstr(file, "accel/") != NULL
                            || strstr(file, "scheduler/") != NULL);
}

static void ours_add(void *p)
{
    pthread_mutex_lock(&ours_lock);
    ours_overflow |= n_ours == MAX_OURS;
    if (n_ours < MAX_OURS)
        ours[n_ours++] = p;
    pthread_mutex_unlock(&ours_lock);
}

static int ours_remove(void *p)
{
    int i;

    pthread_mutex_lock(&ours_lock);
    for (i = n_ours - 1; i >= 0 && ours[i] != p; i--)
        ;
    if (i >= 0)
        ours[i] = ours[--n_ours];
    pthread_mutex_unlock(&ours_lock);
    return i >= 0;
}

static void *t_malloc(size_t n, const char *file, int line)
{
    void *p = count_and_fail(file, line) ? NULL : malloc(n);

    if (p != NULL && our_site(file))
        ours_add(p);
    return p;
}

static void t_free(void *p, const char *file, int line)
{
    (void)file, (void)line;
    if (p != NULL)
        ours_remove(p);
    free(p);
}

/* A failed realloc leaves the block with the caller, as CRYPTO_realloc's contract says. */
static void *t_realloc(void *p, size_t n, const char *file, int line)
{
    void *q;
    int mine;

    if (n == 0) {
        t_free(p, file, line);
        return NULL;
    }
    if (count_and_fail(file, line))
        return NULL;
    mine = p != NULL ? ours_remove(p) : our_site(file);
    q = realloc(p, n);
    if (mine)
        ours_add(q != NULL ? q : p);
    return q;
}

/* Whether the failed allocation was made by accelaes.so or by something it called. */
static int stack_in_accelaes(void)
{
    Dl_info di;

    for (int i = 0; i < fired_depth; i++) {
        const char *base;
        if (dladdr(fired_stack[i], &di) == 0 || di.dli_fname == NULL)
            continue;
        base = strrchr(di.dli_fname, '/');
        if (strcmp(base != NULL ? base + 1 : di.dli_fname, "accelaes.so") == 0)
            return 1;
    }
    return 0;
}

#endif
