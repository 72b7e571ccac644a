/* scheduler/sched.c: the unit table as this process sees it: attaching when the provider loads
 * (shared segment or private fallback), CPU-unit discovery on the first path that uses units, and
 * what a forked child may and must redo. Taking and releasing units: scheduler/units.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef HAVE_NUMA
#include <numa.h>
#endif
#include "scheduler/forksafe.h"
#include "scheduler/sched_int.h"

#define INIT_RETRY_NS 50000000u       /* after the table lock could not be had */

static struct {
    pthread_mutex_t lock;          /* initialisation (fork-safe: forksafe.h) */
    int ready;                     /* atomic: heavy state valid in this process (slot, pid, CPU list) */
    acc_sched_conf conf;
    int reported;                  /* the shm = on fallback line was printed */
    acc_shm_table *tab;            /* atomic: the mapping; a forked child keeps its parent's */
    int shared;
    uid_t euid;                    /* the user the table was attached as */
    char name[ACC_SHM_NAME_MAX + 1];
    int32_t pid;
    uint64_t start;                /* this process's start time (/proc/<pid>/stat), 0 unknown */
    acc_shm_proc *proc;            /* atomic: where counts go (a slot, or own_proc) */
    acc_shm_proc own_proc;         /* when no slot is ours: counts still reach the totals */
    int forked;                    /* a fork happened since this process attached */
    int kernel_ok;                 /* atomic: -1 not yet asked, 0 no, 1 the heavy paths may use the kernel */
    acc_seccomp_state sc_base;     /* the seccomp state the process attached under */
    acc_cpu_list cpus;
    uint64_t retry_ns;             /* atomic: no initialisation attempt before this time */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .conf = { -1, 0 }, .kernel_ok = -1, .sc_base = { -1, -1 } };
ACC_FORK_SAFE(&g.lock, 1, "sched init", ACC_RANK_SCHED, ACC_FORK_HOLD);

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static __thread int32_t tls_tid;

int32_t acc_sched_pid(void)
{
    return g.pid;
}

int32_t acc_sched_tid(void)
{
    if (__builtin_expect(tls_tid == 0, 0))
        tls_tid = (int32_t)syscall(SYS_gettid);
    return tls_tid;
}

/* ---- fork ---- */

static void atfork_prepare(void)
{
    /* Publish this thread's buffered counts to the parent's slot before the child copies them. */
    acc_sched_flush();
}

/* The child owns none of the parent's units and not its slot. It keeps the mapping (so that its
 * inline counts reach the totals with no system call: an OpenSSH privsep child is killed by
 * seccomp for any call outside its list) and redoes the rest only when a split, batch or GPU
 * path asks, and only if acc_sched_kernel_ok() says it may. */
static void atfork_child(void)
{
    ACC_STORE(&g.ready, 0);
    memset(&g.own_proc, 0, sizeof(g.own_proc));
    ACC_STORE(&g.proc, &g.own_proc);
    g.cpus.n = 0;
    g.pid = 0;
    g.forked = 1;
    ACC_STORE(&g.kernel_ok, -1);
    ACC_STORE(&g.retry_ns, 0);
    acc_units_child_reset();
    tls_tid = 0;
    acc_counters_child_reset();
    acc_pool_child_reset();
}

