/* tests/c/test_regcache.c: the registration cache (accel/cuda/regcache.cu, plain C, included here) driven
 * with fake register / unregister callbacks that record every call: hits and misses, the guarantee (no
 * entry outlives munmap, free, madvise, mremap, MAP_FIXED or a brk shrink of its pages), concurrent
 * lookups against a thread that replaces the buffers, file and shared mappings refused, fork, the limits
 * and destroy. As root every lookup also compares each page's frame number (/proc/self/pagemap) with the
 * one seen at registration, and the fake registration holds its pages as a pin does (vmsplice into a
 * pipe), so that a replaced page never gets the old frame back.
 * `test_regcache --bench`: the cost of a hit, of a miss without real pinning and of a watched munmap. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "accel/cuda/regcache.cu"
#include "tests/c/test_cuda_common.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#define PG 4096u
#define MAXREC 8192

/* ---- the fake callbacks: one record per registration ---- */

typedef struct rec {
    uintptr_t base;
    size_t len;
    int writable, live;
    uint64_t tag;  /* the first 8 bytes of the range when registered */
    uint64_t *pfn; /* root: each page's frame number when registered */
    int pin[2];    /* root: a pipe holding the pages (vmsplice), as a pin keeps them */
} rec;

static rec g_rec[MAXREC];
static int g_nrec, g_bad_unreg, g_fail_reg, g_pagemap = -1;

static int read_pfns(uintptr_t b, size_t len, uint64_t *out)
{
    size_t n = len / PG;
    if (pread(g_pagemap, out, n * 8, (off_t)(b / PG * 8)) != (ssize_t)(n * 8))
        return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = out[i] >> 63 ? out[i] & ((1ull << 55) - 1) : 0;
    return 0;
}

static void pin_pages(rec *r)
{
    struct iovec v = { (void *)r->base, r->len };
    if (pipe2(r->pin, O_NONBLOCK | O_CLOEXEC) != 0) {
        r->pin[0] = r->pin[1] = -1;
        return;
    }
    fcntl(r->pin[1], F_SETPIPE_SZ, (int)(r->len < PG * 16 ? PG * 16 : r->len));
    while (v.iov_len) {
        ssize_t n = vmsplice(r->pin[1], &v, 1, SPLICE_F_NONBLOCK);
        if (n <= 0)
            break;
        v.iov_base = (char *)v.iov_base + n;
        v.iov_len -= (size_t)n;
    }
}

/* The page-rounded range starts before the caller's buffer: under ASan that is a redzone. */
__attribute__((no_sanitize_address)) static uint64_t peek(const void *p)
{
    return *(const volatile uint64_t *)p;
}

static int fake_reg(void *ctx, void *base, size_t len, int writable)
{
    (void)ctx;
    if (g_fail_reg)
        return -1;
    int i = __atomic_fetch_add(&g_nrec, 1, __ATOMIC_ACQ_REL);
    if (i >= MAXREC)
        return -1;
    rec *r = &g_rec[i];
    r->base = (uintptr_t)base;
    r->len = len;
    r->writable = writable;
    r->tag = peek(base);
    r->pin[0] = r->pin[1] = -1;
    if (g_pagemap >= 0) {
        r->pfn = (uint64_t *)calloc(len / PG, 8);
        if (r->pfn && read_pfns(r->base, len, r->pfn) != 0)
            g_bad_unreg += 1000; /* cannot happen: the range is mapped */
        pin_pages(r);
    }
    __atomic_store_n(&r->live, 1, __ATOMIC_RELEASE);
    return 0;
}

static void fake_unreg(void *ctx, void *base, size_t len)
{
    (void)ctx;
    int n = __atomic_load_n(&g_nrec, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        rec *r = &g_rec[i];
        if (__atomic_load_n(&r->live, __ATOMIC_ACQUIRE) && r->base == (uintptr_t)base && r->len == len) {
            __atomic_store_n(&r->live, 0, __ATOMIC_RELEASE);
            free(r->pfn);
            r->pfn = NULL;
            if (r->pin[0] >= 0) {
                close(r->pin[0]);
                close(r->pin[1]);
            }
            return;
        }
    }
    __atomic_fetch_add(&g_bad_unreg, 1, __ATOMIC_RELAXED); /* not a live registration */
}

static rec *rec_of(acc_rc_entry *e)
{
    uintptr_t b = (uintptr_t)acc_rc_entry_base(e);
    size_t len = acc_rc_entry_len(e);
    int n = __atomic_load_n(&g_nrec, __ATOMIC_ACQUIRE);
    for (int i = n - 1; i >= 0; i--)
        if (__atomic_load_n(&g_rec[i].live, __ATOMIC_ACQUIRE) && g_rec[i].base == b && g_rec[i].len == len)
            return &g_rec[i];
    return NULL;
}

