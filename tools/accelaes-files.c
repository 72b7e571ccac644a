/* tools/accelaes-files.c: encrypt or decrypt a directory tree with AES-CBC/CTR through the accelaes provider,
 * one stream per file (CBC is serial within a stream), files spread over a pool of threads; for CBC encryption each
 * thread keeps many files in flight as OpenSSL ASYNC jobs, whose updates the provider runs in multi-buffer lanes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "tools/files.h"

static const char usage[] =
"usage: accelaes-files encrypt|decrypt --cipher aes-{128,192,256}-{cbc,ctr} --key-file KEYFILE\n"
"                      IN_DIR OUT_DIR [--threads N] [--jobs N | --no-async] [--provider NAME] [--fsync] [--quiet]\n"
"\n"
"Encrypts (or decrypts) every regular file under IN_DIR into OUT_DIR, with the same relative name.\n"
"  --key-file   the key in hex (whitespace and newlines are ignored); 16, 24 or 32 bytes as the cipher needs.\n"
"               The key is never taken from the command line.\n"
"  --threads N  worker threads (default: the CPUs this process may run on). Each file is one stream.\n"
"  --jobs N     CBC encryption: files in flight per thread, each streamed through an OpenSSL ASYNC job, so that\n"
"               the provider runs their updates side by side in its multi-buffer lanes (default 16, at most 64;\n"
"               fewer where RLIMIT_NOFILE is low). Other modes and decryption are parallel within a stream and\n"
"               take one file at a time per thread.\n"
"  --no-async   one file at a time per thread for CBC encryption too (the same as --jobs 1; for comparison).\n"
"  --provider   the provider that does the AES (default accelaes; `default` for comparison).\n"
"  --fsync      fsync each output before it gets its final name.\n"
"  --quiet      no progress line (it is shown only when stderr is a terminal anyway).\n"
"\n"
"Output format: a random 16-byte IV, then the ciphertext (PKCS#7 padding for CBC), so that\n"
"  openssl enc -d -aes-128-cbc -K <key hex> -iv <first 16 bytes in hex> -in <file without them>\n"
"decrypts it. decrypt does the inverse.\n"
"Files are taken largest first. Subdirectories are processed recursively; the tree is recreated under\n"
"OUT_DIR (directories mode 0700).\n"
"Symbolic links to files are followed; symbolic links to directories, devices, FIFOs and sockets are\n"
"skipped with a note. OUT_DIR is created if missing; it must not be IN_DIR, inside it, or contain it.\n"
"Each output is written to a temporary name in its directory (mode 0600) and renamed when complete, so a\n"
"failure or a kill never leaves a truncated file under a final name; an existing output is replaced.\n"
"A file that fails is named on stderr and the others go on. Exit status: 0 all done, 1 some file failed,\n"
"2 usage, key or setup error.\n";

/* ---- the directory walk ---- */

static int add_job(struct run *r, char *rel, off_t size)
{
    if (r->njobs == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct job *j = realloc(r->jobs, cap * sizeof(*j));

        if (j == NULL)
            return -1;
        r->jobs = j;
        r->cap = cap;
    }
    r->jobs[r->njobs].rel = rel;
    r->jobs[r->njobs++].size = size;
    return 0;
}

/* Largest first: the longest streams start at once and small files fill in around them, so no large file is left
 * to run alone at the end (CBC is serial per file: its time is its length over the speed of one stream). */
