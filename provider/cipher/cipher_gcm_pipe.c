/* provider/cipher/cipher_gcm_pipe.c: OpenSSL 3.5's cipher pipeline API for AES-GCM (EVP_CipherPipeline*):
 * up to 32 messages under one key, each with its own IV, AAD and tag, moved in one call. The key
 * is set up once in the context's own engine state and copied to each pipe's state (a copy costs
 * less than ipsec-mb's key set-up, and the pipes keep it across inits with the same key). OpenSSL's
 * default provider has no pipelines (EVP answers "pipeline not supported"), so there is no
 * behaviour to match here: misuse raises ACC_R_PIPELINE with a detail that names the pipe; the
 * per-message rules (tag lengths, a tag mismatch raising nothing) are those of a single GCM. */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/proverr.h>
#include "provider/cipher/cipher_gcm.h"
#include "provider/base/ctx_alloc.h"
#include "provider/route/policy.h"
#include "provider/route/prov.h"
#include "scheduler/sched.h"

#define PIPE_MAX 32 /* EVP_MAX_PIPES in 3.5's evp.h: EVP refuses more before we are asked */
#define GCM_MAX_DATA ((UINT64_C(1) << 36) - 32)

/* A pipe's message: no IV; IV given (AAD may come); data going in (AAD closed); finished. */
enum { PIPE_IDLE, PIPE_IV, PIPE_DATA, PIPE_DONE };

typedef struct pipe_msg {
    acc_gcm_state st; /* first: 64-byte aligned; the key (copied from the context's) and message */
    int keyed;        /* st holds the context's current key */
    int state;
    acc_aead_aad aad; /* gathered until the data starts (the engine's start takes it whole) */
    uint64_t msglen;
    size_t taglen; /* decryption: the tag's length given (ACC_GCM_UNSET: none yet) */
    uint8_t iv[ACC_GCM_IV_MAX];
    uint8_t tag[ACC_GCM_TAG_LEN];
} pipe_msg;

struct acc_gcm_pipe {
    size_t n, cap; /* pipes of this init; states allocated */
    size_t ivlen;  /* the IVs' length, as the init gave them */
    int enc;
    pipe_msg *msg; /* cap states, from acc_ctx_alloc (64-byte aligned) */
};

static int pipe_err(const char *fmt, const char *what, size_t i)
{
    acc_raise(ACC_R_PIPELINE, fmt, what, i);
    return 0;
}

/* ======================== The pipes' life ======================== */

static void msg_clear(const acc_gcm_engine *geng, pipe_msg *m)
{
    if (m->keyed)
        geng->cleanse(&m->st);
    acc_aead_aad_free(&m->aad);
    OPENSSL_cleanse(m, sizeof(*m));
}

void acc_gcm_pipe_free(acc_gcm_ctx *g)
{
    acc_gcm_pipe *p = g->pipe;

    if (p == NULL)
        return;
    for (size_t i = 0; i < p->cap; i++)
        msg_clear(g->geng, &p->msg[i]);
    acc_ctx_free(p->msg);
    OPENSSL_clear_free(p, sizeof(*p));
    g->pipe = NULL;
}

/* d is a byte copy of s (cipher_gcm.c's dup): its own pipes, each state its own copy. */
int acc_gcm_pipe_dup(acc_gcm_ctx *d, const acc_gcm_ctx *s)
{
    const acc_gcm_pipe *sp = s->pipe;
    acc_gcm_pipe *dp;

    d->pipe = NULL;
    if (sp == NULL)
        return 1;
    if ((dp = OPENSSL_zalloc(sizeof(*dp))) == NULL || (dp->msg = acc_ctx_alloc(sp->cap * sizeof(pipe_msg))) == NULL) {
        OPENSSL_free(dp);
        return 0;
    }
    memset(dp->msg, 0, sp->cap * sizeof(pipe_msg));
    dp->cap = sp->cap;
    dp->n = sp->n;
    dp->enc = sp->enc;
    dp->ivlen = sp->ivlen;
    d->pipe = dp;
    for (size_t i = 0; i < sp->cap; i++) {
        const pipe_msg *sm = &sp->msg[i];
        pipe_msg *dm = &dp->msg[i];

        memcpy(dm, sm, sizeof(*dm));
        dm->keyed = 0;
        if (!acc_aead_aad_dup(&dm->aad, &sm->aad)
            || (sm->keyed && !s->geng->copy(&dm->st, &sm->st))) {
            OPENSSL_cleanse(&dm->st, sizeof(dm->st));
            acc_gcm_pipe_free(d);
            return 0;
        }
        dm->keyed = sm->keyed;
    }
    return 1;
}

