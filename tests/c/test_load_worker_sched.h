/* tests/c/test_load_worker_sched.h: test_load_worker's two modes that use the scheduler alone (the static
 * library's copy, no provider loaded): --takeall and --layout, for tests/system/test_faults.py. Included once, by
 * test_load_worker.c, after it defines _GNU_SOURCE. */
#ifndef ACCELAES_TEST_LOAD_WORKER_SCHED_H
#define ACCELAES_TEST_LOAD_WORKER_SCHED_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>
#include "scheduler/sched_int.h"


/* ---- --takeall: the scheduler only (the static library's copy): take every CPU unit and GPU
 * slot, recovering those of dead owners, report, and give them back. ---- */

static int takeall(void)
{
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    acc_shm_table *t = acc_sched_table();
    int held[ACC_SHM_MAX_UNITS], n = 0, ncpu = acc_sched_cpu_units(), ngpu = 0, cpu = 0, gpu = 0, x;
    if (t == NULL)
        return 2;
    for (uint32_t i = 0; i < acc_shm_nunits(t); i++)
        ngpu += ACC_LOAD(&t->units[i].kind) == ACC_UNIT_GPU;
    /* A dead waiter's recent heartbeat keeps try_acquire polite for up to 200 ms: retry. */
    for (int round = 0; round < 400 && (cpu < ncpu || gpu < ngpu); round++) {
        while (cpu < ncpu && (x = acc_sched_try_acquire(ACC_UNIT_CPU)) >= 0) {
            held[n++] = x;
            cpu++;
        }
        while (gpu < ngpu && (x = acc_sched_try_acquire(ACC_UNIT_GPU)) >= 0) {
            held[n++] = x;
            gpu++;
        }
        if (cpu < ncpu || gpu < ngpu) {
            struct timespec ts = { 0, 5000000 };
            nanosleep(&ts, NULL);
        }
    }
    printf("{\"shared\": %d, \"cpu_units\": %d, \"cpu_taken\": %d, \"gpu_units\": %d, \"gpu_taken\": %d, "
           "\"recoveries\": %llu}\n", acc_sched_is_shared(), ncpu, cpu, ngpu, gpu,
           (unsigned long long)ACC_LOAD(&acc_sched_proc()->events[ACC_EV_RECOVERY]));
    for (int i = 0; i < n; i++)
        acc_sched_release(held[i], 0, 0);
    return cpu == ncpu && gpu == ngpu ? 0 : 1;
}

/* ---- --layout: where the fields of the unit table lie, so the fault tests aim their writes ---- */

static int layout(void)
{
    printf("{\"total\": %zu, \"hdr_size\": %zu, \"lock\": [%zu, %zu], \"nunits\": %zu, \"nwaiting\": %zu, "
           "\"magic\": %zu, \"units\": %zu, \"unit_size\": %zu, \"unit_lock\": [%zu, %zu], \"unit_id\": %zu, "
           "\"unit_kind\": %zu, \"unit_state\": %zu, \"unit_owner_pid\": %zu, \"unit_owner_tid\": %zu, "
           "\"procs\": %zu, \"proc_size\": %zu, \"waiters\": %zu, \"waiter_size\": %zu, "
           "\"max_units\": %u, \"max_procs\": %u, \"max_waiters\": %u}\n",
           sizeof(acc_shm_table), sizeof(acc_shm_hdr), offsetof(acc_shm_hdr, lock), sizeof(acc_owner_word),
           offsetof(acc_shm_hdr, nunits), offsetof(acc_shm_hdr, nwaiting), offsetof(acc_shm_hdr, magic),
           offsetof(acc_shm_table, units), sizeof(acc_shm_unit), offsetof(acc_shm_unit, lock),
           sizeof(acc_owner_word), offsetof(acc_shm_unit, id), offsetof(acc_shm_unit, kind),
           offsetof(acc_shm_unit, state), offsetof(acc_shm_unit, owner_pid), offsetof(acc_shm_unit, owner_tid),
           offsetof(acc_shm_table, procs), sizeof(acc_shm_proc), offsetof(acc_shm_table, waiters),
           sizeof(acc_shm_waiter), ACC_SHM_MAX_UNITS, ACC_SHM_MAX_PROCS, ACC_SHM_MAX_WAITERS);
    return 0;
}

#endif
