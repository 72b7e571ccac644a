/* tools/stat_print.c: accelaes-stat's output: one table (a private, checked copy) as JSON or as
 * text. Liveness is asked of the kernel here, never taken from the table. Unit kinds, paths and
 * events are printed from scheduler/tables.c's tables: a new backend's appear with no change here. */
#define _GNU_SOURCE
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tools/stat.h"

/* "nobody (uid 65534)", or "uid 3000000000" for a uid without a passwd entry. */
const char *stat_who(uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(uid);
    if (pw != NULL)
        snprintf(buf, len, "%s (uid %u)", pw->pw_name, (unsigned)uid);
    else
        snprintf(buf, len, "uid %u", (unsigned)uid);
    return buf;
}

static void json_str(FILE *out, const char *str, size_t max)
{
    fputc('"', out);
    for (size_t i = 0; i < max && str[i] != '\0'; i++) {
        unsigned char c = (unsigned char)str[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(out, "\\u%04x", c);   /* bytes from the segment are not trusted to be UTF-8 */
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static const char *state_name(uint32_t s)
{
    return s == ACC_UNIT_IDLE ? "idle" : s == ACC_UNIT_BUSY ? "busy" : "unknown";
}

/* Liveness comes from kill/tgkill with signal 0 and /proc/<pid>/stat (acc_pid_alive): neither
 * sleeps on the target process (unlike /proc/<pid>/cmdline, which takes its mmap lock). */
static void json_units(FILE *out, const acc_shm_table *t)
{
    uint32_t n = acc_shm_nunits(t);
    for (uint32_t i = 0; i < n; i++) {
        const acc_shm_unit *u = &t->units[i];
        fprintf(out,
                "%s{\"id\": %u, \"kind\": \"%s\", \"cpu\": %d, \"node\": %d, \"state\": \"%s\", "
                "\"owner_pid\": %d, \"owner_tid\": %d, \"owner_alive\": %s, \"since_ns\": %llu, "
                "\"bytes\": %llu, \"requests\": %llu, \"recoveries\": %llu, \"device\": ",
                i ? ", " : "", i, acc_unit_kind_name(u->kind), u->cpu, u->node, state_name(u->state), u->owner_pid,
                u->owner_tid, acc_owner_alive(u->lock, u->owner_start) ? "true" : "false",
                (unsigned long long)u->since_ns, (unsigned long long)u->bytes, (unsigned long long)u->requests,
                (unsigned long long)u->recoveries);
        json_str(out, u->devname, sizeof(u->devname));
        fputc('}', out);
    }
}

/* A process's counts and the totals have the same keys; this closes the object. */
static void json_counts(FILE *out, const char *sep, const uint64_t *bytes, const uint64_t *requests,
                        const uint64_t *events)
{
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        fprintf(out, "%s\"%s_bytes\": %llu, \"%s_requests\": %llu", k ? ", " : sep, acc_path_names[k],
                (unsigned long long)bytes[k], acc_path_names[k], (unsigned long long)requests[k]);
    for (int e = 0; e < ACC_EV_COUNT; e++)
        fprintf(out, ", \"%s\": %llu", acc_events[e].json, (unsigned long long)events[e]);
    fputc('}', out);
}

static void json_procs(FILE *out, const acc_shm_table *t)
{
    int first = 1;
    for (uint32_t i = 0; i < ACC_SHM_MAX_PROCS; i++) {
        const acc_shm_proc *p = &t->procs[i];
        if (p->pid <= 0)
            continue;
        fprintf(out, "%s{\"pid\": %d, \"alive\": %s", first ? "" : ", ", p->pid,
                acc_pid_alive(p->pid, p->start_time) ? "true" : "false");
        json_counts(out, ", ", p->bytes, p->requests, p->events);
        first = 0;
    }
}

static void json_waiters(FILE *out, const acc_shm_table *t)
{
    int first = 1;
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++) {
        const acc_shm_waiter *w = &t->waiters[i];
        if (w->state != ACC_WAITER_WAITING)
            continue;
        fprintf(out, "%s{\"ticket\": %llu, \"pid\": %d, \"tid\": %d, \"kind\": \"%s\", \"alive\": %s}",
                first ? "" : ", ", (unsigned long long)w->ticket, w->pid, w->tid, acc_unit_kind_name(w->kind),
                acc_tid_alive(w->pid, w->tid) ? "true" : "false");
        first = 0;
    }
}

/* One table as a JSON object (no newline). One that was not read (absent included) has an "error" and null units,
 * processes, waiters and totals: a consumer that adds up totals fails there instead of adding zeros. */
void stat_print_json(FILE *out, const snapshot *s)
{
    const acc_shm_table *t = s->t;
    int ok = s->refused == READ_OK;
    struct passwd *pw = getpwuid(s->uid);
    fprintf(out, "{\"shared\": %s, \"segment\": ", ok ? "true" : "false");
    json_str(out, s->name, sizeof(s->name));
    fprintf(out, ", \"uid\": %u, \"user\": ", (unsigned)s->uid);
    if (pw != NULL)
        json_str(out, pw->pw_name, 256);
    else
        fputs("null", out);
    fprintf(out, ", \"exists\": %s, \"now_ns\": %llu", s->exists ? "true" : "false",
            (unsigned long long)acc_now_ns());   /* the clock of since_ns, to compute ages */
    if (s->error != NULL) {
        fprintf(out, ", \"error\": ");
        json_str(out, s->error, 200);
    }
    if (!ok) {
        fputs(", \"units\": null, \"processes\": null, \"waiters\": null, \"totals\": null}", out);
        return;
    }
    fprintf(out, ", \"units\": [");
    json_units(out, t);
    fprintf(out, "], \"processes\": [");
    json_procs(out, t);
    fprintf(out, "], \"waiters\": [");
    json_waiters(out, t);
    fprintf(out, "], \"totals\": {");
    json_counts(out, "", t->hdr.bytes, t->hdr.requests, t->hdr.events);
    fputc('}', out);
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

static void text_units(FILE *out, const acc_shm_table *t)
{
    char b1[32], b2[32];
    fprintf(out, "%4s %-4s %4s %4s %-5s %8s %8s %10s %12s %10s %5s %s\n", "id", "kind", "cpu", "node",
            "state", "owner", "tid", "since", "bytes", "requests", "recov", "device");
    for (uint32_t i = 0, n = acc_shm_nunits(t); i < n; i++) {
        const acc_shm_unit *u = &t->units[i];
        char dev[ACC_SHM_DEVNAME + 1];
        size_t k = 0;
        for (; k < ACC_SHM_DEVNAME && u->devname[k] != '\0'; k++)
            dev[k] = (unsigned char)u->devname[k] >= 0x20 && (unsigned char)u->devname[k] < 0x7f ? u->devname[k] : '?';
        dev[k] = '\0';
        const char *st = state_name(u->state);
        if (u->state == ACC_UNIT_BUSY && !acc_owner_alive(u->lock, u->owner_start))
            st = "dead";   /* BUSY for a dead owner: the next taker recovers it */
        char owner[16] = "-", tid[16] = "-";
        if (u->owner_pid != 0) {
            snprintf(owner, sizeof(owner), "%d", u->owner_pid);
            snprintf(tid, sizeof(tid), "%d", u->owner_tid);
        }
        fprintf(out, "%4u %-4s %4d %4d %-5s %8s %8s %10s %12s %10llu %5llu %s\n", i, acc_unit_kind_name(u->kind),
                u->cpu, u->node, st, owner, tid, age(u->since_ns, b1, sizeof(b1)), human(u->bytes, b2, sizeof(b2)),
                (unsigned long long)u->requests, (unsigned long long)u->recoveries, dev);
    }
}

static void text_counts(FILE *out, const uint64_t *bytes, const uint64_t *requests, const uint64_t *events)
{
    char b[32];
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        fprintf(out, " %11s %8llu", human(bytes[k], b, sizeof(b)), (unsigned long long)requests[k]);
    for (int e = 0; e < ACC_EV_COUNT; e++) {
        if (acc_events[e].bytes)
            fprintf(out, " %*s", acc_events[e].width, human(events[e], b, sizeof(b)));
        else
            fprintf(out, " %*llu", acc_events[e].width, (unsigned long long)events[e]);
    }
    fputc('\n', out);
}

static void text_procs(FILE *out, const acc_shm_table *t)
{
    fprintf(out, "\n%8s %5s", "pid", "alive");
    for (int k = 0; k < ACC_PATH_COUNT; k++)
        fprintf(out, " %11s %8s", acc_path_names[k], "req");
    for (int e = 0; e < ACC_EV_COUNT; e++)
        fprintf(out, " %*s", acc_events[e].width, acc_events[e].column);
    fputc('\n', out);
    int exited = 0, waiting = 0;
    for (uint32_t i = 0; i < ACC_SHM_MAX_PROCS; i++) {
        const acc_shm_proc *p = &t->procs[i];
        if (p->pid <= 0)
            continue;
        if (!acc_pid_alive(p->pid, p->start_time)) {
            exited++;      /* kept until the slot is needed; --json lists them */
            continue;
        }
        fprintf(out, "%8d %5s", p->pid, "yes");
        text_counts(out, p->bytes, p->requests, p->events);
    }
    fprintf(out, "\n%8s %5s", "totals", "");
    text_counts(out, t->hdr.bytes, t->hdr.requests, t->hdr.events);
    if (exited)
        fprintf(out, "(%d exited processes not shown; their counts are in the totals, --json lists them)\n", exited);
    for (uint32_t i = 0; i < ACC_SHM_MAX_WAITERS; i++)
        waiting += t->waiters[i].state == ACC_WAITER_WAITING;
    if (waiting)
        fprintf(out, "\n%d waiting in the FIFO\n", waiting);
}

void stat_print_text(FILE *out, const snapshot *s)
{
    char user[320];
    if (s->refused == ABSENT)
        fprintf(out, "accelaes-stat: segment %s: %s\n", s->name, s->error);
    else if (s->refused == UNUSABLE)
        fprintf(out, "accelaes-stat: segment %s is unusable: %s (its processes use private tables)\n", s->name,
                s->error);
    else if (s->refused != READ_OK)
        fprintf(out, "accelaes-stat: cannot read segment %s: %s\n", s->name, s->error);
    else {
        fprintf(out, "segment %s of %s: %u units\n\n", s->name, stat_who(s->uid, user, sizeof(user)),
                acc_shm_nunits(s->t));
        text_units(out, s->t);
        text_procs(out, s->t);
    }
}

