/* tests/c/test_policy.c: the one routing structure and the one request helper, without any
 * provider around them: acc_policy_make's thresholds for each op from the settings, which paths
 * acc_policy_paths names at the sizes around each threshold, acc_iv_at_block against a plain
 * recomputation for every op (CTR across a 128-bit carry), and the GPU ABI's op numbers mapped
 * both ways. Run by tests/unit/test_policy.py. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "accel/engine.h"
#include "accel/gpu_plugin.h"
#include "provider/route/policy.h"

#include "tests/c/check.h"

static acc_settings settings(int backend, size_t split_min, size_t gpu_min)
{
    acc_settings s;

    memset(&s, 0, sizeof(s));
    s.backend = backend;
    s.split_min = split_min;
    s.gpu_min = gpu_min;
    s.shm = -1;
    s.split_min_auto = 0;   /* set by hand, as in openssl.cnf */
    return s;
}

/* Below a threshold its path is not named, from it on it is. */
static void check_edge(const acc_policy *p, acc_op op, size_t at, unsigned path, const char *what)
{
    CHECK(!(acc_policy_paths(p, op, at - 16) & path), "%s: op %d at %zu - 16 names the path", what, op, at);
    CHECK(acc_policy_paths(p, op, at) & path, "%s: op %d at %zu does not name the path", what, op, at);
}

static void test_defaults(void)
{
    acc_settings s = settings(ACC_BACKEND_AUTO, 256 * 1024, 0);
    acc_policy p;

    acc_policy_make(&p, &s);
    for (int op = ACC_OP_ECB_ENC; op <= ACC_OP_CTR; op++) {
        if (op == ACC_OP_CBC_ENC)
            continue;
        /* gpu_min on auto: the GPU glue is asked from 64 KiB (and calibrates); split from split_min */
        CHECK(p.inline_below[op] == 64 * 1024, "auto: op %d inline below %zu", op, p.inline_below[op]);
        check_edge(&p, (acc_op)op, 64 * 1024, ACC_TRY_GPU, "auto gpu");
        check_edge(&p, (acc_op)op, 256 * 1024, ACC_TRY_SPLIT, "auto split");
        CHECK(!(acc_policy_paths(&p, (acc_op)op, 1u << 30) & ACC_TRY_BATCH), "op %d is never batched", op);
    }
    /* CBC-encrypt: the lanes only, from 768 bytes; never the GPU or the split */
    CHECK(p.inline_below[ACC_OP_CBC_ENC] == 768, "CBC-encrypt inline below %zu", p.inline_below[ACC_OP_CBC_ENC]);
    check_edge(&p, ACC_OP_CBC_ENC, 768, ACC_TRY_BATCH, "cbc-enc batch");
    CHECK(acc_policy_paths(&p, ACC_OP_CBC_ENC, 1u << 30) == ACC_TRY_BATCH, "CBC-encrypt, 1 GiB: lanes only");
    CHECK(acc_policy_paths(&p, ACC_OP_CTR, 16) == 0, "16 bytes: inline only");
    CHECK(acc_policy_paths(&p, (acc_op)0, 1u << 30) == 0 && acc_policy_paths(&p, (acc_op)6, 1u << 30) == 0,
          "an op that is not one: no path");
}

