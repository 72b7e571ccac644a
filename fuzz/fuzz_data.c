/* fuzz/fuzz_data.c: the data calls of the differential fuzzer: Update and EVP_Cipher (sizes up to
 * 70000 bytes, in place with the output lagging the input by what the context holds back, misaligned,
 * tight or NULL buffers on the dispatch layer) and Final, each compared byte for byte. */
#include <stdlib.h>
#include <string.h>
#include <openssl/async.h>
#include <openssl/err.h>
#include "fuzz/fuzz_diff.h"

#define MAX_TOTAL (1u << 20)   /* data bytes per input: larger inputs only slow the search */

/* ======================== Data calls ======================== */

static size_t pick_size(fz_reader *r, unsigned cls)
{
    switch (cls & 7) {
    case 0: return 0;
    case 1: return 1 + fz_u8(r) % 16;
    case 2: return fz_u8(r) % 64;
    case 3: return 16 * (1 + fz_u8(r) % 8);
    case 4: return fz_u16(r) % 4096;
    case 5: return (fz_u16(r) | (size_t)fz_u8(r) << 16) % 70001;
    case 6: return 16 * (fz_u16(r) % 4376);
    default: return 65536 + fz_u16(r) % 4465;
    }
}

void fz_fill(fz_run *R, uint8_t *dst, size_t n, unsigned src, unsigned seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);

    switch (src) {
    case 1:
        if (n > 0)
            memcpy(dst, R->last, n);
        break;
    case 2:
        fz_take(&R->r, dst, n);
        break;
    case 3:
        memset(dst, 0, n);
        break;
    default:
        for (size_t i = 0; i < n; i += 8) {   /* splitmix64: cheap bytes that are not all alike */
            uint64_t z = (x += 0x9E3779B97F4A7C15ull);

            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            memcpy(dst + i, &z, n - i < 8 ? n - i : 8);
        }
        break;
    }
}

/* The buffers of one side for one data call. In place, the output lags the input by the bytes
 * the context holds back (the one layout in which EVP allows in and out to share memory). */
typedef struct bufs {
    uint8_t *mem, *in, *out;
    size_t memlen;
} bufs;

static void bufs_make(fz_run *R, bufs *b, const uint8_t *data, size_t inl, int inplace, size_t lag,
                      unsigned in_off, unsigned out_off, size_t outalloc)
{
    memset(b, 0, sizeof(*b));
    if (inplace) {
        b->memlen = in_off + lag + inl + 16;
        b->mem = malloc(b->memlen);
        if (b->mem != NULL) {
            memset(b->mem, 0xA5, b->memlen);
            b->out = b->mem + in_off;
            b->in = b->out + lag;
        }
    } else {
        /* exact sizes, so that ASan sees a write past the output size given */
        b->memlen = out_off + outalloc;
        b->mem = malloc(b->memlen);
        uint8_t *inb = malloc(in_off + inl + 1);
        if (b->mem != NULL && inb != NULL) {
            memset(b->mem, 0xA5, b->memlen);
            b->out = b->mem + out_off;
            b->in = inb + in_off;
        } else {
            free(inb);
        }
    }
    if (b->out == NULL)
        fz_diverge(R, "out of memory");
    if (inl > 0)
        memcpy(b->in, data, inl);
}

static void bufs_free(bufs *b, int inplace, unsigned in_off)
{
    if (!inplace && b->in != NULL)
        free(b->in - in_off);
    free(b->mem);
}

