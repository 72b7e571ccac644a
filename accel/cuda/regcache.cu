/* accel/cuda/regcache.cu: the registration cache of regcache.h: entries, the userfaultfd watch and the
 * monitor thread that reads its events. No CUDA in here: the file is valid C as well as C++, so
 * tests/c/test_regcache.c includes it and the plugin hands in the register / unregister calls.
 *
 * What keeps it from deadlocking. A thread that unmaps, discards (madvise) or moves (mremap, brk shrink)
 * a watched range sleeps in the kernel until its event is read, and only the monitor or a thread holding
 * the cache lock reads events. So:
 * - Nothing done while holding the lock may unmap, discard or move memory: no free() (glibc may trim the
 *   heap or unmap a chunk), no malloc(), no reg/unreg callback (the driver allocates and frees), no stdio.
 *   Under the lock only list work, read() of events and the userfaultfd ioctls run; the ioctls take the
 *   mmap lock, which no thread waiting for an event holds (the kernel drops it before it waits).
 * - The monitor thread never frees, never calls the callbacks and has every signal blocked (a handler
 *   could unmap): it would wait for itself. Dead entries are freed by the next get / put / destroy.
 * - A thread waiting in get for an event to complete (rc_settle) reads the events itself.
 * What keeps it from going stale:
 * - An unmap or mremap reports its event after the change, so between the change and the read a lookup
 *   could still find the old entry, and another thread may already have mapped new memory at the same
 *   address (the kernel allows it as soon as the unmapping call drops the mmap lock). Each lookup
 *   therefore first asks the kernel whether such a change is under way (rc_settle: UFFDIO_WRITEPROTECT
 *   answers EAGAIN from before the unmap until the unmapping thread has seen its event read) and reads
 *   the events until it is not.
 * - A new range is watched (UFFDIO_REGISTER) before it is pinned, and the entry is in the list (not yet
 *   visible to lookups) from before the watch: an event meanwhile marks it dead and it is not published.
 * - List entries never overlap (a request overlapping a held entry is not cached), so dropping one
 *   entry's watch never drops another's. An entry leaves the list only after the unregister callback
 *   ran: the driver refuses to register an address range it still has registered.
 * The one window left: madvise(MADV_DONTNEED / MADV_FREE) reports before it discards, so a get of the
 *   same pages between the read of that event and the discard would cache pages about to be replaced.
 *   Only a caller that discards a buffer another of its threads is handing to the cipher gets there. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "accel/cuda/regcache.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#define RC_FEATURES (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP)
#define RC_SETTLE_YIELDS 64 /* then sleeps of RC_SETTLE_SLEEP_NS, RC_SETTLE_SLEEPS times (~0.1 s) */
#define RC_SETTLE_SLEEPS 2000
#define RC_SETTLE_SLEEP_NS 50000

struct acc_rc_entry {
    acc_rc_entry *prev, *next; /* c's list, most recently used first */
    acc_rc_entry *out;         /* a chain of entries one thread is retiring */
    uintptr_t base, end;       /* page aligned */
    unsigned refs;             /* holders; the creator holds a pending entry */
    unsigned char writable;
    unsigned char live;       /* published: lookups may return it */
    unsigned char dead;       /* an event touched it: never returned again */
    unsigned char leaving;    /* a thread is retiring it */
    unsigned char watched;    /* UFFDIO_REGISTER succeeded */
    unsigned char registered; /* the reg callback succeeded */
};

struct acc_rc {
    pthread_mutex_t lock;
    acc_rc_entry *head, *tail;
    size_t max_entries, max_bytes, nentries, nbytes, reapable;
    acc_rc_stats st;
    acc_rc_reg_fn reg;
    acc_rc_unreg_fn unreg;
    void *ctx;
    int uffd, stopfd;
    void *probe; /* a PROT_NONE page of our own, never watched: the target of rc_settle's ioctl */
    uintptr_t page;
    pid_t pid;
    pthread_t monitor;
};

/* ---- the list (under the lock) ---- */

static int rc_overlaps(const acc_rc_entry *x, uintptr_t b, uintptr_t e)
{
    return x->base < e && b < x->end;
}

static void rc_link_front(acc_rc *c, acc_rc_entry *x)
{
    x->prev = NULL;
    x->next = c->head;
    if (c->head)
        c->head->prev = x;
    else
        c->tail = x;
    c->head = x;
}

static void rc_unlink(acc_rc *c, acc_rc_entry *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        c->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        c->tail = x->prev;
}

#include "accel/cuda/regcache_watch.h"

/* ---- lookups ---- */

