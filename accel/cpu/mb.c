/* accel/cpu/mb.c: multi-buffer batches over intel-ipsec-mb (1.3 or 2.0): many independent streams,
 * each with its own key and IV, share the SIMD lanes (CBC-encrypt above all, serial per stream). */
#include "accel/mb.h"

#ifndef HAVE_IPSECMB

int acc_mb_available(void)
{
    return 0;
}

int acc_mb_lanes(void)
{
    return 0;
}

const char *acc_mb_library(void)
{
    return NULL;
}

int acc_mb_run(acc_req *reqs, size_t n)
{
    (void)reqs;
    (void)n;
    return 0;
}

#else

#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include <intel-ipsec-mb.h>
#include "accel/cpu/mb_int.h"

/* ipsec-mb keeps per-lane lengths in 16 bits: a job of 64 KiB or more is rejected
 * ("Invalid cipher message length"), so longer requests run as pieces of at most this. */
#define MB_PIECE_BLOCKS 4095u
/* Requests in flight at once: twice the widest lanes. Keeps the per-call state on the stack
 * (nothing allocated per call; about 2 KiB, small enough for an ASYNC job's 32 KiB stack)
 * and well under the manager's queue of IMB_MAX_JOBS jobs. */
#define MB_WINDOW 32

/* One manager of each kind per thread: a manager is not thread-safe, and making one costs far
 * more than a batch, so it lives as long as the thread (freed by the key's destructor, whose
 * value is the thread's own array). */
static __thread IMB_MGR *tl_mgrs[ACC_MB_NMGR];
static pthread_key_t mgr_key;
static pthread_once_t mgr_once = PTHREAD_ONCE_INIT;
static int mgr_key_ok;
/* -1 unknown, 0 no, 1 yes: whether a manager with hardware AES can be made here. */
static int mb_avail = -1;
static int mb_lanes;

static void mgrs_free(void *p)
{
    IMB_MGR **m = p;

    for (int k = 0; k < ACC_MB_NMGR; k++) {
        if (m[k] != NULL)
            free_mb_mgr(m[k]);
        m[k] = NULL;
    }
}

static void mgr_key_init(void)
{
    mgr_key_ok = pthread_key_create(&mgr_key, mgrs_free) == 0;
}

/* On unload (dlclose of the provider) the key's destructor would point into unmapped code
 * for every thread that exits later: delete the key, so those threads' managers are merely
 * left behind, and free this thread's own. */
__attribute__((destructor)) static void mgr_unload(void)
{
    if (mgr_key_ok) {
        pthread_key_delete(mgr_key);
        mgr_key_ok = 0;
    }
    mgrs_free(tl_mgrs);
}

IMB_MGR *acc_mb_mgr(int kind, IMB_MGR *(*make)(void))
{
    IMB_MGR *m = tl_mgrs[kind];

    if (m != NULL)
        return m;
    pthread_once(&mgr_once, mgr_key_init);
    if ((m = make()) == NULL)
        return NULL;
    if (mgr_key_ok)
        pthread_setspecific(mgr_key, tl_mgrs);
    tl_mgrs[kind] = m;
    return m;
}

/* The widest manager init_mb_mgr_auto picks, for the cipher lanes. */
static IMB_MGR *make_aes_mgr(void)
{
    IMB_MGR *m = alloc_mb_mgr(0);

    if (m == NULL)
        return NULL;
    init_mb_mgr_auto(m, NULL);
    if (imb_get_errno(m) != 0 || m->used_arch < IMB_ARCH_SSE) {
        /* No hardware AES: 1.x's software emulation (IMB_ARCH_NOAESNI, below SSE; 2.0 has none)
         * would lose to every other engine. */
        free_mb_mgr(m);
        return NULL;
    }
    return m;
}

static IMB_MGR *mgr_get(void)
{
    return acc_mb_mgr(ACC_MB_MGR_AES, make_aes_mgr);
}

IMB_MGR *acc_mb_aes_mgr(void)
{
    return mgr_get();
}

int acc_mb_available(void)
{
    int a = __atomic_load_n(&mb_avail, __ATOMIC_ACQUIRE);

    if (a < 0) {
        IMB_MGR *m = mgr_get();
        int lanes = 0;

        if (m != NULL) {
            /* CBC-encrypt lanes of the implementation init_mb_mgr_auto picked:
             * 16 with VAES on AVX-512, 8 for the AVX/AVX2/SSE x8 code. */
            lanes = (m->used_arch == IMB_ARCH_AVX512 && (m->features & IMB_FEATURE_VAES)) ? 16 : 8;
        }
        __atomic_store_n(&mb_lanes, lanes, __ATOMIC_RELAXED);
        a = m != NULL;
        __atomic_store_n(&mb_avail, a, __ATOMIC_RELEASE);
    }
    return a;
}

