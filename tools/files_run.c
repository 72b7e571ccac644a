/* tools/files_run.c: accelaes-files' workers: the files dealt to one queue per thread, and each thread's loop: one
 * file at a time, or (CBC encryption) many files in flight whose updates run in OpenSSL ASYNC jobs, so that the
 * provider gathers them into its multi-buffer lanes. Also what becomes of hidden temporaries: their names, the stale
 * ones of killed runs, and the reaper threads that unlink replaced outputs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <openssl/async.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include "tools/files.h"

/* ---- temporaries: names, and the stale ones of killed runs ---- */

#define TMP_MARK ".accelaes-tmp."

char *files_tmp_name(struct slot *s)
{
    char *t;

    if (asprintf(&t, ".%.160s" TMP_MARK "%ld.%u", s->job->name, (long)s->run->pid,
                 atomic_fetch_add(&s->run->tmp_seq, 1)) < 0)
        return errno = ENOMEM, NULL;
    return t;
}

/* The pid in a temporary's name, or 0 when the name is not one of ours. */
static long tmp_pid(const char *name)
{
    const char *m = name[0] == '.' ? strstr(name + 1, TMP_MARK) : NULL;
    long pid = 0;
    unsigned seq;
    int end = 0;

    for (const char *next; m != NULL && (next = strstr(m + 1, TMP_MARK)) != NULL;)
        m = next; /* the last mark: the final name may hold one too */
    if (m == NULL || sscanf(m + strlen(TMP_MARK), "%ld.%u%n", &pid, &seq, &end) != 2 || m[strlen(TMP_MARK) + end])
        return 0;
    return pid > 0 ? pid : 0;
}

/* Called by the walk before any file is opened, so a temporary with this run's pid is stale too (a reused pid). A
 * live pid is another run writing this directory now: its temporaries are left alone (a run in another pid
 * namespace looks dead from here: do not share an OUT_DIR across containers). Complete outputs that a kill caught
 * between link and swap go the same way (the next run writes them again from their inputs), and so do replaced
 * outputs that a kill caught before their reaper unlinked them. */
void files_remove_stale(struct run *r, int out, const char *rel)
{
    int fd = fcntl(out, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    long pid;

    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d)) != NULL)
        if ((pid = tmp_pid(e->d_name)) > 0 && (pid == (long)getpid() || (kill((pid_t)pid, 0) < 0 && errno == ESRCH)))
            if (unlinkat(fd, e->d_name, 0) < 0 && errno != ENOENT) {
                char *path = files_join(r->out_dir, rel), *p = path ? files_join(path, e->d_name) : NULL;

                files_report(r, p ? p : e->d_name, "cannot remove a stale temporary", strerror(errno));
                free(path), free(p);
            }
    closedir(d);
}

/* ---- replaced outputs, unlinked off the workers' path ---- */

struct reap {
    struct reap *next;
    int fd;     /* the output directory's descriptor, held for the run */
    size_t dir; /* for the message */
    char *name;
};

static void reap_one(struct run *r, int fd, size_t dir, char *name)
{
    if (unlinkat(fd, name, 0) < 0 && errno != ENOENT) {
        char *path = files_join(r->out_dir, r->dirs[dir].rel), *p = path ? files_join(path, name) : NULL;
        int err = errno;

        files_report(r, p ? p : name, "cannot remove the output it replaced", strerror(err));
        atomic_store(&r->failed, 1);
        free(path), free(p);
    }
    free(name);
}

static void *reaper_main(void *arg)
{
    struct run *r = arg;
    struct reap *e;

    pthread_mutex_lock(&r->reap_lock);
    for (;;) {
        while (r->reap_head == NULL && !r->reap_stop)
            pthread_cond_wait(&r->reap_cond, &r->reap_lock);
        if ((e = r->reap_head) == NULL)
            break; /* stopping, and nothing left */
        if ((r->reap_head = e->next) == NULL)
            r->reap_tail = &r->reap_head;
        pthread_mutex_unlock(&r->reap_lock);
        reap_one(r, e->fd, e->dir, e->name);
        free(e);
        pthread_mutex_lock(&r->reap_lock);
    }
    pthread_mutex_unlock(&r->reap_lock);
    return NULL;
}

