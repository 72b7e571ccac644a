/* accel/cpu/mb.c: multi-buffer batches over intel-ipsec-mb (stub until filled in). */
#include "accel/mb.h"

int acc_mb_available(void)
{
    return 0;
}

int acc_mb_run(acc_mb_req *reqs, size_t n)
{
    (void)reqs;
    (void)n;
    return 0;
}