int acc_mb_lanes(void)
{
    return acc_mb_available() ? __atomic_load_n(&mb_lanes, __ATOMIC_RELAXED) : 0;
}

const char *acc_mb_library(void)
{
    return imb_get_version_str();
}

/* The state of one request while its pieces run, one piece in flight at a time. */
typedef struct mb_slot {
    uint8_t iv[16];          /* IV / counter of the piece in flight (stable while it runs) */
    uint8_t nextiv[16];      /* CBC-decrypt: last ciphertext block of that piece, saved before
                              * it runs, since in place it is overwritten */
    acc_req *req;
    size_t done;             /* blocks submitted and finished before the piece in flight */
    size_t piece;            /* blocks in the piece in flight (0: none) */
    int used;
} mb_slot;

static int req_valid(const acc_req *r)
{
    const acc_aes_key *k = r->key;

    if (k == NULL || (r->nblocks > 0 && (r->in == NULL || r->out == NULL)))
        return 0;
    if (k->keybits != 128 && k->keybits != 192 && k->keybits != 256)
        return 0;
    switch (r->op) {
    case ACC_OP_CBC_ENC:
    case ACC_OP_CTR:
        return r->iv != NULL;
    case ACC_OP_CBC_DEC:
        return r->iv != NULL && k->has_dec;
    case ACC_OP_ECB_ENC:
        return 1;
    case ACC_OP_ECB_DEC:
        return k->has_dec;
    default:
        return 0;
    }
}

/* Blocks in the next piece of s's request. CTR pieces also stop where the low 32 bits of
 * the counter wrap: ipsec-mb's CTR carries only within those 32 bits (measured: a counter
 * ending ff..fd gives wrong blocks from the wrap on), and acc_ctr_add then does the
 * full 128-bit carry between pieces. */
static size_t piece_blocks(const mb_slot *s)
{
    size_t left = s->req->nblocks - s->done;
    size_t p = left < MB_PIECE_BLOCKS ? left : MB_PIECE_BLOCKS;

    if (s->req->op == ACC_OP_CTR) {
        uint64_t low = ((uint64_t)s->iv[12] << 24) | ((uint64_t)s->iv[13] << 16)
                       | ((uint64_t)s->iv[14] << 8) | s->iv[15];
        uint64_t to_wrap = (1ULL << 32) - low;

        if (p > to_wrap)
            p = (size_t)to_wrap;
    }
    return p;
}

static void submit_piece(IMB_MGR *m, mb_slot *s)
{
    const acc_req *r = s->req;
    size_t off = s->done * ACC_AES_BLOCK;
    IMB_JOB *j = IMB_GET_NEXT_JOB(m);
    int enc = r->op == ACC_OP_CBC_ENC || r->op == ACC_OP_ECB_ENC || r->op == ACC_OP_CTR;

    s->piece = piece_blocks(s);
    if (r->op == ACC_OP_CBC_DEC)
        acc_iv_at_block(r->op, s->iv, r->in + off, NULL, s->piece, s->nextiv);

    /* Recycled jobs keep fields from earlier use (hash, SGL, custom functions): start clean. */
    memset(j, 0, sizeof(*j));
    j->enc_keys = r->key->enc;
    j->dec_keys = r->key->dec;
    j->key_len_in_bytes = (uint64_t)r->key->keybits / 8;
    j->src = r->in + off;
    j->dst = r->out + off;
    j->msg_len_to_cipher_in_bytes = (uint64_t)s->piece * ACC_AES_BLOCK;
    j->hash_alg = IMB_AUTH_NULL;
    j->cipher_direction = enc ? IMB_DIR_ENCRYPT : IMB_DIR_DECRYPT;
    j->chain_order = enc ? IMB_ORDER_CIPHER_HASH : IMB_ORDER_HASH_CIPHER;
    j->cipher_mode = (r->op == ACC_OP_CTR) ? IMB_CIPHER_CNTR
                   : (r->op == ACC_OP_ECB_ENC || r->op == ACC_OP_ECB_DEC) ? IMB_CIPHER_ECB
                   : IMB_CIPHER_CBC;
    if (j->cipher_mode == IMB_CIPHER_ECB) {
        j->iv = NULL;
        j->iv_len_in_bytes = 0;     /* ECB rejects any other IV length */
    } else {
        j->iv = s->iv;
        j->iv_len_in_bytes = 16;    /* CTR: 16 = the whole counter block, no nonce layout */
    }
    j->user_data = s;
}

