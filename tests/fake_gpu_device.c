/* tests/fake_gpu_device.c: the "device" of the fake GPU plugin's process mode: a separate process,
 * spawned by the plugin with one end of a socketpair as fd 3, that runs each job with the CPU
 * engine on its own cores, reading the caller's input and writing its output with
 * process_vm_readv / process_vm_writev. The caller sleeps in read() meanwhile, so its own CPU
 * time per byte is what a GPU that DMAs the caller's memory would cost it: almost none.
 *
 * usage: fake_gpu_device FD CALLER_PID   (started by tests/fake_gpu_plugin.c only)
 * ACCELAES_FAKEGPU_DEVICE_THREADS=n   threads per job (default 2, at most 8)
 * ACCELAES_FAKEGPU_SLOW_US_PER_MIB=n  hold each job n microseconds per MiB longer (a slow device,
 *                                     so that requests queue for it) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
#include "tests/fake_gpu_device.h"

#define CHUNK (256u * 1024u) /* stays in cache between the read, the AES and the write */
#define MAX_THR 8

static pid_t g_caller;

/* One thread's share of a job: blocks [b0, b1), iv at b0; done and iv as far as it got. */
typedef struct part {
    uint8_t *buf; /* CHUNK bytes, kept for the life of the device */
    const acc_engine *e;
    const acc_aes_key *k;
    acc_op op;
    uint64_t in, out;
    size_t b0, b1, done; /* done: bytes from b0 * 16 */
    uint8_t iv[16];
    char err[96];
} part;

static int vm_io(int write, uint64_t remote, void *local, size_t n)
{
    struct iovec l = { local, n }, r = { (void *)(uintptr_t)remote, n };
    ssize_t got = write ? process_vm_writev(g_caller, &l, 1, &r, 1, 0) : process_vm_readv(g_caller, &l, 1, &r, 1, 0);
    return got == (ssize_t)n ? 0 : -1;
}

static void *run_part(void *arg)
{
    part *p = arg;
    uint8_t *buf = p->buf;
    size_t total = (p->b1 - p->b0) * 16;
    while (p->done < total) {
        size_t n = total - p->done < CHUNK ? total - p->done : CHUNK;
        uint64_t off = p->b0 * 16 + p->done;
        acc_req r = { p->op, p->k, p->iv, buf, buf, n / 16 };
        if (vm_io(0, p->in + off, buf, n) != 0) {
            snprintf(p->err, sizeof(p->err), "fake device: process_vm_readv: %s", strerror(errno));
            break;
        }
        if (!acc_engine_run(p->e, &r) || vm_io(1, p->out + off, buf, n) != 0) {
            snprintf(p->err, sizeof(p->err), "fake device: engine or process_vm_writev failed (%s)", strerror(errno));
            break;
        }
        p->done += n;
    }
    OPENSSL_cleanse(buf, CHUNK);
    return NULL;
}

/* The IV at block k of the job: CTR counts on; CBC-decrypt takes ciphertext block k - 1 (read
 * before any part writes: in == out is legal). */
static int iv_at(const fakedev_req *q, acc_op op, size_t k, uint8_t iv[16])
{
    memcpy(iv, q->iv, 16);
    if (op == ACC_OP_CTR)
        acc_ctr_add(iv, k);
    else if (op == ACC_OP_CBC_DEC && k > 0)
        return vm_io(0, q->in + (k - 1) * 16, iv, 16);
    return 0;
}

static int threads_wanted(size_t nblocks)
{
    const char *v = getenv("ACCELAES_FAKEGPU_DEVICE_THREADS");
    int n = v ? atoi(v) : 2;
    n = n < 1 ? 1 : n > MAX_THR ? MAX_THR : n;
    return nblocks < (size_t)n * (CHUNK / 16) ? 1 : n; /* small jobs: one thread */
}

static uint8_t g_bufs[MAX_THR][CHUNK] __attribute__((aligned(64)));

