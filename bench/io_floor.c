/* bench/io_floor.c: the I/O floor of the directory workload. Copies every regular file of IN_DIR to
 * OUT_DIR with nothing in between: no cipher, no OpenSSL, no threads. It is what accelaes-files and the
 * seed-style program must do at least (read each file, write a new file of the same size), so its time
 * bounds from below what any encrypting tool can reach on this machine and filesystem.
 *
 *   io_floor [--mmap] [--part K/N] IN_DIR OUT_DIR
 *
 * --part K/N: only the files whose position in the sorted listing is K modulo N (run N processes, one
 *   per CPU, for the floor of N threads without any sharing between them).
 * --mmap: read the inputs through a private read-only mapping instead of read(2) (tests whether one copy
 *   fewer lifts the floor). The output is always written with write(2), 1 MiB at a time.
 * Build: make build/bench/io_floor; bench/files_floor.sh runs it against the two programs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (1u << 20)

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int copy_one(const char *src, const char *dst, int use_mmap, unsigned char *buf)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, ret = -1;
    struct stat st;

    if (in < 0 || fstat(in, &st) < 0)
        goto done;
    if ((out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        goto done;
    if (use_mmap && st.st_size > 0) {
        size_t n = (size_t)st.st_size;
        unsigned char *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, in, 0);

        if (m == MAP_FAILED)
            goto done;
        ret = 0;
        for (size_t off = 0; ret == 0 && off < n; off += CHUNK)
            ret = write_all(out, m + off, n - off < CHUNK ? n - off : CHUNK);
        munmap(m, n);
    } else {
        ssize_t r;

        ret = 0;
        while (ret == 0 && (r = read(in, buf, CHUNK)) > 0)
            ret = write_all(out, buf, (size_t)r);
        if (r < 0)
            ret = -1;
    }
done:
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) < 0)
        ret = -1;
    return ret;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

int main(int argc, char **argv)
{
    int use_mmap = 0, k = 0, n = 1, i = 1, failed = 0, count;
    struct dirent **list;
    unsigned char *buf;

    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--mmap") == 0)
            use_mmap = 1;
        else if (strcmp(argv[i], "--part") == 0 && i + 1 < argc && sscanf(argv[i + 1], "%d/%d", &k, &n) == 2
                 && n > 0 && k >= 0 && k < n)
            i++;
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: io_floor [--mmap] [--part K/N] IN_DIR OUT_DIR\n");
        return 2;
    }
    if ((buf = malloc(CHUNK)) == NULL || (count = scandir(argv[i], &list, not_hidden, by_name)) < 0) {
        perror("io_floor");
        return 1;
    }
    memset(buf, 0, CHUNK); /* fault the buffer in before the clock of whoever times us matters */
    for (int f = 0; f < count; f++) {
        char src[4096], dst[4096];

        if (f % n == k) {
            snprintf(src, sizeof(src), "%s/%s", argv[i], list[f]->d_name);
            snprintf(dst, sizeof(dst), "%s/%s", argv[i + 1], list[f]->d_name);
            if (copy_one(src, dst, use_mmap, buf) < 0) {
                fprintf(stderr, "io_floor: %s: failed\n", src);
                failed = 1;
            }
        }
        free(list[f]);
    }
    free(list);
    free(buf);
    return failed;
}
