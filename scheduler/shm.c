/* scheduler/shm.c: creating, validating and attaching the per-user unit table, the private
 * fallback table, and the process-liveness helpers the scheduler and accelaes-stat share. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "scheduler/sched_int.h"

/* glibc keeps POSIX shared memory in /dev/shm; linking into place needs the real path. */
#define SHM_DIR "/dev/shm"

uint64_t acc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int acc_shm_name(char *buf, size_t len)
{
    const char *env = secure_getenv("ACCELAES_SHM_NAME");
    if (env == NULL || *env == '\0') {
        /* The effective uid: the user whose rights the process has, and who owns what it creates.
         * With the real uid a setuid program created /accelaes.<real uid> owned by another user,
         * which that user's own processes then refused (and could not remove) for good. */
        int n = snprintf(buf, len, "/accelaes.%u", (unsigned)geteuid());
        return n > 0 && (size_t)n < len ? 0 : -1;
    }
    size_t n = strlen(env);
    /* The name becomes a file under /dev/shm: one leading '/', nothing that walks elsewhere. */
    if (env[0] != '/' || n < 2 || n >= len || n > ACC_SHM_NAME_MAX || strchr(env + 1, '/') != NULL
        || strcmp(env, "/.") == 0 || strcmp(env, "/..") == 0)
        return -1;
    memcpy(buf, env, n + 1);
    return 0;
}

int acc_shm_check_fd(int fd, const char **why)
{
    struct stat st;
    if (fstat(fd, &st) != 0) { *why = "cannot stat the segment"; return -1; }
    if (!S_ISREG(st.st_mode)) { *why = "not a regular file"; return -1; }
    if (st.st_uid != geteuid()) { *why = "owned by another user"; return -1; }
    if ((st.st_mode & 07777) != 0600) { *why = "mode is not 0600"; return -1; }
    if ((uint64_t)st.st_size != sizeof(acc_shm_table)) { *why = "wrong size (another version?)"; return -1; }
    return 0;
}

int acc_shm_check_header(const acc_shm_table *t, const char **why)
{
    const acc_shm_hdr *h = &t->hdr;
    if (h->magic != ACC_SHM_MAGIC) { *why = "bad magic"; return -1; }
    if (h->version != ACC_SHM_VERSION) { *why = "unsupported version"; return -1; }
    if (h->hdr_size != sizeof(acc_shm_hdr) || h->total_size != sizeof(acc_shm_table)
        || h->max_units != ACC_SHM_MAX_UNITS || h->max_procs != ACC_SHM_MAX_PROCS
        || h->max_waiters != ACC_SHM_MAX_WAITERS || h->unit_size != sizeof(acc_shm_unit)
        || h->proc_size != sizeof(acc_shm_proc) || h->waiter_size != sizeof(acc_shm_waiter)) {
        *why = "layout mismatch";
        return -1;
    }
    if (ACC_LOAD(&h->nunits) > ACC_SHM_MAX_UNITS) { *why = "unit count out of range"; return -1; }
    return 0;
}

uint32_t acc_shm_nunits(const acc_shm_table *t)
{
    uint32_t n = ACC_LOAD_ACQ(&t->hdr.nunits);
    return n > ACC_SHM_MAX_UNITS ? ACC_SHM_MAX_UNITS : n;
}

