/* tools/files_io.c: accelaes-files' per-file work: one input streamed through the cipher into an
 * unnamed output (O_TMPFILE) that is linked into place only when complete (swapped with the output it replaces, if
 * there is one), both opened relative to directory descriptors so that no symbolic link is ever followed below
 * IN_DIR or OUT_DIR. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include "tools/files.h"

/* With a progress line on the terminal, clear it first so the two don't mix. */
void files_report(struct run *r, const char *path, const char *what, const char *why)
{
    pthread_mutex_lock(&r->err_lock);
    fprintf(stderr, "%saccelaes-files: %s: %s%s%s\n", r->progress ? "\r\033[K" : "", path, what,
            why ? ": " : "", why ? why : "");
    pthread_mutex_unlock(&r->err_lock);
}

char *files_in_path(const struct run *r, const char *rel, const char *name)
{
    char *s;

    if (asprintf(&s, "%s%s%s%s%s", r->in_dir, rel[0] ? "/" : "", rel, name ? "/" : "", name ? name : "") < 0)
        return NULL;
    return s;
}

void files_report_in(struct run *r, const char *rel, const char *name, const char *what, const char *why)
{
    char *path = files_in_path(r, rel, name);

    files_report(r, path ? path : name ? name : rel, what, why);
    free(path);
}

static void report_ssl(struct run *r, const char *path, const char *what)
{
    char buf[256];
    unsigned long e = ERR_get_error();

    if (e == 0)
        snprintf(buf, sizeof(buf), "no reason given");
    else
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    files_report(r, path, what, buf);
}

/* ---- file I/O that says exactly what failed ---- */

static ssize_t read_full(int fd, unsigned char *buf, size_t want)
{
    size_t have = 0;

    while (have < want) {
        ssize_t got = read(fd, buf + have, want - have);

        if (got == 0)
            break;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        have += (size_t)got;
    }
    return (ssize_t)have;
}

