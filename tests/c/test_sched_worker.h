/* tests/c/test_sched_worker.h: the worker side of test_sched_mp (`test_sched_mp worker MODE ...`):
 * a re-executed process that the multi-process cases here and tests/system/test_sched.py start to
 * hold units, wait in the FIFO, register a device or count, and report on stdout. Included by
 * test_sched_mp.c only, after test_sched_common.h. */
#ifndef ACCELAES_TEST_SCHED_WORKER_H
#define ACCELAES_TEST_SCHED_WORKER_H

/* ---- worker for tests/system/test_sched.py ---- */
static acc_unit_kind kind_of(const char *s)
{
    return strcmp(s, "gpu") == 0 ? ACC_UNIT_GPU : ACC_UNIT_CPU;
}

static int sched_worker(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    acc_sched_conf conf = { 1, 0 };
    acc_sched_configure(&conf);
    if (argc >= 1 && strcmp(argv[0], "info") == 0) {
        printf("shared %d cpu_units %d\n", acc_sched_is_shared(), acc_sched_cpu_units());
        return 0;
    }
    if (argc >= 2 && strcmp(argv[0], "gpu") == 0) {
        printf("gpu_units %d\n", acc_sched_add_gpu_units(atoi(argv[1]), 0, "test-gpu"));
        return 0;
    }
    if (argc >= 2 && strcmp(argv[0], "hold") == 0) {
        /* Take a unit, say which, and keep it until stdin closes (or a kill -9). */
        int id = acc_sched_acquire(kind_of(argv[1]), -1);
        printf("held %d\n", id);
        char buf[64];
        while (fgets(buf, sizeof(buf), stdin) != NULL)
            ;
        acc_sched_release(id, 4096, 1);
        printf("released\n");
        return id >= 0 ? 0 : 1;
    }
    if (argc >= 3 && strcmp(argv[0], "wait") == 0) {
        /* Wait in the FIFO, then append our tag to the log file. */
        printf("waiting\n");
        int id = acc_sched_acquire(kind_of(argv[1]), 30 * 1000000L);
        if (id < 0)
            return 1;
        int fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0600);
        char line[64];
        int n = snprintf(line, sizeof(line), "%s\n", argc >= 4 ? argv[3] : "?");
        int ok = fd >= 0 && write(fd, line, (size_t)n) == n;
        if (fd >= 0)
            close(fd);
        sleep_us(20000);
        acc_sched_release(id, 0, 1);
        return ok ? 0 : 1;
    }
    if (argc >= 1 && strcmp(argv[0], "takeall") == 0) {
        /* Take every CPU unit we may use (recovering dead owners' ones), then give them back. */
        int held[ACC_SHM_MAX_UNITS], n = 0, x;
        for (int i = 0; i < 200 && n < acc_sched_cpu_units(); i++) {
            while ((x = acc_sched_try_acquire(ACC_UNIT_CPU)) >= 0)
                held[n++] = x;
            if (n < acc_sched_cpu_units())
                sleep_us(5000);
        }
        printf("took %d recoveries %llu\n", n, (unsigned long long)acc_sched_proc()->events[ACC_EV_RECOVERY]);
        for (int i = 0; i < n; i++)
            acc_sched_release(held[i], 0, 0);
        return 0;
    }
    if (argc >= 5 && strcmp(argv[0], "count") == 0) {
        /* inline bytes (in 16-byte calls), split, batch, gpu bytes; then events; exit
         * publishes the buffered inline counts. */
        unsigned long long in = strtoull(argv[1], NULL, 0);
        for (unsigned long long i = 0; i < in / 16; i++)
            acc_sched_count(ACC_PATH_INLINE, 16, 1);
        acc_sched_count(ACC_PATH_SPLIT, strtoull(argv[2], NULL, 0), 1);
        acc_sched_count(ACC_PATH_BATCH, strtoull(argv[3], NULL, 0), 1);
        acc_sched_count(ACC_PATH_GPU, strtoull(argv[4], NULL, 0), 1);
        if (argc >= 6)
            for (int i = 0; i < atoi(argv[5]); i++)
                acc_sched_event(ACC_EV_GPU_FALLBACK);
        printf("counted\n");
        if (argc >= 7 && strcmp(argv[6], "stay") == 0) {
            char buf[64];
            while (fgets(buf, sizeof(buf), stdin) != NULL)
                ;
        }
        return 0;
    }
    if (argc >= 1 && strcmp(argv[0], "trytime") == 0) {
        /* A request's first use of the table while another holds its lock (test_late_request):
         * how long acc_sched_try_acquire took, in microseconds. */
        uint64_t t0 = acc_now_ns();
        int id = acc_sched_try_acquire(ACC_UNIT_CPU);
        printf("tried %llu us\n", (unsigned long long)((acc_now_ns() - t0) / 1000));
        if (id >= 0)
            acc_sched_release(id, 0, 0);
        return 0;
    }
    if (argc >= 1 && strcmp(argv[0], "lateslot") == 0) {
        /* Started while the parent holds the table lock (test_late_slot): attach finds it busy
         * and counts go to no slot; once the parent lets go (a line on stdin), the first use of
         * the table claims one, and it must hold what was counted before. */
        acc_sched_attach();
        acc_shm_table *t = acc_sched_count_table();
        acc_sched_count(ACC_PATH_SPLIT, 4096, 1);
        acc_sched_event(ACC_EV_GPU_FALLBACK);
        acc_shm_proc *p = acc_sched_count_proc();
        printf("attached slot %d\n", t != NULL && p >= t->procs && p < t->procs + ACC_SHM_MAX_PROCS);
        char buf[64];
        if (fgets(buf, sizeof(buf), stdin) == NULL)
            return 3;
        t = acc_sched_table();
        p = acc_sched_count_proc();
        int ok = t != NULL && p >= t->procs && p < t->procs + ACC_SHM_MAX_PROCS && p->pid == getpid()
            && p->bytes[ACC_PATH_SPLIT] == 4096 && p->requests[ACC_PATH_SPLIT] == 1
            && p->events[ACC_EV_GPU_FALLBACK] == 1;
        printf("late slot %d\n", ok);
        return ok ? 0 : 1;
    }
    fprintf(stderr,
            "usage: test_sched_mp worker lateslot|trytime|info|gpu N|hold cpu|gpu|wait KIND LOG TAG|takeall|"
            "count IN SPLIT BATCH GPU [FALLBACKS [stay]]\n");
    return 2;
}

#endif