static int larger_first(const void *a, const void *b)
{
    off_t x = ((const struct job *)a)->size, y = ((const struct job *)b)->size;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* Lists the regular files under IN_DIR/rel and makes the matching directories under OUT_DIR. */
static int walk(struct run *r, const char *rel)
{
    char *dir_path = files_join(r->in_dir, rel);
    DIR *d = dir_path ? opendir(dir_path) : NULL;
    struct dirent *e;
    int ret = 0;

    if (d == NULL) {
        files_report(r, dir_path ? dir_path : rel, "cannot open directory", strerror(errno));
        free(dir_path);
        return -1;
    }
    while ((errno = 0, e = readdir(d)) != NULL) {
        char *child, *path;
        struct stat st, lst;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        child = rel[0] == '\0' ? strdup(e->d_name) : files_join(rel, e->d_name);
        path = child ? files_join(r->in_dir, child) : NULL;
        if (path == NULL) {
            free(child);
            files_report(r, dir_path, "out of memory", NULL);
            ret = -1;
            break;
        }
        if (stat(path, &st) < 0) {
            files_report(r, path, "cannot stat", strerror(errno)); /* e.g. a dangling symbolic link */
            ret = -1;
        } else if (S_ISREG(st.st_mode)) {
            if (add_job(r, child, st.st_size) == 0)
                child = NULL;
            else
                files_report(r, path, "out of memory", NULL), ret = -1;
        } else if (S_ISDIR(st.st_mode) && lstat(path, &lst) == 0 && !S_ISLNK(lst.st_mode)) {
            char *out = files_join(r->out_dir, child);

            if (out == NULL || (mkdir(out, 0700) < 0 && errno != EEXIST)) {
                files_report(r, out ? out : path, "cannot create directory", strerror(errno));
                ret = -1;
            } else if (walk(r, child) < 0) {
                ret = -1;
            }
            free(out);
        } else {
            pthread_mutex_lock(&r->err_lock);
            fprintf(stderr, "accelaes-files: note: %s: skipped (%s)\n", path,
                    S_ISDIR(st.st_mode) ? "symbolic link to a directory" : "not a regular file");
            pthread_mutex_unlock(&r->err_lock);
        }
        free(child);
        free(path);
    }
    if (e == NULL && errno != 0) {
        files_report(r, dir_path, "cannot read directory", strerror(errno));
        ret = -1;
    }
    closedir(d);
    free(dir_path);
    return ret;
}

/* ---- setup: provider, directories, threads ---- */

/* OPENSSL_MODULES wins when set; otherwise the module beside this binary (build/), then OpenSSL's MODULESDIR. */
static OSSL_PROVIDER *load_provider(const char *name)
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

/* realpath() of a directory that may not exist yet: its parent resolved, plus its last name. */
static int resolve_dir(const char *path, char *res)
{
    char buf[PATH_MAX], *slash;
    size_t len = strlen(path);

    if (realpath(path, res) != NULL)
        return 0;
    if (errno != ENOENT || len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, path, len + 1);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = '\0';
    slash = strrchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    if (realpath(slash == NULL ? "." : slash == buf ? "/" : buf, res) == NULL)
        return -1;
    len = strlen(res);
    if (snprintf(res + len, PATH_MAX - len, "%s%s", len > 1 ? "/" : "", slash ? slash + 1 : buf) >=
        (int)(PATH_MAX - len))
        return errno = ENAMETOOLONG, -1;
    return 0;
}

/* Refuses OUT_DIR == IN_DIR, OUT_DIR inside IN_DIR (the walk would meet its own output) and the reverse, before
 * anything is created; then makes OUT_DIR if it is missing. */
static int check_dirs(const char *in_dir, const char *out_dir)
{
    char in[PATH_MAX], out[PATH_MAX];
    size_t li, lo;
    struct stat st;

    errno = 0;
    if (stat(in_dir, &st) < 0 || !S_ISDIR(st.st_mode) || realpath(in_dir, in) == NULL) {
        fprintf(stderr, "accelaes-files: IN_DIR %s: %s\n", in_dir, errno ? strerror(errno) : "not a directory");
        return -1;
    }
    if (resolve_dir(out_dir, out) < 0) {
        fprintf(stderr, "accelaes-files: OUT_DIR %s: %s\n", out_dir, strerror(errno));
        return -1;
    }
    li = strlen(in);
    lo = strlen(out);
    if ((lo >= li && strncmp(in, out, li) == 0 && (out[li] == '/' || out[li] == '\0' || li == 1)) ||
        (li > lo && strncmp(in, out, lo) == 0 && (in[lo] == '/' || lo == 1))) {
        fprintf(stderr, "accelaes-files: OUT_DIR %s and IN_DIR %s must not be the same or contain each other\n",
                out, in);
        return -1;
    }
    if (mkdir(out_dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "accelaes-files: cannot create OUT_DIR %s: %s\n", out_dir, strerror(errno));
        return -1;
    }
    if (stat(out_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "accelaes-files: OUT_DIR %s: not a directory\n", out_dir);
        return -1;
    }
    return 0;
}

static int cpu_count(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN) > 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
}