/* A piece came back: carry the IV into the next piece, or finish the request.
 * Returns 1 when the slot's request is complete. */
static int piece_done(mb_slot *s)
{
    acc_req *r = s->req;
    size_t end = s->done + s->piece, off = s->done * ACC_AES_BLOCK;

    if (r->op == ACC_OP_CBC_DEC)
        memcpy(s->iv, s->nextiv, 16);
    else
        acc_iv_at_block(r->op, s->iv, r->in + off, r->out + off, s->piece, s->iv);
    s->done = end;
    s->piece = 0;
    if (s->done < r->nblocks)
        return 0;
    if (r->iv != NULL && acc_op_has_iv(r->op))
        memcpy(r->iv, s->iv, 16);
    return 1;
}

/* Fill a free slot with the next non-empty request; returns 0 when none is left. */
static int slot_take(mb_slot *s, acc_req *reqs, size_t n, size_t *next)
{
    while (*next < n && reqs[*next].nblocks == 0)
        (*next)++;
    if (*next >= n)
        return 0;
    memset(s, 0, sizeof(*s));
    s->req = &reqs[(*next)++];
    s->used = 1;
    if (s->req->iv != NULL && acc_op_has_iv(s->req->op))
        memcpy(s->iv, s->req->iv, 16);
    return 1;
}

/* Handle one job the manager handed back. Returns 0 if it failed. */
static int job_back(IMB_JOB *j, acc_req *reqs, size_t n, size_t *next, size_t *inflight)
{
    mb_slot *s = j->user_data;

    (*inflight)--;
    if (j->status != IMB_STATUS_COMPLETED)
        return 0;
    if (piece_done(s)) {
        s->used = 0;
        (void)slot_take(s, reqs, n, next);
    }
    return 1;
}

int acc_mb_run(acc_req *reqs, size_t n)
{
    mb_slot slots[MB_WINDOW];
    IMB_MGR *m;
    size_t next = 0, inflight = 0, i, nslots = n < MB_WINDOW ? n : MB_WINDOW;
    int ok = 1;

    if (n == 0)
        return 1;
    if (reqs == NULL || !acc_mb_available() || (m = mgr_get()) == NULL)
        return 0;
    for (i = 0; i < n; i++)
        if (!req_valid(&reqs[i]))
            return 0;

    for (i = 0; i < nslots; i++)
        if (!slot_take(&slots[i], reqs, n, &next))
            slots[i].used = 0;

    for (;;) {
        int submitted = 0;

        /* Every slot with a request and no piece in flight gets its next piece in. */
        for (i = 0; i < nslots && ok; i++) {
            IMB_JOB *j;

            if (!slots[i].used || slots[i].piece != 0)
                continue;
            submit_piece(m, &slots[i]);
            inflight++;
            submitted = 1;
            for (j = IMB_SUBMIT_JOB(m); j != NULL; j = IMB_GET_COMPLETED_JOB(m))
                if (!job_back(j, reqs, n, &next, &inflight))
                    ok = 0;
        }
        if (!ok)
            break;
        if (!submitted) {
            if (inflight == 0)
                break;   /* every slot empty: all requests done */
            /* Nothing new can go in until something comes out: run the partly filled lanes. */
            IMB_JOB *j = IMB_FLUSH_JOB(m);

            if (j == NULL) {
                ok = 0;
                break;
            }
            if (!job_back(j, reqs, n, &next, &inflight))
                ok = 0;
            while (ok && (j = IMB_GET_COMPLETED_JOB(m)) != NULL)
                if (!job_back(j, reqs, n, &next, &inflight))
                    ok = 0;
        }
    }
    /* Leave the manager empty for the next call, even after a failed job. */
    while (IMB_FLUSH_JOB(m) != NULL)
        ;
    while (IMB_GET_COMPLETED_JOB(m) != NULL)
        ;
    /* Slots held IVs and counters of the streams: not secret keys, but no reason to leave them. */
    OPENSSL_cleanse(slots, nslots * sizeof(slots[0]));
    return ok;
}

#endif
