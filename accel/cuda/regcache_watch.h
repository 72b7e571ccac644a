/* accel/cuda/regcache_watch.h: the userfaultfd side of the registration cache: watching ranges, reading
 * the events, the monitor thread and /proc/self/maps. A section of regcache.cu, included once by it
 * (after its structures), so that the plugin stays one file for nvcc and the test. The locking rules
 * are regcache.cu's opening comment. */
#ifndef ACCELAES_CUDA_REGCACHE_WATCH_H
#define ACCELAES_CUDA_REGCACHE_WATCH_H

/* ---- the userfaultfd ---- */

static int rc_watch(acc_rc *c, uintptr_t b, uintptr_t e)
{
    struct uffdio_register r;
    memset(&r, 0, sizeof(r));
    r.range.start = b;
    r.range.len = e - b;
    r.mode = UFFDIO_REGISTER_MODE_WP; /* and never write-protected: events only, no fault ever */
    return ioctl(c->uffd, UFFDIO_REGISTER, &r);
}

/* Errors are ignored: a hole in the range is skipped by the kernel, and a range it refuses (a file now
 * mapped in a hole) stays watched, which costs an event read, never a stale entry. */
static void rc_unwatch(acc_rc *c, uintptr_t b, uintptr_t e)
{
    struct uffdio_range r;
    if (b >= e)
        return;
    r.start = b;
    r.len = e - b;
    (void)ioctl(c->uffd, UFFDIO_UNREGISTER, &r);
}

/* [b, e) less [xb, xe), the range a new entry now watches. */
static void rc_unwatch_except(acc_rc *c, uintptr_t b, uintptr_t e, uintptr_t xb, uintptr_t xe)
{
    if (xb >= xe || xe <= b || e <= xb) {
        rc_unwatch(c, b, e);
        return;
    }
    rc_unwatch(c, b, xb < e ? (xb > b ? xb : b) : e);
    rc_unwatch(c, xe > b ? (xe < e ? xe : e) : b, e);
}

static void rc_kill(acc_rc *c, uintptr_t b, uintptr_t e)
{
    for (acc_rc_entry *x = c->head; x; x = x->next) {
        if (!rc_overlaps(x, b, e) || x->dead)
            continue;
        x->dead = 1;
        if (!x->leaving)
            c->st.invalidated++;
        if (!x->refs && !x->leaving)
            c->reapable++;
        x->live = 0;
    }
}

