/* bench/src/io_floor.c: the I/O floor of the directory workload. Copies every regular file of IN_DIR to
 * OUT_DIR with nothing in between: no cipher, no OpenSSL, no worker threads. It is what accelaes-files and the
 * seed-style program must do at least (read each file, write a new file of the same size), so its time
 * bounds from below what any encrypting tool can reach on this machine and filesystem.
 *
 *   io_floor [--mmap] [--part K/N] [--replace trunc|exchange] [--unlinkers N] IN_DIR OUT_DIR
 *
 * --part K/N: only the files whose position in the sorted listing is K modulo N (run N processes, one
 *   per CPU, for the floor of N threads without any sharing between them).
 * --mmap: read the inputs through a private read-only mapping instead of read(2) (tests whether one copy
 *   fewer lifts the floor). The output is always written with write(2), 1 MiB at a time.
 * --replace: how an output that exists already is replaced, which on ext4 costs more than the copy itself
 *   (bench/results/files-ext4.md). trunc (the default, as cp and the seed program do): open(O_TRUNC), which frees
 *   the old blocks at once (waiting for their discard on a -o discard mount) and makes close() flush the new file
 *   (auto_da_alloc). exchange (what accelaes-files does): an O_TMPFILE file, linked under a hidden name, swapped
 *   with the old output by renameat2(RENAME_EXCHANGE), the old one then unlinked by --unlinkers threads (default 2;
 *   0: in this thread), so that a floor compared with accelaes-files pays for replacing exactly what the tool does.
 * Build: make build/bench/io_floor; bench/scripts/files_floor.sh and bench/scripts/files_ext4.sh run it against the two programs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define MAX_UNLINKERS 16

/* --replace exchange: the old outputs' hidden names, unlinked by the unlinker threads. */
static char **gone;
static int ngone, ntaken, gone_cap, done_adding, out_dir = -1;
static pthread_mutex_t gone_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gone_cond = PTHREAD_COND_INITIALIZER;

static void *unlinker(void *arg)
{
    int *failed = arg;

    pthread_mutex_lock(&gone_lock);
    for (;;) {
        while (ntaken == ngone && !done_adding)
            pthread_cond_wait(&gone_cond, &gone_lock);
        if (ntaken == ngone)
            break;
        char *name = gone[ntaken++];
        pthread_mutex_unlock(&gone_lock);
        if (unlinkat(out_dir, name, 0) < 0)
            *failed = 1;
        free(name);
        pthread_mutex_lock(&gone_lock);
    }
    pthread_mutex_unlock(&gone_lock);
    return NULL;
}

/* Hands the old output's hidden name to the unlinkers (or unlinks it here without any). */
static int unlink_later(char *name, int nthreads)
{
    if (nthreads == 0) {
        int ret = unlinkat(out_dir, name, 0);
        free(name);
        return ret;
    }
    pthread_mutex_lock(&gone_lock);
    if (ngone == gone_cap) {
        gone_cap = gone_cap ? 2 * gone_cap : 256;
        if ((gone = realloc(gone, (size_t)gone_cap * sizeof(*gone))) == NULL)
            abort();
    }
    gone[ngone++] = name;
    pthread_cond_signal(&gone_cond);
    pthread_mutex_unlock(&gone_lock);
    return 0;
}

/* The complete O_TMPFILE output fd gets the name `name` in out_dir: linked straight there when the name is free,
 * else linked under a hidden name and swapped with the old output, which is then unlinked. */
static int place(int fd, const char *name, int nthreads)
{
    char proc[64], *tmp;

    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, out_dir, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != EEXIST || asprintf(&tmp, ".%s.floor-tmp.%d", name, (int)getpid()) < 0)
        return -1;
    if (linkat(AT_FDCWD, proc, out_dir, tmp, AT_SYMLINK_FOLLOW) < 0 ||
        renameat2(out_dir, tmp, out_dir, name, RENAME_EXCHANGE) < 0) {
        unlinkat(out_dir, tmp, 0);
        free(tmp);
        return -1;
    }
    return unlink_later(tmp, nthreads);
}

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

static int copy_one(const char *src, const char *dst, const char *name, int use_mmap, int exchange, int nthreads,
                    unsigned char *buf)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, ret = -1;
    struct stat st;

    if (in < 0 || fstat(in, &st) < 0)
        goto done;
    if (exchange)
        out = openat(out_dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    else
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
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
    if (ret == 0 && exchange)
        ret = place(out, name, nthreads);
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
    int use_mmap = 0, exchange = 0, nthreads = 2, k = 0, n = 1, i = 1, failed = 0, unlink_failed = 0, count;
    struct dirent **list;
    unsigned char *buf;
    pthread_t threads[MAX_UNLINKERS];

    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--mmap") == 0)
            use_mmap = 1;
        else if (strcmp(argv[i], "--part") == 0 && i + 1 < argc && sscanf(argv[i + 1], "%d/%d", &k, &n) == 2
                 && n > 0 && k >= 0 && k < n)
            i++;
        else if (strcmp(argv[i], "--replace") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "trunc") == 0 || strcmp(argv[i + 1], "exchange") == 0))
            exchange = strcmp(argv[++i], "exchange") == 0;
        else if (strcmp(argv[i], "--unlinkers") == 0 && i + 1 < argc && atoi(argv[i + 1]) >= 0 &&
                 atoi(argv[i + 1]) <= MAX_UNLINKERS)
            nthreads = atoi(argv[++i]);
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: io_floor [--mmap] [--part K/N] [--replace trunc|exchange] [--unlinkers N] "
                        "IN_DIR OUT_DIR\n");
        return 2;
    }
    if (!exchange)
        nthreads = 0;
    if ((out_dir = open(argv[i + 1], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        perror(argv[i + 1]);
        return 1;
    }
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&threads[t], NULL, unlinker, &unlink_failed) != 0)
            nthreads = t;
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
            if (copy_one(src, dst, list[f]->d_name, use_mmap, exchange, nthreads, buf) < 0) {
                fprintf(stderr, "io_floor: %s: failed\n", src);
                failed = 1;
            }
        }
        free(list[f]);
    }
    free(list);
    free(buf);
    pthread_mutex_lock(&gone_lock);
    done_adding = 1;
    pthread_cond_broadcast(&gone_cond);
    pthread_mutex_unlock(&gone_lock);
    for (int t = 0; t < nthreads; t++)
        pthread_join(threads[t], NULL);
    if (unlink_failed)
        fprintf(stderr, "io_floor: an old output could not be unlinked\n");
    free(gone);
    return failed || unlink_failed;
}