typedef struct rc_plan {
    acc_rc_entry *hit;
    acc_rc_entry *chain; /* entries to retire, through ->out */
    uintptr_t b, e;      /* what to register: the request, grown over the live entries it replaces */
    int writable, conflict;
    size_t nret, bret;
} rc_plan;

static void rc_plan_add(rc_plan *pl, acc_rc_entry *x)
{
    x->leaving = 1;
    x->out = pl->chain;
    pl->chain = x;
    pl->nret++;
    pl->bret += x->end - x->base;
}

/* Under the lock: the hit, or what a miss must retire: the unheld entries the request overlaps
 * (entries never overlap, so one that covers the request is the only one it overlaps). */
static void rc_scan(acc_rc *c, rc_plan *pl)
{
    for (acc_rc_entry *x = c->head; x; x = x->next) {
        if (!rc_overlaps(x, pl->b, pl->e))
            continue;
        if (x->live && x->base <= pl->b && x->end >= pl->e && x->writable >= pl->writable) {
            pl->hit = x;
            return;
        }
        if (x->refs || x->leaving || (!x->live && !x->dead))
            pl->conflict = 1; /* held, being retired, or pending */
    }
}

/* Under the lock: the dead unheld entries, which only a caller's thread may free. */
static void rc_reap(acc_rc *c, rc_plan *pl)
{
    for (acc_rc_entry *x = c->head; x && c->reapable; x = x->next)
        if (x->dead && !x->refs && !x->leaving) {
            rc_plan_add(pl, x);
            c->reapable--;
        }
}

/* Under the lock: take the overlapped live entries into the new one and evict least recently used ones
 * until it fits. 0: go ahead; -1: it does not fit beside the held entries. */
static int rc_make_room(acc_rc *c, rc_plan *pl)
{
    size_t nfree = 0, bfree = 0, need = pl->e - pl->b;
    for (acc_rc_entry *x = c->head; x; x = x->next)
        if (x->live && !x->refs && !x->leaving) {
            nfree++;
            bfree += x->end - x->base;
        }
    if (need > c->max_bytes || c->nentries - pl->nret - nfree + 1 > c->max_entries
        || c->nbytes - pl->bret - bfree + need > c->max_bytes)
        return -1;
    for (acc_rc_entry *x = c->head; x; x = x->next)
        if (x->live && !x->refs && !x->leaving && rc_overlaps(x, pl->b, pl->e)) {
            pl->b = x->base < pl->b ? x->base : pl->b;
            pl->e = x->end > pl->e ? x->end : pl->e;
            pl->writable |= x->writable;
            x->live = 0;
            rc_plan_add(pl, x);
        }
    need = pl->e - pl->b;
    for (acc_rc_entry *x = c->tail; x; x = x->prev) {
        if (c->nentries - pl->nret + 1 <= c->max_entries && c->nbytes - pl->bret + need <= c->max_bytes)
            break;
        if (x->live && !x->refs && !x->leaving) {
            x->live = 0;
            rc_plan_add(pl, x);
            c->st.evicted++;
        }
    }
    return 0;
}

static void rc_unreg_chain(acc_rc *c, acc_rc_entry *chain)
{
    for (acc_rc_entry *x = chain; x; x = x->out)
        if (x->registered)
            c->unreg(c->ctx, (void *)x->base, x->end - x->base);
}

/* Under the lock: stop watching what the chain watched, except [xb, xe), and take it off the list. */
static void rc_unlink_chain(acc_rc *c, acc_rc_entry *chain, uintptr_t xb, uintptr_t xe)
{
    for (acc_rc_entry *x = chain; x; x = x->out) {
        if (x->watched)
            rc_unwatch_except(c, x->base, x->end, xb, xe);
        rc_unlink(c, x);
        c->nentries--;
        c->nbytes -= x->end - x->base;
    }
}

static void rc_free_chain(acc_rc_entry *chain)
{
    while (chain) {
        acc_rc_entry *x = chain;
        chain = x->out;
        free(x);
    }
}

/* With the lock held on entry, released on return: retire the chain (no new entry). */
static void rc_retire_unlock(acc_rc *c, acc_rc_entry *chain)
{
    pthread_mutex_unlock(&c->lock);
    if (!chain)
        return;
    rc_unreg_chain(c, chain);
    pthread_mutex_lock(&c->lock);
    rc_unlink_chain(c, chain, 0, 0);
    pthread_mutex_unlock(&c->lock);
    rc_free_chain(chain);
}

/* The miss: n is in the list, pending, held by us; the chain is marked leaving. Unregister the chain
 * before registering n (the driver refuses overlapping registrations), watch n before pinning it. */