static int known_cipher(const char *c)
{
    static const char *const names[] = { "aes-128-cbc", "aes-192-cbc", "aes-256-cbc",
                                         "aes-128-ctr", "aes-192-ctr", "aes-256-ctr" };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(c, names[i]) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = NULL, *cipher = NULL, *keyfile = NULL, *provider = "accelaes", *dirs[2] = { 0 };
    int threads = 0, ndirs = 0, quiet = 0, keylen, status = 2, inflight = JOBS_DEFAULT;
    char propq[128];
    struct run r;
    OSSL_PROVIDER *prov = NULL, *deflt = NULL;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.err_lock, NULL);
    pthread_mutex_init(&r.take_lock, NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--cipher") == 0 && has_val) {
            cipher = argv[++i];
        } else if (strcmp(a, "--key-file") == 0 && has_val) {
            keyfile = argv[++i];
        } else if (strcmp(a, "--provider") == 0 && has_val) {
            provider = argv[++i];
        } else if (strcmp(a, "--threads") == 0 && has_val) {
            char *end;
            long t = strtol(argv[++i], &end, 10);

            if (*end != '\0' || t < 1 || t > 4096) {
                fprintf(stderr, "accelaes-files: --threads wants a number from 1 to 4096\n");
                return 2;
            }
            threads = (int)t;
        } else if (strcmp(a, "--jobs") == 0 && has_val) {
            char *end;
            long t = strtol(argv[++i], &end, 10);

            if (*end != '\0' || t < 1 || t > JOBS_MAX) {
                fprintf(stderr, "accelaes-files: --jobs wants a number from 1 to %d\n", JOBS_MAX);
                return 2;
            }
            inflight = (int)t;
        } else if (strcmp(a, "--no-async") == 0) {
            inflight = 1;
        } else if (strcmp(a, "--fsync") == 0) {
            r.do_fsync = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "accelaes-files: unknown option or missing value: %s\n%s", a, usage);
            return 2;
        } else if (mode == NULL) {
            mode = a;
        } else if (ndirs < 2) {
            dirs[ndirs++] = a;
        } else {
            fprintf(stderr, "accelaes-files: too many arguments\n%s", usage);
            return 2;
        }
    }
    if (mode == NULL || (strcmp(mode, "encrypt") != 0 && strcmp(mode, "decrypt") != 0) || cipher == NULL ||
        keyfile == NULL || ndirs != 2) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    if (!known_cipher(cipher)) {
        fprintf(stderr, "accelaes-files: unsupported cipher %s (aes-{128,192,256}-{cbc,ctr})\n", cipher);
        return 2;
    }
    r.enc = strcmp(mode, "encrypt") == 0;
    r.in_dir = dirs[0];
    r.out_dir = dirs[1];
    r.progress = !quiet && isatty(2);
    /* Only CBC encryption is serial per stream; the provider batches it alone (provider/batch.c). The other modes
     * are parallel within a stream and gain nothing from more files in flight, so they keep one per thread. */
    r.inflight = r.enc && strcasestr(cipher, "-cbc") != NULL ? inflight : 1;
    r.piece = r.inflight > 1 ? PIECE_ASYNC : PIECE_SYNC;
    /* With a file size limit, a write past it fails with EFBIG instead of killing the whole run. */
    signal(SIGXFSZ, SIG_IGN);

    if ((prov = load_provider(provider)) == NULL) {
        fprintf(stderr, "accelaes-files: cannot load the %s provider from %s (build it with make, or set "
                "OPENSSL_MODULES to the directory that holds %s.so); OpenSSL says:\n", provider,
                getenv("OPENSSL_MODULES") ? "OPENSSL_MODULES" : "this binary's directory or MODULESDIR", provider);
        ERR_print_errors_fp(stderr);
        goto out;
    }
    deflt = strcmp(provider, "default") == 0 ? NULL : OSSL_PROVIDER_load(NULL, "default"); /* for RAND */
    snprintf(propq, sizeof(propq), "provider=%s", provider);
    if ((r.cipher = EVP_CIPHER_fetch(NULL, cipher, propq)) == NULL) {
        fprintf(stderr, "accelaes-files: the %s provider does not offer %s\n", provider, cipher);
        goto out;
    }
    keylen = files_read_key(keyfile, r.key, sizeof(r.key));
    if (keylen < 0)
        goto out;
    if (keylen != EVP_CIPHER_get_key_length(r.cipher)) {
        fprintf(stderr, "accelaes-files: key file %s: %d bytes, but %s needs %d\n", keyfile, keylen, cipher,
                EVP_CIPHER_get_key_length(r.cipher));
        goto out;
    }
    if (check_dirs(r.in_dir, r.out_dir) < 0)
        goto out;

    status = 0;
    if (walk(&r, "") < 0)
        status = 1;
    if (r.njobs > 1)
        qsort(r.jobs, r.njobs, sizeof(*r.jobs), larger_first);
    if (threads == 0)
        threads = cpu_count();
    if ((size_t)threads > r.njobs) /* no idle threads for a handful of files */
        threads = r.njobs > 0 ? (int)r.njobs : 1;
    if (r.njobs > 0 && files_run(&r, threads) < 0)
        status = 2;
    if (atomic_load(&r.failed) && status == 0)
        status = 1;
out:
    OPENSSL_cleanse(r.key, sizeof(r.key));
    for (size_t i = 0; i < r.njobs; i++)
        free(r.jobs[i].rel);
    free(r.jobs);
    free(r.queues);
    free(r.queued);
    EVP_CIPHER_free(r.cipher);
    OSSL_PROVIDER_unload(deflt);
    OSSL_PROVIDER_unload(prov);
    return status;
}
