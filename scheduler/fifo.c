/* scheduler/fifo.c: acc_sched_acquire, the cross-process FIFO of waiters for a unit.
 *
 * A waiter takes a ticket (an entry in the segment with pid, tid, kind and a futex word) and
 * only the oldest live waiter of a kind tries to take a unit; a release bumps that waiter's
 * word and wakes it. Waiters sleep in 20 ms slices and refresh a heartbeat each slice, so a
 * waiter killed in the queue (kill -9 leaves its entry behind) is found dead by its tgkill
 * check or, if its pid was reused, by a heartbeat 2 s stale, and is removed: it delays the
 * queue, never blocks it. A ticket may also be held without sleeping (acc_sched_enqueue /
 * poll / cancel): its holder works meanwhile and refreshes the heartbeat at each poll. Limit: CPU units are per process (affinity, workers), so with
 * waiters for CPU units from processes with different core sets the head may wait for a
 * core it cannot use; the provider only waits for GPU slots. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include "scheduler/sched_int.h"

#define SLICE_NS      20000000u     /* a waiter's sleep between liveness checks */
#define SUSPECT_NS   200000000u     /* heartbeat this old: check that the thread still exists */
#define DEAD_NS     2000000000u     /* heartbeat this old: gone, or stopped; skipped either way */

/* Called with the lock held: free entry i if it still holds `ticket`. */
static void drop_locked(acc_shm_table *t, uint32_t i, uint64_t ticket)
{
    acc_shm_waiter *w = &t->waiters[i];
    if (ACC_LOAD(&w->state) != ACC_WAITER_WAITING || ACC_LOAD(&w->ticket) != ticket)
        return;
    uint32_t k = ACC_LOAD(&w->kind);
    ACC_STORE_REL(&w->state, ACC_WAITER_FREE);
    if (k < ACC_UNIT_KIND_MAX && ACC_LOAD(&t->hdr.nwaiting[k]) > 0)
        ACC_STORE(&t->hdr.nwaiting[k], ACC_LOAD(&t->hdr.nwaiting[k]) - 1);
}

static void drop(acc_shm_table *t, uint32_t i, uint64_t ticket)
{
    if (acc_shm_lock(t) != 0)
        return;
    drop_locked(t, i, ticket);
    acc_shm_unlock(t);
}

/* 1 if the waiter in entry w may still be waiting. check_thread: also ask the kernel. */
static int waiter_alive(const acc_shm_waiter *w, uint64_t now, int check_thread)
{
    uint64_t hb = ACC_LOAD(&w->heartbeat_ns);
    uint64_t age = now > hb ? now - hb : 0;
    if (age > DEAD_NS)
        return 0;
    if (check_thread || age > SUSPECT_NS)
        return acc_tid_alive(ACC_LOAD(&w->pid), ACC_LOAD(&w->tid));
    return 1;
}

/* Enqueue the calling thread; returns the entry index and sets *ticket, or -1 if full. */
static int enqueue(acc_shm_table *t, acc_unit_kind kind, uint64_t *ticket)
{
    if (acc_shm_lock(t) != 0)
        return -1;
    int idx = -1;
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        acc_shm_waiter *w = &t->waiters[i];
        if (ACC_LOAD(&w->state) != ACC_WAITER_FREE)
            continue;
        *ticket = ++t->hdr.next_ticket;
        ACC_STORE(&w->ticket, *ticket);
        ACC_STORE(&w->heartbeat_ns, acc_now_ns());
        ACC_STORE(&w->pid, acc_sched_pid());
        ACC_STORE(&w->tid, acc_sched_tid());
        ACC_STORE(&w->kind, (uint32_t)kind);
        ACC_STORE_REL(&w->state, ACC_WAITER_WAITING);
        ACC_STORE(&t->hdr.nwaiting[kind], ACC_LOAD(&t->hdr.nwaiting[kind]) + 1);
        idx = (int)i;
        break;
    }
    acc_shm_unlock(t);
    /* Pairs with the fence in acc_sched_release: a release either sees nwaiting or leaves
     * an unlocked unit that our first try finds. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return idx;
}

/* 1 if no live waiter of our kind is older than us; dead ones met on the way are removed. */
static int is_head(acc_shm_table *t, uint32_t me, uint64_t ticket, acc_unit_kind kind, uint64_t now)
{
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        if (i == me)
            continue;
        acc_shm_waiter *w = &t->waiters[i];
        if (ACC_LOAD_ACQ(&w->state) != ACC_WAITER_WAITING || ACC_LOAD(&w->kind) != (uint32_t)kind)
            continue;
        uint64_t tk = ACC_LOAD(&w->ticket);
        if (tk >= ticket)
            continue;
        if (waiter_alive(w, now, 0))
            return 0;
        drop(t, i, tk);
    }
    return 1;
}