static void rc_event(acc_rc *c, const struct uffd_msg *m)
{
    switch (m->event) {
    case UFFD_EVENT_UNMAP:
    case UFFD_EVENT_REMOVE:
        rc_kill(c, (uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
        break;
    case UFFD_EVENT_REMAP: /* the old range is gone; the moved vma, still watched, is no entry's */
        rc_kill(c, (uintptr_t)m->arg.remap.from, (uintptr_t)(m->arg.remap.from + m->arg.remap.len));
        rc_kill(c, (uintptr_t)m->arg.remap.to, (uintptr_t)(m->arg.remap.to + m->arg.remap.len));
        break;
    case UFFD_EVENT_PAGEFAULT: { /* never expected (nothing is write-protected): free the thread */
        struct uffdio_writeprotect w;
        struct uffdio_range r;
        memset(&w, 0, sizeof(w));
        w.range.start = (uintptr_t)m->arg.pagefault.address & ~(c->page - 1);
        w.range.len = c->page;
        (void)ioctl(c->uffd, UFFDIO_WRITEPROTECT, &w);
        r = w.range;
        (void)ioctl(c->uffd, UFFDIO_WAKE, &r);
        break;
    }
    default:
        break;
    }
}

/* Read every queued event (under the lock; the fd is non-blocking). Returns how many. */
static int rc_drain(acc_rc *c)
{
    struct uffd_msg m[16];
    int total = 0;
    for (;;) {
        ssize_t n = read(c->uffd, m, sizeof(m));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < (ssize_t)sizeof(m[0]))
            return total;
        for (size_t i = 0; i < (size_t)n / sizeof(m[0]); i++)
            rc_event(c, &m[i]);
        total += (int)((size_t)n / sizeof(m[0]));
    }
}

static void rc_pause(int i)
{
    if (i < RC_SETTLE_YIELDS) {
        sched_yield();
    } else {
        struct timespec ts = { 0, RC_SETTLE_SLEEP_NS };
        nanosleep(&ts, NULL);
    }
}

/* Under the lock: return once no unmap / discard / move of a watched range is between its start and
 * its thread seeing the event read (the kernel's mmap_changing count, which UFFDIO_WRITEPROTECT reports
 * as EAGAIN before it looks at the range), reading the events itself. -1: still busy after ~0.1 s. */
static int rc_settle(acc_rc *c)
{
    for (int i = 0; i < RC_SETTLE_YIELDS + RC_SETTLE_SLEEPS; i++) {
        struct uffdio_writeprotect w;
        memset(&w, 0, sizeof(w));
        w.range.start = (uintptr_t)c->probe;
        w.range.len = c->page;
        if (ioctl(c->uffd, UFFDIO_WRITEPROTECT, &w) == 0 || errno != EAGAIN)
            return 0;
        if (rc_drain(c) == 0)
            rc_pause(i);
    }
    return -1;
}

static void *rc_monitor(void *arg)
{
    acc_rc *c = (acc_rc *)arg;
    struct pollfd pf[2];
    pf[0].fd = c->uffd;
    pf[1].fd = c->stopfd;
    for (;;) {
        pf[0].events = pf[1].events = POLLIN;
        pf[0].revents = pf[1].revents = 0;
        if (poll(pf, 2, -1) < 0) {
            rc_pause(RC_SETTLE_YIELDS); /* EINTR cannot happen (signals blocked); ENOMEM: try again */
            continue;
        }
        if (pf[1].revents)
            return NULL;
        pthread_mutex_lock(&c->lock);
        rc_drain(c);
        pthread_mutex_unlock(&c->lock);
    }
}

/* ---- /proc/self/maps, read with a stack buffer and read(2): it allocates nothing ---- */

typedef int (*rc_vma_fn)(acc_rc *c, void *arg, uintptr_t start, uintptr_t end, int anon_private);

/* "start-end perms offset dev inode [path]": private (perms "...p") and no file (inode 0). */
static int rc_maps_line(acc_rc *c, const char *s, rc_vma_fn fn, void *arg)
{
    char *p;
    uintptr_t start = strtoull(s, &p, 16), end;
    if (*p != '-')
        return 0;
    end = strtoull(p + 1, &p, 16);
    if (*p != ' ' || strlen(p) < 6)
        return 0;
    int priv = p[4] == 'p';
    strtoull(p + 6, &p, 16); /* offset */
    while (*p == ' ')
        p++;
    while (*p && *p != ' ') /* dev */
        p++;
    unsigned long long inode = strtoull(p, &p, 10);
    return fn(c, arg, start, end, priv && inode == 0);
}

/* Calls fn for each mapping in address order until it returns nonzero; returns that, or -1 if the file
 * cannot be read. A line longer than the buffer (a long path) is judged by its first part. */
static int rc_maps_scan(acc_rc *c, rc_vma_fn fn, void *arg)
{
    char buf[2048];
    size_t have = 0;
    int skip = 0, r = 0, fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (!r) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while (!r && (nl = (char *)memchr(line, '\n', (size_t)(buf + have - line)))) {
            *nl = 0;
            if (!skip)
                r = rc_maps_line(c, line, fn, arg);
            skip = 0;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (!r && have == sizeof(buf) - 1) {
            if (!skip)
                r = rc_maps_line(c, buf, fn, arg);
            skip = 1;
            have = 0;
        }
    }
    close(fd);
    return r;
}

struct rc_cover {
    uintptr_t next, end;
};

static int rc_cover_fn(acc_rc *c, void *arg, uintptr_t start, uintptr_t end, int anon_private)
{
    struct rc_cover *k = (struct rc_cover *)arg;
    (void)c;
    if (end <= k->next)
        return 0;
    if (start > k->next || !anon_private)
        return -1; /* a hole, a file or a shared mapping */
    k->next = end;
    return k->next >= k->end ? 1 : 0;
}

/* [b, e) is all private anonymous memory. A file or shared mapping may change under us without an
 * event in this process (another process truncates or writes it), so it is never cached. */
static int rc_private_anon(acc_rc *c, uintptr_t b, uintptr_t e)
{
    struct rc_cover k = { b, e };
    return rc_maps_scan(c, rc_cover_fn, &k) == 1;
}

static int rc_unwatch_fn(acc_rc *c, void *arg, uintptr_t start, uintptr_t end, int anon_private)
{
    (void)arg;
    if (anon_private)
        rc_unwatch(c, start, end);
    return 0;
}

#endif
