/* tests/c/test_cuda_team.c: the CUDA plugin's host team and copy loops (accel/cuda/host_team.cu,
 * plain C, included here so CI without a GPU or nvcc tests it): exact coverage of every task, helpers
 * really used, concurrent callers, inline fallbacks, copy / XOR against a byte loop at all alignments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include "accel/cuda/host_team.cu"
#include "tests/c/test_cuda_common.h"

/* ---- copy and XOR ---- */

static void test_copy_xor(void)
{
    enum { MAXLEN = 2048, GUARD = 64 };
    static uint8_t a[MAXLEN + 128], b[MAXLEN + 128], d[MAXLEN + 128 + 2 * GUARD], want[MAXLEN];
    static const size_t lens[] = { 0, 1, 15, 16, 63, 64, 255, 256, 257, 300, 1000, 1024, 2047, 2048 };
    int bad_copy = 0, bad_xor = 0, bad_guard = 0, bad_inplace = 0;
    RAND_bytes(a, sizeof(a));
    RAND_bytes(b, sizeof(b));
    for (int nt = 0; nt < 2; nt++)
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
            for (size_t da = 0; da < 17; da++)
                for (size_t sa = 0; sa < 17; sa += 3) {
                    size_t len = lens[li];
                    uint8_t *dst = d + GUARD + da;
                    memset(d, 0xa5, sizeof(d));
                    acc_hc_copy(dst, a + sa, len, nt);
                    bad_copy += memcmp(dst, a + sa, len) != 0;
                    for (size_t i = 0; i < len; i++)
                        want[i] = a[sa + i] ^ b[(sa * 5) % 17 + i];
                    memset(d, 0xa5, sizeof(d));
                    acc_hc_xor(dst, a + sa, b + (sa * 5) % 17, len, nt);
                    bad_xor += memcmp(dst, want, len) != 0;
                    for (size_t i = 0; i < GUARD + da; i++)
                        bad_guard += d[i] != 0xa5;
                    for (size_t i = GUARD + da + len; i < sizeof(d); i++)
                        bad_guard += d[i] != 0xa5;
                    /* in place, as CTR does when in == out */
                    memcpy(dst, a + sa, len);
                    acc_hc_xor(dst, dst, b + (sa * 5) % 17, len, nt);
                    bad_inplace += memcmp(dst, want, len) != 0;
                }
    check(!bad_copy, "acc_hc_copy equals memcpy (all lengths, alignments, nt on/off)");
    check(!bad_xor, "acc_hc_xor equals a byte loop");
    check(!bad_guard, "copy / XOR write nothing outside [dst, dst + len)");
    check(!bad_inplace, "acc_hc_xor in place (dst == a)");
}

/* ---- the team ---- */

/* A task records, per 256-byte cell, how often it was covered, and does some real copying so
 * helpers have time to join. */
typedef struct cover {
    size_t total;
    unsigned *hits;     /* per 256-byte cell: pieces start on page boundaries, so cells never straddle */
    int bad_range;      /* a range out of [0, total), empty or not cell-aligned */
    uint8_t *src, *dst;
} cover;

#define CELL 256u