void files_reap(struct slot *s, char *tmp)
{
    struct run *r = s->run;
    struct reap *e = s->own_dirs ? NULL : malloc(sizeof(*e)); /* a reopened directory closes with the file */
    int queued = 0;

    if (e != NULL) {
        *e = (struct reap){ .fd = s->dout, .dir = s->job->dir, .name = tmp };
        pthread_mutex_lock(&r->reap_lock);
        while (r->nreapers < REAPERS && pthread_create(&r->reapers[r->nreapers], NULL, reaper_main, r) == 0)
            r->nreapers++;
        if (r->nreapers > 0) {
            *r->reap_tail = e;
            r->reap_tail = &e->next;
            pthread_cond_signal(&r->reap_cond);
            queued = 1;
        }
        pthread_mutex_unlock(&r->reap_lock);
    }
    if (!queued) { /* no reaper: here */
        free(e);
        reap_one(r, s->dout, s->job->dir, tmp);
    }
}

/* Waits for the reapers to unlink every replaced output. */
static void reap_finish(struct run *r)
{
    pthread_mutex_lock(&r->reap_lock);
    r->reap_stop = 1;
    pthread_cond_broadcast(&r->reap_cond);
    pthread_mutex_unlock(&r->reap_lock);
    for (int i = 0; i < r->nreapers; i++)
        pthread_join(r->reapers[i], NULL);
}

/* ---- the workers ---- */

/* The index of the worker's next file: its own queue's front, else the back of the fullest other queue. */
static int next_file(struct worker *w, size_t *i)
{
    struct run *r = w->run;
    struct queue *q = &r->queues[w->id], *from = NULL;

    pthread_mutex_lock(&r->take_lock);
    if (q->head < q->tail) {
        *i = q->idx[q->head++];
        from = q;
    } else {
        for (int t = 0; t < r->nqueues; t++) {
            struct queue *v = &r->queues[t];

            if (v->tail > v->head && (from == NULL || v->tail - v->head > from->tail - from->head))
                from = v;
        }
        if (from != NULL)
            *i = from->idx[--from->tail];
    }
    pthread_mutex_unlock(&r->take_lock);
    return from != NULL;
}

/* The next file that opens into slot s; 0 when none is left. A file that fails to open is reported and counted. */
static int take_file(struct worker *w, struct slot *s)
{
    struct run *r = w->run;
    size_t i;

    while (next_file(w, &i)) {
        if (files_open(s, &r->jobs[i]))
            return 1;
        atomic_store(&r->failed, 1);
        atomic_fetch_add(&r->done, 1);
    }
    return 0;
}

static void file_done(struct slot *s)
{
    if (!files_finish(s))
        atomic_store(&s->run->failed, 1);
    atomic_fetch_add(&s->run->done, 1);
}

enum { SLOT_IDLE, SLOT_READY, SLOT_PAUSED };

static int transform_job(void *arg)
{
    return files_transform(*(struct slot **)arg);
}

/* Starts or resumes the job transforming slot s's piece. Returns 1 while the job is paused (its update waits in
 * the provider's batch), 0 once the piece is done; a file that failed is finished (reported) here, at once, so that
 * the reason on the thread's error queue is its own. */
static int run_transform(struct slot *s)
{
    int fresh = s->state != SLOT_PAUSED, ret = 0;

    switch (ASYNC_start_job(&s->ajob, s->wctx, &ret, transform_job, &s, sizeof(s))) {
    case ASYNC_PAUSE:
        s->state = SLOT_PAUSED;
        return 1;
    case ASYNC_FINISH:
        break;
    default: /* ASYNC_ERR, ASYNC_NO_JOBS */
        if (fresh) {
            ERR_clear_error();
            ret = files_transform(s); /* no job could start: this piece runs here, without lanes */
        } else {
            /* A paused job that cannot be resumed: its file is lost, the others go on. */
            s->what = "ASYNC job failed", s->err = 0, s->ssl_err = 1;
            s->ajob = NULL;
            ret = 0;
        }
    }
    s->state = SLOT_IDLE;
    if (!ret)
        file_done(s);
    return 0;
}

