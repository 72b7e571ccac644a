/* tools/accelaes-stat.c: shows the user's unit table (units, live processes, totals), like
 * `top`; --json for scripts and tests, --watch to refresh every second. It reads a private
 * copy of the segment and trusts nothing in it, so a corrupt segment cannot crash it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "scheduler/shm_layout.h"

static const char *path_names[ACC_PATH_COUNT] = { "inline", "split", "batch", "gpu" };

typedef struct snapshot {
    char name[ACC_SHM_NAME_MAX + 1];
    int exists;              /* a segment file is there */
    const char *error;       /* why it cannot be used (NULL: fine, or absent) */
    acc_shm_table *t;        /* private copy, valid when exists && !error */
} snapshot;

/* Read the whole segment into private memory: a concurrent truncation then gives a short
 * read, not a SIGBUS, and nothing changes under our checks. */
static void take_snapshot(snapshot *s)
{
    s->exists = 0;
    s->error = NULL;
    if (acc_shm_name(s->name, sizeof(s->name)) != 0) {
        snprintf(s->name, sizeof(s->name), "%s", "(invalid ACCELAES_SHM_NAME)");
        s->error = "invalid ACCELAES_SHM_NAME";
        return;
    }
    int fd = shm_open(s->name, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) {
        if (errno != ENOENT) {
            s->exists = 1;
            s->error = errno == ELOOP ? "the segment is a symlink" : "cannot open the segment";
        }
        return;
    }
    s->exists = 1;
    if (acc_shm_check_fd(fd, &s->error) == 0) {
        size_t got = 0, want = sizeof(acc_shm_table);
        while (got < want) {
            ssize_t n = pread(fd, (char *)s->t + got, want - got, (off_t)got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != want)
            s->error = "the segment changed size while being read";
        else
            acc_shm_check_header(s->t, &s->error);
    }
    close(fd);
}

static void json_str(const char *str, size_t max)
{
    putchar('"');
    for (size_t i = 0; i < max && str[i] != '\0'; i++) {
        unsigned char c = (unsigned char)str[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);   /* bytes from the segment are not trusted to be UTF-8 */
        else
            putchar(c);
    }
    putchar('"');
}

static const char *kind_name(uint32_t k)
{
    return k == ACC_UNIT_CPU ? "cpu" : k == ACC_UNIT_GPU ? "gpu" : "unknown";
}

static const char *state_name(uint32_t s)
{
    return s == ACC_UNIT_IDLE ? "idle" : s == ACC_UNIT_BUSY ? "busy" : "unknown";
}

static void print_json(const snapshot *s)
{
    const acc_shm_table *t = s->t;
    int ok = s->exists && s->error == NULL;
    printf("{\"shared\": %s, \"segment\": ", ok ? "true" : "false");
    json_str(s->name, sizeof(s->name));
    printf(", \"exists\": %s, \"now_ns\": %llu", s->exists ? "true" : "false",
           (unsigned long long)acc_now_ns());   /* the clock of since_ns, to compute ages */
    if (s->error != NULL) {
        printf(", \"error\": ");
        json_str(s->error, 200);
    }
    printf(", \"units\": [");
    uint32_t n = ok ? acc_shm_nunits(t) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const acc_shm_unit *u = &t->units[i];
        printf("%s{\"id\": %u, \"kind\": \"%s\", \"cpu\": %d, \"node\": %d, \"state\": \"%s\", "
               "\"owner_pid\": %d, \"owner_tid\": %d, \"owner_alive\": %s, \"since_ns\": %llu, "
               "\"bytes\": %llu, \"requests\": %llu, \"recoveries\": %llu, \"device\": ",
               i ? ", " : "", i, kind_name(u->kind), u->cpu, u->node, state_name(u->state),
               u->owner_pid, u->owner_tid, acc_tid_alive(u->owner_pid, u->owner_tid) ? "true" : "false",
               (unsigned long long)u->since_ns, (unsigned long long)u->bytes,
               (unsigned long long)u->requests, (unsigned long long)u->recoveries);
        json_str(u->devname, sizeof(u->devname));
        printf("}");
    }
    printf("], \"processes\": [");
    int first = 1;
    for (uint32_t i = 0; ok && i < ACC_SHM_MAX_PROCS; i++) {
        const acc_shm_proc *p = &t->procs[i];
        if (p->pid <= 0)
            continue;
        printf("%s{\"pid\": %d, \"alive\": %s", first ? "" : ", ", p->pid,
               acc_pid_alive(p->pid, p->start_time) ? "true" : "false");
        for (int k = 0; k < ACC_PATH_COUNT; k++)
            printf(", \"%s_bytes\": %llu, \"%s_requests\": %llu", path_names[k],
                   (unsigned long long)p->bytes[k], path_names[k], (unsigned long long)p->requests[k]);
        printf(", \"waits\": %llu, \"recoveries\": %llu, \"gpu_fallbacks\": %llu}",
               (unsigned long long)p->events[ACC_EV_WAIT], (unsigned long long)p->events[ACC_EV_RECOVERY],
               (unsigned long long)p->events[ACC_EV_GPU_FALLBACK]);
        first = 0;
    }
    printf("], \"waiters\": [");
    first = 1;
    for (uint32_t i = 0; ok && i < ACC_SHM_MAX_WAITERS; i++) {
        const acc_shm_waiter *w = &t->waiters[i];
        if (w->state != ACC_WAITER_WAITING)
            continue;
        printf("%s{\"ticket\": %llu, \"pid\": %d, \"tid\": %d, \"kind\": \"%s\", \"alive\": %s}",
               first ? "" : ", ", (unsigned long long)w->ticket, w->pid, w->tid, kind_name(w->kind),
               acc_tid_alive(w->pid, w->tid) ? "true" : "false");
        first = 0;
    }
    printf("], \"totals\": {");
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        printf("%s\"%s_bytes\": %llu, \"%s_requests\": %llu", k ? ", " : "", path_names[k],
               ok ? (unsigned long long)t->hdr.bytes[k] : 0ULL, path_names[k],
               ok ? (unsigned long long)t->hdr.requests[k] : 0ULL);
    printf(", \"waits\": %llu, \"recoveries\": %llu, \"gpu_fallbacks\": %llu}}\n",
           ok ? (unsigned long long)t->hdr.events[ACC_EV_WAIT] : 0ULL,
           ok ? (unsigned long long)t->hdr.events[ACC_EV_RECOVERY] : 0ULL,
           ok ? (unsigned long long)t->hdr.events[ACC_EV_GPU_FALLBACK] : 0ULL);
}