static void cover_fn(void *arg, size_t lo, size_t hi)
{
    cover *c = (cover *)arg;
    if (lo >= hi || hi > c->total || lo % CELL) {
        __atomic_add_fetch(&c->bad_range, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t x = lo / CELL; x < (hi + CELL - 1) / CELL; x++)
        __atomic_add_fetch(&c->hits[x], 1u, __ATOMIC_RELAXED);
    if (c->src)
        acc_hc_copy(c->dst + lo, c->src + lo, hi - lo, (lo / CELL) & 1);
}

static int run_cover(acc_ht *t, size_t total, uint8_t *src, uint8_t *dst)
{
    cover c = { total, NULL, 0, src, dst };
    size_t cells = (total + CELL - 1) / CELL;
    c.hits = (unsigned *)calloc(cells ? cells : 1, sizeof(unsigned));
    if (!c.hits)
        return 0;
    acc_ht_run(t, total, cover_fn, &c);
    int ok = c.bad_range == 0;
    for (size_t x = 0; x < cells; x++)
        ok &= c.hits[x] == 1;
    if (src)
        ok &= memcmp(src, dst, total) == 0;
    free(c.hits);
    return ok;
}

typedef struct caller_arg {
    acc_ht *t;
    int ok, rounds;
    uint8_t *src, *dst;
    size_t len;
} caller_arg;

static void *caller_thread(void *p)
{
    caller_arg *a = (caller_arg *)p;
    for (int r = 0; r < a->rounds; r++)
        a->ok &= run_cover(a->t, a->len - (size_t)r * 4096, a->src, a->dst);
    return NULL;
}

static void test_team(unsigned spin_us)
{
    enum { BIG = 8 << 20 };
    uint8_t *src = (uint8_t *)malloc(BIG), *dst = (uint8_t *)malloc(BIG);
    char what[160];
    if (!src || !dst) {
        check(0, "malloc");
        free(src);
        free(dst);
        return;
    }
    RAND_bytes(src, 1 << 20);
    for (size_t i = 1; i < 8; i++)
        memcpy(src + (i << 20), src, 1 << 20);
    acc_ht t;
    int n = acc_ht_start(&t, 4, spin_us);
    snprintf(what, sizeof(what), "spin %u us: 3 helpers started (got %d)", spin_us, n);
    check(n == 3, what);

    static const size_t sizes[] = { 0, 1, 16, 4096, ACC_HT_MIN_PIECE, ACC_HT_MIN_PIECE + 16, 64u << 10,
                                    (256u << 10) + 48, 1u << 20, (4u << 20) - 16, 4u << 20, 8u << 20 };
    int ok = 1;
    for (int round = 0; round < 40; round++)
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            ok &= run_cover(&t, sizes[i], sizes[i] >= (1u << 20) ? src : NULL, dst);
    snprintf(what, sizeof(what), "spin %u us: every byte of every task done exactly once (0 B to 8 MiB)", spin_us);
    check(ok, what);
    snprintf(what, sizeof(what), "spin %u us: helpers did pieces (%llu)", spin_us,
             (unsigned long long)__atomic_load_n(&t.helped, __ATOMIC_RELAXED));
    check(__atomic_load_n(&t.helped, __ATOMIC_RELAXED) > 0, what);

    /* Two callers at once (two slots): one has the team, the other works alone; both exact. */
    uint8_t *dst2 = (uint8_t *)malloc(BIG);
    caller_arg ca[2] = { { &t, 1, 30, src, dst, 2u << 20 }, { &t, 1, 30, src, dst2, 3u << 20 } };
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2 && dst2; i++)
        started += pthread_create(&th[i], NULL, caller_thread, &ca[i]) == 0;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    snprintf(what, sizeof(what), "spin %u us: two concurrent callers on one team, both exact", spin_us);
    check(dst2 && started == 2 && ca[0].ok && ca[1].ok, what);
    free(dst2);

    acc_ht_stop(&t);
    check(t.nhelp == 0, "stop joins every helper");
    check(run_cover(&t, 1u << 20, src, dst), "a stopped team runs tasks on the caller");
    free(src);
    free(dst);
}

static void test_no_team(void)
{
    check(run_cover(NULL, 3u << 20, NULL, NULL), "no team: the caller does the whole task");
    acc_ht t;
    check(acc_ht_start(&t, 1, 0) == 0, "one thread asked: no helper");
    check(run_cover(&t, 3u << 20, NULL, NULL), "helperless team: the caller does the whole task");
    acc_ht_stop(&t);
}

int main(void)
{
    test_copy_xor();
    test_no_team();
    test_team(0);      /* helpers sleep between tasks: the wake-up path */
    test_team(200);    /* helpers poll between tasks, as in the plugin */
    return check_report();
}