static void test_settings(void)
{
    acc_policy p;
    acc_settings s = settings(ACC_BACKEND_CPU, 1u << 20, 0);

    /* backend = cpu: no GPU at any size, so the inline floor is the split's */
    acc_policy_make(&p, &s);
    CHECK(p.inline_below[ACC_OP_CTR] == 1u << 20, "cpu: CTR inline below %zu", p.inline_below[ACC_OP_CTR]);
    CHECK(!(acc_policy_paths(&p, ACC_OP_ECB_DEC, SIZE_MAX - 15) & ACC_TRY_GPU), "cpu: never the GPU");
    check_edge(&p, ACC_OP_CBC_DEC, 1u << 20, ACC_TRY_SPLIT, "cpu split");

    /* a split_min below two pieces is raised to two pieces (64 KiB); gpu_min set is taken as set */
    s = settings(ACC_BACKEND_CUDA, 4096, 8u << 20);
    acc_policy_make(&p, &s);
    check_edge(&p, ACC_OP_ECB_ENC, 64 * 1024, ACC_TRY_SPLIT, "small split_min");
    check_edge(&p, ACC_OP_CTR, 8u << 20, ACC_TRY_GPU, "gpu_min set");
    CHECK(p.inline_below[ACC_OP_CTR] == 64 * 1024, "CTR inline below %zu", p.inline_below[ACC_OP_CTR]);
    CHECK(!(acc_policy_paths(&p, ACC_OP_CBC_ENC, 1u << 30) & (ACC_TRY_GPU | ACC_TRY_SPLIT)),
          "CBC-encrypt is serial: no GPU, no split");
    /* GCM updates and XTS units split from the same size as the block modes (raised to two pieces) */
    CHECK(p.ranges_from[ACC_RANGES_AEAD] == 64 * 1024 && p.ranges_from[ACC_RANGES_XTS] == 64 * 1024,
          "GCM/XTS split from %zu/%zu", p.ranges_from[ACC_RANGES_AEAD], p.ranges_from[ACC_RANGES_XTS]);
    s = settings(ACC_BACKEND_AUTO, 1u << 20, 0);
    acc_policy_make(&p, &s);
    CHECK(p.ranges_from[ACC_RANGES_AEAD] == 1u << 20 && p.ranges_from[ACC_RANGES_XTS] == 1u << 20,
          "GCM/XTS follow split_min");
    /* split_min on auto: GCM stays on one core (the split measured slower), XTS splits */
    s.split_min_auto = 1;
    acc_policy_make(&p, &s);
    CHECK(p.ranges_from[ACC_RANGES_AEAD] == SIZE_MAX && p.ranges_from[ACC_RANGES_XTS] == 1u << 20,
          "auto: GCM %zu, XTS %zu", p.ranges_from[ACC_RANGES_AEAD], p.ranges_from[ACC_RANGES_XTS]);
}

/* ---- ranges: GCM updates and XTS units through the backends that take them ---- */

#define NPIECES 40

typedef struct {
    int runs[NPIECES];
} range_log;

static void log_range(void *arg, size_t first, size_t count)
{
    range_log *l = arg;

    for (size_t i = first; i < first + count && i < NPIECES; i++)
        __atomic_add_fetch(&l->runs[i], 1, __ATOMIC_RELAXED);
}

/* r: what acc_policy_ranges returned for kind at len; want_run: whether a backend should have run it
 * (from the threshold and whether the pool has a unit besides the caller's). */
static void check_ranges(const acc_policy *p, int kind, size_t len, int want_run, const char *what)
{
    range_log l;
    acc_path path = ACC_PATH_COUNT;
    int r;

    memset(&l, 0, sizeof(l));
    r = acc_policy_ranges(p, kind, len, log_range, &l, NPIECES, len / NPIECES, &path);
    CHECK(r == (want_run ? 1 : -1), "%s: kind %d at %zu returned %d", what, kind, len, r);
    for (int i = 0; i < NPIECES; i++)
        CHECK(l.runs[i] == (r == 1), "%s: piece %d ran %d times", what, i, l.runs[i]);
    if (r == 1)
        CHECK(path == ACC_PATH_SPLIT || path == ACC_PATH_INLINE, "%s: counted to path %d", what, (int)path);
}

