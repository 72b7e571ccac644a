/* tools/files.h: what the parts of accelaes-files share: the run (cipher, key, job list, counters) and
 * the per-file transform. */
#ifndef ACCELAES_TOOLS_FILES_H
#define ACCELAES_TOOLS_FILES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <openssl/evp.h>

#define PIECE (1u << 20) /* bytes read per step: memory stays bounded at two pieces per thread */
#define IVLEN 16

struct job {
    char *rel; /* path relative to IN_DIR */
};

struct run {
    EVP_CIPHER *cipher;
    int enc;
    unsigned char key[EVP_MAX_KEY_LENGTH];
    const char *in_dir, *out_dir;
    int do_fsync, progress;
    struct job *jobs;
    size_t njobs, cap;
    atomic_size_t next, done;
    atomic_int failed;
    atomic_ullong bytes;
    atomic_uint tmp_seq;
    pthread_mutex_t err_lock; /* stderr lines, so they never interleave with the progress line */
};

struct worker {
    struct run *run;
    pthread_t tid;
    EVP_CIPHER_CTX *ctx;
    unsigned char *inbuf, *outbuf;
};

/* One line on stderr: "accelaes-files: PATH: WHAT[: WHY]". */
void files_report(struct run *r, const char *path, const char *what, const char *why);
/* Reads a hex key (whitespace ignored); returns its length, or -1 after saying why on stderr. */
int files_read_key(const char *file, unsigned char *key, size_t keymax);
/* "a/b", or a copy of a when b is empty; NULL when out of memory. */
char *files_join(const char *a, const char *b);
/* Encrypts or decrypts IN_DIR/rel into OUT_DIR/rel by way of a temporary name; 1 done, 0 failed (reported). */
int files_process(struct worker *w, const struct job *j);

#endif