static acc_rc_entry *rc_fill(acc_rc *c, acc_rc_entry *n, acc_rc_entry *chain)
{
    rc_unreg_chain(c, chain);
    int ok = rc_watch(c, n->base, n->end) == 0;
    n->watched = (unsigned char)ok;
    ok = ok && rc_private_anon(c, n->base, n->end);
    ok = ok && c->reg(c->ctx, (void *)n->base, n->end - n->base, n->writable) == 0;
    n->registered = (unsigned char)ok;
    pthread_mutex_lock(&c->lock);
    ok = ok && !n->dead;
    rc_unlink_chain(c, chain, ok ? n->base : 0, ok ? n->end : 0);
    if (ok) {
        n->live = 1;
        c->st.misses++;
        pthread_mutex_unlock(&c->lock);
        rc_free_chain(chain);
        return n;
    }
    c->st.uncached++;
    n->out = NULL;
    rc_unlink_chain(c, n, 0, 0);
    pthread_mutex_unlock(&c->lock);
    rc_unreg_chain(c, n);
    free(n);
    rc_free_chain(chain);
    return NULL;
}

acc_rc_entry *acc_rc_get(acc_rc *c, const void *p, size_t len, int writable)
{
    rc_plan pl;
    acc_rc_entry *n = NULL;
    if (!c || !p || !len || c->pid != getpid() || len > UINTPTR_MAX / 2 || (uintptr_t)p > UINTPTR_MAX - len - c->page)
        return NULL;
    for (;;) {
        memset(&pl, 0, sizeof(pl));
        pl.b = (uintptr_t)p & ~(c->page - 1);
        pl.e = ((uintptr_t)p + len + c->page - 1) & ~(c->page - 1);
        pl.writable = writable != 0;
        pthread_mutex_lock(&c->lock);
        if (rc_settle(c) == 0)
            rc_scan(c, &pl);
        else
            pl.conflict = 1;
        if (pl.hit) {
            pl.hit->refs++;
            rc_unlink(c, pl.hit);
            rc_link_front(c, pl.hit);
            c->st.hits++;
            pthread_mutex_unlock(&c->lock);
            free(n);
            return pl.hit;
        }
        if (n || pl.conflict)
            break;
        pthread_mutex_unlock(&c->lock); /* no malloc under the lock */
        n = (acc_rc_entry *)calloc(1, sizeof(*n));
        if (!n) {
            pthread_mutex_lock(&c->lock);
            break;
        }
    }
    rc_reap(c, &pl);
    if (!n || pl.conflict || rc_make_room(c, &pl) < 0) {
        c->st.uncached++;
        rc_retire_unlock(c, pl.chain);
        free(n);
        return NULL;
    }
    n->base = pl.b;
    n->end = pl.e;
    n->writable = (unsigned char)pl.writable;
    n->refs = 1;
    rc_link_front(c, n);
    c->nentries++;
    c->nbytes += n->end - n->base;
    pthread_mutex_unlock(&c->lock);
    return rc_fill(c, n, pl.chain);
}

void acc_rc_put(acc_rc *c, acc_rc_entry *e)
{
    rc_plan pl;
    if (!c || !e || c->pid != getpid())
        return;
    memset(&pl, 0, sizeof(pl));
    pthread_mutex_lock(&c->lock);
    if (e->refs && --e->refs == 0 && e->dead && !e->leaving)
        c->reapable++;
    rc_reap(c, &pl);
    rc_retire_unlock(c, pl.chain);
}

void *acc_rc_entry_base(const acc_rc_entry *e)
{
    return (void *)e->base;
}

size_t acc_rc_entry_len(const acc_rc_entry *e)
{
    return e->end - e->base;
}

void acc_rc_get_stats(acc_rc *c, acc_rc_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c || c->pid != getpid())
        return;
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    out->entries = c->nentries;
    out->bytes = c->nbytes;
    pthread_mutex_unlock(&c->lock);
}

/* ---- create / destroy ---- */

