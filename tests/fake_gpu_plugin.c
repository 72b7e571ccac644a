/* tests/fake_gpu_plugin.c: a GPU plugin (accel/gpu_plugin.h ABI) that runs on the CPU with the
 * inline engine, so the provider's GPU path is testable without a GPU; it fails on demand. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "accel/engine.h"
#include "accel/gpu_plugin.h"

/* ACCELAES_FAKEGPU_FAIL=init | run | half    fail init; fail every run with nothing done;
 *                                            do half of the bytes of a run (a prefix) then fail.
 * ACCELAES_FAKEGPU_LOG=path                  one line per run call: njobs, bytes, slot, pid.
 * ACCELAES_FAKEGPU_DELAY_MS=n                each run call holds its slot n ms longer (makes
 *                                            requests queue up, so batching can be tested). */
#define FAKE_SLOTS 2

static __thread char t_err[160];
static pid_t g_init_pid;   /* process in which init succeeded (a forked child must init again) */

static const char *fail_mode(void)
{
    const char *v = getenv("ACCELAES_FAKEGPU_FAIL");
    return v ? v : "";
}

static int fake_init(acc_gpu_info *info, char *err, size_t errlen)
{
    if (!strcmp(fail_mode(), "init")) {
        snprintf(t_err, sizeof(t_err), "fake GPU: init failure requested (ACCELAES_FAKEGPU_FAIL=init)");
        if (err && errlen)
            snprintf(err, errlen, "%s", t_err);
        return -1;
    }
    if (!acc_engine_default()) {
        snprintf(t_err, sizeof(t_err), "fake GPU: no CPU engine");
        if (err && errlen)
            snprintf(err, errlen, "%s", t_err);
        return -2;
    }
    g_init_pid = getpid();
    if (info) {
        memset(info, 0, sizeof(*info));
        snprintf(info->name, sizeof(info->name), "fake GPU (CPU)");
        info->slots = FAKE_SLOTS;
        info->numa_node = -1;
    }
    return 0;
}

static void log_run(int slot, size_t njobs, size_t bytes)
{
    const char *path = getenv("ACCELAES_FAKEGPU_LOG");
    char line[160];
    if (!path || !*path)
        return;
    int n = snprintf(line, sizeof(line), "njobs=%zu bytes=%zu slot=%d pid=%ld\n", njobs, bytes, slot, (long)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    /* One write with O_APPEND: lines from concurrent processes never interleave. */
    if (write(fd, line, (size_t)n) != n)
        snprintf(t_err, sizeof(t_err), "fake GPU: log write failed");
    close(fd);
}

/* Run `len` bytes of one job from its current done/iv; returns 0 or -1. */
static int do_job(const acc_engine *e, acc_gpu_job *j, size_t len)
{
    acc_aes_key *k = OPENSSL_zalloc(sizeof(*k));
    acc_req r = { acc_op_of_gpu_abi(j->op), k, j->iv, j->in + j->done, j->out + j->done, len / 16 };
    if (!k || !e->set_key(k, j->key, (size_t)j->keybits / 8, !acc_op_needs_dec(r.op))) {
        OPENSSL_free(k);
        snprintf(t_err, sizeof(t_err), "fake GPU: key set-up failed (keybits %d)", j->keybits);
        return -1;
    }
    int ok = acc_engine_run(e, &r);
    e->free_key(k);
    OPENSSL_free(k);
    if (!ok) {
        snprintf(t_err, sizeof(t_err), "fake GPU: the %s engine failed", e->name);
        return -1;
    }
    j->done += len;
    return 0;
}

static int fake_run(int slot, acc_gpu_job *jobs, size_t njobs)
{
    const acc_engine *e = acc_engine_default();
    const char *mode = fail_mode();
    size_t total = 0;
    if (!jobs && njobs) {
        snprintf(t_err, sizeof(t_err), "fake GPU: jobs is NULL");
        return -1;
    }
    for (size_t i = 0; i < njobs; i++) {
        jobs[i].done = 0;
        total += jobs[i].len;
        if (acc_op_of_gpu_abi(jobs[i].op) == 0 || jobs[i].len % 16
            || (jobs[i].keybits != 128 && jobs[i].keybits != 192 && jobs[i].keybits != 256)) {
            snprintf(t_err, sizeof(t_err), "fake GPU: job %zu is invalid", i);
            return -1;
        }
    }
    log_run(slot, njobs, total);
    if (g_init_pid != getpid()) {
        snprintf(t_err, sizeof(t_err), "fake GPU: run before a successful init in this process");
        return -1;
    }
    if (slot < 0 || slot >= FAKE_SLOTS) {
        snprintf(t_err, sizeof(t_err), "fake GPU: slot %d out of range", slot);
        return -1;
    }
    const char *delay = getenv("ACCELAES_FAKEGPU_DELAY_MS");
    if (delay && atoi(delay) > 0)
        usleep((useconds_t)atoi(delay) * 1000u);
    if (!strcmp(mode, "run")) {
        snprintf(t_err, sizeof(t_err), "fake GPU: run failure requested (ACCELAES_FAKEGPU_FAIL=run)");
        return -1;
    }
    /* half: the first half of the bytes of the call, in job order, rounded down to blocks,
     * as a GPU that dies mid-way would leave it (nothing at all for a one-block call). */
    size_t budget = !strcmp(mode, "half") ? (total / 2) & ~(size_t)15 : total;
    for (size_t i = 0; i < njobs && budget; i++) {
        size_t take = jobs[i].len < budget ? jobs[i].len : budget;
        if (do_job(e, &jobs[i], take))
            return -1;
        budget -= take;
    }
    if (!strcmp(mode, "half")) {
        snprintf(t_err, sizeof(t_err), "fake GPU: failing half-way as requested (ACCELAES_FAKEGPU_FAIL=half)");
        return -1;
    }
    return 0;
}

static const char *fake_last_error(void)
{
    return t_err[0] ? t_err : "fake GPU: no error";
}

static void fake_shutdown(void)
{
}

static const acc_gpu_plugin g_fake = {
    ACC_GPU_ABI_VERSION, "fake", fake_init, fake_run, fake_last_error, fake_shutdown
};

__attribute__((visibility("default"))) const acc_gpu_plugin *accelaes_gpu_plugin(void);
const acc_gpu_plugin *accelaes_gpu_plugin(void)
{
    return &g_fake;
}
