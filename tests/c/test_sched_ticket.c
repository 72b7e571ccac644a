/* tests/c/test_sched_ticket.c: a FIFO place held without blocking (acc_sched_enqueue / poll /
 * cancel): a poller gets a unit only in its turn, newcomers and younger tickets do not pass it,
 * a cancel passes the turn on (to a poller or a sleeping acc_sched_acquire), and bad tickets are
 * refused. Also the byte figure of ACC_EV_GPU_TAIL_BYTES (acc_sched_event_add). */
#define _GNU_SOURCE
#include "tests/c/test_sched_common.h"

static int gpu_busy(acc_shm_table *t, int id)
{
    return ACC_LOAD(&t->units[id].state) == ACC_UNIT_BUSY;
}

static void test_refusals(void)
{
    acc_sched_ticket tk, zero;
    memset(&zero, 0, sizeof(zero));
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, &tk) == -1, "no GPU unit yet: nothing to queue for");
    CHECK(acc_sched_enqueue((acc_unit_kind)9, &tk) == -1, "bad kind queued");
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, NULL) == -1, "NULL ticket queued");
    CHECK(acc_sched_poll(NULL) == -1 && acc_sched_poll(&zero) == -1, "a NULL or empty ticket polled a unit");
    acc_sched_cancel(NULL);
    acc_sched_cancel(&zero);
    zero.kind = ACC_UNIT_GPU;
    zero.idx = 100000;          /* out of the table: must not be touched */
    zero.ticket = 1;
    CHECK(acc_sched_poll(&zero) == -1, "a ticket whose entry is out of the table took a unit");
    acc_sched_cancel(&zero);
}

/* Polls: in turn only; a younger ticket and a newcomer wait; the spent ticket is inert. */
static void test_turns(acc_shm_table *t, int unit)
{
    acc_sched_ticket a, b;
    uint64_t waits0 = ACC_LOAD(&t->hdr.events[ACC_EV_WAIT]);
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, &a) == 0 && a.idx >= 0, "enqueue a");
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, &b) == 0 && b.idx >= 0, "enqueue b");
    CHECK(ACC_LOAD(&t->hdr.events[ACC_EV_WAIT]) == waits0 + 2, "each enqueue is one wait");
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 2, "two queued");
    CHECK(acc_sched_poll(&a) == -1 && acc_sched_poll(&b) == -1, "a unit while it is held");
    acc_sched_release(unit, 0, 0);
    CHECK(!gpu_busy(t, unit), "released");
    CHECK(acc_sched_try_acquire(ACC_UNIT_GPU) == -1, "a newcomer passed two live tickets");
    CHECK(acc_sched_poll(&b) == -1, "the younger ticket passed the older one");
    int got = acc_sched_poll(&a);
    CHECK(got == unit && gpu_busy(t, unit), "the head's poll took %d, expected %d", got, unit);
    CHECK(acc_sched_poll(&a) == -1, "a spent ticket took a second unit");
    acc_sched_cancel(&a);   /* spent: no-op */
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 1, "b still queued");
    acc_sched_release(got, 0, 0);
    got = acc_sched_poll(&b);
    CHECK(got == unit, "b's turn: %d", got);
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 0, "queue empty");
    acc_sched_release(got, 0, 0);
}

/* Cancel passes the turn on: to the next poller, then to a thread asleep in acc_sched_acquire. */
static int g_blocked_got = -2;

static void *blocked_acquire(void *arg)
{
    (void)arg;
    __atomic_store_n(&g_blocked_got, acc_sched_acquire(ACC_UNIT_GPU, 20 * 1000000L), __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_cancel(acc_shm_table *t, int unit)
{
    acc_sched_ticket a, b;
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, &a) == 0 && acc_sched_enqueue(ACC_UNIT_GPU, &b) == 0, "enqueue");
    acc_sched_release(unit, 0, 0);
    acc_sched_cancel(&a);
    CHECK(acc_sched_poll(&a) == -1, "a cancelled ticket took a unit");
    int got = acc_sched_poll(&b);
    CHECK(got == unit, "after a's cancel, b's turn: %d", got);
    if (got < 0)
        return;
    /* Now a poller ahead of a sleeper: the sleeper waits while the poller is queued and gets
     * the unit once the poller cancels (woken, or at its next slice). */
    CHECK(acc_sched_enqueue(ACC_UNIT_GPU, &a) == 0, "enqueue a again");
    pthread_t th;
    pthread_create(&th, NULL, blocked_acquire, NULL);
    for (int w = 0; w < 5000 && ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) < 2; w++)
        sleep_us(1000);
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 2, "the sleeper queued behind the poller");
    acc_sched_release(got, 0, 0);
    /* The unit is idle and the poller (older, alive) does not poll: the sleeper must not take it.
     * 50 ms is only the chance for a wrong take to show (the sleeper looks every 20 ms). */
    sleep_us(50000);
    CHECK(__atomic_load_n(&g_blocked_got, __ATOMIC_SEQ_CST) == -2, "the sleeper passed the poller");
    acc_sched_cancel(&a);
    pthread_join(th, NULL);
    CHECK(g_blocked_got == unit, "the sleeper got %d after the cancel", g_blocked_got);
    if (g_blocked_got >= 0)
        CHECK(ACC_LOAD(&t->units[unit].owner_pid) == getpid(), "owner");
    CHECK(ACC_LOAD(&t->hdr.nwaiting[ACC_UNIT_GPU]) == 0, "queue empty at the end");
}

static void test_tail_bytes(acc_shm_table *t)
{
    uint64_t b0 = ACC_LOAD(&t->hdr.events[ACC_EV_GPU_TAIL_BYTES]);
    acc_sched_event_add(ACC_EV_GPU_TAIL_BYTES, 12345);
    acc_sched_event_add(ACC_EV_GPU_TAIL_BYTES, 0);
    acc_sched_event_add((acc_event)99, 7);
    CHECK(ACC_LOAD(&t->hdr.events[ACC_EV_GPU_TAIL_BYTES]) == b0 + 12345, "tail bytes %llu",
          (unsigned long long)(ACC_LOAD(&t->hdr.events[ACC_EV_GPU_TAIL_BYTES]) - b0));
}

int main(void)
{
    snprintf(segname, sizeof(segname), "/accelaes-test-ticket.%d", (int)getpid());
    setenv("ACCELAES_SHM_NAME", segname, 1);
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    acc_shm_table *t = acc_sched_table();
    CHECK(t != NULL, "no table");
    if (t == NULL)
        return 1;
    test_refusals();
    CHECK(acc_sched_add_gpu_units(1, 0, "test-gpu-ticket") == 1, "one GPU unit");
    int unit = acc_sched_try_acquire(ACC_UNIT_GPU);
    CHECK(unit >= 0, "take the GPU unit");
    if (unit >= 0) {
        test_turns(t, unit);
        unit = acc_sched_try_acquire(ACC_UNIT_GPU);
        CHECK(unit >= 0, "take it again");
        if (unit >= 0)
            test_cancel(t, unit);
        if (g_blocked_got >= 0)
            acc_sched_release(g_blocked_got, 0, 0);
    }
    test_tail_bytes(t);
    shm_unlink(segname);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