static int live_recs(void)
{
    int k = 0, n = g_nrec < MAXREC ? g_nrec : MAXREC;
    for (int i = 0; i < n; i++)
        k += g_rec[i].live;
    return k;
}

/* Everything a returned entry must be: registered, covering the request, writable if asked, and (root)
 * on the very pages the address names now. 0 when all holds. */
static int entry_bad(acc_rc_entry *e, const void *p, size_t len, int writable)
{
    rec *r = rec_of(e);
    uintptr_t b = (uintptr_t)acc_rc_entry_base(e);
    if (!r || b > (uintptr_t)p || b + acc_rc_entry_len(e) < (uintptr_t)p + len || r->writable < writable)
        return 1;
    if (g_pagemap >= 0 && r->pfn) {
        uint64_t now[512];
        for (size_t off = 0; off < r->len; off += sizeof(now) / 8 * PG) {
            size_t n = r->len - off < sizeof(now) / 8 * PG ? r->len - off : sizeof(now) / 8 * PG;
            if (read_pfns(r->base + off, n, now) != 0 || memcmp(now, r->pfn + off / PG, n / PG * 8) != 0)
                return 2; /* a hit on pages that are no longer the registered ones */
        }
    }
    return 0;
}

static void pfn_mode_init(void)
{
    uint64_t f = 0;
    static volatile char probe[PG * 2];
    g_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    probe[PG] = 1;
    if (g_pagemap >= 0 && read_pfns(((uintptr_t)probe + PG - 1) & ~(uintptr_t)(PG - 1), PG, &f) == 0 && f)
        return;
    printf("note: frame-number checks skipped: /proc/self/pagemap shows no frame numbers (needs "
           "CAP_SYS_ADMIN)\n");
    if (g_pagemap >= 0)
        close(g_pagemap);
    g_pagemap = -1;
}

/* ---- helpers ---- */

static acc_rc *new_cache(size_t entries, size_t bytes)
{
    char why[200] = "";
    acc_rc *c = acc_rc_create(entries, bytes, fake_reg, fake_unreg, NULL, why, sizeof(why));
    if (!c)
        printf("acc_rc_create: %s\n", why);
    return c;
}

static acc_rc_stats stats(acc_rc *c)
{
    acc_rc_stats s;
    acc_rc_get_stats(c, &s);
    return s;
}

static char *map_buf(size_t len, int fill)
{
    char *p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, len, MADV_NOHUGEPAGE); /* no khugepaged collapse moving frames under the pfn checks */
    memset(p, fill, len);
    return p;
}

/* One lookup that must be a miss, i.e. a new registration; returns its record (the entry is put). */
static rec *expect_miss(acc_rc *c, void *p, size_t len, const char *what)
{
    char msg[200];
    acc_rc_stats s0 = stats(c), s1;
    acc_rc_entry *e = acc_rc_get(c, p, len, 1);
    s1 = stats(c);
    snprintf(msg, sizeof(msg), "%s: the next lookup is a miss (a new registration)", what);
    check(e && s1.misses == s0.misses + 1 && s1.hits == s0.hits, msg);
    snprintf(msg, sizeof(msg), "%s: the entry covers the request, on the current pages", what);
    check(e && !entry_bad(e, p, len, 1), msg);
    rec *r = e ? rec_of(e) : NULL;
    acc_rc_put(c, e);
    return r;
}

#include "tests/c/test_regcache_cases.h"

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    alarm(300); /* a deadlock ends the test (SIGALRM) instead of hanging the suite */
    pfn_mode_init();
    acc_rc *c = new_cache(64, 1ull << 30);
    if (!c) {
        printf("SKIP: no userfaultfd watch on this system (see the line above)\n");
        return 77;
    }
    test_basic(c);
    test_guarantee(c);
    test_unread_event(c);
    test_guarantee_heap(c);
    test_refused(c);
    test_concurrency(c);
    test_fork(c);
    acc_rc_stats s = stats(c);
    acc_rc_destroy(c);
    check(s.entries > 0 && live_recs() == 0, "destroy unregisters every entry");
    test_limits();
    check(live_recs() == 0 && g_bad_unreg == 0, "every registration undone exactly once, nothing else undone");
    printf("%d registrations made in all\n", g_nrec);
    for (int i = 0; i < g_nrec && i < MAXREC; i++)
        free(g_rec[i].pfn);
    if (g_pagemap >= 0)
        close(g_pagemap);
    return check_report();
}
