/* scheduler/pool_adapt.c: whether helpers pay for a split request, here and now. Both measures are of this
 * process's own requests: what other processes do shows only in what our requests take.
 *  - The stall gate: a join that waits STALL_MIN_NS or more (and more than half the caller's own share) lost
 *    more than the helpers could have saved; the next GATE_NS run alone, so that a helper whose core was
 *    just taken is not asked again at once.
 *  - Per request size (powers of two), the mean time per MiB of requests run with helpers and of requests
 *    run alone (EWMAs); the cheaper way is taken and the other probed now and then. This sees what the gate
 *    cannot: rescues, and a caller preempted more often while a helper works on a contended core. So samples
 *    are capped only at ADAPT_CAP, the way in use is averaged over many samples so that its rare slow
 *    requests weigh what they cost, and probes with helpers are rare, since where helpers lose each one is a
 *    slow request. Helpers are given up only after ADAPT_TRUST samples: a process that makes a few large
 *    requests keeps the split.
 * The runs behind these numbers, and what was tried and dropped: bench/results/split-load.md and
 * bench/results/pool-design.md. */
#include "scheduler/pool_int.h"
#include "scheduler/sched_int.h"

#define STALL_MIN_NS     250000u
#define GATE_NS        10000000u
#define ADAPT_CLASSES        12     /* requests of 2^15 .. 2^26 bytes and more */
#define ALONE_PROBE         128u
#define SPLIT_PROBE        8192u    /* a burst of PROBE_BURST every SPLIT_PROBE requests */
#define PROBE_BURST           8u
#define ADAPT_CAP      20000000u    /* ns per MiB */
#define EW_IN_USE             7     /* 1/128 */
#define ADAPT_TRUST         128u    /* samples with helpers before they may be given up */
#define EW_PROBE              4     /* 1/16 */
static uint64_t gate_until_ns;       /* atomic */
typedef struct adapt_class {
    uint32_t with, alone;           /* atomics: EWMA ns per MiB (0: no sample yet) */
    uint32_t count;                 /* atomic: requests seen, for the probes */
    uint32_t burst;                 /* atomic: requests left in a probe with helpers */
    uint32_t nwith;                 /* atomic: samples with helpers, up to ADAPT_TRUST */
} adapt_class;
static adapt_class adapt[ADAPT_CLASSES];

static int gate_closed(uint64_t now)
{
    return (int64_t)(now - __atomic_load_n(&gate_until_ns, __ATOMIC_RELAXED)) < 0;
}

static void gate_stall(uint64_t now)
{
    __atomic_store_n(&gate_until_ns, now + GATE_NS, __ATOMIC_RELAXED);
}

static adapt_class *adapt_of(uint64_t bytes)
{
    int c = 0;
    while (c < ADAPT_CLASSES - 1 && (bytes >> (16 + c)) != 0)
        c++;
    return &adapt[c];
}

/* A probe with helpers is a burst, the way helpers are used once chosen: a helper spins a while after a
 * request and then sleeps, and a wake-up costs a 1 MiB request 20-40 us (the first ever, a thread's
 * creation, more), so the first request of a burst (RUN_WITH_COLD) teaches nothing. */
static int adapt_choose(adapt_class *a)
{
    uint32_t with = __atomic_load_n(&a->with, __ATOMIC_RELAXED);
    uint32_t alone = __atomic_load_n(&a->alone, __ATOMIC_RELAXED);
    uint32_t k = __atomic_add_fetch(&a->count, 1, __ATOMIC_RELAXED);
    uint32_t burst = __atomic_load_n(&a->burst, __ATOMIC_RELAXED);
    if (burst != 0) {
        __atomic_store_n(&a->burst, burst - 1, __ATOMIC_RELAXED);
        return RUN_WITH_PROBE;
    }
    if (with != 0 && __atomic_load_n(&a->nwith, __ATOMIC_RELAXED) < ADAPT_TRUST)
        return RUN_WITH;            /* helpers until their average is worth a decision */
    if (with != 0 && alone == 0)
        return RUN_ALONE_PROBE;
    if (with != 0 && with <= alone)
        return k % ALONE_PROBE != 0 ? RUN_WITH : RUN_ALONE_PROBE;
    if (with != 0 && k % SPLIT_PROBE != 0)
        return RUN_ALONE;
    __atomic_store_n(&a->burst, PROBE_BURST - 1, __ATOMIC_RELAXED);
    return RUN_WITH_COLD;
}

static void adapt_note(uint32_t *ew, uint64_t ns, uint64_t bytes, unsigned shift)
{
    if (bytes == 0)
        return;
    uint64_t v = ns * (1u << 20) / bytes, old = __atomic_load_n(ew, __ATOMIC_RELAXED);
    if (v > ADAPT_CAP)
        v = ADAPT_CAP;
    uint64_t now = old == 0 ? v : old - (old >> shift) + (v >> shift);
    __atomic_store_n(ew, (uint32_t)(now ? now : 1), __ATOMIC_RELAXED);
}

void acc_pool_adapt_choose(acc_pool_choice *ch, uint64_t bytes)
{
    ch->cls = adapt_of(bytes);
    ch->bytes = bytes;
    ch->t_start = acc_now_ns();
    ch->how = gate_closed(ch->t_start) ? RUN_ALONE : adapt_choose(ch->cls);
}

void acc_pool_adapt_alone(const acc_pool_choice *ch, uint64_t now)
{
    adapt_note(&ch->cls->alone, now - ch->t_start, ch->bytes, ch->how == RUN_ALONE ? EW_IN_USE : EW_PROBE);
}

void acc_pool_adapt_with(const acc_pool_choice *ch, uint64_t now, uint64_t own_ns, uint64_t join_ns)
{
    adapt_class *a = ch->cls;
    if (join_ns >= STALL_MIN_NS && join_ns >= own_ns / 2)
        gate_stall(now);
    if (ch->how == RUN_WITH_COLD)
        return;
    adapt_note(&a->with, now - ch->t_start, ch->bytes, ch->how == RUN_WITH ? EW_IN_USE : EW_PROBE);
    if (__atomic_load_n(&a->nwith, __ATOMIC_RELAXED) < ADAPT_TRUST)
        __atomic_fetch_add(&a->nwith, 1, __ATOMIC_RELAXED);
}
