/* tools/conf_file.c: accelaes-conf's file handling. Every file it reads is untrusted input (it
 * may be a FIFO, a directory, huge, or not a configuration at all), so it is opened without
 * blocking, checked with fstat and read whole into memory within CT_FILE_MAX; libcrypto then parses
 * that copy. A file is replaced only through a synced temporary file beside it and rename(2), so
 * a reader sees the old or the new file, never a mixture, and the original keeps its mode and owner. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include "tools/conf_tool.h"

/* The line `enable` appends. The second form says that enable also added the line break before
 * it (the file did not end with one), so that `disable` can give the file back byte for byte. */
#define MARK_TEXT   "# added by accelaes-conf enable"
#define MARK_NL     MARK_TEXT ", with the line break before it"
/* What an .include path may hold: the parser expands $, ends the line at #, and eats \ and quotes. */
#define PATH_CHARS  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+-@,:~"

int ct_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("accelaes-conf: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static const char *kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

int ct_read_file(const char *path, ct_text *t)
{
    memset(t, 0, sizeof(*t));
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ct_fail("%s: %s", path, strerror(errno));
    const char *bad = NULL;
    char why[64];
    if (fstat(fd, &t->st) != 0)
        bad = strerror(errno);
    else if (!S_ISREG(t->st.st_mode))
        bad = kind(t->st.st_mode);   /* a FIFO would block the parser, a directory parses as empty */
    else if (t->st.st_size > (off_t)CT_FILE_MAX) {
        snprintf(why, sizeof(why), "too large (%lld bytes; at most %u)", (long long)t->st.st_size, CT_FILE_MAX);
        bad = why;
    }
    if (bad != NULL) {
        close(fd);
        return ct_fail("%s: %s%s", path, bad, S_ISREG(t->st.st_mode) ? "" : ", not a configuration file");
    }
    t->buf = malloc(CT_FILE_MAX + 2);
    while (t->buf != NULL && t->len <= CT_FILE_MAX) {   /* it may grow while being read */
        ssize_t n = read(fd, t->buf + t->len, CT_FILE_MAX + 1 - t->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            close(fd);
            ct_text_free(t);
            return ct_fail("%s: %s", path, strerror(err));
        }
        if (n == 0)
            break;
        t->len += (size_t)n;
    }
    close(fd);
    if (t->buf == NULL)
        return ct_fail("%s: out of memory", path);
    t->buf[t->len] = '\0';
    if (t->len > CT_FILE_MAX) {
        ct_text_free(t);
        return ct_fail("%s: too large (grew past %u bytes while being read)", path, CT_FILE_MAX);
    }
    if (memchr(t->buf, '\0', t->len) != NULL) {   /* the parser would stop there, our line edits not */
        ct_text_free(t);
        return ct_fail("%s: contains a NUL byte, not a configuration file", path);
    }
    return 0;
}

void ct_text_free(ct_text *t)
{
    free(t->buf);
    t->buf = NULL;
    t->len = 0;
}

/* Parsed by the same code as OpenSSL's own NCONF_load (which opens the file and calls this on
 * it), so .include, .pragma and $var expansion give exactly what programs see. */
CONF *ct_parse(const char *label, const char *buf, size_t len)
{
    CONF *c = NCONF_new(NULL);
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    long eline = 0;
    if (c == NULL || b == NULL || NCONF_load_bio(c, b, &eline) <= 0) {
        unsigned long e = ERR_peek_last_error();
        const char *why = ERR_reason_error_string(e);
        if (eline > 0)
            ct_fail("%s: line %ld: %s", label, eline, why != NULL ? why : "cannot be parsed");
        else
            ct_fail("%s: %s", label, why != NULL ? why : "cannot be parsed");
        NCONF_free(c);
        c = NULL;
    }
    BIO_free(b);
    ERR_clear_error();   /* a missing .include file leaves an error behind without failing */
    return c;
}

/* <dir>/<name without .cnf>-accelaes.cnf beside the real (symlink-resolved) file. */
int ct_snippet_path(const char *real, char *out, size_t cap)
{
    char d[PATH_MAX], b[PATH_MAX];
    snprintf(d, sizeof(d), "%s", real);
    snprintf(b, sizeof(b), "%s", real);
    const char *dir = dirname(d);
    char *base = basename(b);
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".cnf") == 0)
        base[n - 4] = '\0';
    int w = snprintf(out, cap, "%s/%s-accelaes.cnf", strcmp(dir, "/") == 0 ? "" : dir, base);
    if (w < 0 || (size_t)w >= cap)
        return ct_fail("%s: path too long", real);
    if (strspn(out, PATH_CHARS) != strlen(out))
        return ct_fail("%s: the path has characters an .include line cannot carry safely (only %s)",
                       real, PATH_CHARS);
    return 0;
}

static int is_line(const char *p, size_t n, const char *include, const char *mark)
{
    size_t a = strlen(include), m = strlen(mark);
    return n == a + 1 + m && memcmp(p, include, a) == 0 && p[a] == ' ' && memcmp(p + a + 1, mark, m) == 0;
}

