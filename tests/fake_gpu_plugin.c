/* tests/fake_gpu_plugin.c: a GPU plugin (accel/gpu_plugin.h ABI) that runs on the CPU with the
 * inline engine, so the provider's GPU path is testable without a GPU; it fails on demand. In
 * process mode the engine runs in a device process of its own (tests/fake_gpu_device.c), so that
 * the caller's CPU is free as a GPU's caller's would be. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
#include "tests/fake_gpu_device.h"

/* ACCELAES_FAKEGPU_FAIL=init | run | half    fail init; fail every run with nothing done;
 *                                            do half of the bytes of a run (a prefix) then fail.
 * ACCELAES_FAKEGPU_LOG=path                  one line per run call: njobs, bytes, slot, pid.
 * ACCELAES_FAKEGPU_DELAY_MS=n                each run call holds its slot n ms longer (makes
 *                                            requests queue up).
 * ACCELAES_FAKEGPU_DEVICE=process            one device process per slot does the AES (the caller
 *                                            sleeps in read()); ACCELAES_FAKEGPU_DEVICE_BIN names
 *                                            it (default: tests/fake_gpu_device beside this .so);
 *                                            its own knobs are in tests/fake_gpu_device.c. */
#define FAKE_SLOTS 2

extern char **environ;
static int g_dev_fd[FAKE_SLOTS] = { -1, -1 }; /* process mode: each slot's socket to its device */
static pid_t g_dev_pid[FAKE_SLOTS];

static __thread char t_err[160];
static pid_t g_init_pid;   /* process in which init succeeded (a forked child must init again) */

static const char *fail_mode(void)
{
    const char *v = getenv("ACCELAES_FAKEGPU_FAIL");
    return v ? v : "";
}

static int process_mode(void)
{
    const char *v = getenv("ACCELAES_FAKEGPU_DEVICE");
    return v && !strcmp(v, "process");
}

/* build/tests/fake_gpu_device for build/accelaes-fakegpu.so, unless the environment names it. */
static int device_path(char *buf, size_t len)
{
    const char *env = getenv("ACCELAES_FAKEGPU_DEVICE_BIN");
    Dl_info di;
    if (env && *env)
        return snprintf(buf, len, "%s", env) < (int)len;
    if (!dladdr((void *)device_path, &di) || !di.dli_fname || !strrchr(di.dli_fname, '/'))
        return 0;
    const char *slash = strrchr(di.dli_fname, '/');
    return snprintf(buf, len, "%.*s/tests/fake_gpu_device", (int)(slash - di.dli_fname), di.dli_fname) < (int)len;
}

/* One device process per slot, its socket as its fd 3 and nothing else of ours (closefrom):
 * stdout goes to /dev/null so a test harness reading ours sees its end when we exit. A forked
 * child drops the parent's sockets (they lead to devices that serve the parent's memory). */
static int spawn_one(const char *path, int slot, char *err, size_t errlen)
{
    int sv[2];
    char fdarg[16], pidarg[24];
    posix_spawn_file_actions_t fa;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, errlen, "fake GPU: socketpair: %s", strerror(errno));
        return -1;
    }
    snprintf(fdarg, sizeof(fdarg), "3");
    snprintf(pidarg, sizeof(pidarg), "%ld", (long)getpid());
    char *argv[] = { (char *)path, fdarg, pidarg, NULL };
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    int rc = posix_spawn(&g_dev_pid[slot], path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        snprintf(err, errlen, "fake GPU: cannot start the device %s: %s", path, strerror(rc));
        return -1;
    }
    /* Under Yama ptrace_scope 1 only a declared tracer may read our memory: the device. */
    (void)prctl(PR_SET_PTRACER, (unsigned long)g_dev_pid[slot], 0, 0, 0);
    g_dev_fd[slot] = sv[0];
    return 0;
}

static int spawn_devices(char *err, size_t errlen)
{
    char path[4096], dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    for (int i = 0; i < FAKE_SLOTS; i++)
        if (g_dev_fd[i] >= 0) { /* the parent's (after fork), or an earlier init's */
            close(g_dev_fd[i]);
            g_dev_fd[i] = -1;
        }
    if (!device_path(path, sizeof(path))) {
        snprintf(err, errlen, "fake GPU: the device program's path is too long or unknown");
        return -1;
    }
    for (int i = 0; i < FAKE_SLOTS; i++)
        if (spawn_one(path, i, err, errlen) != 0)
            return -1;
    return 0;
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
    if (process_mode() && spawn_devices(err, errlen) != 0)
        return -3;
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

/* Process mode: the job's header and key to the slot's device, then a sleeping read() until it
 * answers. Its answer is checked like any plugin's (done within what was asked, in blocks). */
static int device_job(int slot, acc_gpu_job *j, size_t len)
{
    fakedev_req q;
    fakedev_resp a;
    int fd = g_dev_fd[slot], rc = -1;
    memset(&q, 0, sizeof(q));
    q.magic = FAKEDEV_MAGIC;
    q.op = (uint32_t)j->op;
    q.keybits = (uint32_t)j->keybits;
    memcpy(q.key, j->key, (size_t)j->keybits / 8);
    memcpy(q.iv, j->iv, 16);
    q.in = (uint64_t)(uintptr_t)(j->in + j->done);
    q.out = (uint64_t)(uintptr_t)(j->out + j->done);
    q.len = len;
    if (fd < 0 || full_io(fd, &q, sizeof(q), 1) != 0 || full_io(fd, &a, sizeof(a), 0) != 0)
        snprintf(t_err, sizeof(t_err), "fake GPU: the device process of slot %d is gone", slot);
    else if (a.magic != FAKEDEV_MAGIC || a.done > len || a.done % 16)
        snprintf(t_err, sizeof(t_err), "fake GPU: a bad answer from the device");
    else {
        j->done += a.done;
        memcpy(j->iv, a.iv, 16);
        a.err[sizeof(a.err) - 1] = 0;
        if (a.status != 0)
            snprintf(t_err, sizeof(t_err), "%s", a.err);
        rc = a.status == 0 && a.done == len ? 0 : -1;
    }
    OPENSSL_cleanse(&q, sizeof(q));
    return rc;
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
        if (process_mode() ? device_job(slot, &jobs[i], take) : do_job(e, &jobs[i], take))
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
    for (int i = 0; i < FAKE_SLOTS; i++)
        if (g_dev_fd[i] >= 0 && g_init_pid == getpid()) {
            close(g_dev_fd[i]); /* the device sees EOF and exits */
            g_dev_fd[i] = -1;
            waitpid(g_dev_pid[i], NULL, 0);
        }
}

static const acc_gpu_plugin g_fake = {
    ACC_GPU_ABI_VERSION, "fake", fake_init, fake_run, fake_last_error, fake_shutdown
};

__attribute__((visibility("default"))) const acc_gpu_plugin *accelaes_gpu_plugin(void);
const acc_gpu_plugin *accelaes_gpu_plugin(void)
{
    return &g_fake;
}