/* Many files in flight on this thread, in rounds: first the I/O of every file (write the piece transformed last
 * round, read the next; a file that ends is finished and its slot takes the next file), then every file's cipher
 * update, each in an ASYNC job, one right after another. The provider queues a CBC-encrypt update made inside a
 * job and pauses the job (provider/route/batch.c), so the round's updates meet in its multi-buffer lanes: the queue runs
 * when it is full, or when a resumed job finds that nobody joined since it paused, which is what resuming the
 * paused jobs in turn does once all have been started. The I/O stays outside the jobs, so that a job runs the EVP
 * update alone (OpenSSL 3.0 gives a job a 32 KiB stack) and so that the updates are not spread out by reads and
 * writes in between, which let the provider's batch wait run out (slower: bench/results/files-async.md).
 * Every pause of the batch may be resumed at once (its wait fd is always readable), so the thread polls instead of
 * sleeping in select, as `openssl speed -async_jobs` does. */
static void worker_async(struct worker *w)
{
    int more = 1;

    for (;;) {
        int ready = 0, paused = 0;

        for (int i = 0; i < w->nslots; i++) {
            struct slot *s = &w->slots[i];

            while (s->job != NULL || (more && (more = take_file(w, s)))) {
                if (files_advance(s)) {
                    s->state = SLOT_READY;
                    ready++;
                    break;
                }
                file_done(s);
            }
        }
        if (ready == 0)
            break; /* every slot is empty and no file is left */
        for (int i = 0; i < w->nslots; i++)
            if (w->slots[i].state == SLOT_READY)
                paused += run_transform(&w->slots[i]);
        while (paused > 0) {
            paused = 0;
            for (int i = 0; i < w->nslots; i++)
                if (w->slots[i].state == SLOT_PAUSED)
                    paused += run_transform(&w->slots[i]);
        }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    if (w->nslots > 1 && ASYNC_init_thread((size_t)w->nslots, (size_t)w->nslots)) {
        worker_async(w);
        ASYNC_cleanup_thread();
        return NULL;
    }
    /* One file at a time (--no-async, or no ASYNC support here). */
    while (take_file(w, &w->slots[0])) {
        (void)files_stream(&w->slots[0]);
        file_done(&w->slots[0]);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A worker's slots, with their cipher contexts, wait contexts and buffers (one allocation). 0, or -1 when out of
 * memory. */
static int worker_setup(struct worker *w, struct run *r, int nslots)
{
    size_t per = (r->enc ? 1 : 2) * r->piece + 2 * IVLEN;

    w->run = r;
    w->slots = calloc((size_t)nslots, sizeof(*w->slots));
    w->mem = malloc((size_t)nslots * per);
    if (w->slots == NULL || w->mem == NULL)
        return -1;
    w->memlen = (size_t)nslots * per;
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &w->slots[i];

        w->nslots = i + 1;
        s->run = r;
        s->in = s->out = s->din = s->dout = -1;
        s->buf = w->mem + (size_t)i * per;
        s->tail = s->buf + r->piece;
        s->out_buf = r->enc ? s->buf : s->tail + 2 * IVLEN;
        s->ctx = EVP_CIPHER_CTX_new();
        s->wctx = nslots > 1 ? ASYNC_WAIT_CTX_new() : NULL;
        if (s->ctx == NULL || (nslots > 1 && s->wctx == NULL))
            return -1;
    }
    return 0;
}

static void worker_teardown(struct worker *w)
{
    for (int i = 0; w->slots != NULL && i < w->nslots; i++) {
        EVP_CIPHER_CTX_free(w->slots[i].ctx);
        ASYNC_WAIT_CTX_free(w->slots[i].wctx); /* closes the provider's wait fd */
    }
    if (w->mem != NULL)
        OPENSSL_cleanse(w->mem, w->memlen); /* plaintext of the last pieces */
    free(w->mem);
    free(w->slots);
}

/* Makes room for `need` descriptors now, while this process has one thread. Growing the descriptor table of a
 * process with several threads waits for an RCU grace period (the kernel's expand_fdtable) each time it doubles, a
 * stall on the scale of a whole run (bench/results/files-async.md). The table never shrinks, so one descriptor
 * placed high and closed again is enough. Returns how many descriptors the limit (RLIMIT_NOFILE) allows. */
static long reserve_fds(long need)
{
    struct rlimit rl;
    long room = 1024;
    int fd, probe;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        room = (long)rl.rlim_cur;
    if (need >= room)
        need = room - 1;
    probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (probe >= 0) {
        if ((fd = fcntl(probe, F_DUPFD_CLOEXEC, (int)need)) >= 0)
            close(fd);
        close(probe);
    }
    return room;
}

/* Deals the files (sorted largest first) to one queue per worker in snake order, 0 1 1 0 0 1 ...: each worker
 * starts with the largest files it will stream, and the queues' byte totals stay within one file of each other, so
 * the workers' in-flight files (which cannot move to another thread) are balanced from the start. 0, or -1 when out
 * of memory. */
static int deal(struct run *r, int nthreads)
{
    size_t per = r->njobs / (size_t)nthreads + 1;

    r->queues = calloc((size_t)nthreads, sizeof(*r->queues));
    r->queued = malloc((size_t)nthreads * per * sizeof(*r->queued));
    if (r->queues == NULL || r->queued == NULL)
        return -1;
    r->nqueues = nthreads;
    for (int t = 0; t < nthreads; t++)
        r->queues[t].idx = r->queued + (size_t)t * per;
    for (size_t i = 0; i < r->njobs; i++) {
        size_t pos = i % (size_t)nthreads;
        struct queue *q = &r->queues[(i / (size_t)nthreads) % 2 ? (size_t)nthreads - 1 - pos : pos];

        q->idx[q->tail++] = i;
    }
    return 0;
}

/* ---- the run ---- */

/* Runs the jobs on nthreads workers; the calling thread draws the progress line meanwhile. */
int files_run(struct run *r, int nthreads)
{
    struct worker *w = calloc((size_t)nthreads, sizeof(*w));
    int started = 0, ret = 0, nslots = r->inflight;
    long room, per, base;
    double t0 = now();

    r->pid = getpid();
    pthread_mutex_init(&r->reap_lock, NULL);
    pthread_cond_init(&r->reap_cond, NULL);
    r->reap_tail = &r->reap_head;
    if (w == NULL || deal(r, nthreads) < 0) {
        fprintf(stderr, "accelaes-files: out of memory\n");
        free(w);
        return -1;
    }
    if ((size_t)nslots > (r->njobs + (size_t)nthreads - 1) / (size_t)nthreads) /* a worker's share of the files */
        nslots = (int)((r->njobs + (size_t)nthreads - 1) / (size_t)nthreads);
    /* Each file in flight holds its input, its output and the provider's wait fd, and its two directories where
     * they are not held (past the walk's budget); the held directories two each; the rest of the process keeps a
     * few dozen. Fewer files in flight where the limit is low, rather than files failing with EMFILE. */
    per = r->ndirs > r->held + 1 ? 5 : 3;
    base = 64 + 2L * (long)(r->held + 1);
    room = reserve_fds(per * nthreads * nslots + base);
    if (per * nthreads * nslots + base > room)
        nslots = room > base + per * nthreads ? (int)((room - base) / (per * nthreads)) : 1;
    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        if (worker_setup(&w[i], r, nslots) < 0) {
            fprintf(stderr, "accelaes-files: out of memory for %d threads x %d files in flight\n", nthreads,
                    nslots);
            nthreads = i + 1;
            ret = -1;
            break;
        }
    }
    for (int i = 0; ret == 0 && i < nthreads; i++) {
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0)
            break; /* fewer threads still finish the work */
        started++;
    }
    if (ret == 0 && started == 0)
        worker_main(&w[0]);
    while (ret == 0 && r->progress && atomic_load(&r->done) < r->njobs) {
        struct timespec nap = { 0, 200 * 1000 * 1000 };
        double mb = (double)atomic_load(&r->bytes) / 1e6, dt = now() - t0;

        nanosleep(&nap, NULL);
        pthread_mutex_lock(&r->err_lock);
        fprintf(stderr, "\r\033[K%zu/%zu files, %.1f MB, %.1f MB/s", atomic_load(&r->done), r->njobs, mb,
                dt > 0 ? mb / dt : 0.0);
        pthread_mutex_unlock(&r->err_lock);
    }
    for (int i = 0; i < started; i++)
        pthread_join(w[i].tid, NULL);
    reap_finish(r);
    if (r->progress && ret == 0)
        fprintf(stderr, "\r\033[K%zu files, %.1f MB in %.2f s\n", r->njobs,
                (double)atomic_load(&r->bytes) / 1e6, now() - t0);
    for (int i = 0; i < nthreads; i++)
        worker_teardown(&w[i]);
    free(w);
    return ret;
}

