/* accel/cpu/unroll.h: one switch that turns a run-time group size into a constant, so that every size
 * is its own unrolled copy (the block, XTS and GCM kernels of every width). Internal to accel/cpu/. */
#ifndef ACCELAES_UNROLL_H
#define ACCELAES_UNROLL_H

/* GROUP(q, ...) with q = 1..8 a constant in each case; nothing for any other q. The arguments after
 * GROUP, if any, follow q. */
#define GROUP_OF(q, GROUP, ...)                                                            \
    switch (q) {                                                                           \
    case 1: GROUP(1, ##__VA_ARGS__); break;                                                \
    case 2: GROUP(2, ##__VA_ARGS__); break;                                                \
    case 3: GROUP(3, ##__VA_ARGS__); break;                                                \
    case 4: GROUP(4, ##__VA_ARGS__); break;                                                \
    case 5: GROUP(5, ##__VA_ARGS__); break;                                                \
    case 6: GROUP(6, ##__VA_ARGS__); break;                                                \
    case 7: GROUP(7, ##__VA_ARGS__); break;                                                \
    case 8: GROUP(8, ##__VA_ARGS__); break;                                                \
    default: break;                                                                        \
    }

#endif