/* Runs on every release while someone waits, so it takes no lock: a lock word another process
 * wrote would make each release wait. It wakes the oldest waiter whose heartbeat is fresh; a
 * wake that misses (an entry changing meanwhile) costs the real head at most one sleep slice,
 * and dead entries are removed by the waiters themselves (is_head). */
void acc_fifo_notify(acc_shm_table *t, acc_unit_kind kind)
{
    uint64_t now = acc_now_ns(), best = UINT64_MAX;
    int head = -1;
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        acc_shm_waiter *w = &t->waiters[i];
        uint64_t tk = ACC_LOAD(&w->ticket);
        if (ACC_LOAD_ACQ(&w->state) == ACC_WAITER_WAITING && ACC_LOAD(&w->kind) == (uint32_t)kind
            && tk < best && waiter_alive(w, now, 0)) {
            best = tk;
            head = (int)i;
        }
    }
    if (head >= 0) {
        __atomic_fetch_add(&t->waiters[head].word, 1, __ATOMIC_RELEASE);
        acc_futex_wake(&t->waiters[head].word, 1);
    }
}

static int has_kind(acc_shm_table *t, acc_unit_kind kind)
{
    if (acc_unit_kinds[kind].per_core)
        return acc_sched_cpu_unit(0, NULL) >= 0;
    uint32_t n = acc_shm_nunits(t);
    for (uint32_t i = 0; i < n; i++)
        if (ACC_LOAD(&t->units[i].kind) == (uint32_t)kind)
            return 1;
    return 0;
}

