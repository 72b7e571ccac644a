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

/* Streams one open input into one open output; returns NULL or what failed (errno or the SSL queue set). */
static const char *transform(struct worker *w, int in, int out, int *ssl_err)
{
    struct run *r = w->run;
    unsigned char iv[IVLEN];
    ssize_t n;
    int outl;

    *ssl_err = 0;
    if (r->enc) {
        if (RAND_bytes(iv, IVLEN) != 1)
            return *ssl_err = 1, "cannot make an IV";
        if (write_all(out, iv, IVLEN) < 0)
            return "write failed";
    } else {
        if ((n = read_full(in, iv, IVLEN)) < 0)
            return "read failed";
        if (n < IVLEN)
            return errno = 0, "shorter than the 16-byte IV: not a file this tool encrypted";
    }
    if (EVP_CipherInit_ex2(w->ctx, r->cipher, r->key, iv, r->enc, NULL) != 1)
        return *ssl_err = 1, "cipher init failed";
    while ((n = read_full(in, w->inbuf, PIECE)) > 0) {
        if (EVP_CipherUpdate(w->ctx, w->outbuf, &outl, w->inbuf, (int)n) != 1)
            return *ssl_err = 1, "cipher update failed";
        if (write_all(out, w->outbuf, (size_t)outl) < 0)
            return "write failed";
        atomic_fetch_add(&r->bytes, (unsigned long long)n);
    }
    if (n < 0)
        return "read failed";
    if (EVP_CipherFinal_ex(w->ctx, w->outbuf, &outl) != 1) {
        if (!r->enc)
            return errno = 0, "bad decrypt (wrong key, or not a file this tool encrypted)";
        return *ssl_err = 1, "cipher final failed";
    }
    if (write_all(out, w->outbuf, (size_t)outl) < 0)
        return "write failed";
    return NULL;
}

int files_process(struct worker *w, const struct job *j)
{
    struct run *r = w->run;
    char *in_path = files_join(r->in_dir, j->rel), *out_path = files_join(r->out_dir, j->rel), *tmp = NULL;
    const char *what = NULL, *base;
    int in = -1, out = -1, ssl_err = 0, ok = 0, err = 0;
    struct stat st;

    if (in_path == NULL || out_path == NULL) {
        files_report(r, j->rel, "out of memory", NULL);
        goto done;
    }
    if ((in = open(in_path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(in, &st) < 0) {
        files_report(r, in_path, "cannot open", strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) { /* it changed since the walk */
        files_report(r, in_path, "no longer a regular file", NULL);
        goto done;
    }
    /* The temporary sits beside the final name (same filesystem, so rename is atomic), hidden by a dot; the name
     * part is cut so that a long file name still leaves room under NAME_MAX. */
    base = strrchr(out_path, '/') + 1;
    for (int tries = 0; out < 0 && tries < 100; tries++) {
        free(tmp);
        if (asprintf(&tmp, "%.*s.%.160s.accelaes-tmp.%ld.%u", (int)(base - out_path), out_path, base,
                     (long)getpid(), atomic_fetch_add(&r->tmp_seq, 1)) < 0) {
            tmp = NULL;
            files_report(r, in_path, "out of memory", NULL);
            goto done;
        }
        out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0 && errno != EEXIST)
            break;
    }
    if (out < 0) {
        files_report(r, tmp, "cannot create", strerror(errno));
        free(tmp);
        tmp = NULL;
        goto done;
    }
    what = transform(w, in, out, &ssl_err);
    err = errno;
    if (what == NULL && r->do_fsync && fsync(out) < 0)
        what = "fsync failed", err = errno;
    /* close reports delayed write errors (NFS, quota): it is part of the write. */
    if (close(out) < 0 && what == NULL)
        what = "close failed", err = errno;
    out = -1;
    if (what == NULL && rename(tmp, out_path) < 0)
        what = "cannot rename into place", err = errno;
    if (what == NULL)
        ok = 1;
    else if (ssl_err)
        report_ssl(r, in_path, what);
    else
        files_report(r, in_path, what, err ? strerror(err) : NULL);
done:
    if (!ok && tmp != NULL)
        unlink(tmp);
    if (in >= 0)
        close(in);
    free(tmp);
    free(in_path);
    free(out_path);
    return ok;
}