static void test_ranges(void)
{
    acc_settings s = settings(ACC_BACKEND_CUDA, 1u << 20, 4096);
    int pool = acc_sched_cpu_units() > 1; /* the pool declines with no unit besides the caller's */
    acc_policy p;

    acc_policy_make(&p, &s);
    /* the GPU and the lanes take no ranges, whatever their block thresholds: the pool's size only */
    for (int kind = ACC_RANGES_AEAD; kind <= ACC_RANGES_XTS; kind++) {
        check_ranges(&p, kind, (1u << 20) - 1, 0, "below split_min");
        check_ranges(&p, kind, 1u << 20, pool, "at split_min");
    }
    check_ranges(&p, ACC_RANGES_KINDS, 1u << 30, 0, "not a kind");
    s.split_min_auto = 1;
    acc_policy_make(&p, &s);
    check_ranges(&p, ACC_RANGES_AEAD, SIZE_MAX, 0, "auto: GCM");
    check_ranges(&p, ACC_RANGES_XTS, 1u << 20, pool, "auto: XTS");
}

static void ref_iv(acc_op op, const uint8_t iv0[16], const uint8_t *in, const uint8_t *out, size_t k, uint8_t iv[16])
{
    memcpy(iv, iv0, 16);
    if (op == ACC_OP_CTR) {
        for (size_t i = 0; i < k; i++)   /* one at a time, carrying by hand */
            for (int b = 15; b >= 0 && ++iv[b] == 0; b--)
                ;
    } else if (op == ACC_OP_CBC_DEC && k > 0) {
        memcpy(iv, in + 16 * (k - 1), 16);
    } else if (op == ACC_OP_CBC_ENC && k > 0) {
        memcpy(iv, out + 16 * (k - 1), 16);
    }
}

static void test_iv_at_block(void)
{
    uint8_t in[16 * 300], out[16 * 300], iv0[16], iv[16], want[16];

    for (size_t i = 0; i < sizeof(in); i++) {
        in[i] = (uint8_t)(i * 7 + 1);
        out[i] = (uint8_t)(i * 13 + 5);
    }
    for (int carry = 0; carry < 2; carry++) {
        memset(iv0, carry ? 0xff : 0x10, 16);
        iv0[15] = 0xf0;
        for (int op = ACC_OP_ECB_ENC; op <= ACC_OP_CTR; op++)
            for (size_t k = 0; k <= 300; k += (k < 20 ? 1 : 37)) {
                memset(iv, 0xaa, 16);
                if (op == ACC_OP_ECB_ENC || op == ACC_OP_ECB_DEC) {
                    acc_iv_at_block((acc_op)op, iv0, in, out, k, iv);
                    memset(want, 0xaa, 16);   /* ECB has no IV: untouched */
                } else {
                    acc_iv_at_block((acc_op)op, iv0, in, out, k, iv);
                    ref_iv((acc_op)op, iv0, in, out, k, want);
                }
                CHECK(memcmp(iv, want, 16) == 0, "iv at block %zu, op %d, carry %d", k, op, carry);
            }
    }
    /* in place: the iv advanced where it stands */
    memset(iv, 0xff, 16);
    acc_iv_at_block(ACC_OP_CTR, iv, NULL, NULL, 2, iv);
    memset(want, 0, 16);
    want[15] = 1;
    CHECK(memcmp(iv, want, 16) == 0, "CTR wraps at 2^128, advanced in place");
}

static void test_gpu_abi(void)
{
    for (int op = ACC_OP_ECB_ENC; op <= ACC_OP_CTR; op++) {
        int abi = acc_gpu_abi_op((acc_op)op);
        CHECK(abi >= ACC_GPU_ECB_ENC && abi <= ACC_GPU_CTR, "op %d maps to ABI %d", op, abi);
        CHECK(acc_op_of_gpu_abi(abi) == (acc_op)op, "ABI %d maps back to op %d", abi, op);
    }
    CHECK(acc_gpu_abi_op(ACC_OP_CBC_DEC) == ACC_GPU_CBC_DEC && acc_gpu_abi_op(ACC_OP_CTR) == ACC_GPU_CTR,
          "the ABI's numbers are its own");
    CHECK(acc_op_of_gpu_abi(0) == 0 && acc_op_of_gpu_abi(99) == 0, "no op for a number the ABI lacks");
}

int main(void)
{
    test_defaults();
    test_settings();
    test_ranges();
    test_iv_at_block();
    test_gpu_abi();
    return CHECK_SUMMARY();
}
