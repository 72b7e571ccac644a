/* tools/accelaes-stat.c: shows a unit table (units, live processes, totals), like `top`; --json
 * for scripts and tests, --watch to refresh every second, --user and --all-users for root.
 *
 * Everything under /dev/shm and in a segment is untrusted: another user can put a FIFO, a
 * symlink or a damaged file at any name there. So the name is opened without blocking and
 * without following links, fstat decides whether it is a table of the expected owner at all,
 * and only then is it copied into private memory with pread (never mapped: a concurrent
 * truncation gives a short read, not a SIGBUS, and a reader, root included, cannot write to it).
 *
 * No silent zeros: a table that cannot be read (absent, refused, damaged, another owner) is an error
 * exit with the reason on stderr, and --json gives it null units, processes and totals with an
 * "error", so a script that sums totals fails rather than reading 0 bytes for a busy server.
 *
 * Stopping: SIGINT and SIGTERM end the program at once (_exit), except while a finished line is
 * being written to stdout; then the line gets STOP_GRACE_NS to finish and the program ends anyway
 * (a reader that stopped reading must not keep it alive). Output is built in memory first, so
 * nothing but that write can block on stdout. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "scheduler/shm_layout.h"
#include "tools/stat.h"

#define SHM_DIR        "/dev/shm"   /* where glibc's shm_open keeps segments */
#define SEG_PREFIX     "accelaes."
#define MAX_USERS      4096         /* --all-users shows at most this many tables */
#define STOP_GRACE_NS  50000000L    /* to finish a line after a signal: well under 100 ms */

typedef struct opts {
    int json, watch, all_users, one_user;
    uid_t user; /* --user: the owner the table must have (and its name without ACCELAES_SHM_NAME) */
} opts;

static DIR *shm_dir;         /* /dev/shm, opened once; NULL when there is none */

static void __attribute__((format(printf, 3, 4))) set_error(snapshot *s, int refused, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof(s->why), fmt, ap);
    va_end(ap);
    s->error = s->why;
    s->refused = refused;
}

static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISDIR(m) ? "a directory" : "not a file";
}

/* A table owned by someone else is not that user's table (anyone may create a name under /dev/shm). For a name
 * from ACCELAES_SHM_NAME the owner to expect is the caller unless --user says another: say exactly that. */
static void wrong_owner(snapshot *s, uid_t owner)
{
    char who[320], want[320];
    stat_who(owner, who, sizeof(who));
    stat_who(s->uid, want, sizeof(want));
    if (s->named)
        set_error(s, UNUSABLE,
                  "owned by another user: %s, not %s (to read it as that user's table: "
                  "--user %u with this ACCELAES_SHM_NAME)",
                  who, want, (unsigned)owner);
    else
        set_error(s, UNUSABLE, "owned by another user: %s, not %s as its name says", who, want);
}

/* acc_shm_check_fd's checks, against the uid the table must belong to rather than always ours. */
static int check_file(int fd, snapshot *s)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        set_error(s, REFUSED_OPEN, "cannot stat it: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        set_error(s, REFUSED_NOT_FILE, "not a regular file (%s)", file_kind(st.st_mode));
    else if (st.st_uid != s->uid)
        wrong_owner(s, st.st_uid);
    else if ((st.st_mode & 07777) != 0600)
        set_error(s, UNUSABLE, "mode is %04o, not 0600", (unsigned)(st.st_mode & 07777));
    else if ((uint64_t)st.st_size != sizeof(acc_shm_table))
        set_error(s, UNUSABLE, "wrong size (%lld bytes; another version?)", (long long)st.st_size);
    return s->error != NULL ? -1 : 0;
}