/* Room for n pipes: more than before means fresh states (keyed again at their next init). */
static acc_gcm_pipe *pipe_alloc(acc_gcm_ctx *g, size_t n)
{
    acc_gcm_pipe *p = g->pipe;

    if (p != NULL && p->cap >= n)
        return p;
    acc_gcm_pipe_free(g);
    if ((p = OPENSSL_zalloc(sizeof(*p))) == NULL || (p->msg = acc_ctx_alloc(n * sizeof(pipe_msg))) == NULL) {
        OPENSSL_free(p);
        acc_raise(ACC_R_MALLOC_FAILURE, "%zu pipeline states", n);
        return NULL;
    }
    memset(p->msg, 0, n * sizeof(pipe_msg));
    p->cap = n;
    g->pipe = p;
    return p;
}

/* The context's key into pipe m's state, unless it holds it already. */
static int msg_key(acc_gcm_ctx *g, pipe_msg *m)
{
    if (m->keyed)
        return 1;
    memcpy(&m->st, &g->st, sizeof(m->st));
    if (!g->geng->copy(&m->st, &g->st)) {
        OPENSSL_cleanse(&m->st, sizeof(m->st));
        acc_raise(ACC_R_ENGINE_FAILURE, "%s GCM engine could not copy the key to a pipe", g->geng->name);
        return 0;
    }
    m->keyed = 1;
    return 1;
}

/* ======================== Init ======================== */

static int pipe_check_init(const acc_gcm_ctx *g, const unsigned char *key, size_t keylen, size_t n,
                           const unsigned char **iv, size_t ivlen)
{
    if (n == 0 || n > PIPE_MAX) {
        acc_raise(ACC_R_PIPELINE, "%zu pipes: 1..%d", n, PIPE_MAX);
        return 0;
    }
    if (key != NULL && keylen != g->base.keylen) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_KEY_LENGTH), "key length %zu, expected %zu", keylen, g->base.keylen);
        return 0;
    }
    if (iv == NULL)
        return 1;
    if (ivlen != g->ivlen) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "pipeline iv length %zu, the context's is %zu", ivlen,
                  g->ivlen);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (iv[i] == NULL)
            return pipe_err("%s: pipe %zu has no iv", "pipeline init", i);
    return 1;
}

static int pipe_init(acc_gcm_ctx *g, const unsigned char *key, size_t keylen, size_t n, const unsigned char **iv,
                     size_t ivlen, const OSSL_PARAM params[], int enc)
{
    acc_gcm_pipe *p;

    if (!pipe_check_init(g, key, keylen, n, iv, ivlen) || (p = pipe_alloc(g, n)) == NULL)
        return 0;
    /* the single-message API on this context starts from no IV, as after a key-only init */
    g->started = 0;
    g->iv_state = ACC_AEAD_IV_UNSET;
    g->base.enc = enc;
    p->enc = enc;
    p->n = n;
    if (iv != NULL)
        p->ivlen = ivlen;
    if (key != NULL && !(g->key_set && CRYPTO_memcmp(g->base.rawkey, key, keylen) == 0)) {
        for (size_t i = 0; i < p->cap; i++)
            if (p->msg[i].keyed) {
                g->geng->cleanse(&p->msg[i].st);
                p->msg[i].keyed = 0;
            }
        if (!acc_gcm_set_key(g, key, keylen))
            return 0;
    }
    for (size_t i = 0; i < n; i++) {
        pipe_msg *m = &p->msg[i];

        if (iv != NULL) {
            memcpy(m->iv, iv[i], ivlen);
            m->state = PIPE_IV;
        } else if (m->state == PIPE_DATA) {
            m->state = PIPE_IDLE; /* an open message ends with any init, its IV used */
        }
        m->aad.len = 0;
        m->msglen = 0;
        m->taglen = ACC_GCM_UNSET;
        if (g->key_set && !msg_key(g, m))
            return 0;
    }
    return acc_gcm_set_ctx_params(g, params);
}