static void init_once(void)
{
    acc_fork_install();
    pthread_atfork(atfork_prepare, NULL, atfork_child);
    /* Pool threads sleep in our code and thread-exit destructors point into it: pin the
     * module so that a provider unload (dlclose) cannot unmap code still in use. */
    Dl_info info;
    if (dladdr((void *)&acc_sched_table, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0')
        (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    atexit(acc_sched_flush);
}

/* ---- initialisation ---- */

int acc_sched_add_unit(acc_shm_table *t, acc_unit_kind kind, int cpu, int node, const char *devname)
{
    uint32_t n = acc_shm_nunits(t);
    if (n >= ACC_SHM_MAX_UNITS)
        return -1;
    acc_shm_unit *u = &t->units[n];
    memset(u, 0, sizeof(*u));   /* lock word 0: free */
    u->id = n;
    u->kind = (uint32_t)kind;
    u->cpu = cpu;
    u->node = node;
    u->since_ns = acc_now_ns();
    if (devname != NULL)
        snprintf(u->devname, sizeof(u->devname), "%s", devname);
    ACC_STORE_REL(&t->hdr.nunits, n + 1);   /* publish only a complete unit */
    return (int)n;
}

static int cpu_node(int cpu)
{
#ifdef HAVE_NUMA
    static int avail = -2;
    /* libnuma reads /sys and prints a warning on stderr when it cannot (a sandbox that refuses
     * files): ask it only where it can read what it needs. */
    if (avail == -2)
        avail = access("/sys/devices/system/node", R_OK | X_OK) == 0 ? numa_available() : -1;
    if (avail >= 0) {
        int node = numa_node_of_cpu(cpu);
        return node >= 0 ? node : 0;
    }
#endif
    (void)cpu;
    return 0;
}

/* One CPU unit per core of our affinity set (at most `workers`), shared with every process
 * of the user that runs on the same cores; called with the table lock held. */
static void discover_cpus(acc_shm_table *t)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        CPU_SET(0, &set);
    int limit = g.conf.workers > 0 ? g.conf.workers : INT_MAX;
    g.cpus.n = 0;
    for (int c = 0; c < CPU_SETSIZE && g.cpus.n < limit; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int id = -1;
        uint32_t n = acc_shm_nunits(t);
        for (uint32_t i = 0; i < n && id < 0; i++)
            if (ACC_LOAD(&t->units[i].kind) == ACC_UNIT_CPU && ACC_LOAD(&t->units[i].cpu) == c)
                id = (int)i;
        if (id < 0)
            id = acc_sched_add_unit(t, ACC_UNIT_CPU, c, cpu_node(c), NULL);
        if (id < 0)
            break;
        g.cpus.unit[g.cpus.n] = (uint32_t)id;
        g.cpus.cpu[g.cpus.n] = c;
        g.cpus.n++;
    }
}

/* Counts made while no slot was ours (the table lock was busy when we attached: many processes
 * starting at once on few cores) move into the slot now; they reached the totals already. */
static void adopt_own_counts(acc_shm_proc *p)
{
    acc_shm_proc *o = &g.own_proc;
    for (unsigned i = 0; i < ACC_PATH_MAX; i++) {
        ACC_ADD(&p->bytes[i], __atomic_exchange_n(&o->bytes[i], 0, __ATOMIC_RELAXED));
        ACC_ADD(&p->requests[i], __atomic_exchange_n(&o->requests[i], 0, __ATOMIC_RELAXED));
    }
    for (unsigned i = 0; i < ACC_EV_MAX; i++)
        ACC_ADD(&p->events[i], __atomic_exchange_n(&o->events[i], 0, __ATOMIC_RELAXED));
}

/* A slot for our counters; a slot whose process died (or whose pid was reused) is taken
 * over: its counts already reached the totals when they were published. */
static void claim_slot(acc_shm_table *t)
{
    uint64_t start = g.start;
    ACC_STORE(&g.proc, &g.own_proc);
    /* Never-used slots first, so that accelaes-stat can still show what recently exited
     * processes did; then the first slot of a dead process. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < ACC_SHM_MAX_PROCS; i++) {
            acc_shm_proc *p = &t->procs[i];
            int32_t pid = ACC_LOAD(&p->pid);
            if (pass == 0 ? pid != 0
                          : pid != g.pid && acc_pid_alive(pid, ACC_LOAD(&p->start_time)))
                continue;
            memset((char *)p + sizeof(p->pid), 0, sizeof(*p) - sizeof(p->pid));
            ACC_STORE(&p->start_time, start);
            ACC_STORE_REL(&p->pid, g.pid);
            ACC_STORE_REL(&g.proc, p);
            adopt_own_counts(p);
            return;
        }
    }
}

/* Map the shared segment, or a private table when it cannot be used. g.lock held. */
static acc_shm_table *map_table(void)
{
    const char *why = "shm = off";
    acc_shm_table *t = NULL;
    g.name[0] = '\0';
    if (g.conf.shm != 0) {
        if (acc_shm_name(g.name, sizeof(g.name)) != 0)
            why = "invalid ACCELAES_SHM_NAME";
        else
            t = acc_shm_attach(g.name, &why);
    }
    g.shared = t != NULL;
    if (t == NULL) {
        if (g.conf.shm == 1 && !g.reported) {
            fprintf(stderr, "accelaes: shared unit table %s unusable (%s); using a private table\n",
                    g.name[0] ? g.name : "(ACCELAES_SHM_NAME)", why);
            g.reported = 1;
        }
        t = acc_shm_private();
    }
    return t;
}

/* Attach (map, claim a slot) in a process that has not forked since: what counters need.
 * CPU discovery waits for the first path that uses units. g.lock held. */
static void attach_locked(void)
{
    if (g.tab != NULL && !g.forked)
        return;
    acc_shm_table *t = g.tab;
    /* A child gets a slot of its own; a private table is the parent's copy, with the parent's
     * units held by threads the child does not have: start a fresh one; and a child that changed
     * user since (a server's worker) attaches its own user's table. The old one stays mapped:
     * another thread of the child may be adding its counts to it right now. */
    if (t != NULL && (!g.shared || geteuid() != g.euid))
        t = NULL;
    if (t == NULL && (t = map_table()) == NULL)
        return;
    g.euid = geteuid();
    g.pid = (int32_t)getpid();
    g.start = acc_proc_start_time(g.pid);
    ACC_STORE(&g.proc, &g.own_proc);
    if (acc_shm_lock(t) == 0) {
        claim_slot(t);
        acc_shm_unlock(t);
    }
    if (!g.forked)
        (void)acc_seccomp_read(&g.sc_base);
    ACC_STORE_REL(&g.tab, t);
}

/* wait_ns: how long the table lock may be waited for (a request's short wait, or a once-only
 * caller's long one, which also ignores the retry time a request's failure set). */
static acc_shm_table *init_slow(uint64_t wait_ns)
{
    pthread_once(&g_once, init_once);
    if (!acc_sched_kernel_ok())
        return NULL;
    /* The table lock could not be had lately (a word another process wrote): do not wait for it
     * on every request; such requests run inline. */
    if (wait_ns <= ACC_SHM_LOCK_WAIT_NS && acc_now_ns() < ACC_LOAD(&g.retry_ns))
        return NULL;
    pthread_mutex_lock(&g.lock);
    if (!ACC_LOAD(&g.ready)) {
        if (g.forked || g.tab == NULL)
            attach_locked();
        g.forked = 0;      /* from here on, this process is attached as any other */
        acc_shm_table *t = g.tab;
        if (t != NULL && acc_shm_lock_wait(t, wait_ns) == 0) {
            if (ACC_LOAD(&g.proc) == &g.own_proc)   /* the lock was busy at attach: a slot now */
                claim_slot(t);
            g.cpus.n = 0;
            discover_cpus(t);
            acc_shm_unlock(t);
            ACC_STORE_REL(&g.ready, 1);
        } else if (t != NULL) {
            ACC_STORE(&g.retry_ns, acc_now_ns() + INIT_RETRY_NS);
        }
    }
    pthread_mutex_unlock(&g.lock);
    return ACC_LOAD(&g.ready) ? g.tab : NULL;
}

void acc_sched_attach(void)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g.lock);
    if (g.tab == NULL)
        attach_locked();
    pthread_mutex_unlock(&g.lock);
}

/* The heavy paths' system calls (CPU discovery, threads, eventfd, dlopen) are safe in a process
 * that has not forked since it attached: it made such calls already, or could have. A forked
 * child may have entered a sandbox since (OpenSSH's privsep child is killed by seccomp for any
 * call outside its list), so it asks once, through /proc/self/status, which a sandbox that
 * refuses files refuses with an errno: the heavy paths are allowed only when the child runs
 * under no seccomp filter, or under exactly the filters its parent attached under. */
int acc_sched_kernel_ok(void)
{
    int k = ACC_LOAD(&g.kernel_ok);
    if (k >= 0)
        return k;
    if (!g.forked) {
        k = 1;
    } else {
        acc_seccomp_state now;
        k = acc_seccomp_read(&now) == 0
            && (now.mode == 0 || (now.mode == g.sc_base.mode && now.filters >= 0
                                  && now.filters == g.sc_base.filters));
    }
    ACC_STORE(&g.kernel_ok, k);
    return k;
}

acc_shm_table *acc_sched_table(void)
{
    if (__builtin_expect(ACC_LOAD_ACQ(&g.ready), 1))
        return g.tab;
    return init_slow(ACC_SHM_LOCK_WAIT_NS);
}

acc_shm_table *acc_sched_table_once(void)
{
    if (__builtin_expect(ACC_LOAD_ACQ(&g.ready), 1))
        return g.tab;
    return init_slow(ACC_SHM_LOCK_ONCE_NS);
}

acc_shm_table *acc_sched_count_table(void)
{
    acc_shm_table *t = ACC_LOAD_ACQ(&g.tab);
    if (t != NULL || g.forked)
        return t;
    return acc_sched_table();   /* never attached: a program that links the scheduler directly */
}

acc_shm_proc *acc_sched_count_proc(void)
{
    acc_shm_proc *p = ACC_LOAD_ACQ(&g.proc);
    return p != NULL ? p : &g.own_proc;
}

acc_shm_proc *acc_sched_proc(void)
{
    (void)acc_sched_table();
    return acc_sched_count_proc();
}

void acc_sched_configure(const acc_sched_conf *conf)
{
    if (conf == NULL)
        return;
    pthread_mutex_lock(&g.lock);
    /* A forked child that configures (loads a provider of its own) attaches anew. The parent's
     * mapping stays mapped: another thread may be adding its counts to it right now. */
    if (g.forked && !ACC_LOAD(&g.ready) && g.tab != NULL) {
        ACC_STORE_REL(&g.tab, NULL);
        ACC_STORE(&g.proc, &g.own_proc);
    }
    if (!ACC_LOAD(&g.ready) && g.tab == NULL) {
        g.conf.shm = conf->shm < 0 ? -1 : conf->shm > 0 ? 1 : 0;
        g.conf.workers = conf->workers > 0 ? conf->workers : 0;
    }
    pthread_mutex_unlock(&g.lock);
}

int acc_sched_is_shared(void)
{
    return acc_sched_table() != NULL && g.shared;
}

int acc_sched_cpu_units(void)
{
    if (acc_sched_table() == NULL || g.cpus.n < 1)
        return 1;
    return g.cpus.n;
}

int acc_sched_cpu_unit(int i, int *cpu)
{
    if (acc_sched_table() == NULL || i < 0 || i >= g.cpus.n)
        return -1;
    if (cpu != NULL)
        *cpu = g.cpus.cpu[i];
    return (int)g.cpus.unit[i];
}

int32_t acc_sched_pid_start(uint64_t *start)
{
    *start = g.start;
    return g.pid;
}

const acc_cpu_list *acc_sched_cpus(void)
{
    return &g.cpus;
}

acc_shm_table *acc_sched_ready_table(void)
{
    return ACC_LOAD_ACQ(&g.ready) ? g.tab : NULL;
}
