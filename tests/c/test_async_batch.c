/* tests/c/test_async_batch.c: async-job batching (provider/route/batch.c) driven directly with
 * ASYNC_start_job and cipher contexts filled here: random mixes of jobs, key sizes, lengths
 * and in-place use, every stream checked against OpenSSL's default provider; what is never
 * taken (outside jobs, other modes, small, foreign key schedules); ASYNC_block_pause. */
#include "tests/c/test_async_common.h"

/* Random mixes of key sizes, lengths and in-place use across n concurrent jobs. */
static void test_jobs(int n, int nupd, size_t fixed_len, const char *label)
{
    stream *ss = calloc((size_t)n, sizeof(*ss));
    jobslot *js = calloc((size_t)n, sizeof(*js));
    int ok = ss != NULL && js != NULL, good = 0, batched = 0;
    char what[160];

    for (int i = 0; ok && i < n; i++) {
        ok = stream_init(&ss[i], nupd, fixed_len) && (js[i].wctx = ASYNC_WAIT_CTX_new()) != NULL;
        js[i].s = &ss[i];
    }
    ok = ok && drive(js, n);
    for (int i = 0; ok && i < n; i++) {
        good += stream_ok(&ss[i]);
        batched += ss[i].batched;
    }
    snprintf(what, sizeof(what), "%s: %d jobs, every stream equals OpenSSL's (%d of %d)", label, n, good, n);
    check(ok && good == n, what);
    if (n > 1) {
        snprintf(what, sizeof(what), "%s: requests went through the batch (%d batched)", label, batched);
        check(batched > 0, what);
    }
    for (int i = 0; ss != NULL && js != NULL && i < n; i++) {
        stream_free(&ss[i]);
        ASYNC_WAIT_CTX_free(js[i].wctx);
    }
    free(ss);
    free(js);
}

/* Outside a job nothing waits and nothing is touched. */
static void test_outside_job(void)
{
    stream s;
    uint8_t iv[16];

    if (!stream_init(&s, 1, 4096)) {
        check(0, "set-up");
        return;
    }
    memcpy(iv, s.ctx.iv, 16);
    check(acc_batch_submit(&s.ctx, s.in, s.out, 4096) == 0, "outside a job: not taken");
    check(memcmp(iv, s.ctx.iv, 16) == 0, "outside a job: IV untouched");
    stream_free(&s);
}

/* Inside a job, what the lanes cannot take is refused at once: CBC-decrypt, CTR, ECB, ragged, empty. */
static int refuse_fn(void *arg)
{
    stream *s = *(stream **)arg;
    int taken = 0;

    /* Only CBC-encrypt goes to the lanes. (Which sizes are offered is the policy's: test_policy.) */
    for (int op = ACC_OP_ECB_ENC; op <= ACC_OP_CTR; op++) {
        s->ctx.op = (acc_op)op;
        if (op != ACC_OP_CBC_ENC)
            taken += acc_batch_submit(&s->ctx, s->in, s->out, 4096) != 0;
    }
    s->ctx.op = ACC_OP_CBC_ENC;
    taken += acc_batch_submit(&s->ctx, s->in, s->out, 4097) != 0;
    taken += acc_batch_submit(&s->ctx, s->in, s->out, 0) != 0;
    /* A schedule made by the nested-EVP engine is not in the lanes' layout. */
    s->ctx.eng = acc_engine_evp();
    taken += acc_batch_submit(&s->ctx, s->in, s->out, 4096) != 0;
    s->ctx.eng = eng;
    return taken == 0;
}

static void test_refusals(void)
{
    stream s, *sp = &s;
    ASYNC_JOB *job = NULL;
    int ret = 0;

    if (!stream_init(&s, 1, 4096)) {
        check(0, "set-up");
        return;
    }
    check(ASYNC_start_job(&job, NULL, &ret, refuse_fn, &sp, sizeof(sp)) == ASYNC_FINISH && ret == 1,
          "in a job: decrypt, CTR, ECB, ragged, empty and non-AES-NI-schedule requests are not taken, never pause");
    stream_free(&s);
}

/* With pausing blocked, a request still completes (flushed at once) and nothing hangs. */
static int blocked_fn(void *arg)
{
    stream *s = *(stream **)arg;
    int r;

    ASYNC_block_pause();
    r = acc_batch_submit(&s->ctx, s->in, s->out, s->total);
    ASYNC_unblock_pause();
    if (r == 0)
        return eng->cbc_enc(&s->ctx.ks, s->in, s->out, s->total / 16, s->ctx.iv);
    return r > 0;
}

static void test_blocked_pause(void)
{
    stream s, *sp = &s;
    ASYNC_JOB *job = NULL;
    int ret = 0;

    if (!stream_init(&s, 1, 8192)) {
        check(0, "set-up");
        return;
    }
    check(ASYNC_start_job(&job, NULL, &ret, blocked_fn, &sp, sizeof(sp)) == ASYNC_FINISH && ret == 1,
          "ASYNC_block_pause: the job finishes without pausing");
    check(stream_ok(&s), "ASYNC_block_pause: stream equals OpenSSL's");
    stream_free(&s);
}

static void jobs16(void) { test_jobs(16, 6, 0, "16 jobs (full lanes)"); }
static void jobs40(void) { test_jobs(40, 4, 0, "40 jobs (more than the lanes)"); }
static void jobs5(void) { test_jobs(5, 8, 0, "5 jobs (partial batches)"); }
static void jobs3(void) { test_jobs(3, 8, 16384, "3 jobs, 16 KiB"); }
static void jobs1(void) { test_jobs(1, 8, 0, "1 job"); }

int main(void)
{
    void (*const scenarios[])(void) = {
        test_outside_job, test_refusals, test_blocked_pause, jobs16, jobs40, jobs5, jobs3, jobs1
    };

    return async_test_main(scenarios, sizeof(scenarios) / sizeof(scenarios[0]), 4242u);
}