int acc_gcm_pipe_einit(void *vctx, const unsigned char *key, size_t keylen, size_t numpipes, const unsigned char **iv,
                       size_t ivlen, const OSSL_PARAM params[])
{
    return pipe_init(vctx, key, keylen, numpipes, iv, ivlen, params, 1);
}

int acc_gcm_pipe_dinit(void *vctx, const unsigned char *key, size_t keylen, size_t numpipes, const unsigned char **iv,
                       size_t ivlen, const OSSL_PARAM params[])
{
    return pipe_init(vctx, key, keylen, numpipes, iv, ivlen, params, 0);
}

/* ======================== Update and final ======================== */

/* The context's pipes, if n matches them and they are keyed. */
static acc_gcm_pipe *pipe_ready(acc_gcm_ctx *g, size_t n, const char *what)
{
    acc_gcm_pipe *p = g->pipe;

    if (p == NULL || p->n == 0) {
        acc_raise(ACC_R_PIPELINE, "%s: no pipeline init (EVP_CipherPipelineEncryptInit/DecryptInit)", what);
        return NULL;
    }
    if (n != p->n) {
        acc_raise(ACC_R_PIPELINE, "%s: %zu pipes, the init had %zu", what, n, p->n);
        return NULL;
    }
    if (!g->key_set) {
        acc_raise(ACC_PROV_R(PROV_R_NO_KEY_SET), "%s: the pipeline has no key", what);
        return NULL;
    }
    return p;
}

/* A pipe's message may take more: it has an IV and is not finished. */
static int msg_open(const pipe_msg *m, const char *what, size_t i)
{
    if (m->state == PIPE_IDLE)
        return pipe_err("%s: pipe %zu has no iv (a pipeline init with ivs first)", what, i);
    if (m->state == PIPE_DONE)
        return pipe_err("%s: pipe %zu's message is finished (a new init with new ivs first)", what, i);
    return 1;
}

static int overlaps_partially(const uint8_t *in, const uint8_t *out, size_t len)
{
    uintptr_t a = (uintptr_t)in, b = (uintptr_t)out;

    return a != b && (a < b ? b - a < len : a - b < len);
}

/* Every pipe is checked before any moves, so that a refused call changes nothing. */
static int update_check(const acc_gcm_pipe *p, unsigned char **out, const size_t *outsize, const unsigned char **in,
                        const size_t *inl)
{
    for (size_t i = 0; i < p->n; i++) {
        const pipe_msg *m = &p->msg[i];

        if (!msg_open(m, "pipeline update", i))
            return 0;
        if (inl[i] > 0 && in[i] == NULL)
            return pipe_err("%s: pipe %zu has no input", "pipeline update", i);
        if (out == NULL) {
            if (m->state == PIPE_DATA)
                return pipe_err("%s: pipe %zu: AAD after data", "pipeline update", i);
            continue;
        }
        if (inl[i] > 0 && out[i] == NULL)
            return pipe_err("%s: pipe %zu has no output", "pipeline update", i);
        if (outsize != NULL && outsize[i] < inl[i]) {
            acc_raise(ACC_PROV_R(PROV_R_OUTPUT_BUFFER_TOO_SMALL), "pipe %zu: need %zu bytes of output, have %zu", i,
                      inl[i], outsize[i]);
            return 0;
        }
        if (inl[i] > GCM_MAX_DATA - m->msglen)
            return pipe_err("%s: pipe %zu's message is past GCM's length limit", "pipeline update", i);
        if (overlaps_partially(in[i], out[i], inl[i]))
            return pipe_err("%s: pipe %zu's input and output overlap partially", "pipeline update", i);
    }
    return 1;
}

static int aad_add(pipe_msg *m, const unsigned char *aad, size_t len)
{
    int r = acc_aead_aad_add(&m->aad, aad, len, SIZE_MAX / 2);

    if (r == 0)
        acc_raise(ACC_R_LENGTH_TOO_LARGE, "pipeline AAD of %zu bytes", len);
    else if (r < 0)
        acc_raise(ACC_R_MALLOC_FAILURE, "pipeline AAD of %zu bytes", m->aad.len + len);
    return r > 0;
}