static int write_all(int fd, const unsigned char *buf, size_t len)
{
    while (len > 0) {
        ssize_t put = write(fd, buf, len);

        if (put < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += put;
        len -= (size_t)put;
    }
    return 0;
}

char *files_join(const char *a, const char *b)
{
    char *s;

    if (b[0] == '\0')
        return strdup(a);
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

/* ---- one file: IN_DIR/rel/name -> an unnamed output in OUT_DIR/rel -> its final name ---- */

/* Records what failed (with errno, or with the reason on OpenSSL's queue) for files_finish to report; 0. */
static int slot_fail(struct slot *s, const char *what, int ssl_err)
{
    s->what = what;
    s->err = ssl_err ? 0 : errno;
    s->ssl_err = ssl_err;
    return 0;
}

/* Reports what failed for the slot's file, named by its input path; 0. */
static int slot_report(struct slot *s, const char *what, const char *why)
{
    files_report_in(s->run, s->run->dirs[s->job->dir].rel, s->job->name, what, why);
    return 0;
}

/* The IV: a fresh random one, due first in the output (encrypt), or the file's first 16 bytes (decrypt); then the
 * cipher. */
static int start_stream(struct slot *s)
{
    struct run *r = s->run;
    ssize_t n;

    if (r->enc) {
        if (RAND_bytes(s->iv, IVLEN) != 1)
            return slot_fail(s, "cannot make an IV", 1);
        s->iv_due = 1;
    } else {
        if ((n = read_full(s->in, s->iv, IVLEN)) < 0)
            return slot_fail(s, "read failed", 0);
        if (n < IVLEN)
            return errno = 0, slot_fail(s, "shorter than the 16-byte IV: not a file this tool encrypted", 0);
    }
    if (EVP_CipherInit_ex2(s->ctx, r->cipher, r->key, s->iv, r->enc, NULL) != 1)
        return slot_fail(s, "cipher init failed", 1);
    return 1;
}

/* Writes len bytes of output, the IV in front of the first (one writev). The first piece read is IVLEN bytes short
 * of a whole one, so every write starts on a piece boundary of the output: ext4 then gives the page cache folios as
 * large as the writes (64 KiB), where writes 16 bytes off the boundary make most of them smaller, at a cost in kernel
 * time (bench/results/files-ext4.md). */
static int put(struct slot *s, const unsigned char *buf, size_t len)
{
    struct iovec v[2] = { { s->iv, IVLEN }, { (void *)buf, len } };
    ssize_t n;

    if (!s->iv_due)
        return write_all(s->out, buf, len);
    s->iv_due = 0;
    if ((n = writev(s->out, v, 2)) < 0) {
        if (errno != EINTR)
            return -1;
        n = 0;
    }
    if ((size_t)n < IVLEN) {
        if (write_all(s->out, s->iv + n, IVLEN - (size_t)n) < 0)
            return -1;
        n = IVLEN;
    }
    return write_all(s->out, buf + (n - IVLEN), len - (size_t)(n - IVLEN));
}

int files_advance(struct slot *s)
{
    struct run *r = s->run;
    size_t want = r->piece - (s->iv_due ? IVLEN : 0);
    ssize_t n;
    int outl;

    if (s->n > 0) {
        if (put(s, s->out_buf, (size_t)s->outl) < 0)
            return slot_fail(s, "write failed", 0);
        atomic_fetch_add(&r->bytes, (unsigned long long)s->n);
        s->n = 0;
        s->outl = 0;
        want = r->piece;
    }
    if (!s->last) {
        if ((n = read_full(s->in, s->buf, want)) < 0)
            return slot_fail(s, "read failed", 0);
        /* read_full fills the piece up to the end of the file, so a short piece is the last one. Stopping there
         * also keeps encryption in place safe: only the last update may leave a partial block in the context. */
        s->last = (size_t)n < want;
        s->n = (size_t)n;
        if (n > 0)
            return 1;
    }
    if (EVP_CipherFinal_ex(s->ctx, s->tail, &outl) != 1) {
        if (!r->enc)
            return errno = 0, slot_fail(s, "bad decrypt (wrong key, or not a file this tool encrypted)", 0);
        return slot_fail(s, "cipher final failed", 1);
    }
    if (put(s, s->tail, (size_t)outl) < 0)
        return slot_fail(s, "write failed", 0);
    return 0;
}

int files_transform(struct slot *s)
{
    if (EVP_CipherUpdate(s->ctx, s->out_buf, &s->outl, s->buf, (int)s->n) != 1)
        return slot_fail(s, "cipher update failed", 1);
    return 1;
}

int files_stream(struct slot *s)
{
    while (files_advance(s))
        if (!files_transform(s))
            return 0;
    return s->what == NULL;
}

/* ---- opening and naming an output ---- */

/* The descriptors of directory di: the held ones (0), or, past the budget, reopened name by name from the nearest
 * held ancestor with the walk's O_NOFOLLOW (1: the caller closes them); -1 on failure. */
static int dir_fds(const struct run *r, size_t di, int *in, int *out)
{
    const struct dir *d = &r->dirs[di];
    int pin, pout, owned, err;

    if (d->in >= 0) {
        *in = d->in, *out = d->out;
        return 0;
    }
    if ((owned = dir_fds(r, d->parent, &pin, &pout)) < 0)
        return -1;
    *in = openat(pin, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    *out = *in < 0 ? -1 : openat(pout, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    err = errno;
    if (*out < 0 && *in >= 0)
        close(*in);
    if (owned)
        close(pin), close(pout);
    errno = err;
    return *out < 0 ? -1 : 1;
}

/* An unnamed file in the output directory (O_TMPFILE): a kill at any moment takes it with it, so no partial output
 * exists under any name. A filesystem without O_TMPFILE (EOPNOTSUPP; EISDIR from kernels before 3.11) gets a hidden
 * temporary instead (O_EXCL | O_NOFOLLOW: never a planted file or link), removed on every failure path; one that a
 * kill -9 leaves is removed by the next run (files_remove_stale). */
static int open_output(struct slot *s)
{
    struct dir *d = &s->run->dirs[s->job->dir];

    if (s->run->tmpfile && !atomic_load_explicit(&d->no_tmpfile, memory_order_relaxed)) {
        s->out = openat(s->dout, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (s->out >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
            return s->out;
        atomic_store_explicit(&d->no_tmpfile, 1, memory_order_relaxed);
    }
    for (int tries = 0; tries < 100; tries++) {
        free(s->tmp);
        if ((s->tmp = files_tmp_name(s)) == NULL)
            return -1;
        s->out = openat(s->dout, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (s->out >= 0 || errno != EEXIST)
            return s->out;
    }
    return -1;
}

/* cachestat(2) (Linux 6.5), which the C library here does not declare yet. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
struct files_cachestat_range { uint64_t off, len; };
struct files_cachestat { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; };

/* Looks for an output that exists already (s->exists: then the new one goes straight to replace_output). If all of
 * its page cache is clean, that is dropped now, before the new output is written, so that the page freeing happens
 * before the new output's pages are taken rather than in the reaper's unlink, which then has only blocks to free
 * (bench/results/files-ext4.md: a small gain at best). Dirty pages are left alone: DONTNEED would start writing back
 * a file that is about to go. The old output stays complete on disk; a reader meanwhile reads it from there.
 * Only a regular file is ever opened: whatever else is at the name (a FIFO, a device node, a link to one) is replaced
 * without being opened, since opening a device can act (a tape rewinds, a modem hangs up) and a FIFO's writer would
 * wake. The name is taken with O_PATH, which opens nothing, and checked with fstat; only that same inode, a regular
 * file, is then opened for reading, through /proc/self/fd (no second lookup of the name, so nothing swapped in
 * between is opened either). Without /proc the cache is simply left. */
static void drop_old_cache(struct slot *s)
{
    struct files_cachestat_range all = { 0, 0 };
    struct files_cachestat cs;
    struct stat st;
    char proc[32];
    int path = openat(s->dout, s->job->name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;

    s->exists = path >= 0 || errno != ENOENT;
    if (path < 0)
        return;
    fd = -1;
    if (fstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path);
        fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    }
    close(path);
    if (fd < 0)
        return;
    if (syscall(SYS_cachestat, fd, &all, &cs, 0) == 0 && cs.nr_cache > 0 && cs.nr_dirty == 0 && cs.nr_writeback == 0)
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* linkat of an O_TMPFILE descriptor. AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH (recent kernels also let the opener
 * of the file) and says ENOENT without it; the /proc/self/fd name needs only /proc (checked at start). The first
 * ENOENT moves the whole run to /proc. */
static int link_fd(struct run *r, int fd, int dir, const char *name)
{
    char proc[32];

    if (!atomic_load_explicit(&r->link_proc, memory_order_relaxed)) {
        if (linkat(fd, "", dir, name, AT_EMPTY_PATH) == 0)
            return 0;
        if (errno != ENOENT)
            return -1;
        atomic_store_explicit(&r->link_proc, 1, memory_order_relaxed);
    }
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, dir, name, AT_SYMLINK_FOLLOW);
}

/* Puts the complete output, linked under the hidden name tmp, in place of OUT_DIR's `name` in one step: readers see
 * the old file or the new one, never neither. An existing output is swapped out with RENAME_EXCHANGE rather than
 * renamed over: on ext4, a rename that replaces a file flushes the new file's delayed allocation at once
 * (auto_da_alloc: block allocation and I/O submission in this thread), and unlinking the old one waits for its
 * blocks' discard; the swap does neither (bench/results/files-ext4.md). The old output, now under tmp, goes to
 * files_reap, which unlinks it off the workers' path (a kill before that leaves it, complete, for the next run to
 * remove). A directory found where the output belongs is swapped back and refused (EISDIR, as rename would); a
 * symbolic link there is replaced, never followed. exists: the name is known to be taken (linkat said EEXIST). On
 * success tmp is used up (NULL); on failure the caller removes it. */
static int replace_output(struct slot *s, char **tmp, int exists)
{
    const char *name = s->job->name;
    struct stat st;

    for (int tries = 0; tries < 100; tries++, exists = !exists) {
        if (!exists) {
            if (renameat2(s->dout, *tmp, s->dout, name, RENAME_NOREPLACE) == 0)
                return free(*tmp), *tmp = NULL, 0;
            if (errno == EINVAL) /* the filesystem has no renameat2 flags: a plain rename, as before */
                break;
            if (errno != EEXIST)
                return -1;
            continue;
        }
        if (renameat2(s->dout, *tmp, s->dout, name, RENAME_EXCHANGE) == 0) {
            if (fstatat(s->dout, *tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                (void)renameat2(s->dout, *tmp, s->dout, name, RENAME_EXCHANGE);
                return errno = EISDIR, -1;
            }
            files_reap(s, *tmp);
            *tmp = NULL;
            return 0;
        }
        if (errno == EINVAL)
            break;
        if (errno != ENOENT) /* ENOENT: the old output went away meanwhile */
            return -1;
    }
    return renameat(s->dout, *tmp, s->dout, name) == 0 ? (free(*tmp), *tmp = NULL, 0) : -1;
}

/* Names the complete unnamed output: straight under its final name when there is none yet (linkat never replaces a
 * name), else under a hidden temporary name first, then swapped into place (replace_output). */
static int link_output(struct slot *s)
{
    char *tmp;
    int err;

    if (!s->exists && link_fd(s->run, s->out, s->dout, s->job->name) == 0)
        return 0;
    if (!s->exists && errno != EEXIST)
        return -1;
    for (int tries = 0; tries < 100; tries++) {
        if ((tmp = files_tmp_name(s)) == NULL)
            return -1;
        if (link_fd(s->run, s->out, s->dout, tmp) == 0) {
            if (replace_output(s, &tmp, 1) == 0)
                return 0;
            err = errno, unlinkat(s->dout, tmp, 0), free(tmp), errno = err;
            return -1;
        }
        err = errno, free(tmp), errno = err;
        if (err != EEXIST)
            return -1;
    }
    return -1;
}

static void slot_clear(struct slot *s)
{
    if (s->in >= 0)
        close(s->in);
    if (s->out >= 0)
        close(s->out);
    if (s->own_dirs)
        close(s->din), close(s->dout);
    s->in = s->out = s->din = s->dout = -1;
    s->own_dirs = 0;
    free(s->tmp);
    s->tmp = NULL;
    s->job = NULL;
}

/* The input: opened with O_NOFOLLOW (a link put in its place since the walk is refused) and O_NONBLOCK (a FIFO put
 * there does not hang the thread; a regular file ignores the flag), then checked to be a regular file. */
static int open_input(struct slot *s)
{
    struct stat st;

    if ((s->in = openat(s->din, s->job->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        return slot_report(s, "cannot open", errno == ELOOP ? "a symbolic link now, not followed" : strerror(errno));
    if (fstat(s->in, &st) < 0)
        return slot_report(s, "cannot open", strerror(errno));
    if (!S_ISREG(st.st_mode)) /* it changed since the walk */
        return slot_report(s, "no longer a regular file", NULL);
    return 1;
}

int files_open(struct slot *s, const struct job *j)
{
    int owned;

    s->job = j;
    s->in = s->out = -1;
    s->what = NULL;
    s->err = s->ssl_err = 0;
    s->n = 0;
    s->outl = 0;
    s->last = 0;
    s->iv_due = 0;
    s->exists = 0;
    s->tmp = NULL;
    if ((owned = dir_fds(s->run, j->dir, &s->din, &s->dout)) < 0) {
        slot_report(s, "cannot open its directories", strerror(errno));
        goto fail;
    }
    s->own_dirs = owned;
    if (!open_input(s))
        goto fail;
    drop_old_cache(s);
    if (open_output(s) < 0) {
        slot_report(s, "cannot create the output", strerror(errno));
        goto fail;
    }
    if (!start_stream(s))
        return files_finish(s); /* reports, drops the output, frees the slot: 0 */
    return 1;
fail:
    free(s->tmp);
    s->tmp = NULL; /* not created: nothing to remove */
    slot_clear(s);
    return 0;
}

/* Without O_TMPFILE: close first (it reports delayed write errors, NFS), then into place (replace_output). */
static const char *finish_named(struct slot *s, const char *what, int *err)
{
    if (close(s->out) < 0 && what == NULL)
        what = "close failed", *err = errno;
    s->out = -1;
    if (what == NULL && replace_output(s, &s->tmp, 0) < 0)
        what = "cannot rename into place", *err = errno;
    if (what != NULL)
        unlinkat(s->dout, s->tmp, 0);
    return what;
}

/* O_TMPFILE: the name needs the descriptor, so close comes after it. The filesystems that have O_TMPFILE report
 * write errors at write or fsync, not close; should one come anyway, the name just made is taken back. */
static const char *finish_unnamed(struct slot *s, const char *what, int *err)
{
    if (what == NULL && link_output(s) < 0)
        what = "cannot link into place", *err = errno;
    if (close(s->out) < 0 && what == NULL) {
        what = "close failed", *err = errno;
        unlinkat(s->dout, s->job->name, 0);
    }
    s->out = -1;
    return what;
}

int files_finish(struct slot *s)
{
    struct run *r = s->run;
    const char *what = s->what;
    int err = s->err;

    if (what == NULL && r->do_fsync && fsync(s->out) < 0)
        what = "fsync failed", err = errno;
    what = s->tmp != NULL ? finish_named(s, what, &err) : finish_unnamed(s, what, &err);
    if (what != NULL && s->ssl_err && what == s->what) {
        char *path = files_in_path(r, r->dirs[s->job->dir].rel, s->job->name);

        report_ssl(r, path ? path : s->job->name, what);
        free(path);
    } else if (what != NULL) {
        slot_report(s, what, err ? strerror(err) : NULL);
    }
    slot_clear(s);
    return what == NULL;
}