/* Update (is_cipher 0) or EVP_Cipher (1). */
void fz_op_data(fz_run *R, int is_cipher)
{
    fz_slot *s = fz_pick_slot(R);
    unsigned f = fz_u8(&R->r), src = (f >> 3) & 3, al = 0, h = 0, seed;
    int inplace = (f >> 5) & 1, null_out = 0, null_in = 0, ok_d = 0, ok_a, rand_iv = fz_gcm_random_iv(R, s);
    size_t inl = pick_size(&R->r, f), lag = 0, bs = FZ_STREAM(R->mode) ? 0 : 16, outsize, outl_d = 0, outl_a = 0;
    size_t claim;                /* the length the provider is told */
    const char *acc_only = NULL;
    uint8_t *data;
    bufs bd, ba;
    unsigned long err_a;

    R->opname = is_cipher ? "EVP_Cipher" : "update";
    if (is_cipher && !R->raw && !s->inited)
        return;                  /* EVP_Cipher does not check for a cipher: it crashes */
    if (f & 0x40)
        al = fz_u8(&R->r);
    if (f & 0x80)                /* hostile: bits 0-1 output, 2 NULL input, 3 a huge length */
        h = 0x100 | fz_u8(&R->r);
    seed = fz_u16(&R->r);
    if (src == 1)
        inl = R->lastlen;
    if (R->total + inl > MAX_TOTAL)
        inl %= 512;
    R->total += inl;
    outsize = inl + bs;          /* what EVP passes */
    if (h && R->raw) {           /* the dispatch layer: any output size, NULL buffers */
        switch (h & 3) {
        case 0: outsize = inl; break;
        case 1: outsize = fz_u16(&R->r) % (inl + 33); break;
        case 2: outsize = SIZE_MAX; break;
        default: null_out = 1; break;
        }
        null_in = (h >> 2) & 1;
    } else if (h) {              /* EVP: only a NULL output */
        null_out = (h & 3) == 3;
    }
    claim = inl;
    if (h & 8)                   /* EVP turns this into a negative int (EVP_Cipher: near 4 GiB) */
        claim = SIZE_MAX - fz_u8(&R->r) % 32;
    if (!is_cipher && R->mode != FZ_CTR)
        lag = s->buffered;
    if (claim != inl)
        acc_only = "a length far beyond the buffers";
    else if (null_out && !FZ_AEAD(R->mode)) /* GCM, CCM: a NULL output is AAD, for both */
        acc_only = "a NULL output buffer";
    else if (null_in && inl > 0 && !FZ_AEAD(R->mode)) /* GCM, CCM: a NULL input is final, for both */
        acc_only = "a NULL input with a length";
    else if (R->mode == FZ_XTS && !s->have_key)
        acc_only = "XTS data with no key (the default's copy of a keyless context calls a NULL block function)";
    else if (is_cipher && !FZ_STREAM(R->mode) && inl % 16 != 0)
        acc_only = "EVP_Cipher on a partial block (documented: the default drops the tail)";
    else if (!is_cipher && s->tls != 0 && R->mode == FZ_ECB)
        acc_only = "a TLS record on ECB (documented: accelaes handles records only for CBC)";
    else if (!is_cipher && s->tls != 0 && R->mode == FZ_CBC && !s->enc && inl == 0 && s->tls != 0x0300
             && s->tls != 0x0301)
        acc_only = "an empty TLS 1.1+ record (the default strips the explicit IV and reads before the buffer)";

    if (is_cipher && R->mode == FZ_XTS && outsize < inl) {
        /* both providers write the whole unit past the room they are told (EVP_Cipher itself always tells
         * the unit's length; tests/error_rows.py's dispatch-cipher-outsize checks they agree, with room for
         * it): here the room is real, so neither is called. Not generated. */
        fz_trace(R, "pair %d: XTS EVP_Cipher with less room than the unit: skipped", (int)(s - R->s));
        return;
    }
    if (acc_only == NULL && is_cipher && R->mode == FZ_GCM && inl == 0 && !null_out && !null_in) {
        /* documented: the default's EVP_Cipher of 0 data bytes closes the AAD's GHASH block (later
         * AAD is hashed after zero padding); accelaes changes nothing. Not generated. */
        fz_trace(R, "pair %d: GCM EVP_Cipher of 0 data bytes: skipped", (int)(s - R->s));
        return;
    }
    fz_trace(R, "pair %d: %zu bytes (told %zu), source %u, %s, lag %zu, offsets %u/%u, outsize %zu, "
             "%s, tls 0x%x mac %zu%s%s%s", (int)(s - R->s), inl, claim, src, inplace ? "in place" : "out of place",
             lag, al & 15, al >> 4, outsize, s->enc ? "enc" : "dec", s->tls, s->tlsms, null_out ? ", NULL out" : "",
             null_in ? ", NULL in" : "", acc_only ? ", accelaes alone" : "");
    data = malloc(inl + 1);
    if (data == NULL)
        fz_diverge(R, "out of memory");
    fz_fill(R, data, inl, src, seed);
    {
        size_t outalloc = outsize < inl + 16 ? outsize : inl + 16;
        bufs_make(R, &bd, data, inl, inplace, lag, al & 15, al >> 4, outalloc);
        bufs_make(R, &ba, data, inl, inplace, lag, al & 15, al >> 4, outalloc);
    }
    {
        uint8_t *out_d = null_out ? NULL : bd.out, *out_a = null_out ? NULL : ba.out;
        const uint8_t *in_d = null_in ? NULL : bd.in, *in_a = null_in ? NULL : ba.in;

        ERR_clear_error();
        if (acc_only == NULL) {
            ok_d = (is_cipher ? fz_cipher : fz_update)(&s->c[FZ_DEF], out_d, &outl_d, outsize, in_d, claim);
            R->def_silent = !ok_d && ERR_peek_error() == 0;
        }
        ERR_clear_error();
        ok_a = (is_cipher ? fz_cipher : fz_update)(&s->c[FZ_ACC], out_a, &outl_a, outsize, in_a, claim);
        err_a = ERR_peek_error();
    }
    if (acc_only == NULL && !is_cipher && R->mode == FZ_CTR && s->tls != 0 && !s->enc && s->tlsms > 0
        && inl > 0) {
        /* Documented: the default's stream update (written for the stitched ciphers) takes
         * tls-mac-size bytes off every CTR decrypt as a "MAC", failing when fewer came in;
         * accelaes ignores TLS settings on CTR. Compared modulo that. */
        if (ok_d)
            outl_d += s->tlsms;
        else if (ok_a && inl < s->tlsms)
            ok_d = 1, outl_d = outl_a;
    }
    if (acc_only != NULL) {
        /* a NULL output is fine where nothing is due; anything else must be refused */
        if (!ok_a && is_cipher && R->mode == FZ_XTS)
            fz_resync(R, s); /* XTS's EVP_Cipher refuses without an error, as the default's */
        else if (!(ok_a && null_out && claim == inl && outl_a == 0))
            fz_refused(R, s, ok_a, acc_only);
        else
            fz_resync(R, s);
    } else if (rand_iv) {
        /* GCM encryption without an IV: each side drew a random one; verdicts and lengths only */
        fz_trace(R, "GCM with a random IV: verdicts and lengths compared, then the pair rebuilt");
        if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
            if (outl_d != outl_a)
                fz_diverge(R, "%zu bytes in (random IV): default wrote %zu, accelaes %zu", inl, outl_d, outl_a);
            fz_resync(R, s);
        }
    } else if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        if (fz_selftest && outl_a > 0 && !null_out)
            ba.out[0] ^= 1;      /* a planted difference: proves that comparisons can fail */
        if (outl_d != outl_a)
            fz_diverge(R, "%zu bytes in: default wrote %zu, accelaes %zu", inl, outl_d, outl_a);
        if (outl_a > outsize || outl_a > (inplace ? bd.memlen - (al & 15) : bd.memlen - (al >> 4)))
            fz_diverge(R, "accelaes reports %zu bytes written, room was %zu", outl_a, outsize);
        if (inplace ? memcmp(bd.mem, ba.mem, bd.memlen) != 0 : memcmp(bd.out, ba.out, outl_a) != 0)
            fz_diverge(R, "%zu bytes in, %zu out%s: the output bytes differ", inl, outl_a,
                       inplace ? " (in place)" : "");
        if (!is_cipher && R->mode != FZ_CTR) {
            if (s->tls != 0)
                s->buffered = 0;
            else if (outl_a > s->buffered + inl)
                fz_diverge(R, "%zu bytes out of %zu held plus %zu in", outl_a, s->buffered, inl);
            else
                s->buffered += inl - outl_a;
        }
        if (!is_cipher && s->tls != 0 && R->mode == FZ_CBC && !s->enc && inplace) {
            size_t skip = (s->tls == 0x0300 || s->tls == 0x0301) ? 0 : 16;   /* the explicit IV */
            s->tls_mac = 1;
            if (inl >= skip)
                fz_check_tls_mac(R, s, bd.out + skip, inl - skip);
        }
        if (!null_out)
            fz_keep_last(R, bd.out, outl_d);
        fz_gcm_advance(R, s, null_in && (inl > 0 || is_cipher) ? SIZE_MAX : is_cipher ? 1 : inl);
        fz_check_state(R, s);
    }
    bufs_free(&bd, inplace, al & 15);
    bufs_free(&ba, inplace, al & 15);
    free(data);
}