static int rc_open(acc_rc *c, char *why, size_t whylen)
{
    struct uffdio_api api;
    c->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (c->uffd < 0 && errno == EINVAL) /* a kernel before 5.11 knows no USER_MODE_ONLY */
        c->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (c->uffd < 0) {
        snprintf(why, whylen, "userfaultfd: %s", strerror(errno));
        return -1;
    }
    memset(&api, 0, sizeof(api));
    api.api = UFFD_API;
    api.features = RC_FEATURES;
    if (ioctl(c->uffd, UFFDIO_API, &api) != 0 || (api.features & RC_FEATURES) != RC_FEATURES) {
        snprintf(why, whylen, "userfaultfd: no unmap / remove / remap events (%s)", strerror(errno));
        return -1;
    }
    c->probe = mmap(NULL, c->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->probe == MAP_FAILED) {
        c->probe = NULL;
        snprintf(why, whylen, "mmap: %s", strerror(errno));
        return -1;
    }
    struct uffdio_writeprotect w;
    memset(&w, 0, sizeof(w));
    w.range.start = (uintptr_t)c->probe;
    w.range.len = c->page;
    if (ioctl(c->uffd, UFFDIO_WRITEPROTECT, &w) == 0 || errno != ENOENT) {
        snprintf(why, whylen, "userfaultfd: no write-protect mode (%s)", strerror(errno));
        return -1;
    }
    if (!rc_private_anon(c, (uintptr_t)c->probe, (uintptr_t)c->probe + c->page)) {
        snprintf(why, whylen, "/proc/self/maps cannot be read");
        return -1;
    }
    return 0;
}

static void rc_close(acc_rc *c)
{
    if (c->uffd >= 0)
        close(c->uffd);
    if (c->stopfd >= 0)
        close(c->stopfd);
    if (c->probe)
        munmap(c->probe, c->page);
}

static int rc_start(acc_rc *c, char *why, size_t whylen)
{
    pthread_attr_t at;
    sigset_t all, old;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256u << 10);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the monitor */
    int rc = pthread_create(&c->monitor, &at, rc_monitor, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0)
        snprintf(why, whylen, "pthread_create: %s", strerror(rc));
    return rc ? -1 : 0;
}

acc_rc *acc_rc_create(size_t max_entries, size_t max_bytes, acc_rc_reg_fn reg, acc_rc_unreg_fn unreg, void *ctx,
                      char *why, size_t whylen)
{
    char spare[8];
    if (!why || !whylen) {
        why = spare;
        whylen = sizeof(spare);
    }
    if (!reg || !unreg || !max_entries || !max_bytes) {
        snprintf(why, whylen, "cache off (no callbacks, or a limit of 0)");
        return NULL;
    }
    acc_rc *c = (acc_rc *)calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    c->reg = reg;
    c->unreg = unreg;
    c->ctx = ctx;
    c->page = (uintptr_t)sysconf(_SC_PAGESIZE);
    c->stopfd = -1;
    c->pid = getpid();
    if (rc_open(c, why, whylen) < 0)
        goto fail;
    if ((c->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        snprintf(why, whylen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    pthread_mutex_init(&c->lock, NULL);
    if (rc_start(c, why, whylen) == 0)
        return c;
    pthread_mutex_destroy(&c->lock);
fail:
    rc_close(c);
    free(c);
    return NULL;
}

/* In a forked child: the fd's watch and the monitor are the parent's (the child's mappings are not
 * watched: no UFFD_FEATURE_EVENT_FORK), so no ioctl and no callback, only our own memory. If a parent
 * thread held the lock at fork the lists may be half changed: they are left as they are. */
static void rc_destroy_child(acc_rc *c)
{
    if (pthread_mutex_trylock(&c->lock) != 0) {
        rc_close(c);
        return;
    }
    acc_rc_entry *x = c->head;
    while (x) {
        acc_rc_entry *next = x->next;
        free(x);
        x = next;
    }
    pthread_mutex_unlock(&c->lock);
    rc_close(c);
    free(c);
}

void acc_rc_destroy(acc_rc *c)
{
    uint64_t one = 1;
    if (!c)
        return;
    if (c->pid != getpid()) {
        rc_destroy_child(c);
        return;
    }
    while (write(c->stopfd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
    pthread_join(c->monitor, NULL);
    /* From here this thread is the only reader: stop watching everything (leftovers too: a moved vma,
     * a range that grew) before anything below may free memory, and let every unmap under way finish. */
    pthread_mutex_lock(&c->lock);
    rc_drain(c);
    for (acc_rc_entry *x = c->head; x; x = x->next)
        rc_unwatch(c, x->base, x->end);
    rc_maps_scan(c, rc_unwatch_fn, NULL);
    rc_settle(c);
    pthread_mutex_unlock(&c->lock);
    for (acc_rc_entry *x = c->head; x; x = x->next)
        if (x->registered)
            c->unreg(c->ctx, (void *)x->base, x->end - x->base);
    while (c->head) {
        acc_rc_entry *x = c->head;
        c->head = x->next;
        free(x);
    }
    pthread_mutex_destroy(&c->lock);
    rc_close(c);
    free(c);
}