/* Open a pipe's message in its engine state: the IV and the whole AAD (raises nothing: it may run
 * on a pool thread). */
static int msg_start(const acc_gcm_ctx *g, const acc_gcm_pipe *p, pipe_msg *m)
{
    if (m->state != PIPE_DATA && !g->geng->start(&m->st, p->enc, m->iv, p->ivlen, m->aad.p, m->aad.len))
        return 0;
    m->state = PIPE_DATA;
    return 1;
}

/* One update's data, pipe by pipe: on the caller's thread, or as ranges of pipes (one pipe a
 * piece: the pipes' states are apart) on the backends that take AEAD ranges where the batch is as
 * large as they ask for (policy.c's acc_policy_ranges). A pipe's failure is raised by the caller
 * after the run: an error raised on a pool thread would land in that thread's queue. */
typedef struct {
    acc_gcm_ctx *g;
    acc_gcm_pipe *p;
    unsigned char **out;
    const unsigned char **in;
    const size_t *inl;
    uint8_t failed[PIPE_MAX]; /* 1: the start failed, 2: the update */
} pipe_job;

static void pipe_data(void *arg, size_t i)
{
    pipe_job *j = arg;
    pipe_msg *m = &j->p->msg[i];
    const acc_gcm_engine *geng = j->g->geng;

    if (j->inl[i] == 0)
        return;
    if (!msg_start(j->g, j->p, m)) {
        j->failed[i] = 1;
        return;
    }
    if (!geng->update(&m->st, j->in[i], j->out[i], j->inl[i]))
        j->failed[i] = 2;
    else
        m->msglen += j->inl[i];
}

static void pipe_range(void *arg, size_t first, size_t count)
{
    for (size_t i = first; i < first + count; i++)
        pipe_data(arg, i);
}

static int data_run(acc_gcm_ctx *g, acc_gcm_pipe *p, unsigned char **out, const unsigned char **in, const size_t *inl)
{
    pipe_job j = { .g = g, .p = p, .out = out, .in = in, .inl = inl };
    size_t total = 0;
    acc_path path;
    int ok = 1;

    for (size_t i = 0; i < p->n; i++)
        total += inl[i];
    if (p->n < 2
        || acc_policy_ranges(&g->base.prov->policy, ACC_RANGES_AEAD, total, pipe_range, &j, p->n, total / p->n, &path)
               < 0)
        pipe_range(&j, 0, p->n);
    for (size_t i = 0; i < p->n; i++) {
        if (j.failed[i] == 0)
            continue;
        p->msg[i].state = PIPE_DONE; /* the message is lost: no output is left behind */
        OPENSSL_cleanse(out[i], inl[i]);
        acc_raise(ACC_R_ENGINE_FAILURE, "%s GCM engine failed to %s pipe %zu", g->geng->name,
                  j.failed[i] == 1 ? "start" : "update", i);
        ok = 0;
    }
    return ok;
}

/* out == NULL: in[] is each pipe's AAD (outl = inl, as a single GCM's AAD update says). */
int acc_gcm_pipe_update(void *vctx, size_t numpipes, unsigned char **out, size_t *outl, const size_t *outsize,
                        const unsigned char **in, const size_t *inl)
{
    acc_gcm_ctx *g = vctx;
    acc_gcm_pipe *p;

    if ((p = pipe_ready(g, numpipes, "pipeline update")) == NULL)
        return 0;
    if (in == NULL || inl == NULL || outl == NULL) {
        acc_raise(ACC_R_NULL_POINTER, "pipeline update: no input, input lengths or output lengths");
        return 0;
    }
    if (!update_check(p, out, outsize, in, inl))
        return 0;
    if (out == NULL) {
        for (size_t i = 0; i < p->n; i++)
            if (!aad_add(&p->msg[i], in[i], inl[i]))
                return 0;
    } else if (!data_run(g, p, out, in, inl)) {
        return 0;
    }
    for (size_t i = 0; i < p->n; i++)
        outl[i] = inl[i];
    return 1;
}

