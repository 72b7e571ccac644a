/* tests/fake_gpu_device.h: the messages between the fake GPU plugin (tests/fake_gpu_plugin.c,
 * ACCELAES_FAKEGPU_DEVICE=process) and its device process (tests/fake_gpu_device.c) over their
 * socketpair. The key travels only on that socket, never through shared memory; the data never
 * travels on it: the device reads and writes the caller's buffers (process_vm_readv/writev). */
#ifndef ACCELAES_FAKE_GPU_DEVICE_H
#define ACCELAES_FAKE_GPU_DEVICE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#define FAKEDEV_MAGIC 0x46414b45u /* "FAKE" */

typedef struct fakedev_req {
    uint32_t magic;
    uint32_t op; /* enum acc_gpu_op */
    uint32_t keybits;
    uint32_t pad;
    uint8_t key[32];
    uint8_t iv[16];
    uint64_t in, out; /* addresses in the caller */
    uint64_t len;     /* bytes, a multiple of 16 */
} fakedev_req;

typedef struct fakedev_resp {
    uint32_t magic;
    int32_t status; /* 0: all done; else how far is in done / iv */
    uint64_t done;
    uint8_t iv[16];
    char err[96];
} fakedev_resp;

/* Move exactly n bytes over the socket (either side); -1 on error or end of file. */
static inline int full_io(int fd, void *p, size_t n, int write_it)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = write_it ? write(fd, (char *)p + got, n - got) : read(fd, (char *)p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

#endif