static const char *human(uint64_t v, char *buf, size_t len)
{
    const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double d = (double)v;
    int i = 0;
    while (d >= 1024 && i < 5) {
        d /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)v);
    else
        snprintf(buf, len, "%.1f %s", d, unit[i]);
    return buf;
}

static const char *age(uint64_t since, char *buf, size_t len)
{
    uint64_t now = acc_now_ns();
    if (since == 0 || since > now)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.1fs", (double)(now - since) / 1e9);
    return buf;
}

static void print_text(const snapshot *s)
{
    if (!s->exists) {
        printf("accelaes-stat: no segment %s (no accelaes process has run for this user yet)\n", s->name);
        return;
    }
    if (s->error != NULL) {
        printf("accelaes-stat: segment %s is unusable: %s (processes use private tables)\n", s->name, s->error);
        return;
    }
    const acc_shm_table *t = s->t;
    char b1[32], b2[32];
    uint32_t n = acc_shm_nunits(t);
    printf("segment %s: %u units\n\n", s->name, n);
    printf("%4s %-4s %4s %4s %-5s %8s %8s %10s %12s %10s %5s %s\n", "id", "kind", "cpu", "node", "state",
           "owner", "tid", "since", "bytes", "requests", "recov", "device");
    for (uint32_t i = 0; i < n; i++) {
        const acc_shm_unit *u = &t->units[i];
        char dev[ACC_SHM_DEVNAME + 1];
        size_t k = 0;
        for (; k < ACC_SHM_DEVNAME && u->devname[k] != '\0'; k++)
            dev[k] = (unsigned char)u->devname[k] >= 0x20 && (unsigned char)u->devname[k] < 0x7f ? u->devname[k] : '?';
        dev[k] = '\0';
        const char *st = state_name(u->state);
        if (u->state == ACC_UNIT_BUSY && !acc_tid_alive(u->owner_pid, u->owner_tid))
            st = "dead";   /* BUSY for a dead owner: the next taker recovers it */
        char owner[16] = "-", tid[16] = "-";
        if (u->owner_pid != 0) {
            snprintf(owner, sizeof(owner), "%d", u->owner_pid);
            snprintf(tid, sizeof(tid), "%d", u->owner_tid);
        }
        printf("%4u %-4s %4d %4d %-5s %8s %8s %10s %12s %10llu %5llu %s\n", i, kind_name(u->kind), u->cpu,
               u->node, st, owner, tid, age(u->since_ns, b1, sizeof(b1)),
               human(u->bytes, b2, sizeof(b2)), (unsigned long long)u->requests,
               (unsigned long long)u->recoveries, dev);
    }
    printf("\n%8s %5s", "pid", "alive");
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        printf(" %11s %8s", path_names[k], "req");
    printf(" %6s %5s %6s\n", "waits", "recov", "gpu_fb");
    int exited = 0;
    for (uint32_t i = 0; i < ACC_SHM_MAX_PROCS; i++) {
        const acc_shm_proc *p = &t->procs[i];
        if (p->pid <= 0)
            continue;
        if (!acc_pid_alive(p->pid, p->start_time)) {
            exited++;      /* kept until the slot is needed; --json lists them */
            continue;
        }
        printf("%8d %5s", p->pid, "yes");
        for (int k = 0; k < ACC_PATH_COUNT; k++)
            printf(" %11s %8llu", human(p->bytes[k], b1, sizeof(b1)), (unsigned long long)p->requests[k]);
        printf(" %6llu %5llu %6llu\n", (unsigned long long)p->events[ACC_EV_WAIT],
               (unsigned long long)p->events[ACC_EV_RECOVERY], (unsigned long long)p->events[ACC_EV_GPU_FALLBACK]);
    }
    printf("\n%8s %5s", "totals", "");
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        printf(" %11s %8llu", human(t->hdr.bytes[k], b1, sizeof(b1)), (unsigned long long)t->hdr.requests[k]);
    printf(" %6llu %5llu %6llu\n", (unsigned long long)t->hdr.events[ACC_EV_WAIT],
           (unsigned long long)t->hdr.events[ACC_EV_RECOVERY], (unsigned long long)t->hdr.events[ACC_EV_GPU_FALLBACK]);
    if (exited)
        printf("(%d exited processes not shown; their counts are in the totals, --json lists them)\n", exited);
    int waiting = 0;
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++)
        waiting += t->waiters[i].state == ACC_WAITER_WAITING;
    if (waiting)
        printf("\n%d waiting in the FIFO\n", waiting);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: accelaes-stat [--json] [--watch]\n"
               "  Shows the accelaes unit table of this user (segment /accelaes.<uid>, or\n"
               "  $ACCELAES_SHM_NAME): units, live processes and cumulative totals.\n"
               "  Inline counts of a running thread may lag by up to 64 KiB.\n");
}

int main(int argc, char **argv)
{
    int json = 0, watch = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--watch") == 0)
            watch = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    snapshot s;
    s.t = malloc(sizeof(acc_shm_table));
    if (s.t == NULL) {
        fprintf(stderr, "accelaes-stat: out of memory\n");
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    do {
        take_snapshot(&s);
        if (watch && !json)
            printf("\033[H\033[2J");
        if (json)
            print_json(&s);
        else
            print_text(&s);
        fflush(stdout);
        if (watch && !stop) {
            struct timespec ts = { 1, 0 };
            nanosleep(&ts, NULL);
        }
    } while (watch && !stop);
    free(s.t);
    return 0;
}