/* Every pipe's message ends; encrypting, its tag is kept for "pipeline-tag". Decrypting, 0 if any
 * pipe's tag did not match, with no error raised, as a single GCM's final (the pipes that matched
 * are finished all the same). */
int acc_gcm_pipe_final(void *vctx, size_t numpipes, unsigned char **out, size_t *outl, const size_t *outsize)
{
    acc_gcm_ctx *g = vctx;
    acc_gcm_pipe *p;
    int ok = 1;

    (void)out;
    (void)outsize;
    if ((p = pipe_ready(g, numpipes, "pipeline final")) == NULL)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!msg_open(&p->msg[i], "pipeline final", i))
            return 0;
        if (!p->enc && p->msg[i].taglen == ACC_GCM_UNSET)
            return pipe_err("%s: pipe %zu has no tag to check (set pipeline-tag before final)", "pipeline final", i);
    }
    for (size_t i = 0; i < p->n; i++) {
        pipe_msg *m = &p->msg[i];

        if (!msg_start(g, p, m)) {
            m->state = PIPE_DONE;
            acc_raise(ACC_R_ENGINE_FAILURE, "%s GCM engine could not start pipe %zu", g->geng->name, i);
            return 0;
        }
        m->state = PIPE_DONE;
        if (!g->geng->finish(&m->st, m->tag, p->enc ? ACC_GCM_TAG_LEN : m->taglen))
            ok = 0;
        if (outl != NULL)
            outl[i] = 0;
    }
    return ok;
}

/* ======================== The "pipeline-tag" parameter ======================== */

/* An OSSL_PARAM_OCTET_PTR whose pointer is an array of one tag buffer per pipe, all of data_size
 * bytes (as OpenSSL's own test provider reads it). */
static unsigned char **tag_array(const OSSL_PARAM *p, size_t n, size_t *taglen)
{
    unsigned char **tags = NULL;

    if (!OSSL_PARAM_get_octet_ptr(p, (const void **)&tags, taglen) || tags == NULL) {
        acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER),
                  "'%s' is an octet pointer to an array of one tag buffer per pipe", p->key);
        return NULL;
    }
    if (*taglen == 0 || *taglen > ACC_GCM_TAG_LEN) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_TAG_LENGTH), "pipeline tag length %zu, expected 1..16", *taglen);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (tags[i] == NULL) {
            pipe_err("%s: pipe %zu has no tag buffer", p->key, i);
            return NULL;
        }
    return tags;
}

int acc_gcm_pipe_get_tag(acc_gcm_ctx *g, OSSL_PARAM *prm)
{
    acc_gcm_pipe *p = g->pipe;
    unsigned char **tags;
    size_t taglen;

    if (p == NULL || p->n == 0) {
        acc_raise(ACC_R_PIPELINE, "%s: no pipeline init", prm->key);
        return 0;
    }
    if (!p->enc) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_TAG), "pipeline tags are read after an encryption's final");
        return 0;
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->msg[i].state != PIPE_DONE)
            return pipe_err("%s: pipe %zu has no tag yet (its final first)", prm->key, i);
    if ((tags = tag_array(prm, p->n, &taglen)) == NULL)
        return 0;
    for (size_t i = 0; i < p->n; i++)
        memcpy(tags[i], p->msg[i].tag, taglen);
    return 1;
}

int acc_gcm_pipe_set_tag(acc_gcm_ctx *g, const OSSL_PARAM *prm)
{
    acc_gcm_pipe *p = g->pipe;
    unsigned char **tags;
    size_t taglen;

    if (p == NULL || p->n == 0) {
        acc_raise(ACC_R_PIPELINE, "%s: no pipeline init", prm->key);
        return 0;
    }
    if (p->enc) {
        acc_raise(ACC_PROV_R(PROV_R_TAG_NOT_NEEDED), "pipeline tags are set for decryption only");
        return 0;
    }
    for (size_t i = 0; i < p->n; i++)
        if (!msg_open(&p->msg[i], prm->key, i))
            return 0;
    if ((tags = tag_array(prm, p->n, &taglen)) == NULL)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        memcpy(p->msg[i].tag, tags[i], taglen);
        p->msg[i].taglen = taglen;
    }
    return 1;
}