static void open_error(snapshot *s, int err)
{
    if (err == ENOENT) { /* absent: no traffic counted here, or the wrong name or user: the caller decides */
        set_error(s, ABSENT,
                  "no segment at this name (no accelaes process of uid %u has used it yet, or they "
                  "run with shm=off or another ACCELAES_SHM_NAME)",
                  (unsigned)s->uid);
        return;
    }
    s->exists = 1;
    if (err == ELOOP)        /* O_NOFOLLOW; reported like a damaged segment, as before */
        set_error(s, UNUSABLE, "the segment is a symlink");
    else if (err == ENXIO)   /* what open says for a socket */
        set_error(s, REFUSED_NOT_FILE, "not a regular file (a socket)");
    else if ((err == EACCES || err == EPERM) && s->uid != geteuid())
        set_error(s, REFUSED_OPEN, "permission denied (only root may read another user's table)");
    else
        set_error(s, REFUSED_OPEN, "cannot open it: %s", strerror(err));
}

/* Open without blocking (a FIFO would wait for a writer for ever) or following a link, check
 * the file, then copy it: nothing in it is used before acc_shm_check_header accepts it. */
static void take_snapshot(snapshot *s)
{
    s->exists = 0;
    s->refused = READ_OK;
    s->error = NULL;
    int fd = shm_dir == NULL ? (errno = ENOENT, -1)
           : openat(dirfd(shm_dir), s->name + 1, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        open_error(s, errno);
        return;
    }
    s->exists = 1;
    if (check_file(fd, s) == 0) {
        size_t got = 0, want = sizeof(acc_shm_table);
        while (got < want) {
            ssize_t n = pread(fd, (char *)s->t + got, want - got, (off_t)got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        const char *bad = NULL;
        if (got != want)
            set_error(s, UNUSABLE, "the segment changed size while being read");
        else if (acc_shm_check_header(s->t, &bad) != 0 || bad != NULL)
            set_error(s, UNUSABLE, "%s", bad != NULL ? bad : "damaged header");
    }
    close(fd);
}

/* A uid as written in a segment name: decimal, and for names (strict) exactly as the scheduler
 * prints it (no sign, no leading zero), so "accelaes.0012" is nobody's table. */
static int parse_uid(const char *str, int strict, uid_t *uid)
{
    size_t n = strlen(str);
    if (n == 0 || n > 10 || strspn(str, "0123456789") != n || (strict && str[0] == '0' && n > 1))
        return -1;
    unsigned long long v = strtoull(str, NULL, 10);
    if (v >= 0xffffffffULL)   /* (uid_t)-1 is "no uid" */
        return -1;
    *uid = (uid_t)v;
    return 0;
}

static int cmp_uid(const void *a, const void *b)
{
    uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;
    return x < y ? -1 : x > y;
}

/* The uids that have a /dev/shm/accelaes.<uid>, sorted. Exactly that name (not the scheduler's
 * temporary names, nor tests' own), and only what readdir says is a regular file (or does not
 * say): symlinks and FIFOs are not even opened. -1 when /dev/shm cannot be listed. */
static int scan_users(uid_t *uids, size_t max, size_t *n, size_t *more)
{
    *n = *more = 0;
    if (shm_dir == NULL)
        return -1;
    rewinddir(shm_dir);      /* re-reads the directory: --watch sees new users */
    struct dirent *e;
    while ((e = readdir(shm_dir)) != NULL) {
        uid_t uid;
        if (strncmp(e->d_name, SEG_PREFIX, strlen(SEG_PREFIX)) != 0
            || parse_uid(e->d_name + strlen(SEG_PREFIX), 1, &uid) != 0
            || (e->d_type != DT_REG && e->d_type != DT_UNKNOWN))
            continue;
        if (*n < max)
            uids[(*n)++] = uid;
        else
            (*more)++;
    }
    qsort(uids, *n, sizeof(*uids), cmp_uid);
    return 0;
}

/* The exit status for one table that was looked at. */
static int exit_status(const snapshot *s)
{
    return s->refused == READ_OK ? STAT_EXIT_OK : s->refused == ABSENT ? STAT_EXIT_ABSENT : STAT_EXIT_UNREADABLE;
}

/* One table: $ACCELAES_SHM_NAME's, else /accelaes.<uid>, where uid is --user's or the caller's effective uid (as
 * the scheduler: its own segment is owned by the effective uid). The table must belong to that uid. */
static int show_one(FILE *out, const opts *o, snapshot *s)
{
    const char *env = getenv("ACCELAES_SHM_NAME");
    s->uid = o->one_user ? o->user : geteuid();
    s->named = env != NULL && *env != '\0';
    if (s->named && acc_shm_name(s->name, sizeof(s->name)) != 0) {
        fprintf(stderr, "accelaes-stat: invalid ACCELAES_SHM_NAME (\"/name\", no other '/')\n");
        return STAT_EXIT_USAGE;
    }
    if (!s->named)
        snprintf(s->name, sizeof(s->name), "/" SEG_PREFIX "%u", (unsigned)s->uid);
    take_snapshot(s);
    if (o->json) {
        stat_print_json(out, s);
        fputc('\n', out);
    } else if (s->refused == READ_OK || o->watch) /* else the reason goes to stderr alone */
        stat_print_text(out, s);
    if (s->refused != READ_OK && !o->watch)
        fprintf(stderr, "accelaes-stat: " SHM_DIR "%s: %s\n", s->name, s->error);
    return exit_status(s);
}

/* Every user's table: one JSON object keyed by uid, or one text block per user. A name that
 * turns out not to be a regular file is skipped as the scan skips it; one that may not be read
 * is listed with its error ("permission denied" for another user's table unless root), said on
 * stderr, and makes the exit status 1. */
static int show_all(FILE *out, const opts *o, snapshot *s)
{
    static uid_t uids[MAX_USERS];
    size_t n, more, shown = 0;
    if (scan_users(uids, MAX_USERS, &n, &more) != 0) {
        fprintf(stderr, "accelaes-stat: cannot list " SHM_DIR "\n");
        return 1;
    }
    char user[320];
    int rc = STAT_EXIT_OK;
    fputs(o->json ? "{" : "", out);
    for (size_t i = 0; i < n; i++) {
        snprintf(s->name, sizeof(s->name), "/" SEG_PREFIX "%u", (unsigned)uids[i]);
        s->uid = uids[i];
        s->named = 0;
        take_snapshot(s);
        if (!s->exists || s->refused == REFUSED_NOT_FILE)
            continue;        /* gone since the scan, or a FIFO (...) put there */
        if (s->refused != READ_OK) {
            rc = STAT_EXIT_UNREADABLE;
            if (!o->watch)
                fprintf(stderr, "accelaes-stat: " SHM_DIR "%s: %s\n", s->name, s->error);
        }
        if (o->json) {
            fprintf(out, "%s\"%u\": ", shown ? ", " : "", (unsigned)uids[i]);
            stat_print_json(out, s);
        } else {
            fprintf(out, "%s== %s: %s ==\n", shown ? "\n" : "", stat_who(uids[i], user, sizeof(user)), s->name);
            stat_print_text(out, s);
        }
        shown++;
    }
    fputs(o->json ? "}\n" : shown ? "" : "accelaes-stat: no accelaes segments in " SHM_DIR "\n", out);
    if (more)
        fprintf(stderr, "accelaes-stat: %zu more segments not shown (at most %u)\n", more, MAX_USERS);
    return rc;
}

static volatile sig_atomic_t stopping, emitting, stop_status;
static int watch_mode;
static timer_t grace_timer;
static int have_grace_timer;

static void on_grace_over(int sig)
{
    (void)sig;
    _exit(stop_status);
}

/* Nothing is half-done outside emit(): the segment is only read, and output is in memory. */
static void on_stop(int sig)
{
    stop_status = watch_mode ? 0 : 128 + sig;   /* a signal is how a --watch normally ends */
    stopping = 1;
    if (!emitting || !have_grace_timer)
        _exit(stop_status);
    struct itimerspec its = { { 0, 0 }, { 0, STOP_GRACE_NS } };
    timer_settime(grace_timer, 0, &its, NULL);   /* async-signal-safe */
}

static void setup_signals(int watch)
{
    watch_mode = watch;
    struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM };
    have_grace_timer = timer_create(CLOCK_MONOTONIC, &ev, &grace_timer) == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGALRM);
    sa.sa_handler = on_grace_over;       /* no SA_RESTART: a blocked write returns at once */
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The only place that may block on the reader of stdout; on_stop bounds it. */
static void emit(const char *p, size_t n)
{
    emitting = 1;
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
    emitting = 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: accelaes-stat [--json] [--watch] [--user NAME|UID | --all-users]\n"
            "  Shows an accelaes unit table: units, live processes and cumulative totals.\n"
            "  Inline counts of a running thread may lag by up to 64 KiB.\n"
            "  (default)    this user's table: /accelaes.<euid>, or $ACCELAES_SHM_NAME\n"
            "  --user U     the table of user U: /accelaes.<uid>, or $ACCELAES_SHM_NAME owned\n"
            "               by U; another user's needs root\n"
            "  --all-users  every /dev/shm/accelaes.<uid>, one block per user; without root,\n"
            "               others' tables are listed as \"permission denied\" (exit 1)\n"
            "  --json       one JSON object per refresh: {\"shared\", \"segment\", \"uid\", \"user\",\n"
            "               \"exists\", \"now_ns\", [\"error\"], \"units\", \"processes\", \"waiters\",\n"
            "               \"totals\"}; with --all-users an object of those keyed by uid:\n"
            "               {\"0\": {...}, \"33\": {...}}. A table that was not read has an\n"
            "               \"error\" and null units, processes, waiters and totals (never zeros)\n"
            "  --watch      refresh every second until SIGINT or SIGTERM (then exit 0)\n"
            "  Exit status: 0 read; 1 a table could not be read (not a regular file, may not\n"
            "  be opened, another owner, wrong mode, size or version, damaged; the reason on\n"
            "  stderr); 2 usage; 3 no segment at that name (nothing counted there yet, or the\n"
            "  wrong name or user).\n");
}