static void run_job(const fakedev_req *q, fakedev_resp *a, const acc_engine *e, acc_aes_key *k)
{
    acc_op op = acc_op_of_gpu_abi((int)q->op);
    size_t nb = q->len / 16;
    part p[MAX_THR];
    pthread_t th[MAX_THR];
    int n = threads_wanted(nb), started[MAX_THR] = { 0 };
    a->status = -1;
    for (int i = 0; i < n; i++) {
        p[i] = (part){ g_bufs[i], e, k, op, q->in, q->out, nb * i / n, nb * (i + 1) / n, 0, { 0 }, "" };
        if (iv_at(q, op, p[i].b0, p[i].iv) != 0) {
            snprintf(a->err, sizeof(a->err), "fake device: could not read the caller's memory");
            return;
        }
    }
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, run_part, &p[i]) == 0;
    run_part(&p[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            snprintf(p[i].err, sizeof(p[i].err), "fake device: no thread");
    }
    /* The done prefix: whole parts, then the first part that stopped short. */
    a->done = 0;
    memcpy(a->iv, q->iv, 16);
    for (int i = 0; i < n; i++) {
        a->done += p[i].done;
        memcpy(a->iv, p[i].iv, 16);
        if (p[i].done < (p[i].b1 - p[i].b0) * 16) {
            snprintf(a->err, sizeof(a->err), "%s", p[i].err);
            return;
        }
    }
    a->status = 0;
}

static void slow_down(uint64_t len)
{
    const char *v = getenv("ACCELAES_FAKEGPU_SLOW_US_PER_MIB");
    long us = v ? atol(v) : 0;
    if (us <= 0)
        return;
    uint64_t total = (uint64_t)us * len / (1u << 20);
    struct timespec ts = { (time_t)(total / 1000000u), (long)(total % 1000000u) * 1000 };
    nanosleep(&ts, NULL);
}

static void serve(int fd, const acc_engine *e, acc_aes_key *k)
{
    fakedev_req q;
    while (full_io(fd, &q, sizeof(q), 0) == 0) { /* EOF: the caller is gone */
        fakedev_resp a;
        memset(&a, 0, sizeof(a));
        a.magic = FAKEDEV_MAGIC;
        acc_op op = acc_op_of_gpu_abi((int)q.op);
        if (q.magic != FAKEDEV_MAGIC || op == 0 || q.len % 16 || getppid() != g_caller
            || (q.keybits != 128 && q.keybits != 192 && q.keybits != 256))
            snprintf(a.err, sizeof(a.err), "fake device: bad request");
        else if (!e->set_key(k, q.key, q.keybits / 8, !acc_op_needs_dec(op)))
            snprintf(a.err, sizeof(a.err), "fake device: key set-up failed");
        else {
            run_job(&q, &a, e, k);
            e->free_key(k);
            slow_down(q.len);
        }
        if (a.status != 0 && !a.err[0])
            snprintf(a.err, sizeof(a.err), "fake device: failed");
        OPENSSL_cleanse(&q, sizeof(q));
        if (full_io(fd, &a, sizeof(a), 1) != 0)
            break;
    }
    OPENSSL_cleanse(&q, sizeof(q));
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FD CALLER_PID (started by the fake GPU plugin)\n", argv[0]);
        return 2;
    }
    int fd = atoi(argv[1]);
    g_caller = (pid_t)atol(argv[2]);
    const acc_engine *e = acc_engine_default();
    acc_aes_key *k = OPENSSL_zalloc(sizeof(*k));
    if (fd < 0 || g_caller <= 0 || !e || !k) {
        fprintf(stderr, "fake_gpu_device: bad arguments or no engine\n");
        OPENSSL_free(k);
        return 2;
    }
    serve(fd, e, k);
    OPENSSL_clear_free(k, sizeof(*k));
    return 0;
}
