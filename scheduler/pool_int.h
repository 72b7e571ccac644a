/* scheduler/pool_int.h: what the worker pool (pool.c) asks its choice of helpers or alone (pool_adapt.c)
 * for each split request (acc_pool_run_ranges), and what it tells it back. */
#ifndef ACCELAES_POOL_INT_H
#define ACCELAES_POOL_INT_H

#include <stdint.h>

/* How a request runs, and what it teaches: RUN_ALONE and RUN_WITH are the way in use, the probes try
 * the other way, and RUN_WITH_COLD, the first request of a burst of probes, teaches nothing. */
enum { RUN_ALONE, RUN_ALONE_PROBE, RUN_WITH, RUN_WITH_PROBE, RUN_WITH_COLD };

typedef struct acc_pool_choice {
    struct adapt_class *cls; /* the request's size class */
    uint64_t bytes;
    uint64_t t_start; /* when the choice was made: the request's clock */
    int how;          /* RUN_* */
} acc_pool_choice;

/* Choose how a split request of `bytes` runs (ch->how) and start its clock. */
void acc_pool_adapt_choose(acc_pool_choice *ch, uint64_t bytes);

/* A request run alone (RUN_ALONE or RUN_ALONE_PROBE) ended at now. */
void acc_pool_adapt_alone(const acc_pool_choice *ch, uint64_t now);

/* A request that had helpers ended at now; the caller's own pieces took own_ns and the wait for the
 * helpers after them join_ns. */
void acc_pool_adapt_with(const acc_pool_choice *ch, uint64_t now, uint64_t own_ns, uint64_t join_ns);

#endif
