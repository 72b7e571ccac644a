/* accel/gpu_plugin.h: the C ABI between the provider and a GPU plugin loaded with dlopen
 * (build/accelaes-cuda.so, or the CPU-only fake plugin the tests use). Plain C, no CUDA types. */
#ifndef ACCELAES_GPU_PLUGIN_H
#define ACCELAES_GPU_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include "accel/engine.h"

#define ACC_GPU_ABI_VERSION 1
#define ACC_GPU_ENTRY "accelaes_gpu_plugin"   /* the one exported symbol */

enum acc_gpu_op {
    ACC_GPU_ECB_ENC = 1,
    ACC_GPU_ECB_DEC = 2,
    ACC_GPU_CBC_ENC = 3,   /* serial per job: one GPU thread per job, many jobs per launch */
    ACC_GPU_CBC_DEC = 4,   /* separate in and out device buffers: never in place on the GPU */
    ACC_GPU_CTR     = 5    /* 128-bit big-endian counter, full carry */
};

/* The one place where the provider's operations (acc_op, accel/engine.h) meet the ABI's frozen
 * numbers: the provider maps a request's op to the ABI, a plugin maps a job's op back (0: not an
 * operation of this ABI). The two numberings agree today; the ABI's must not move if acc_op does. */
static inline int acc_gpu_abi_op(acc_op op)
{
    switch (op) {
    case ACC_OP_ECB_ENC: return ACC_GPU_ECB_ENC;
    case ACC_OP_ECB_DEC: return ACC_GPU_ECB_DEC;
    case ACC_OP_CBC_ENC: return ACC_GPU_CBC_ENC;
    case ACC_OP_CBC_DEC: return ACC_GPU_CBC_DEC;
    case ACC_OP_CTR:     return ACC_GPU_CTR;
    }
    return 0;
}

static inline acc_op acc_op_of_gpu_abi(int abi)
{
    for (int op = ACC_OP_ECB_ENC; op <= ACC_OP_CTR; op++)
        if (acc_gpu_abi_op((acc_op)op) == abi)
            return (acc_op)op;
    return (acc_op)0;
}

/* One request. The key is raw (16/24/32 bytes) and stays in process memory and GPU
 * memory only; the plugin expands it itself. len is a multiple of 16.
 * in == out is legal (the plugin stages through its own buffers).
 *
 * Completion contract, so the CPU can always finish a job the GPU did not:
 *  - on return, out[0, done) holds correct output and out[done, len) is untouched
 *    (in place: still the input), done a multiple of 16;
 *  - iv holds the IV / counter to continue from offset done (CBC: the last
 *    ciphertext block before done; CTR: counter + done/16).
 */
typedef struct acc_gpu_job {
    int op;                 /* enum acc_gpu_op */
    int keybits;            /* 128, 192, 256 */
    const uint8_t *key;
    uint8_t iv[16];
    const uint8_t *in;
    uint8_t *out;
    size_t len;
    size_t done;            /* set by the plugin */
} acc_gpu_job;

typedef struct acc_gpu_info {
    char name[64];          /* e.g. "NVIDIA H100 80GB HBM3" */
    int slots;              /* concurrent requests it wants (scheduler units of kind gpu) */
    int numa_node;          /* -1 if unknown */
} acc_gpu_info;

typedef struct acc_gpu_plugin {
    int abi;                /* ACC_GPU_ABI_VERSION */
    const char *name;       /* "cuda", "fake" */
    /* Initialise in this process (lazily, after any fork). 0 on success; otherwise a
     * negative code and a one-line reason in err. Safe to call again after a fork:
     * the child must never use the parent's device state. */
    int  (*init)(acc_gpu_info *info, char *err, size_t errlen);
    /* Run njobs jobs on slot (0 <= slot < info.slots), synchronously. Jobs of one call
     * may mix ops and keys (one launch serves many streams). Returns 0 when every job
     * is done, else a negative code; each job's done/iv say how far it got. */
    int  (*run)(int slot, acc_gpu_job *jobs, size_t njobs);
    /* Last error as text (thread-local or per-slot), for the once-per-process message. */
    const char *(*last_error)(void);
    /* Release device state (at unload). */
    void (*shutdown)(void);
} acc_gpu_plugin;

typedef const acc_gpu_plugin *(*acc_gpu_entry_fn)(void);

#endif
