/* scheduler/units.c: taking and releasing units (a CAS on the owner word, recovering a unit
 * whose holder is gone or whose pid was reused), the dead-holder sweep, the FIFO's priority over
 * newcomers, and GPU slot registration. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include "scheduler/sched_int.h"

#define SWEEP_INTERVAL_NS 50000000u     /* how often a process looks for dead owners' units */
#define MAX_DEVICE_SLOTS 64             /* per device kind and name */
#define REUSE_CHECK_NS 100000000u       /* held this long: check the holder's start time too */

static uint64_t last_sweep_ns;          /* atomic */

void acc_units_child_reset(void)
{
    ACC_STORE(&last_sweep_ns, 0);
}

/* The holder of u (owner word cur) still exists. Its process start time is read only for a unit
 * held longer than any request takes: a CPU piece or a GPU run lasts milliseconds, a holder
 * killed with -9 holds for ever, and its pid may meanwhile name another process. */
static int holder_alive(acc_shm_unit *u, acc_owner_word cur)
{
    uint64_t held = acc_now_ns() - ACC_LOAD(&u->since_ns);
    return acc_owner_alive(cur, held > REUSE_CHECK_NS ? ACC_LOAD(&u->owner_start) : 0);
}

int acc_sched_take(acc_shm_table *t, uint32_t id)
{
    if (id >= acc_shm_nunits(t))
        return 0;
    acc_shm_unit *u = &t->units[id];
    if (ACC_LOAD(&u->id) != id)
        return 0;
    uint64_t start;
    int32_t pid = acc_sched_pid_start(&start);
    acc_owner_word me = ACC_OWNER(pid, acc_sched_tid());
    int rc = acc_lock_try(&u->lock, me, 0);
    if (rc == 0) {
        acc_owner_word cur = ACC_LOAD(&u->lock);
        if (cur == 0 || cur == me || holder_alive(u, cur)
            || !__atomic_compare_exchange_n(&u->lock, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return 0;
        rc = 2;
    }
    ACC_STORE(&u->owner_start, start);
    if (rc == 2) {
        /* The owner died holding it: the unit holds no data, so it is simply usable again. */
        ACC_ADD(&u->recoveries, 1);
        acc_sched_event(ACC_EV_RECOVERY);
    }
    ACC_STORE(&u->owner_pid, pid);
    ACC_STORE(&u->owner_tid, acc_sched_tid());
    ACC_STORE(&u->since_ns, acc_now_ns());
    ACC_STORE(&u->state, ACC_UNIT_BUSY);
    return 1;
}

void acc_sched_sweep(acc_shm_table *t, acc_unit_kind kind)
{
    uint64_t now = acc_now_ns(), last = ACC_LOAD(&last_sweep_ns);
    if (last != 0 && now - last < SWEEP_INTERVAL_NS)
        return;
    if (!__atomic_compare_exchange_n(&last_sweep_ns, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;   /* another thread of ours is sweeping */
    uint32_t n = acc_shm_nunits(t);
    for (uint32_t i = 0; i < n; i++) {
        acc_shm_unit *u = &t->units[i];
        if (ACC_LOAD(&u->kind) != (uint32_t)kind || ACC_LOAD(&u->state) != ACC_UNIT_BUSY)
            continue;
        /* BUSY with a free lock word is a state nobody holds (a damaged entry): fix it too. */
        acc_owner_word cur = ACC_LOAD(&u->lock);
        if (cur != 0 && holder_alive(u, cur))
            continue;
        if (acc_sched_take(t, i))
            acc_sched_release((int)i, 0, 0);
    }
}

static int fifo_has_live_waiter(acc_shm_table *t, acc_unit_kind kind)
{
    uint64_t now = acc_now_ns();
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        acc_shm_waiter *w = &t->waiters[i];
        /* A waiter refreshes its heartbeat every 20 ms; 200 ms of silence: not waiting. */
        if (ACC_LOAD(&w->state) == ACC_WAITER_WAITING && ACC_LOAD(&w->kind) == (uint32_t)kind
            && now - ACC_LOAD(&w->heartbeat_ns) < 200000000u)
            return 1;
    }
    return 0;
}

int acc_sched_try_kind(acc_shm_table *t, acc_unit_kind kind)
{
    if (acc_unit_kinds[kind].per_core) {
        const acc_cpu_list *c = acc_sched_cpus();
        int n = c->n;
        if (n <= 0)
            return -1;
        /* Start at the core we run on, so a caller keeps its cache; else spread by thread. */
        int start = (int)((uint32_t)acc_sched_tid() % (uint32_t)n), cur = sched_getcpu();
        for (int i = 0; i < n; i++)
            if (c->cpu[i] == cur) { start = i; break; }
        for (int i = 0; i < n; i++) {
            uint32_t id = c->unit[(start + i) % n];
            if (id < ACC_SHM_MAX_UNITS && ACC_LOAD(&t->units[id].state) == ACC_UNIT_IDLE
                && acc_sched_take(t, id))
                return (int)id;
        }
        return -1;
    }
    uint32_t n = acc_shm_nunits(t);
    for (uint32_t i = 0; i < n; i++) {
        acc_shm_unit *u = &t->units[i];
        if (ACC_LOAD(&u->kind) == (uint32_t)kind && ACC_LOAD(&u->state) == ACC_UNIT_IDLE
            && acc_sched_take(t, i))
            return (int)i;
    }
    return -1;
}

int acc_sched_try_acquire(acc_unit_kind kind)
{
    acc_shm_table *t = acc_sched_table();
    if (t == NULL || !acc_unit_kind_valid(kind))
        return -1;
    acc_sched_sweep(t, kind);
    /* Waiters in the FIFO come first: taking past them would starve them. */
    if (ACC_LOAD(&t->hdr.nwaiting[kind]) != 0 && fifo_has_live_waiter(t, kind))
        return -1;
    return acc_sched_try_kind(t, kind);
}

void acc_sched_release(int unit, uint64_t bytes, uint64_t requests)
{
    acc_shm_table *t = acc_sched_ready_table();
    if (t == NULL)
        return;
    if (unit < 0 || (uint32_t)unit >= acc_shm_nunits(t))
        return;
    acc_shm_unit *u = &t->units[unit];
    /* Only the thread that holds it: the state must not say IDLE while another thread (or
     * the parent, after fork) holds it. */
    int32_t pid = acc_sched_pid();
    acc_owner_word me = ACC_OWNER(pid, acc_sched_tid());
    if (ACC_LOAD(&u->lock) != me || ACC_LOAD(&u->owner_pid) != pid
        || ACC_LOAD(&u->owner_tid) != acc_sched_tid() || ACC_LOAD(&u->state) != ACC_UNIT_BUSY)
        return;
    ACC_ADD(&u->bytes, bytes);
    ACC_ADD(&u->requests, requests);
    ACC_STORE(&u->owner_pid, 0);
    ACC_STORE(&u->owner_tid, 0);
    ACC_STORE(&u->owner_start, 0);
    ACC_STORE(&u->since_ns, acc_now_ns());
    ACC_STORE_REL(&u->state, ACC_UNIT_IDLE);
    acc_lock_release(&u->lock, me);
    /* Pairs with the fence in the FIFO's enqueue: either it sees our unlock, or we see it. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint32_t kind = ACC_LOAD(&u->kind);
    if (kind < ACC_UNIT_KIND_MAX && ACC_LOAD(&t->hdr.nwaiting[kind]) != 0)
        acc_fifo_notify(t, (acc_unit_kind)kind);
}

int acc_sched_add_gpu_units(int n, int node, const char *devname)
{
    return acc_sched_add_device_units(ACC_UNIT_GPU, n, node, devname);
}

int acc_sched_add_device_units(acc_unit_kind kind, int n, int node, const char *devname)
{
    acc_shm_table *t = acc_sched_table_once();
    if (t == NULL || !acc_unit_kind_valid(kind) || acc_unit_kinds[kind].per_core)
        return 0;
    char name[ACC_SHM_DEVNAME];
    snprintf(name, sizeof(name), "%s", devname != NULL ? devname : acc_unit_kinds[kind].name);
    if (n > MAX_DEVICE_SLOTS)
        n = MAX_DEVICE_SLOTS;
    if (node < -1)
        node = -1;
    /* Once per process: a 2 ms wait lost to a preempted holder would leave the device unused
     * by this process for its whole life. */
    if (acc_shm_lock_wait(t, ACC_SHM_LOCK_ONCE_NS) != 0)
        return 0;
    int have = 0, total = 0;
    uint32_t nu = acc_shm_nunits(t);
    for (uint32_t i = 0; i < nu; i++) {
        acc_shm_unit *u = &t->units[i];
        if (ACC_LOAD(&u->kind) != (uint32_t)kind)
            continue;
        total++;
        if (strncmp(u->devname, name, sizeof(u->devname)) == 0)
            have++;
    }
    /* Idempotent per host: another process may have registered this device already. */
    for (; have < n; have++, total++)
        if (acc_sched_add_unit(t, kind, -1, node, name) < 0)
            break;
    acc_shm_unlock(t);
    return total;
}
