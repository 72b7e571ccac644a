/* tools/files.h: what the parts of accelaes-files share: the run (cipher, key, job list, queues, counters), the file
 * in flight (a slot), and the per-file steps: open, advance (the I/O), transform (the update), finish. */
#ifndef ACCELAES_TOOLS_FILES_H
#define ACCELAES_TOOLS_FILES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include <openssl/async.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

/* Bytes read per step. One file at a time per thread: 1 MiB (fewer system calls). Many files in flight per thread
 * (ASYNC jobs whose CBC-encrypt updates share the provider's multi-buffer lanes): each holds a piece, encrypted in
 * place; the piece size hardly matters (bench/results/files-*.md), and 64 KiB keeps a thread's 16 pieces
 * within a 1 MiB L2. */
#define PIECE_SYNC (1u << 20)
#define PIECE_ASYNC (64u << 10)
#define IVLEN 16
/* Files in flight per thread with ASYNC jobs: the 16 CBC-encrypt lanes of intel-ipsec-mb on AVX-512 + VAES
 * (accel/mb.h; 8 elsewhere, where the batch simply closes at 8 and the rest waits for the next one). */
#define JOBS_DEFAULT 16
#define JOBS_MAX 64
/* Threads that unlink replaced outputs (files_reap). Most of an unlink's time is the wait for the discard of the old
 * file's blocks (ext4 mounted with -o discard and no journal: synchronous), and those waits overlap across threads
 * (bench/results/files-ext4.md). */
#define REAPERS 4

/* A directory of the tree: IN_DIR/rel and OUT_DIR/rel, reached only through descriptors opened one name at a time
 * with O_NOFOLLOW from the parent's, so that no symbolic link planted below IN_DIR or OUT_DIR is ever followed. */
struct dir {
    char *rel;         /* "" for the top; every job and message names files through it */
    const char *name;  /* its last component, inside rel */
    size_t parent;     /* index in run->dirs; the top (0) is always held */
    int in, out;       /* held for the run, or -1 past the descriptor budget: then each file reopens them */
    atomic_int no_tmpfile; /* this filesystem refused O_TMPFILE: outputs go through hidden temporaries */
};

struct job {
    char *name; /* the file's name in its directory */
    size_t dir; /* index in run->dirs */
    off_t size; /* from the walk's stat: the largest files go first */
};

/* The files dealt to one worker, largest first: the worker takes from the front; a worker whose own are gone takes
 * from the back of the fullest other queue (its smallest files). */
struct queue {
    size_t *idx; /* into run->jobs */
    size_t head, tail;
};

struct run {
    EVP_CIPHER *cipher;
    int enc;
    unsigned char key[EVP_MAX_KEY_LENGTH];
    const char *in_dir, *out_dir;
    int do_fsync, progress;
    struct dir *dirs;
    size_t ndirs, dcap;
    size_t held, hold_max; /* directories whose descriptors are held (2 each), and how many may be */
    int tmpfile;           /* outputs are O_TMPFILE files (0: hidden temporaries everywhere) */
    atomic_int link_proc;  /* linkat through /proc/self/fd: AT_EMPTY_PATH was refused (no CAP_DAC_READ_SEARCH) */
    int inflight; /* files in flight per thread: 1 means no ASYNC jobs */
    size_t piece; /* PIECE_SYNC or PIECE_ASYNC */
    struct job *jobs;
    size_t njobs, cap;
    struct queue *queues; /* one per worker */
    size_t *queued;       /* the queues' entries, one allocation */
    int nqueues;
    pthread_mutex_t take_lock; /* the queues: taken once per file, so a lock costs nothing that shows */
    atomic_size_t done;
    atomic_int failed;
    atomic_ullong bytes;
    atomic_uint tmp_seq;
    pid_t pid; /* for temporary names */
    pthread_mutex_t err_lock; /* stderr lines, so they never interleave with the progress line */
    /* Replaced outputs waiting for their unlink (files_reap): a list the reaper threads empty; they start with the
     * first replaced output and are joined before files_run returns. */
    pthread_mutex_t reap_lock;
    pthread_cond_t reap_cond;
    struct reap *reap_head, **reap_tail;
    int reap_stop, nreapers;
    pthread_t reapers[REAPERS];
};

/* One file in flight: everything its stream needs lives here, not on a stack, so that a thread can take many files
 * in turns and run their updates in ASYNC jobs. */