/* The FIFO is full (hundreds of waiters): fall back to polling, not in order. */
static int poll_acquire(acc_shm_table *t, acc_unit_kind kind, uint64_t deadline)
{
    for (;;) {
        acc_sched_sweep(t, kind);
        int id = acc_sched_try_kind(t, kind);
        if (id >= 0)
            return id;
        if (acc_now_ns() >= deadline)
            return -1;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* One look at the ticket's turn (both the blocking and the polling waiter): queue again at the
 * back if someone took us for dead, refresh the heartbeat, and, as the oldest live waiter, try
 * to take a unit. *seen: the futex word as read before the try, to sleep on. */
static int ticket_turn(acc_shm_table *t, acc_sched_ticket *tk, uint64_t now, uint32_t *seen)
{
    if (tk->idx < 0) {
        acc_sched_sweep(t, tk->kind);
        tk->idx = enqueue(t, tk->kind, &tk->ticket);   /* room again: into the queue */
        if (tk->idx < 0)
            return acc_sched_try_kind(t, tk->kind);
    }
    acc_shm_waiter *w = &t->waiters[tk->idx];
    /* Someone took us for dead (we were stopped, say): queue again, at the back. */
    if (ACC_LOAD_ACQ(&w->state) != ACC_WAITER_WAITING || ACC_LOAD(&w->ticket) != tk->ticket
        || ACC_LOAD(&w->pid) != acc_sched_pid() || ACC_LOAD(&w->tid) != acc_sched_tid()) {
        tk->idx = enqueue(t, tk->kind, &tk->ticket);
        *seen = 0;
        return -1;
    }
    ACC_STORE(&w->heartbeat_ns, now);
    *seen = __atomic_load_n(&w->word, __ATOMIC_ACQUIRE);
    if (!is_head(t, (uint32_t)tk->idx, tk->ticket, tk->kind, now))
        return -1;
    acc_sched_sweep(t, tk->kind);
    int id = acc_sched_try_kind(t, tk->kind);
    if (id >= 0) {
        drop(t, (uint32_t)tk->idx, tk->ticket);
        tk->idx = -1;
        /* Pass the turn on: another unit may be idle for the next waiter. */
        if (ACC_LOAD(&t->hdr.nwaiting[tk->kind]) != 0)
            acc_fifo_notify(t, tk->kind);
    }
    return id;
}

static void ticket_leave(acc_shm_table *t, acc_sched_ticket *tk)
{
    acc_unit_kind kind = tk->kind;
    if (tk->idx >= 0)
        drop(t, (uint32_t)tk->idx, tk->ticket);
    tk->idx = -1;
    tk->kind = 0;
    /* We may have been woken for a unit we now leave idle: the next waiter takes it. */
    if (ACC_LOAD(&t->hdr.nwaiting[kind]) != 0)
        acc_fifo_notify(t, kind);
}

int acc_sched_enqueue(acc_unit_kind kind, acc_sched_ticket *tk)
{
    acc_shm_table *t = acc_sched_table();
    if (tk == NULL)
        return -1;
    tk->kind = 0;
    tk->idx = -1;
    if (t == NULL || !acc_unit_kind_valid(kind) || !has_kind(t, kind))
        return -1;
    acc_sched_event(ACC_EV_WAIT);
    tk->kind = kind;
    tk->idx = enqueue(t, kind, &tk->ticket);   /* -1: full; poll takes any idle unit instead */
    return 0;
}

/* A ticket this process holds: a queued kind and an entry in the table or -1 (caller memory,
 * but an index is bounds-checked wherever it comes from). */
static int ticket_ok(const acc_sched_ticket *tk)
{
    return tk != NULL && acc_unit_kind_valid(tk->kind) && tk->idx >= -1 && tk->idx < (int)ACC_SHM_MAX_WAITERS;
}

int acc_sched_poll(acc_sched_ticket *tk)
{
    acc_shm_table *t = acc_sched_ready_table();
    uint32_t seen;
    if (t == NULL || !ticket_ok(tk))
        return -1;
    int id = ticket_turn(t, tk, acc_now_ns(), &seen);
    if (id >= 0)
        tk->kind = 0;   /* spent */
    return id;
}

void acc_sched_cancel(acc_sched_ticket *tk)
{
    acc_shm_table *t = acc_sched_ready_table();
    if (t == NULL || !ticket_ok(tk))
        return;
    ticket_leave(t, tk);
}

int acc_sched_acquire(acc_unit_kind kind, long timeout_us)
{
    acc_shm_table *t = acc_sched_table();
    if (t == NULL || !acc_unit_kind_valid(kind) || !has_kind(t, kind))
        return -1;
    int id = acc_sched_try_acquire(kind);
    if (id >= 0 || timeout_us == 0)
        return id;
    uint64_t now = acc_now_ns();
    /* Negative, or beyond ~11 days (where the ns arithmetic could wrap): no limit. */
    uint64_t deadline = timeout_us < 0 || timeout_us > 1000000000000L ? UINT64_MAX
                                                                     : now + (uint64_t)timeout_us * 1000u;
    acc_sched_ticket tk;
    if (acc_sched_enqueue(kind, &tk) != 0)
        return -1;
    for (;;) {
        if (tk.idx < 0)
            return poll_acquire(t, kind, deadline);   /* the FIFO is full: polled, not in order */
        uint32_t seen = 0;
        now = acc_now_ns();
        id = ticket_turn(t, &tk, now, &seen);
        if (id >= 0)
            return id;
        if (now >= deadline) {
            ticket_leave(t, &tk);
            return -1;
        }
        uint64_t left = deadline - now;
        if (tk.idx >= 0)   /* else requeued: the loop polls */
            acc_futex_wait(&t->waiters[tk.idx].word, seen, left < SLICE_NS ? left : SLICE_NS);
    }
}