void fz_op_final(fz_run *R)
{
    fz_slot *s = fz_pick_slot(R);
    unsigned f = fz_u8(&R->r), off = f >> 4;
    size_t outsize = FZ_STREAM(R->mode) ? 0 : 16, outl_d = 0, outl_a = 0, alloc;
    int null_out = 0, acc_alone, ok_d = 0, ok_a, rand_iv = fz_gcm_random_iv(R, s);
    uint8_t *od, *oa;
    unsigned long err_a;

    R->opname = "final";
    if (R->raw && (f & 3) == 1)
        outsize = fz_u8(&R->r) % 17;
    else if (R->raw && (f & 3) == 2)
        outsize = SIZE_MAX;
    null_out = (f & 0xC) == 0xC;
    fz_trace(R, "pair %d: outsize %zu%s", (int)(s - R->s), outsize, null_out ? ", NULL out" : "");
    alloc = outsize < 16 ? outsize : 16;
    od = malloc(off + alloc);
    oa = malloc(off + alloc);
    if (od == NULL || oa == NULL)
        fz_diverge(R, "out of memory");
    ERR_clear_error();
    /* GCM and XTS write nothing at final: a NULL output goes to both */
    acc_alone = null_out && !FZ_NEW_MODE(R->mode);
    if (!acc_alone) {
        ok_d = fz_final(&s->c[FZ_DEF], null_out ? NULL : od + off, &outl_d, outsize);
        R->def_silent = !ok_d && ERR_peek_error() == 0;
    }
    ERR_clear_error();
    ok_a = fz_final(&s->c[FZ_ACC], null_out ? NULL : oa + off, &outl_a, outsize);
    err_a = ERR_peek_error();
    if (acc_alone) {
        if (!(ok_a && outl_a == 0))
            fz_refused(R, s, ok_a, "Final with a NULL output buffer");
        else
            fz_resync(R, s);
    } else if (fz_verdicts(R, s, ok_d, ok_a, err_a)) {
        if (rand_iv) { /* GCM: tags over two random IVs; the pair rebuilt */
            fz_resync(R, s);
            goto out;
        }
        if (outl_d != outl_a || outl_a > alloc || memcmp(od + off, oa + off, outl_a) != 0)
            fz_diverge(R, "Final wrote %zu bytes, accelaes %zu%s", outl_d, outl_a,
                       outl_d == outl_a ? " (different bytes)" : "");
        s->buffered = 0;
        if (outl_d > 0 || !FZ_NEW_MODE(R->mode)) /* GCM: the ciphertext stays the last output */
            fz_keep_last(R, od + off, outl_d);
        fz_gcm_advance(R, s, SIZE_MAX);
        fz_check_state(R, s);
    }
out:
    free(od);
    free(oa);
}

