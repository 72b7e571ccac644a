/* fuzz/fuzz_diff.h: the state of one fuzz input (the reader over its bytes, the context pairs and
 * what the harness knows about them), shared by fuzz_diff.c (entry points, init, copy, set-params),
 * fuzz_data.c (update, EVP_Cipher, final) and fuzz_params.c (parameters and state checks). */
#ifndef ACCELAES_FUZZ_DIFF_H
#define ACCELAES_FUZZ_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/params.h>
#include "fuzz/fuzz_side.h"

#define FZ_NSLOTS 3

/* The input, read a field at a time; past its end every field reads as zero. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

unsigned fz_u8(fz_reader *r);
unsigned fz_u16(fz_reader *r);
void fz_take(fz_reader *r, uint8_t *dst, size_t n);

/* A pair of contexts, one per provider, driven in lockstep, and the harness's model of them:
 * enough to rebuild both after a failed call and to keep away from the default provider's
 * undefined behaviour. */
typedef struct fz_slot {
    fz_ctx c[2];               /* [FZ_DEF], [FZ_ACC] */
    int inited;                /* an init with the cipher has succeeded */
    int have_key, have_iv;
    uint8_t key[64], iv[128];  /* the key in the contexts, the IV given at init (GCM: up to 128) */
    size_t ivlen;              /* GCM: the IV length in effect, 0 for the default 12 */
    int gcm;                   /* GCM: the IV state, FZ_IV_* (as the default's iv_state) */
    int enc;                   /* the direction (EVP's ctx->encrypt) */
    size_t buffered;           /* ECB/CBC bytes held back, from the lengths both reported */
    unsigned tls;              /* tls-version in effect, 0 for none */
    size_t tlsms;              /* tls-mac-size in effect */
    int tls_mac;               /* a TLS record was decrypted: the contexts hold a MAC buffer */
} fz_slot;

typedef struct fz_run {
    fz_reader r;
    int raw, inst, cipher, mode;
    size_t keylen;
    int op;                    /* number of the operation running (for messages) */
    const char *opname;
    size_t total;              /* bytes of data so far (a budget keeps executions fast) */
    fz_slot s[FZ_NSLOTS];
    uint8_t *last;             /* the default provider's last output, fed back as input */
    size_t lastlen;
    int def_silent;  /* the default failed without an error (GCM/XTS: accelaes may too) */
    uint8_t tag[16]; /* GCM: the default's last tag got, to be set on a decryption */
} fz_run;

/* GCM IV states: none (an encryption draws a random IV), given, in use by a message, finished */
enum { FZ_IV_UNSET, FZ_IV_BUFFERED, FZ_IV_OPEN, FZ_IV_FINISHED };

/* Print what diverged, with the operation, cipher and layer, and abort (libFuzzer's crash). */
void fz_diverge(const fz_run *R, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Both contexts of the slot made again (after a failed call) from the model. */
void fz_resync(fz_run *R, fz_slot *s);
/* The two verdicts on one call; 1 when both succeeded (both failing rebuilds the pair). */
int fz_verdicts(fz_run *R, fz_slot *s, int ok_d, int ok_a, unsigned long err_a);
/* A call only accelaes got: it must have refused it, with a reason; the pair is rebuilt. */
void fz_refused(fz_run *R, fz_slot *s, int ok_a, const char *what);
fz_slot *fz_pick_slot(fz_run *R);
/* The default provider's output, kept to be fed back as the next input. */
void fz_keep_last(fz_run *R, const uint8_t *out, size_t n);
extern int fz_selftest;
/* FUZZ_DIFF_TRACE=1: one line per operation on stderr, to read a crashing input. */
extern int fz_tracing;
void fz_trace(const fz_run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- fuzz_data.c ---- */
void fz_op_data(fz_run *R, int is_cipher);    /* Update (0) or EVP_Cipher (1) */
void fz_op_final(fz_run *R);
/* One update on every pair, accelaes's inside ASYNC jobs (multi-buffer batching). */
void fz_op_async(fz_run *R);
/* Bytes of a data call: 1 the last output, 2 from the input, 3 zeros, else a PRNG from seed. */
void fz_fill(fz_run *R, uint8_t *dst, size_t n, unsigned src, unsigned seed);

/* ---- fuzz_aead.c ---- */
/* GCM: set the IV length, AAD (update with out NULL), tag get, tag set. */
void fz_op_aead(fz_run *R);
/* The IV length of the slot's contexts (GCM's in effect, else 16). */
size_t fz_ivlen(const fz_run *R, const fz_slot *s);
/* A GCM encryption with no IV: each provider draws its own random IV, so only verdicts and lengths
 * can be compared, and the pair is rebuilt afterwards. */
int fz_gcm_random_iv(const fz_run *R, const fz_slot *s);
/* After a successful data call of n bytes (final: n = SIZE_MAX): the model's GCM IV state. */
void fz_gcm_advance(const fz_run *R, fz_slot *s, size_t n);

/* ---- fuzz_params.c ---- */
#define FZ_MAXPARAMS 4
typedef struct fz_params {
    OSSL_PARAM p[FZ_MAXPARAMS + 1];
    union {
        uint64_t u64;
        uint32_t u32;
        int64_t i64;
        int32_t i32;
        double d;
        unsigned char b[32];
        char s[32];
        void *ptr;
    } v[FZ_MAXPARAMS];
} fz_params;

/* Hostile settable parameters read from the input. */
void fz_params_build(fz_reader *r, fz_params *ps);
/* 1 where the default provider would take the list and then misbehave, or where accelaes is
 * documented to be stricter: accelaes alone gets it and must refuse. */
int fz_params_acc_only(const fz_run *R, const OSSL_PARAM *p);
/* Record the TLS settings of a list both providers accepted. */
void fz_params_apply(const fz_run *R, fz_slot *s, const OSSL_PARAM *p);
int fz_tls_version_known(unsigned v);
/* Get-params: a random request to both sides, compared. */
void fz_op_get_params(fz_run *R, fz_slot *s);
/* The updated IV and num of both sides, compared (after every successful data call). */
void fz_check_state(fz_run *R, fz_slot *s);
/* A copy of the slot's accelaes context holds the same state and its own TLS MAC. */
void fz_check_copy(fz_run *R, fz_slot *s, fz_ctx *copy);
/* After a TLS record was decrypted in place: both sides' tls-mac, compared where the record's
 * padding was good (with bad padding each provider hands out a random MAC). */
void fz_check_tls_mac(fz_run *R, fz_slot *s, const uint8_t *rec, size_t len);

#endif
