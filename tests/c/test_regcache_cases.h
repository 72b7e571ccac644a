/* tests/c/test_regcache_cases.h: the cases and the bench of tests/c/test_regcache.c (a section of that
 * file, included once by it). */

/* Hits, misses, writability, growing over neighbours, bad arguments, a failing registration. */
static void test_basic(acc_rc *c)
{
    char *buf = map_buf(1 << 20, 1), *other = map_buf(1 << 16, 2);
    acc_rc_stats s0 = stats(c);
    acc_rc_entry *e1 = acc_rc_get(c, buf + 100, 50000, 0);
    check(e1 && acc_rc_entry_base(e1) == buf && acc_rc_entry_len(e1) == 13 * PG, "miss: the page-rounded range");
    check(e1 && !entry_bad(e1, buf + 100, 50000, 0) && stats(c).misses == s0.misses + 1, "miss registers it");
    acc_rc_entry *e2 = acc_rc_get(c, buf + PG, 100, 0);
    check(e2 == e1 && stats(c).hits == s0.hits + 1, "hit: the same buffer again (inside the range)");
    acc_rc_entry *e3 = acc_rc_get(c, buf, 100, 1);
    check(!e3 && stats(c).uncached == s0.uncached + 1, "writable asked of a held read-only entry: NULL");
    acc_rc_put(c, e1);
    acc_rc_put(c, e2);
    rec *r1 = rec_of(e1);
    e3 = acc_rc_get(c, buf, 100, 1);
    check(e3 && !entry_bad(e3, buf, 100, 1) && acc_rc_entry_len(e3) == 13 * PG, "writable: re-registered writable");
    check(r1 && !r1->live, "the read-only registration it replaced was undone");
    acc_rc_entry *e4 = acc_rc_get(c, buf + 2 * PG, 10, 0);
    check(e4 == e3, "a writable entry serves a read");
    acc_rc_put(c, e3);
    acc_rc_put(c, e4);
    acc_rc_entry *e5 = acc_rc_get(c, other, 1 << 16, 0);
    check(e5 && e5 != e3 && !entry_bad(e5, other, 1 << 16, 0), "another buffer: a miss of its own");
    acc_rc_put(c, e5);
    /* [buf, 13 pages) and [14 pages, 18 pages) exist: a request over both grows into one entry */
    acc_rc_entry *e6 = acc_rc_get(c, buf + 14 * PG, 4 * PG, 0);
    acc_rc_put(c, e6);
    size_t n0 = stats(c).entries;
    acc_rc_entry *e7 = acc_rc_get(c, buf + 12 * PG, 3 * PG, 0);
    check(e7 && acc_rc_entry_base(e7) == buf && acc_rc_entry_len(e7) == 18 * PG && e7->writable,
          "a request overlapping two entries: one entry over all three ranges, still writable");
    check(stats(c).entries == n0 - 1, "the two entries it grew over are gone");
    acc_rc_put(c, e7);
    check(!acc_rc_get(NULL, buf, 1, 0) && !acc_rc_get(c, NULL, 1, 0) && !acc_rc_get(c, buf, 0, 0)
              && !acc_rc_get(c, buf, SIZE_MAX, 0) && !acc_rc_get(c, (void *)(UINTPTR_MAX - 10), 5, 0),
          "bad arguments: NULL, no crash");
    int n = g_nrec;
    char *gone = map_buf(PG, 0);
    munmap(gone, PG);
    check(!acc_rc_get(c, gone, 10, 0) && g_nrec == n, "an unmapped address: NULL, nothing registered");
    char *fresh = map_buf(2 * PG, 3);
    g_fail_reg = 1;
    size_t entries = stats(c).entries;
    check(!acc_rc_get(c, fresh, PG, 1) && stats(c).entries == entries, "a failing registration: NULL, no entry left");
    g_fail_reg = 0;
    expect_miss(c, fresh, PG, "after a failing registration");
    munmap(fresh, 2 * PG);
    munmap(buf, 1 << 20);
    munmap(other, 1 << 16);
}

/* After each of these calls returns, the entry is dead (the kernel held the call until the monitor had
 * read the event) and the next lookup registers again. */
