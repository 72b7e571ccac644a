/* bench/src/mb_lanes.c: does a multi-buffer batch (accel/cpu/mb.c) beat the inline engine
 * (acc_engine_default(), AES-NI/VAES) running the same streams one after another?
 * Prints, per op and size, the median throughput of both and their ratio. Not a test.
 * Build: gcc -O2 -I. -o build/mb_lanes bench/src/mb_lanes.c build/libaccelaes.a -lIPSec_MB -lcrypto -lpthread -fopenmp -lnuma */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "accel/engine.h"
#include "accel/mb.h"

#define STREAMS 16
#define ROUNDS 5

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

typedef struct setup {
    const acc_engine *eng;
    acc_aes_key ks[STREAMS];
    uint8_t iv[STREAMS][16];
    uint8_t *buf[STREAMS];
    acc_req req[STREAMS];
    size_t nblocks;
    int op;
} setup;

static void run_plain(setup *s)
{
    int ok = 1;

    for (int i = 0; i < STREAMS; i++) {
        const acc_aes_key *k = &s->ks[i];
        uint8_t *b = s->buf[i];

        switch (s->op) {
        case ACC_OP_CBC_ENC: ok &= s->eng->cbc_enc(k, b, b, s->nblocks, s->iv[i]); break;
        case ACC_OP_CBC_DEC: ok &= s->eng->cbc_dec(k, b, b, s->nblocks, s->iv[i]); break;
        case ACC_OP_ECB_ENC: ok &= s->eng->ecb_enc(k, b, b, s->nblocks); break;
        case ACC_OP_ECB_DEC: ok &= s->eng->ecb_dec(k, b, b, s->nblocks); break;
        default:             ok &= s->eng->ctr(k, b, b, s->nblocks, s->iv[i]); break;
        }
    }
    if (!ok) {                  /* a time for work that failed means nothing */
        fprintf(stderr, "mb_lanes: the %s engine failed\n", s->eng->name);
        exit(1);
    }
}

static int run_mb(setup *s)
{
    return acc_mb_run(s->req, STREAMS);
}

/* Bytes per second of one way, run for about `secs`. */
static double measure(setup *s, int use_mb, double secs)
{
    double t0 = now_s(), t;
    size_t reps = 0;

    do {
        for (int k = 0; k < 8; k++) {
            if (use_mb) {
                if (!run_mb(s)) {
                    fprintf(stderr, "acc_mb_run failed\n");
                    exit(1);
                }
            } else {
                run_plain(s);
            }
        }
        reps += 8;
        t = now_s() - t0;
    } while (t < secs);
    return (double)reps * STREAMS * s->nblocks * 16 / t;
}

int main(int argc, char **argv)
{
    static const struct { int op; const char *name; } ops[] = {
        { ACC_OP_CBC_ENC, "cbc-enc" }, { ACC_OP_CBC_DEC, "cbc-dec" }, { ACC_OP_ECB_ENC, "ecb-enc" },
        { ACC_OP_ECB_DEC, "ecb-dec" }, { ACC_OP_CTR, "ctr" } };
    static const size_t sizes[] = { 256, 1024, 16384 };
    double secs = argc > 1 ? atof(argv[1]) : 0.1;
    static setup s;
    uint8_t key[16];

    s.eng = acc_engine_default();
    if (s.eng == NULL || !acc_mb_available()) {
        printf("no engine or no intel-ipsec-mb: nothing to compare\n");
        return 0;
    }
    printf("engine %s vs intel-ipsec-mb (%d lanes), %d streams, AES-128, median of %d alternated rounds\n",
           s.eng->name, acc_mb_lanes(), STREAMS, ROUNDS);
    printf("%-8s %7s %12s %12s %7s\n", "op", "bytes", "inline MB/s", "mb MB/s", "mb/inl");
    for (int i = 0; i < STREAMS; i++) {
        for (int j = 0; j < 16; j++)
            key[j] = (uint8_t)(i * 16 + j);
        if (!s.eng->set_key(&s.ks[i], key, 16, 0) || (s.buf[i] = calloc(1, 16384)) == NULL)
            return 1;
    }
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            double a[ROUNDS], b[ROUNDS];

            s.op = ops[o].op;
            s.nblocks = sizes[z] / 16;
            for (int i = 0; i < STREAMS; i++) {
                int ecb = s.op == ACC_OP_ECB_ENC || s.op == ACC_OP_ECB_DEC;

                s.req[i] = (acc_req){ s.op, &s.ks[i], ecb ? NULL : s.iv[i], s.buf[i], s.buf[i], s.nblocks };
            }
            for (int r = 0; r < ROUNDS; r++) {
                a[r] = measure(&s, 0, secs);
                b[r] = measure(&s, 1, secs);
            }
            qsort(a, ROUNDS, sizeof(double), cmp_double);
            qsort(b, ROUNDS, sizeof(double), cmp_double);
            printf("%-8s %7zu %12.0f %12.0f %7.2f\n", ops[o].name, sizes[z], a[ROUNDS / 2] / 1e6,
                   b[ROUNDS / 2] / 1e6, b[ROUNDS / 2] / a[ROUNDS / 2]);
        }
    }
    for (int i = 0; i < STREAMS; i++) {
        s.eng->free_key(&s.ks[i]);
        free(s.buf[i]);
    }
    return 0;
}
