/* scheduler/tables.c: the names of unit kinds, paths and events, indexed as sched.h numbers them.
 * The segment's arrays are indexed by the same numbers and accelaes-stat prints from here, so a
 * new backend's kind, path or event is one line in each table (and its enum value). */
#include "scheduler/sched.h"

const acc_unit_kind_info acc_unit_kinds[ACC_UNIT_KIND_COUNT] = {
    [ACC_UNIT_CPU] = { "cpu", 1 },
    [ACC_UNIT_GPU] = { "gpu", 0 },
};

const char *const acc_path_names[ACC_PATH_COUNT] = {
    [ACC_PATH_INLINE] = "inline",
    [ACC_PATH_SPLIT] = "split",
    [ACC_PATH_BATCH] = "batch",
    [ACC_PATH_GPU] = "gpu",
};

/* gpu_tail_cpu_bytes: a part of inline_bytes (the tails queued GPU requests ran on the CPU) */
const acc_event_info acc_events[ACC_EV_COUNT] = {
    [ACC_EV_WAIT] = { "waits", "waits", 6, 0 },
    [ACC_EV_RECOVERY] = { "recoveries", "recov", 5, 0 },
    [ACC_EV_GPU_FALLBACK] = { "gpu_fallbacks", "gpu_fb", 6, 0 },
    [ACC_EV_GPU_TAIL_BYTES] = { "gpu_tail_cpu_bytes", "gpu_tail", 11, 1 },
};