/* The file without accelaes-conf's line. A line that carries the mark but is not exactly the
 * line for this snippet (edited, or written for a file since moved) is not guessed at. */
int ct_strip_line(const char *path, const ct_text *t, const char *snippet, char **base, size_t *blen, int *found)
{
    char include[PATH_MAX + 16];
    snprintf(include, sizeof(include), ".include %s", snippet);
    char *out = malloc(t->len + 1);
    size_t o = 0, lineno = 0;
    *found = 0;
    if (out == NULL)
        return ct_fail("out of memory");
    for (size_t at = 0; at < t->len; lineno++) {
        const char *p = t->buf + at, *nl = memchr(p, '\n', t->len - at);
        size_t n = nl != NULL ? (size_t)(nl - p) : t->len - at, next = at + n + (nl != NULL);
        if (memmem(p, n, MARK_TEXT, strlen(MARK_TEXT)) == NULL) {
            memcpy(out + o, p, next - at);
            o += next - at;
        } else if (is_line(p, n, include, MARK_TEXT) || is_line(p, n, include, MARK_NL)) {
            *found = 1;
            if (next == t->len && is_line(p, n, include, MARK_NL) && o > 0 && out[o - 1] == '\n')
                o--;   /* the line break enable added, when nothing was added after the line since */
        } else {
            free(out);
            return ct_fail("%s: line %zu carries accelaes-conf's mark but is not its line for this file "
                           "(%s %s): edit it by hand", path, lineno + 1, include, MARK_TEXT);
        }
        at = next;
    }
    out[o] = '\0';
    *base = out;
    *blen = o;
    return 0;
}

int ct_append_line(const char *base, size_t blen, const char *snippet, char **out, size_t *olen)
{
    int nl = blen > 0 && base[blen - 1] != '\n';
    size_t cap = blen + strlen(snippet) + sizeof(MARK_NL) + 16;
    *out = malloc(cap);
    if (*out == NULL)
        return ct_fail("out of memory");
    memcpy(*out, base, blen);
    int w = snprintf(*out + blen, cap - blen, "%s.include %s %s\n", nl ? "\n" : "", snippet, nl ? MARK_NL : MARK_TEXT);
    *olen = blen + (size_t)w;
    return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static void sync_dir(const char *path)
{
    char d[PATH_MAX];
    snprintf(d, sizeof(d), "%s", path);
    int fd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);   /* the rename itself is durable only once the directory is */
        close(fd);
    }
}

/* A synced new file beside path holding data: mode and owner from `like`, else 0644 and the
 * caller's. Its name goes to tmp; on failure nothing is left behind. */
int ct_temp_beside(const char *path, const char *data, size_t len, const struct stat *like, char *tmp, size_t cap)
{
    char d[PATH_MAX], b[PATH_MAX];
    snprintf(d, sizeof(d), "%s", path);
    snprintf(b, sizeof(b), "%s", path);
    int w = snprintf(tmp, cap, "%s/.%s.XXXXXX", dirname(d), basename(b));
    if (w < 0 || (size_t)w >= cap)
        return ct_fail("%s: path too long", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return ct_fail("%s: cannot create a file beside it: %s", path, strerror(errno));
    const char *step = NULL;
    if (write_all(fd, data, len) != 0)
        step = "write";
    else if (fchmod(fd, like != NULL ? like->st_mode & 07777 : 0644) != 0)
        step = "set the mode of";
    else if (like != NULL && (like->st_uid != geteuid() || like->st_gid != getegid())
             && fchown(fd, like->st_uid, like->st_gid) != 0)
        step = "set the owner of";
    else if (fsync(fd) != 0)
        step = "sync";
    int bad = errno;
    close(fd);
    if (step == NULL)
        return 0;
    unlink(tmp);
    return ct_fail("%s: cannot %s %s: %s", path, step, tmp, strerror(bad));
}

/* Replace path by data (see ct_temp_beside for `like`), but only if path is still the file
 * `expect` describes: another editor may have saved it since it was read. */
int ct_replace_file(const char *path, const char *data, size_t len, const struct stat *like,
                    const struct stat *expect)
{
    char tmp[PATH_MAX];
    if (ct_temp_beside(path, data, len, like, tmp, sizeof(tmp)) != 0)
        return -1;
    struct stat now;
    if (expect != NULL && (stat(path, &now) != 0 || now.st_ino != expect->st_ino
        || now.st_size != expect->st_size || now.st_mtim.tv_sec != expect->st_mtim.tv_sec
        || now.st_mtim.tv_nsec != expect->st_mtim.tv_nsec)) {
        unlink(tmp);
        return ct_fail("%s changed while accelaes-conf was editing it; nothing was written, run it again", path);
    }
    if (rename(tmp, path) != 0) {
        int bad = errno;
        unlink(tmp);
        return ct_fail("%s: cannot replace it: %s", path, strerror(bad));
    }
    sync_dir(path);
    return 0;
}