static void test_guarantee(acc_rc *c)
{
    size_t len = 2 << 20;
    char *p = map_buf(len, 3), *q;
    rec *r = expect_miss(c, p, len, "first use");
    acc_rc_stats s0 = stats(c);
    munmap(p, len);
    check(stats(c).invalidated == s0.invalidated + 1, "munmap: the entry is dead when munmap returns");
    q = (char *)mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    check(q == p, "mmap again at the same address");
    memset(p, 4, len);
    expect_miss(c, p, len, "munmap + mmap");
    check(r && !r->live, "munmap + mmap: the old registration was undone");

    /* held across the munmap: undone at the put, and no lookup gets it meanwhile */
    acc_rc_entry *e = acc_rc_get(c, p, len, 1);
    r = e ? rec_of(e) : NULL;
    munmap(p, len);
    q = (char *)mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    memset(p, 5, len);
    check(!acc_rc_get(c, p, len, 1), "held across munmap + mmap: the next lookup gets NULL, not the old entry");
    check(r && r->live, "held: the old registration stays until the put");
    acc_rc_put(c, e);
    check(r && !r->live, "held: undone at the last put");
    expect_miss(c, p, len, "after the put");

    s0 = stats(c);
    madvise(p, len, MADV_DONTNEED);
    check(stats(c).invalidated == s0.invalidated + 1, "madvise(MADV_DONTNEED): dead when it returns");
    memset(p, 6, len);
    rec *r2 = expect_miss(c, p, len, "madvise(MADV_DONTNEED)");
    if (g_pagemap >= 0) {
        uint64_t now;
        read_pfns((uintptr_t)p, PG, &now);
        check(r2 && r2->pfn && r2->pfn[0] == now, "madvise: the new registration has the new frames");
    }

    char *away = map_buf(len, 0);
    s0 = stats(c);
    q = (char *)mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, away);
    check(q == away && stats(c).invalidated == s0.invalidated + 1, "mremap away: dead when it returns");
    q = (char *)mremap(away, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, p);
    check(q == p, "mremap back to the old address");
    expect_miss(c, p, len, "mremap away and back");

    s0 = stats(c);
    q = (char *)mremap(p, len, len / 2, 0);
    check(q == p && stats(c).invalidated == s0.invalidated + 1, "mremap shrinking it: dead when it returns");
    expect_miss(c, p, len / 2, "mremap shrink");

    s0 = stats(c);
    q = (char *)mmap(p, len / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    check(q == p && stats(c).invalidated == s0.invalidated + 1, "mmap(MAP_FIXED) over it: dead when it returns");
    memset(p, 7, len / 2);
    expect_miss(c, p, len / 2, "mmap(MAP_FIXED) over it");
    munmap(p, len / 2);
}

/* White box: an unmap whose event nobody has read yet (the test holds the cache lock, so the monitor
 * cannot), with new memory already mapped at the old address by another thread, as the kernel allows.
 * A lookup (rc_settle + rc_scan, what acc_rc_get does under the lock) must not find the old entry. */
static int g_go;

