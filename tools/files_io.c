/* tools/files_io.c: accelaes-files' per-file work: the key file, and one input streamed through the cipher into a
 * temporary output that is renamed into place only when complete. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- key file ---- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int files_read_key(const char *file, unsigned char *key, size_t keymax)
{
    char text[4096];
    size_t len = 0, n = 0;
    ssize_t got;
    int fd, hi = -1, ret = -1;

    if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "accelaes-files: key file %s: %s\n", file, strerror(errno));
        return -1;
    }
    while (len < sizeof(text) && (got = read(fd, text + len, sizeof(text) - len)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "accelaes-files: key file %s: %s\n", file, strerror(errno));
            goto out;
        }
        len += (size_t)got;
    }
    if (len == sizeof(text)) {
        fprintf(stderr, "accelaes-files: key file %s: too long for a hex key\n", file);
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        int v = hexval((unsigned char)text[i]);

        if (v < 0) {
            if (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')
                continue;
            fprintf(stderr, "accelaes-files: key file %s: not hex at byte %zu\n", file, i);
            goto out;
        }
        if (hi < 0) {
            hi = v;
            continue;
        }
        if (n == keymax) {
            fprintf(stderr, "accelaes-files: key file %s: key longer than %zu bytes\n", file, keymax);
            goto out;
        }
        key[n++] = (unsigned char)(hi << 4 | v);
        hi = -1;
    }
    if (hi >= 0)
        fprintf(stderr, "accelaes-files: key file %s: odd number of hex digits\n", file);
    else if (n == 0)
        fprintf(stderr, "accelaes-files: key file %s: empty\n", file);
    else
        ret = (int)n;
out:
    OPENSSL_cleanse(text, sizeof(text));
    close(fd);
    return ret;
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

/* ---- one file: IN -> temporary name -> final name ---- */

/* Records what failed (with errno, or with the reason on OpenSSL's queue) for files_finish to report; 0. */
static int slot_fail(struct slot *s, const char *what, int ssl_err)
{
    s->what = what;
    s->err = ssl_err ? 0 : errno;
    s->ssl_err = ssl_err;
    return 0;
}

/* The IV: a fresh random one written first (encrypt), or the file's first 16 bytes (decrypt); then the cipher. */
static int start_stream(struct slot *s)
{
    struct run *r = s->run;
    unsigned char iv[IVLEN];
    ssize_t n;

    if (r->enc) {
        if (RAND_bytes(iv, IVLEN) != 1)
            return slot_fail(s, "cannot make an IV", 1);
        if (write_all(s->out, iv, IVLEN) < 0)
            return slot_fail(s, "write failed", 0);
    } else {
        if ((n = read_full(s->in, iv, IVLEN)) < 0)
            return slot_fail(s, "read failed", 0);
        if (n < IVLEN)
            return errno = 0, slot_fail(s, "shorter than the 16-byte IV: not a file this tool encrypted", 0);
    }
    if (EVP_CipherInit_ex2(s->ctx, r->cipher, r->key, iv, r->enc, NULL) != 1)
        return slot_fail(s, "cipher init failed", 1);
    return 1;
}

int files_advance(struct slot *s)
{
    struct run *r = s->run;
    ssize_t n;
    int outl;

    if (s->n > 0) {
        if (write_all(s->out, s->out_buf, (size_t)s->outl) < 0)
            return slot_fail(s, "write failed", 0);
        atomic_fetch_add(&r->bytes, (unsigned long long)s->n);
        s->n = 0;
        s->outl = 0;
    }
    if (!s->last) {
        if ((n = read_full(s->in, s->buf, r->piece)) < 0)
            return slot_fail(s, "read failed", 0);
        /* read_full fills the piece up to the end of the file, so a short piece is the last one. Stopping there
         * also keeps encryption in place safe: only the last update may leave a partial block in the context. */
        s->last = (size_t)n < r->piece;
        s->n = (size_t)n;
        if (n > 0)
            return 1;
    }
    if (EVP_CipherFinal_ex(s->ctx, s->tail, &outl) != 1) {
        if (!r->enc)
            return errno = 0, slot_fail(s, "bad decrypt (wrong key, or not a file this tool encrypted)", 0);
        return slot_fail(s, "cipher final failed", 1);
    }
    if (write_all(s->out, s->tail, (size_t)outl) < 0)
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

static void slot_clear(struct slot *s)
{
    if (s->in >= 0)
        close(s->in);
    if (s->out >= 0)
        close(s->out);
    s->in = s->out = -1;
    free(s->in_path);
    free(s->out_path);
    free(s->tmp);
    s->in_path = s->out_path = s->tmp = NULL;
    s->job = NULL;
}

int files_open(struct slot *s, const struct job *j)
{
    struct run *r = s->run;
    const char *base;
    struct stat st;

    s->job = j;
    s->in = s->out = -1;
    s->what = NULL;
    s->err = s->ssl_err = 0;
    s->n = 0;
    s->outl = 0;
    s->last = 0;
    s->in_path = files_join(r->in_dir, j->rel);
    s->out_path = files_join(r->out_dir, j->rel);
    s->tmp = NULL;
    if (s->in_path == NULL || s->out_path == NULL) {
        files_report(r, j->rel, "out of memory", NULL);
        goto fail;
    }
    if ((s->in = open(s->in_path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(s->in, &st) < 0) {
        files_report(r, s->in_path, "cannot open", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) { /* it changed since the walk */
        files_report(r, s->in_path, "no longer a regular file", NULL);
        goto fail;
    }
    /* The temporary sits beside the final name (same filesystem, so rename is atomic), hidden by a dot; the name
     * part is cut so that a long file name still leaves room under NAME_MAX. */
    base = strrchr(s->out_path, '/') + 1;
    for (int tries = 0; s->out < 0 && tries < 100; tries++) {
        free(s->tmp);
        if (asprintf(&s->tmp, "%.*s.%.160s.accelaes-tmp.%ld.%u", (int)(base - s->out_path), s->out_path, base,
                     (long)getpid(), atomic_fetch_add(&r->tmp_seq, 1)) < 0) {
            s->tmp = NULL;
            files_report(r, s->in_path, "out of memory", NULL);
            goto fail;
        }
        s->out = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (s->out < 0 && errno != EEXIST)
            break;
    }
    if (s->out < 0) {
        files_report(r, s->tmp, "cannot create", strerror(errno));
        goto fail;
    }
    if (!start_stream(s))
        return files_finish(s); /* reports, removes the temporary, frees the slot: 0 */
    return 1;
fail:
    slot_clear(s);
    return 0;
}

int files_finish(struct slot *s)
{
    struct run *r = s->run;
    const char *what = s->what;
    int err = s->err, ok = 0;

    if (what == NULL && r->do_fsync && fsync(s->out) < 0)
        what = "fsync failed", err = errno;
    /* close reports delayed write errors (NFS, quota): it is part of the write. */
    if (close(s->out) < 0 && what == NULL)
        what = "close failed", err = errno;
    s->out = -1;
    if (what == NULL && rename(s->tmp, s->out_path) < 0)
        what = "cannot rename into place", err = errno;
    if (what == NULL)
        ok = 1;
    else if (s->ssl_err && what == s->what)
        report_ssl(r, s->in_path, what);
    else
        files_report(r, s->in_path, what, err ? strerror(err) : NULL);
    if (!ok)
        unlink(s->tmp);
    slot_clear(s);
    return ok;
}
