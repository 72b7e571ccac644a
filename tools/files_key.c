/* tools/files_key.c: accelaes-files' key file: hex digits (whitespace allowed), refused when group
 * or others may access it, the text wiped after use; and the provider that will use it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/provider.h>

#include "tools/files.h"

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

/* Like ssh with a private key: a key that group or others may read (or write: then they choose it) is refused,
 * unless the user says otherwise. A symbolic link to the key is fine (the check is on the file it names, by
 * fstat); a pipe (`--key-file <(...)`) is 0600. */
static int key_perms_ok(int fd, const char *file, int allow_unsafe)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        fprintf(stderr, "accelaes-files: key file %s: %s\n", file, strerror(errno));
        return 0;
    }
    if ((st.st_mode & 077) == 0 || allow_unsafe)
        return 1;
    fprintf(stderr, "accelaes-files: UNPROTECTED KEY FILE: permissions %04o for '%s' are too open.\n"
            "accelaes-files: a key file must not be accessible by group or others: chmod 600 it, or pass "
            "--allow-unsafe-key-perms.\n", (unsigned)(st.st_mode & 07777), file);
    return 0;
}

int files_read_key(const char *file, unsigned char *key, size_t keymax, int allow_unsafe)
{
    char text[4096];
    size_t len = 0, n = 0;
    ssize_t got;
    int fd, hi = -1, ret = -1;

    if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "accelaes-files: key file %s: %s\n", file, strerror(errno));
        return -1;
    }
    if (!key_perms_ok(fd, file, allow_unsafe))
        goto out;
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

/* OPENSSL_MODULES wins when set; otherwise the module beside this binary (build/), then OpenSSL's MODULESDIR. */
OSSL_PROVIDER *files_load_provider(const char *name)
{
    OSSL_PROVIDER *p;
    char exe[PATH_MAX], *slash, *mod = NULL;
    ssize_t n;

    if (strcmp(name, "default") == 0 || getenv("OPENSSL_MODULES") != NULL)
        return OSSL_PROVIDER_load(NULL, name);
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/')) != NULL) {
            *slash = '\0';
            if (asprintf(&mod, "%s/%s.so", exe, name) >= 0 && access(mod, R_OK) == 0)
                OSSL_PROVIDER_set_default_search_path(NULL, exe);
            free(mod);
        }
    }
    p = OSSL_PROVIDER_load(NULL, name);
    ERR_set_mark(); /* put the search path back for anything loaded later */
    OSSL_PROVIDER_set_default_search_path(NULL, NULL);
    ERR_pop_to_mark();
    return p;
}