/* ======================== Async jobs ======================== */

typedef struct async_arg {
    fz_ctx *c;
    uint8_t *out;
    const uint8_t *in;
    size_t inl, outl;
    int ok;
} async_arg;

static int async_update(void *v)
{
    async_arg *a = *(async_arg **)v;

    a->ok = fz_update(a->c, a->out, &a->outl, a->inl + 16, a->in, a->inl);
    return a->ok;
}

/* One update on every pair at once: accelaes's inside ASYNC jobs resumed in turn, as an
 * application with several jobs in flight does (CBC-encrypt is then queued and run in
 * multi-buffer lanes, provider/route/batch.c), the default's directly; each compared as usual. */
void fz_op_async(fz_run *R)
{
    unsigned f = fz_u8(&R->r), seed = fz_u16(&R->r);
    async_arg a[FZ_NSLOTS];
    uint8_t *in[FZ_NSLOTS], *od[FZ_NSLOTS];
    ASYNC_JOB *job[FZ_NSLOTS] = { NULL };
    ASYNC_WAIT_CTX *wait[FZ_NSLOTS] = { NULL };
    int ok_d[FZ_NSLOTS], done[FZ_NSLOTS], left = 0;
    size_t outl_d[FZ_NSLOTS];
    unsigned long err_a;

    R->opname = "async updates";
    for (int i = 0; i < FZ_NSLOTS; i++) {
        fz_slot *s = &R->s[i];
        size_t inl = 768 + 16 * (fz_u8(&R->r) % 64) + ((f >> i) & 1 ? fz_u8(&R->r) % 16 : 0);

        memset(&a[i], 0, sizeof(a[i]));
        /* records have rules of their own; keyless XTS: see fz_op_data */
        done[i] = s->tls != 0 || fz_gcm_random_iv(R, s) || (R->mode == FZ_XTS && !s->have_key);
        if (R->total + inl > MAX_TOTAL)
            done[i] = 1;
        in[i] = od[i] = NULL;
        if (done[i])
            continue;
        R->total += inl;
        in[i] = malloc(inl);
        od[i] = malloc(inl + 16);
        a[i].out = malloc(inl + 16);
        wait[i] = ASYNC_WAIT_CTX_new();
        if (in[i] == NULL || od[i] == NULL || a[i].out == NULL || wait[i] == NULL)
            fz_diverge(R, "out of memory");
        fz_fill(R, in[i], inl, 0, seed + (unsigned)i);
        a[i].c = &s->c[FZ_ACC];
        a[i].in = in[i];
        a[i].inl = inl;
        ERR_clear_error();
        ok_d[i] = fz_update(&s->c[FZ_DEF], od[i], &outl_d[i], inl + 16, in[i], inl);
        left++;
    }
    ERR_clear_error();
    for (long round = 0; left > 0; round++) {
        if (round > 100000)
            fz_diverge(R, "ASYNC jobs did not finish after %ld rounds", round);
        for (int i = 0; i < FZ_NSLOTS; i++) {
            async_arg *p = &a[i];
            int ret = 0;

            if (done[i])
                continue;
            switch (ASYNC_start_job(&job[i], wait[i], &ret, async_update, &p, sizeof(p))) {
            case ASYNC_PAUSE:
                break;
            case ASYNC_NO_JOBS:       /* no fibers here: the call itself, directly */
                async_update(&p);
                done[i] = 1;
                left--;
                break;
            default:                  /* finished, or failed to run */
                done[i] = 1;
                left--;
                break;
            }
        }
    }
    err_a = ERR_peek_error();    /* the default's errors were cleared before the jobs ran */
    for (int i = 0; i < FZ_NSLOTS; i++) {
        fz_slot *s = &R->s[i];

        ASYNC_WAIT_CTX_free(wait[i]);
        if (in[i] == NULL)
            continue;
        if (fz_verdicts(R, s, ok_d[i], a[i].ok, err_a)) {
            if (outl_d[i] != a[i].outl || memcmp(od[i], a[i].out, a[i].outl) != 0)
                fz_diverge(R, "pair %d, %zu bytes in an ASYNC job: %zu out, default %zu%s", i, a[i].inl,
                           a[i].outl, outl_d[i], outl_d[i] == a[i].outl ? " (different bytes)" : "");
            if (R->mode != FZ_CTR)
                s->buffered += a[i].inl - a[i].outl;
            fz_gcm_advance(R, s, a[i].inl);
            fz_keep_last(R, od[i], outl_d[i]);
            fz_check_state(R, s);
        }
        free(in[i]);
        free(od[i]);
        free(a[i].out);
    }
}