static void *unmapper(void *arg)
{
    while (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
        sched_yield();
    munmap(arg, 1 << 20); /* returns once the event is read */
    return NULL;
}

static void test_unread_event(acc_rc *c)
{
    char *p = map_buf(1 << 20, 14), *q = (char *)MAP_FAILED;
    pthread_t t;
    expect_miss(c, p, 1 << 20, "before the unread unmap");
    pthread_create(&t, NULL, unmapper, p);
    pthread_mutex_lock(&c->lock);
    __atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
    while (q == MAP_FAILED) { /* free as soon as the unmapping thread drops the mmap lock */
        q = (char *)mmap(p, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == MAP_FAILED)
            sched_yield();
    }
    rc_plan pl;
    memset(&pl, 0, sizeof(pl));
    pl.b = (uintptr_t)p;
    pl.e = (uintptr_t)p + (1 << 20);
    pl.writable = 1;
    int settled = rc_settle(c) == 0;
    rc_scan(c, &pl);
    pthread_mutex_unlock(&c->lock);
    check(q == p && settled && !pl.hit, "an unmap with its event unread: the lookup reads it, no hit on the old entry");
    pthread_join(t, NULL);
    memset(p, 15, 1 << 20);
    expect_miss(c, p, 1 << 20, "new memory at the address of an unread unmap");
    munmap(p, 1 << 20);
}

/* free + malloc of an mmap'd block at the same address, and the program break moved down and up. */
static void test_guarantee_heap(acc_rc *c)
{
    size_t len = 4 << 20;
    mallopt(M_MMAP_THRESHOLD, 256 << 10); /* fixed: no dynamic threshold moving the block to the heap */
    char *p = (char *)malloc(len), *q;
    memset(p, 8, len);
    rec *r = expect_miss(c, p, len, "malloc'd block");
    acc_rc_stats s0 = stats(c);
    free(p);
    q = (char *)malloc(len);
    if (q == p && stats(c).invalidated == s0.invalidated + 1) {
        memset(q, 9, len);
        expect_miss(c, q, len, "free + malloc at the same address");
        check(r && !r->live, "free + malloc: the old registration was undone");
    } else {
        /* a sanitizer's allocator keeps freed blocks (quarantine) or their pages: no new pages here */
        check(SANITIZED, "glibc: free unmaps the block (the entry dies) and malloc gives the address back");
        printf("note: free + malloc case not exercised: this allocator %s\n",
               q == p ? "kept the pages mapped" : "gave another address");
    }
    free(q);

    /* brk: glibc must not need the break meanwhile (it would take memory above ours, which the shrink
     * would cut): a large top pad and no trimming keep its top chunk ample */
    mallopt(M_TOP_PAD, 16 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    free(malloc(200 << 10));
    char *cur = (char *)sbrk(0), *b = (char *)(((uintptr_t)cur + PG - 1) & ~(uintptr_t)(PG - 1));
    intptr_t grow = (intptr_t)(b - cur) + (1 << 20);
    if (sbrk(grow) != cur) {
        printf("note: brk case not exercised: sbrk failed\n");
        return;
    }
    memset(b, 10, 1 << 20);
    r = expect_miss(c, b, 1 << 20, "brk memory");
    s0 = stats(c);
    sbrk(-grow);
    check(stats(c).invalidated == s0.invalidated + 1, "brk shrink: dead when sbrk returns");
    check(sbrk(grow) == cur, "brk grown again over the same addresses");
    memset(b, 11, 1 << 20);
    expect_miss(c, b, 1 << 20, "brk shrink + grow");
    check(r && !r->live, "brk: the old registration was undone");
    acc_rc_entry *e = acc_rc_get(c, b, 1 << 20, 0);
    acc_rc_put(c, e);
    sbrk(-grow);
}

/* File and shared mappings: NULL without error and without a registration. */
static void test_refused(acc_rc *c)
{
    size_t len = 1 << 20;
    FILE *f = tmpfile();
    int fd = f ? fileno(f) : -1;
    int mfd = memfd_create("regcache", MFD_CLOEXEC);
    check(fd >= 0 && ftruncate(fd, (off_t)len) == 0 && mfd >= 0 && ftruncate(mfd, (off_t)len) == 0, "temp files");
    char *maps[4] = {
        (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0),
        (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
        (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0),
        (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, mfd, 0),
    };
    static const char *what[4] = { "a private file mapping", "a shared file mapping", "a shared anonymous mapping",
                                   "a private memfd mapping" };
    for (int i = 0; i < 4; i++) {
        char msg[200];
        if (maps[i] == MAP_FAILED)
            continue;
        memset(maps[i], 1, len);
        acc_rc_stats s0 = stats(c);
        int n = g_nrec;
        acc_rc_entry *e = acc_rc_get(c, maps[i], len, 0);
        snprintf(msg, sizeof(msg), "%s is not cached (NULL, nothing registered, counted as uncached)", what[i]);
        check(!e && g_nrec == n && stats(c).uncached == s0.uncached + 1 && stats(c).entries <= s0.entries, msg);
        munmap(maps[i], len);
    }
    if (f)
        fclose(f);
    if (mfd >= 0)
        close(mfd);
}

/* ---- concurrency: lookups while another thread replaces the buffers ---- */

enum { NSLOT = 6, SLOT_LEN = 64 << 10, READERS = 3 };
typedef struct slot {
    pthread_rwlock_t lock; /* lookups read-lock it: a correct program does not unmap what it uses */
    char *addr;
    uint64_t gen;
} slot;
static slot g_slot[NSLOT];
static int g_stale, g_wrong, g_stop, g_moved;

static void slot_fill(slot *s)
{
    s->gen++;
    for (size_t off = 0; off < SLOT_LEN; off += PG)
        memcpy(s->addr + off, &s->gen, sizeof(s->gen));
}

static void *reader(void *arg)
{
    acc_rc *c = (acc_rc *)arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        slot *s = &g_slot[rand_r(&seed) % NSLOT];
        int whole = rand_r(&seed) & 1;
        size_t off = whole ? 0 : (size_t)(rand_r(&seed) % 4) * PG;
        size_t len = SLOT_LEN - off - (whole ? 0 : (size_t)(rand_r(&seed) % 3) * PG);
        int w = rand_r(&seed) & 1;
        pthread_rwlock_rdlock(&s->lock);
        acc_rc_entry *e = acc_rc_get(c, s->addr + off, len, w);
        if (e) {
            rec *r = rec_of(e);
            int bad = entry_bad(e, s->addr + off, len, w);
            if (bad == 2 || (r && r->tag != s->gen))
                __atomic_fetch_add(&g_stale, 1, __ATOMIC_RELAXED); /* registered for replaced pages */
            else if (bad)
                __atomic_fetch_add(&g_wrong, 1, __ATOMIC_RELAXED);
            acc_rc_put(c, e);
        }
        pthread_rwlock_unlock(&s->lock);
    }
    return NULL;
}

/* Replace one slot's memory: munmap + mmap (same address when free), madvise, or mremap onto the spare
 * mapping (the old place becomes the spare). MAP_FIXED only over our own mappings. */
static void replace(slot *s, int how, char **spare)
{
    char *q;
    if (how == 0) {
        munmap(s->addr, SLOT_LEN);
        q = (char *)mmap(s->addr, SLOT_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
        if (q == MAP_FAILED) /* something else took the address meanwhile */
            q = (char *)mmap(NULL, SLOT_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        s->addr = q;
    } else if (how == 1) {
        madvise(s->addr, SLOT_LEN, MADV_DONTNEED);
    } else {
        /* a watch of part of the slot splits its mapping, and mremap moves one mapping only (EFAULT) */
        char *old = s->addr;
        q = (char *)mremap(old, SLOT_LEN, SLOT_LEN, MREMAP_MAYMOVE | MREMAP_FIXED, *spare);
        if (q == MAP_FAILED) {
            replace(s, 0, spare);
            return;
        }
        g_moved++;
        s->addr = q;
        *spare = (char *)mmap(old, SLOT_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (*spare == MAP_FAILED)
            *spare = (char *)mmap(NULL, SLOT_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    slot_fill(s);
}

static void test_concurrency(acc_rc *c)
{
    pthread_t t[READERS];
    char *spare = map_buf(SLOT_LEN, 0);
    for (int i = 0; i < NSLOT; i++) {
        pthread_rwlock_init(&g_slot[i].lock, NULL);
        g_slot[i].addr = map_buf(SLOT_LEN, 0);
        slot_fill(&g_slot[i]);
    }
    acc_rc_stats s0 = stats(c);
    for (int i = 0; i < READERS; i++)
        pthread_create(&t[i], NULL, reader, c);
    unsigned seed = 7;
    for (int k = 0; k < (SANITIZED ? 600 : 3000); k++) {
        slot *s = &g_slot[rand_r(&seed) % NSLOT];
        pthread_rwlock_wrlock(&s->lock);
        replace(s, k % 3, &spare);
        pthread_rwlock_unlock(&s->lock);
        if (k % 8 == 0)
            sched_yield();
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    acc_rc_stats s1 = stats(c);
    printf("concurrency: %d moved by mremap; %llu hits, %llu misses, %llu invalidated, %llu uncached\n", g_moved,
           (unsigned long long)(s1.hits - s0.hits), (unsigned long long)(s1.misses - s0.misses),
           (unsigned long long)(s1.invalidated - s0.invalidated), (unsigned long long)(s1.uncached - s0.uncached));
    check(g_stale == 0, "concurrency: no lookup returned a registration of replaced memory");
    check(g_wrong == 0, "concurrency: every entry returned covers its request, writable when asked");
    check(g_moved > 0, "concurrency: some slots moved by mremap");
    check(s1.hits > s0.hits && s1.misses > s0.misses && s1.invalidated > s0.invalidated,
          "concurrency: hits, misses and invalidations all happened (the test is not vacuous)");
    for (int i = 0; i < NSLOT; i++) {
        munmap(g_slot[i].addr, SLOT_LEN);
        pthread_rwlock_destroy(&g_slot[i].lock);
    }
    munmap(spare, SLOT_LEN);
}

/* The child gets NULL and may unmap cached memory without waiting for anyone; the parent goes on. */
static void test_fork(acc_rc *c)
{
    size_t len = 1 << 20;
    char *p = map_buf(len, 12), *other = map_buf(len, 13);
    acc_rc_entry *e = acc_rc_get(c, p, len, 1);
    acc_rc_put(c, e);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = acc_rc_get(c, p, len, 1) != NULL || acc_rc_get(c, other, len, 1) != NULL;
        acc_rc_put(c, e); /* nothing: the parent's */
        munmap(p, len);   /* not watched in the child: returns at once */
        acc_rc_destroy(c);
        _exit(bad);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    check(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork: the child gets NULL, unmaps freely, frees");
    acc_rc_stats s0 = stats(c);
    e = acc_rc_get(c, p, len, 1);
    check(e && stats(c).hits == s0.hits + 1 && !entry_bad(e, p, len, 1), "fork: the parent still hits");
    acc_rc_put(c, e);
    munmap(p, len);
    check(stats(c).invalidated == s0.invalidated + 1, "fork: the parent's watch still works");
    munmap(other, len);
}

/* Least recently used unheld entries go first; held ones never; destroy undoes everything. */
static void test_limits(void)
{
    char *b[4];
    acc_rc *c = new_cache(3, 1 << 30);
    check(c != NULL, "a cache of 3 entries");
    if (!c)
        return;
    for (int i = 0; i < 4; i++)
        b[i] = map_buf(1 << 16, i);
    for (int i = 0; i < 3; i++)
        acc_rc_put(c, acc_rc_get(c, b[i], 1 << 16, 0));
    acc_rc_put(c, acc_rc_get(c, b[0], 1 << 16, 0)); /* b[0] now most recent, b[1] least */
    acc_rc_put(c, acc_rc_get(c, b[3], 1 << 16, 0));
    acc_rc_stats s = stats(c);
    check(s.evicted == 1 && s.entries == 3, "max_entries: one evicted to make room");
    acc_rc_entry *e = acc_rc_get(c, b[0], 1 << 16, 0);
    check(e && stats(c).hits == s.hits + 1, "the recently used one stayed");
    acc_rc_put(c, e);
    acc_rc_put(c, acc_rc_get(c, b[1], 1 << 16, 0));
    check(stats(c).misses == s.misses + 1, "the least recently used one was the one evicted");
    acc_rc_destroy(c);
    check(live_recs() == 0, "destroy: every registration undone");

    c = new_cache(100, 3 * PG);
    acc_rc_entry *x = acc_rc_get(c, b[0], 2 * PG, 0);
    check(x && !acc_rc_get(c, b[1], 2 * PG, 0), "max_bytes: no room beside a held entry: NULL");
    acc_rc_put(c, x);
    x = acc_rc_get(c, b[1], 2 * PG, 0);
    s = stats(c);
    check(x && s.evicted == 1 && s.bytes == 2 * PG, "max_bytes: the unheld entry evicted");
    check(!acc_rc_get(c, b[2], 4 * PG, 0), "larger than max_bytes: NULL");
    acc_rc_put(c, x);
    munmap(b[1], 1 << 16); /* dead, not yet reaped when destroyed */
    acc_rc_destroy(c);
    check(live_recs() == 0, "destroy with a dead entry: every registration undone");
    char why[100] = "";
    check(!acc_rc_create(0, 1, fake_reg, fake_unreg, NULL, why, sizeof(why)) && why[0], "a limit of 0: NULL, why");
    for (int i = 0; i < 4; i++)
        if (i != 1)
            munmap(b[i], 1 << 16);
}

/* ---- --bench ---- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double munmap_us(acc_rc *c, size_t len, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        char *p = map_buf(len, 1);
        if (c)
            acc_rc_put(c, acc_rc_get(c, p, len, 1));
        double t0 = now_ns();
        munmap(p, len);
        total += now_ns() - t0;
    }
    return total / n / 1e3;
}

static int bench(void)
{
    acc_rc *c = new_cache(64, 1ull << 30), *one = new_cache(1, 1ull << 30);
    if (!c || !one)
        return 77;
    char *p = map_buf(1 << 20, 1), *q = map_buf(1 << 20, 2);
    enum { HITS = 200000, MISSES = 2000 };
    acc_rc_put(c, acc_rc_get(c, p, 1 << 20, 1));
    double t0 = now_ns();
    for (int i = 0; i < HITS; i++)
        acc_rc_put(c, acc_rc_get(c, p, 1 << 20, 1));
    printf("bench: hit (get + put, 1 MiB): %.0f ns\n", (now_ns() - t0) / HITS);
    t0 = now_ns();
    for (int i = 0; i < MISSES; i++)
        acc_rc_put(one, acc_rc_get(one, i & 1 ? q : p, 1 << 20, 1)); /* each evicts the other */
    printf("bench: miss (get + put, 1 MiB, fake registration, evicting one): %.1f us\n",
           (now_ns() - t0) / MISSES / 1e3);
    for (size_t len = 64 << 10; len <= (4 << 20); len *= 8)
        printf("bench: munmap of %zu KiB: unwatched %.1f us, watched %.1f us\n", len >> 10, munmap_us(NULL, len, 500),
               munmap_us(c, len, 500));
    acc_rc_destroy(c);
    acc_rc_destroy(one);
    munmap(p, 1 << 20);
    munmap(q, 1 << 20);
    return 0;
}