int acc_lock_try(acc_owner_word *w, acc_owner_word me, int check_dead)
{
    acc_owner_word cur = 0;
    if (__atomic_compare_exchange_n(w, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 1;
    /* Held: take it over only from a thread that is gone (killed, or exited holding it). A
     * garbage word names no live thread either, so it is taken over the same way. */
    if (!check_dead || cur == me || acc_tid_alive(ACC_OWNER_PID(cur), ACC_OWNER_TID(cur)))
        return 0;
    return __atomic_compare_exchange_n(w, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ? 2 : 0;
}

void acc_lock_release(acc_owner_word *w, acc_owner_word me)
{
    acc_owner_word cur = me;
    __atomic_compare_exchange_n(w, &cur, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* The caller's owner word (the scheduler caches pid and tid, and redoes both after fork). */
static acc_owner_word self_word(void)
{
    int32_t pid = acc_sched_pid();
    return ACC_OWNER(pid > 0 ? pid : (int32_t)getpid(), acc_sched_tid());
}

/* A holder died inside the lock: the only derived state is the per-kind FIFO count. */
static void repair_after_death(acc_shm_table *t)
{
    uint32_t n[ACC_UNIT_KIND_MAX] = { 0 };
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        acc_shm_waiter *w = &t->waiters[i];
        uint32_t k = ACC_LOAD(&w->kind);
        if (ACC_LOAD(&w->state) == ACC_WAITER_WAITING && k < ACC_UNIT_KIND_MAX)
            n[k]++;
    }
    for (uint32_t k = 0; k < ACC_UNIT_KIND_MAX; k++)
        ACC_STORE(&t->hdr.nwaiting[k], n[k]);
}

int acc_shm_lock(acc_shm_table *t)
{
    return acc_shm_lock_wait(t, ACC_SHM_LOCK_WAIT_NS);
}

int acc_shm_lock_wait(acc_shm_table *t, uint64_t wait_ns)
{
    acc_owner_word me = self_word();
    uint64_t deadline = 0;
    /* Sections under this lock are short scans: spin a little, then sleep in short slices,
     * asking the kernel whether the holder still exists every few tries. */
    for (unsigned tries = 0;; tries++) {
        int r = acc_lock_try(&t->hdr.lock, me, tries >= 64 && tries % 16 == 0);
        if (r == 2)
            repair_after_death(t);
        if (r != 0)
            return 0;
        if (tries < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        uint64_t now = acc_now_ns();
        if (deadline == 0)
            deadline = now + wait_ns;
        else if (now >= deadline)
            return -1;
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

void acc_shm_unlock(acc_shm_table *t)
{
    acc_lock_release(&t->hdr.lock, self_word());
}

static int init_table(acc_shm_table *t)
{
    acc_shm_hdr *h = &t->hdr;
    memset(h, 0, sizeof(*h));
    h->version = ACC_SHM_VERSION;
    h->hdr_size = sizeof(acc_shm_hdr);
    h->total_size = sizeof(acc_shm_table);
    h->max_units = ACC_SHM_MAX_UNITS;
    h->max_procs = ACC_SHM_MAX_PROCS;
    h->max_waiters = ACC_SHM_MAX_WAITERS;
    h->unit_size = sizeof(acc_shm_unit);
    h->proc_size = sizeof(acc_shm_proc);
    h->waiter_size = sizeof(acc_shm_waiter);
    h->owner_uid = (uint32_t)geteuid();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    h->lock = 0;
    /* The magic goes last: a reader that sees it sees everything before it. */
    __atomic_store_n(&h->magic, ACC_SHM_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

acc_shm_table *acc_shm_private(void)
{
    void *p = mmap(NULL, sizeof(acc_shm_table), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (init_table(p) != 0) {
        munmap(p, sizeof(acc_shm_table));
        return NULL;
    }
    return p;
}

void acc_shm_unmap(acc_shm_table *t)
{
    if (t != NULL)
        munmap(t, sizeof(acc_shm_table));
}

static acc_shm_table *map_checked(int fd, const char **why)
{
    if (acc_shm_check_fd(fd, why) != 0)
        return NULL;
    void *p = mmap(NULL, sizeof(acc_shm_table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { *why = "mmap failed"; return NULL; }
    if (acc_shm_check_header(p, why) != 0) {
        munmap(p, sizeof(acc_shm_table));
        return NULL;
    }
    return p;
}

/* Build a complete table under a private temporary name, then hard-link it to the real
 * name: other processes either find no segment or a fully initialised one. Returns 1 if
 * ours is now the segment, 0 if another process won the race, -1 on failure. */
static int create_and_link(const char *name, const char **why)
{
    static unsigned seq;
    char tmp[ACC_SHM_NAME_MAX + 64], from[sizeof(tmp) + 16], to[ACC_SHM_NAME_MAX + 16];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%ld.%u", name, (int)getpid(), (long)syscall(SYS_gettid),
             __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0) { *why = errno == ENOENT ? "no /dev/shm" : "cannot create the segment"; return -1; }
    int ret = -1;
    void *p = MAP_FAILED;
    /* fchmod: the umask must not leave a mode that our own attach check then refuses. */
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, sizeof(acc_shm_table)) != 0) {
        *why = "cannot size the segment";
        goto out;
    }
    p = mmap(NULL, sizeof(acc_shm_table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || init_table(p) != 0) {
        *why = "cannot initialise the segment";
        goto out;
    }
    snprintf(from, sizeof(from), SHM_DIR "%s", tmp);
    snprintf(to, sizeof(to), SHM_DIR "%s", name);
    if (link(from, to) == 0)
        ret = 1;
    else if (errno == EEXIST)
        ret = 0;
    else
        *why = "cannot link the segment into /dev/shm";
out:
    if (p != MAP_FAILED)
        munmap(p, sizeof(acc_shm_table));
    close(fd);
    shm_unlink(tmp);
    return ret;
}

/* Our own file (regular, ours, 0600) holding a table of an older layout: left by an accelaes
 * of an earlier version. Refusing it would leave every process on a private table for good. */
static int older_layout(int fd)
{
    struct stat st;
    acc_shm_hdr h;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()
        || (st.st_mode & 07777) != 0600 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        return 0;
    return h.magic == ACC_SHM_MAGIC && h.version < ACC_SHM_VERSION;
}

acc_shm_table *acc_shm_attach(const char *name, const char **why)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0);
        if (fd >= 0) {
            acc_shm_table *t = map_checked(fd, why);
            int replace = t == NULL && older_layout(fd);
            close(fd);
            if (!replace)
                return t;
            /* Processes of the older version keep the table they have; new ones get a new one. */
            shm_unlink(name);
            continue;
        }
        if (errno != ENOENT) {
            *why = errno == ELOOP ? "the segment is a symlink" : "cannot open the segment";
            return NULL;
        }
        /* Absent: create it. Losing the race means it exists now, so open again. The
         * retry bound covers a segment unlinked between our attempts. */
        if (create_and_link(name, why) < 0)
            return NULL;
    }
    *why = "the segment keeps disappearing";
    return NULL;
}

uint64_t acc_proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: fields restart after the last ')'. starttime is
     * field 22. p starts at the space before field 3; each step moves to the space before the
     * next field (one step more would read vsize, which changes as memory grows). */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    for (int f = 3; f < 22 && p != NULL; f++)
        p = strchr(p + 1, ' ');
    return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

int acc_pid_alive(int32_t pid, uint64_t start_time)
{
    /* pid <= 0 would address process groups: never a valid owner. */
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    if (start_time != 0) {
        uint64_t now = acc_proc_start_time(pid);
        if (now != 0 && now != start_time)
            return 0;     /* the pid was reused */
    }
    return 1;
}

int acc_owner_alive(acc_owner_word w, uint64_t start)
{
    int32_t pid = ACC_OWNER_PID(w);
    if (!acc_tid_alive(pid, ACC_OWNER_TID(w)))
        return 0;
    uint64_t now = start != 0 ? acc_proc_start_time(pid) : 0;
    return now == 0 || now == start;
}

int acc_tid_alive(int32_t pid, int32_t tid)
{
    if (pid <= 0 || tid <= 0)
        return 0;
    if (syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH)
        return 0;
    return 1;
}

/* "Seccomp:" and "Seccomp_filters:" (Linux 5.9+) of /proc/self/status. */
int acc_seccomp_read(acc_seccomp_state *s)
{
    char buf[4096];
    s->mode = -1;
    s->filters = -1;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t have = 0;
    ssize_t n;
    while (have < sizeof(buf) - 1 && (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    buf[have] = '\0';
    const char *m = strstr(buf, "\nSeccomp:"), *f = strstr(buf, "\nSeccomp_filters:");
    if (m == NULL)
        return -1;
    s->mode = (int)strtol(m + sizeof("\nSeccomp:") - 1, NULL, 10);
    if (f != NULL)
        s->filters = (int)strtol(f + sizeof("\nSeccomp_filters:") - 1, NULL, 10);
    return 0;
}
