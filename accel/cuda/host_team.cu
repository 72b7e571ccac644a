/* accel/cuda/host_team.cu: the host thread team behind the staging pipeline and its copy / XOR loops.
 * No CUDA in here: the file is valid C as well as C++, so tests/c/test_cuda_team.c includes it. */
#include <signal.h>
#include <string.h>
#include <time.h>
#include "accel/cuda/host_team.h"
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define HT_SSE2 1
#define ht_pause() _mm_pause()
#else
#define HT_SSE2 0
#define ht_pause() ((void)0)
#endif

#define LD(p) __atomic_load_n(p, __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n(p, v, __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST)

static uint64_t ht_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Claim and run pieces until none is left. */
static size_t ht_work(acc_ht *t)
{
    size_t did = 0;
    for (;;) {
        size_t i = ADD(&t->next, (size_t)1);
        if (i >= t->npieces)
            return did;
        size_t lo = i * t->piece, hi = lo + t->piece < t->total ? lo + t->piece : t->total;
        t->fn(t->arg, lo, hi);
        ADD(&t->finished, (size_t)1);
        did++;
    }
}

/* Wait for gen to move past seen: poll for spin_us (tasks of one large request come every ~100 us,
 * a futex wake-up would cost a good part of that), then sleep on the condition variable. */
static uint64_t ht_wait(acc_ht *t, uint64_t seen)
{
    uint64_t g, deadline = 0;
    for (unsigned i = 0;; i++) {
        if ((g = LD(&t->gen)) != seen)
            return g;
        if ((i & 255) == 0) {
            uint64_t now = ht_now_us();
            if (!deadline)
                deadline = now + t->spin_us;
            else if (now >= deadline)
                break;
        }
        ht_pause();
    }
    pthread_mutex_lock(&t->lock);
    ADD(&t->sleepers, 1);
    /* The caller bumps gen, then reads sleepers: with both sequentially consistent, either gen is
     * seen here or the caller sees this sleeper and broadcasts under the lock we hold. */
    while ((g = LD(&t->gen)) == seen)
        pthread_cond_wait(&t->cv, &t->lock);
    ADD(&t->sleepers, -1);
    pthread_mutex_unlock(&t->lock);
    return g;
}

static void *ht_helper(void *p)
{
    acc_ht *t = (acc_ht *)p;
    uint64_t seen = 0;   /* gen starts at 0, so the first task (gen 1) is seen */
    for (;;) {
        seen = ht_wait(t, seen);
        if (LD(&t->stop))
            return NULL;
        ADD(&t->active, 1);
        /* Only after announcing ourselves may we trust open: the caller closes the task, then
         * waits for active to drop to 0 before it reuses the task fields. */
        if (LD(&t->gen) == seen && LD(&t->open)) {
            size_t did = ht_work(t);
            if (did)
                ADD(&t->helped, (uint64_t)did);
        }
        ADD(&t->active, -1);
    }
}

int acc_ht_start(acc_ht *t, int nthreads, unsigned spin_us)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->use, NULL);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->spin_us = spin_us;
    if (nthreads > ACC_HT_MAXTHREADS)
        nthreads = ACC_HT_MAXTHREADS;
    pthread_attr_t at;
    sigset_t all, old;
    if (pthread_attr_init(&at))
        return 0;
    pthread_attr_setstacksize(&at, 256u << 10);
    /* Helpers never take the application's signals: they run no code of its own. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < nthreads - 1; i++) {
        if (pthread_create(&t->th[t->nhelp], &at, ht_helper, t))
            break;
        t->nhelp++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    return t->nhelp;
}

void acc_ht_stop(acc_ht *t)
{
    if (!t->nhelp)
        return;
    ST(&t->stop, 1);
    pthread_mutex_lock(&t->lock);
    ADD(&t->gen, (uint64_t)1);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < t->nhelp; i++)
        pthread_join(t->th[i], NULL);
    t->nhelp = 0;
}

void acc_ht_run(acc_ht *t, size_t total, acc_ht_fn fn, void *arg)
{
    if (!total)
        return;
    size_t threads = t ? (size_t)t->nhelp + 1 : 1;
    /* About three pieces per thread, so a helper that wakes late still finds work, in whole pages
     * so non-temporal stores and the DMA that follows see aligned ranges. */
    size_t piece = (total / (3 * threads) + 4095) & ~(size_t)4095;
    if (piece < ACC_HT_MIN_PIECE)
        piece = ACC_HT_MIN_PIECE;
    if (threads < 2 || total <= piece || pthread_mutex_trylock(&t->use)) {
        fn(arg, 0, total);
        return;
    }
    t->fn = fn;
    t->arg = arg;
    t->total = total;
    t->piece = piece;
    t->npieces = (total + piece - 1) / piece;
    ST(&t->next, (size_t)0);
    ST(&t->finished, (size_t)0);
    ST(&t->open, 1);
    ADD(&t->gen, (uint64_t)1);
    if (LD(&t->sleepers)) {
        pthread_mutex_lock(&t->lock);
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->lock);
    }
    ht_work(t);
    ST(&t->open, 0);
    while (LD(&t->finished) < t->npieces || LD(&t->active) > 0)
        ht_pause();
    pthread_mutex_unlock(&t->use);
}

/* ---- copy and XOR ---- */

void acc_hc_copy(uint8_t *dst, const uint8_t *src, size_t len, int nt)
{
#if HT_SSE2
    if (nt && len >= 256) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
        memcpy(dst, src, head);
        size_t i = head;
        for (; i + 64 <= len; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
            _mm_stream_si128((__m128i *)(dst + i), a);
            _mm_stream_si128((__m128i *)(dst + i + 16), b);
            _mm_stream_si128((__m128i *)(dst + i + 32), c);
            _mm_stream_si128((__m128i *)(dst + i + 48), d);
        }
        memcpy(dst + i, src + i, len - i);
        _mm_sfence();   /* the stores are weakly ordered: visible before anyone is told "done" */
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, len);
}

void acc_hc_xor(uint8_t *dst, const uint8_t *a, const uint8_t *b, size_t len, int nt)
{
    size_t i = 0;
#if HT_SSE2
    if (nt && len >= 256) {
        for (; ((uintptr_t)(dst + i) & 15) && i < len; i++)
            dst[i] = a[i] ^ b[i];
        for (; i + 64 <= len; i += 64) {
            for (size_t k = 0; k < 64; k += 16) {
                __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(a + i + k)),
                                          _mm_loadu_si128((const __m128i *)(b + i + k)));
                _mm_stream_si128((__m128i *)(dst + i + k), x);
            }
        }
        _mm_sfence();
    } else {
        for (; i + 16 <= len; i += 16) {
            __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(a + i)),
                                      _mm_loadu_si128((const __m128i *)(b + i)));
            _mm_storeu_si128((__m128i *)(dst + i), x);
        }
    }
#endif
    (void)nt;
    for (; i + 8 <= len; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        memcpy(dst + i, &x, 8);
    }
    for (; i < len; i++)
        dst[i] = a[i] ^ b[i];
}