struct slot {
    struct run *run;
    EVP_CIPHER_CTX *ctx;
    unsigned char *buf;     /* the piece read: run->piece bytes */
    unsigned char *out_buf; /* where updates write: buf itself when encrypting (in place: every update but the last
                             * is whole blocks), a second piece when decrypting (the held-back block shifts it) */
    unsigned char *tail;    /* the final block: 2 * IVLEN bytes */
    unsigned char iv[IVLEN];
    int iv_due;             /* encrypting: the IV is not written yet (it goes in front of the first write) */
    int exists;             /* an output of this name was there when the file was opened */
    const struct job *job;  /* the file, or NULL when the slot is free */
    char *tmp;              /* the hidden temporary's name, where the filesystem has no O_TMPFILE; else NULL */
    int in, out;
    int din, dout, own_dirs; /* its directories' descriptors; own_dirs: reopened for this file, closed with it */
    const char *what; /* what failed in the stream, or NULL */
    int err, ssl_err; /* its errno; whether the reason is on OpenSSL's error queue */
    ASYNC_JOB *ajob;  /* the paused job transforming this file's piece, or NULL */
    ASYNC_WAIT_CTX *wctx;
    size_t n;  /* bytes of the piece in buf, not yet written out (0: none) */
    int outl;  /* of which the transform made this many in out_buf */
    int last;  /* a short piece came: the file ends after it */
    int state; /* the worker's: SLOT_READY (a piece to transform), SLOT_PAUSED (its job waits in the batch) */
};

struct worker {
    struct run *run;
    int id; /* its queue */
    pthread_t tid;
    struct slot *slots;
    int nslots;
    unsigned char *mem; /* every slot's buffers, one allocation */
    size_t memlen;
};

/* Processes every file of r on nthreads threads, with a progress line where r->progress; 0, or -1 when out of
 * memory for the threads (files that fail are counted in r->failed). */
int files_run(struct run *r, int nthreads);
/* One line on stderr: "accelaes-files: PATH: WHAT[: WHY]". */
void files_report(struct run *r, const char *path, const char *what, const char *why);
/* Reads a hex key (whitespace ignored); returns its length, or -1 after saying why on stderr. A key file that group
 * or others may access is refused unless allow_unsafe. */
int files_read_key(const char *file, unsigned char *key, size_t keymax, int allow_unsafe);
/* Loads the provider `name`: OPENSSL_MODULES wins when set; otherwise the module beside this binary (build/), then
 * OpenSSL's MODULESDIR. NULL when it cannot be loaded (the reason on OpenSSL's error queue). */
OSSL_PROVIDER *files_load_provider(const char *name);
/* "a/b", or a copy of a when b is empty; NULL when out of memory. */
char *files_join(const char *a, const char *b);
/* IN_DIR/rel/name for messages (name may be NULL); NULL when out of memory. */
char *files_in_path(const struct run *r, const char *rel, const char *name);
/* files_report of IN_DIR/rel/name. */
void files_report_in(struct run *r, const char *rel, const char *name, const char *what, const char *why);
/* A hidden temporary name for the slot's output in its directory: "." + the name cut so that a long one still fits
 * NAME_MAX, a fixed mark, the pid and a sequence number, so that runs side by side never collide and later runs can
 * tell whose it was (files_remove_stale). Malloc'ed; NULL (ENOMEM) when out of memory. */
char *files_tmp_name(struct slot *s);
/* Removes the temporaries that killed runs left in OUT_DIR/rel (descriptor out): names with the temporary mark whose
 * process is gone. */
void files_remove_stale(struct run *r, int out, const char *rel);
/* Opens the input in its directory and an unnamed output in the matching OUT_DIR directory, writes or reads the IV
 * and sets up the cipher. 1: the slot holds the file, ready to stream; 0: failed, reported, the slot free again. */
int files_open(struct slot *s, const struct job *j);
/* One step of a file: writes the piece transformed last (if any), then reads the next. 1: a piece is ready for
 * files_transform. 0: the file is over, its final block written, or something failed (s->what says what); either
 * way files_finish comes next. */
int files_advance(struct slot *s);
/* The cipher update of the piece read, in out_buf. Runs inside an ASYNC job when the worker batches; 1 done, 0
 * failed (s->what set, the reason on OpenSSL's error queue). */
int files_transform(struct slot *s);
/* The whole file, one piece after another (one file at a time per thread). 1 done, 0 failed. */
int files_stream(struct slot *s);
/* Unlinks the hidden name tmp in the slot's output directory, which holds the output that the slot's file has just
 * replaced: on a reaper thread where the directory's descriptor is held for the run, else here. Takes tmp. A failure
 * is reported and fails the run (the old output would stay under that name until the next run removes it). */
void files_reap(struct slot *s, char *tmp);
/* Gives the complete output its final name (or drops it after a failure, which is reported), closes the input and
 * frees the slot for the next file. 1 done, 0 failed. */
int files_finish(struct slot *s);

#endif