/* 0 to run, 1 after --help, 2 on a usage error (said on stderr). */
static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o->json = 1;
        else if (strcmp(argv[i], "--watch") == 0)
            o->watch = 1;
        else if (strcmp(argv[i], "--all-users") == 0)
            o->all_users = 1;
        else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
            struct passwd *pw = NULL;
            const char *arg = argv[++i];
            if (parse_uid(arg, 0, &o->user) != 0 && (pw = getpwnam(arg)) == NULL) {
                fprintf(stderr, "accelaes-stat: no such user: %s\n", arg);
                return 2;
            }
            if (pw != NULL)
                o->user = pw->pw_uid;
            o->one_user = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (o->one_user && o->all_users) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    snapshot s;
    s.t = malloc(sizeof(acc_shm_table));
    if (s.t == NULL) {
        fprintf(stderr, "accelaes-stat: out of memory\n");
        return 1;
    }
    setup_signals(o.watch);
    shm_dir = opendir(SHM_DIR);
    for (;;) {
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (out == NULL) {
            fprintf(stderr, "accelaes-stat: out of memory\n");
            return 1;
        }
        if (o.watch && !o.json)
            fputs("\033[H\033[2J", out);
        rc = o.all_users ? show_all(out, &o, &s) : show_one(out, &o, &s);
        fclose(out);
        if (rc != 2)
            emit(buf, len);
        free(buf);
        if (!o.watch || rc == 2 || stopping)
            break;
        struct timespec ts = { 1, 0 };
        nanosleep(&ts, NULL);  /* a signal ends the program here (on_stop) */
    }
    return stopping ? stop_status : rc;
}
