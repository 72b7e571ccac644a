/* tests/c/test_cuda_host.c: the CUDA kernels' AES code (accel/cuda/aes_core.h) compiled by gcc and
 * checked on the CPU against FIPS-197 / SP 800-38A vectors and OpenSSL EVP, so CI without a GPU tests it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/engine.h"
#include "accel/cuda/aes_core.h"
#include "tests/c/test_cuda_common.h"

static acc_core_tables T;
/* Replicated copies laid out as the kernels' shared memory (sh = 5). */
static uint32_t te_rep[256 * 32], td_rep[256 * 32];
static uint8_t isb_rep[256 * 32];

/* A table layout: plain (sh 0) or replicated (sh 5, a given lane). */
typedef struct { const uint32_t *te, *td; const uint8_t *isb; unsigned sh, lane; } layout;

static layout lay_plain(void)
{
    layout l = { T.te0, T.td0, T.isbox, 0, 0 };
    return l;
}

static layout lay_rep(unsigned lane)
{
    layout l = { te_rep, td_rep, isb_rep, 5, lane };
    return l;
}

static void words_from(uint32_t w[4], const uint8_t *b)
{
    memcpy(w, b, 16);   /* what a kernel's 32-bit loads see */
}

/* ---- modes built on the per-block steps exactly as the kernels call them ---- */
typedef struct { uint32_t rk[60], dk[60]; int rounds; } sched;

static int sched_make(sched *k, const uint8_t *key, int keybits)
{
    k->rounds = acc_core_enc_keys(key, keybits, k->rk);
    if (k->rounds)
        acc_core_dec_keys(k->rk, k->rounds, k->dk);
    return k->rounds;
}

static void m_ecb(const layout *l, const sched *k, int enc, const uint8_t *in, uint8_t *out, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        uint32_t w[4], s[4];
        words_from(w, in + 16 * b);
        acc_core_load(s, w);
        if (enc)
            acc_core_enc(l->te, l->sh, l->lane, k->rk, k->rounds, s);
        else
            acc_core_dec(l->td, l->isb, l->sh, l->lane, k->dk, k->rounds, s);
        for (int i = 0; i < 4; i++)
            w[i] = ACC_BSWAP(s[i]);
        memcpy(out + 16 * b, w, 16);
    }
}

static void m_cbc_enc(const layout *l, const sched *k, const uint8_t iv[16], const uint8_t *in, uint8_t *out, size_t nb)
{
    uint32_t chain[4], w[4];
    uint32_t *ibuf = malloc(16 * nb + 16), *obuf = malloc(16 * nb + 16);
    words_from(w, iv);
    acc_core_load(chain, w);
    memcpy(ibuf, in, 16 * nb);
    acc_core_cbc_enc_run(l->te, l->sh, l->lane, k->rk, k->rounds, ibuf, obuf, nb, chain);
    memcpy(out, obuf, 16 * nb);
    free(ibuf);
    free(obuf);
}

/* Every block independent, as on the GPU: prev = previous input block, or the IV for block 0. */
static void m_cbc_dec(const layout *l, const sched *k, const uint8_t iv[16], const uint8_t *in, uint8_t *out, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        uint32_t w[4], prev[4], o[4];
        words_from(w, in + 16 * b);
        words_from(prev, b ? in + 16 * (b - 1) : iv);
        acc_core_cbc_dec_step(l->td, l->isb, l->sh, l->lane, k->dk, k->rounds, w, prev, o);
        memcpy(out + 16 * b, o, 16);
    }
}

static void ctr_split(const uint8_t ctr[16], uint64_t *hi, uint64_t *lo)
{
    *hi = *lo = 0;
    for (int i = 0; i < 8; i++) {
        *hi = *hi << 8 | ctr[i];
        *lo = *lo << 8 | ctr[8 + i];
    }
}

static void m_ctr(const layout *l, const sched *k, const uint8_t ctr[16], const uint8_t *in, uint8_t *out, size_t nb)
{
    uint64_t hi, lo;
    ctr_split(ctr, &hi, &lo);
    for (size_t b = 0; b < nb; b++) {
        uint32_t w[4], o[4];
        if (in)
            words_from(w, in + 16 * b);
        acc_core_ctr_step(l->te, l->sh, l->lane, k->rk, k->rounds, hi, lo, b, in ? w : NULL, o);
        memcpy(out + 16 * b, o, 16);
    }
}

/* ---- references ---- */
static const EVP_CIPHER *evp_for(const char *mode, int keybits)
{
    char name[32];
    snprintf(name, sizeof(name), "AES-%d-%s", keybits, mode);
    return EVP_CIPHER_fetch(NULL, name, "provider=default");
}

static int evp_run(const char *mode, int keybits, int enc, const uint8_t *key, const uint8_t *iv,
                   const uint8_t *in, uint8_t *out, size_t len)
{
    EVP_CIPHER *c = (EVP_CIPHER *)evp_for(mode, keybits);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ol = 0, fl = 0, ok = c && x && EVP_CipherInit_ex2(x, c, key, iv, enc, NULL)
        && EVP_CIPHER_CTX_set_padding(x, 0) && EVP_CipherUpdate(x, out, &ol, in, (int)len)
        && EVP_CipherFinal_ex(x, out + ol, &fl) && (size_t)(ol + fl) == len;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok;
}

/* ---- 1. tables and FIPS-197 appendix C ---- */
static int unhex(const char *h, uint8_t *out, size_t max)
{
    size_t n = 0;
    while (h[0] && h[1] && n < max) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1)
            return -1;
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return (int)n;
}

static void test_fips197(void)
{
    check(T.sbox[0x00] == 0x63 && T.sbox[0x53] == 0xed && T.isbox[0x63] == 0x00, "S-box values of FIPS-197 5.1.1");
    static const struct { int bits; const char *key, *ct; } c[] = {
        { 128, "000102030405060708090a0b0c0d0e0f", "69c4e0d86a7b0430d8cdb78070b4c55a" },
        { 192, "000102030405060708090a0b0c0d0e0f1011121314151617", "dda97ca4864cdfe06eaf70a0ec0d7191" },
        { 256, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "8ea2b7ca516745bfeafc49904b496089" },
    };
    /* FIPS-197 A.1-A.3: the last word of each expanded key. */
    static const struct { int bits; const char *key; uint32_t last; } a[] = {
        { 128, "2b7e151628aed2a6abf7158809cf4f3c", 0xb6630ca6 },
        { 192, "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b", 0x01002202 },
        { 256, "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 0x706c631e },
    };
    for (size_t i = 0; i < 3; i++) {
        uint8_t key[32];
        sched k;
        unhex(a[i].key, key, 32);
        int r = sched_make(&k, key, a[i].bits);
        check(r == a[i].bits / 32 + 6 && k.rk[4 * (r + 1) - 1] == a[i].last, "FIPS-197 appendix A key expansion");
    }
    for (size_t i = 0; i < 3; i++) {
        uint8_t key[32], pt[16], ct[16], out[16], back[16];
        sched k;
        unhex(c[i].key, key, 32);
        unhex("00112233445566778899aabbccddeeff", pt, 16);
        unhex(c[i].ct, ct, 16);
        sched_make(&k, key, c[i].bits);
        for (unsigned lane = 0; lane < 33; lane++) {
            layout l = lane == 32 ? lay_plain() : lay_rep(lane);
            m_ecb(&l, &k, 1, pt, out, 1);
            m_ecb(&l, &k, 0, ct, back, 1);
            check(!memcmp(out, ct, 16) && !memcmp(back, pt, 16), "FIPS-197 appendix C block encrypt/decrypt");
        }
    }
    check(sched_make(&(sched){0}, (const uint8_t *)"0123456789abcdef", 100) == 0, "bad key size refused");
    /* The key schedules' constant-time S-box and InvMixColumns against the tables (every S-box value;
     * InvMixColumns on random columns, as td0[S[x]] rotated computes it). */
    int sbox_ok = 1, imc_ok = 1;
    for (uint32_t x = 0; x < 256; x++)
        sbox_ok &= acc_core_subword(x << 24 | (x ^ 0x5a) << 16 | (255 - x) << 8 | (x * 7 & 0xff))
                   == ((uint32_t)T.sbox[x] << 24 | (uint32_t)T.sbox[x ^ 0x5a] << 16
                       | (uint32_t)T.sbox[255 - x] << 8 | T.sbox[x * 7 & 0xff]);
    for (int i = 0; i < 4096; i++) {
        uint32_t w, want;
        RAND_bytes((unsigned char *)&w, sizeof(w));
        want = T.td0[T.sbox[w >> 24]] ^ ACC_ROTR(T.td0[T.sbox[(w >> 16) & 0xff]], 8)
             ^ ACC_ROTR(T.td0[T.sbox[(w >> 8) & 0xff]], 16) ^ ACC_ROTR(T.td0[T.sbox[w & 0xff]], 24);
        imc_ok &= acc_inv_mix_column(w) == want;
    }
    check(sbox_ok, "constant-time S-box equals the table for all 256 inputs");
    check(imc_ok, "constant-time InvMixColumns equals the table form");
}

/* ---- 2. OpenSSL's published stanzas (FIPS-197, SP 800-38A F.1/F.2/F.5, RFC 3686, carry) ---- */
static int run_stanza(const char *cipher, const uint8_t *key, int klen, const uint8_t *iv,
                      const uint8_t *pt, const uint8_t *ct, int len, int op_enc, int op_dec)
{
    int bits = klen * 8, ran = 0;
    char mode[8] = "";
    if (sscanf(cipher, "AES-%*d-%7s", mode) != 1 || (len % 16 && strcmp(mode, "CTR")))
        return 0;
    sched k;
    if (!sched_make(&k, key, bits))
        return 0;
    uint8_t *out = malloc((size_t)len + 16);
    for (int rep = 0; rep < 2; rep++) {
        layout l = rep ? lay_rep(7) : lay_plain();
        size_t nb = ((size_t)len + 15) / 16;   /* CTR may end in a partial block: inputs have room */
        if (!strcmp(mode, "ECB")) {
            if (op_enc) { m_ecb(&l, &k, 1, pt, out, nb); check(!memcmp(out, ct, len), cipher); }
            if (op_dec) { m_ecb(&l, &k, 0, ct, out, nb); check(!memcmp(out, pt, len), cipher); }
        } else if (!strcmp(mode, "CBC")) {
            if (op_enc) { m_cbc_enc(&l, &k, iv, pt, out, nb); check(!memcmp(out, ct, len), cipher); }
            if (op_dec) { m_cbc_dec(&l, &k, iv, ct, out, nb); check(!memcmp(out, pt, len), cipher); }
        } else if (!strcmp(mode, "CTR")) {
            m_ctr(&l, &k, iv, op_enc ? pt : ct, out, nb);
            check(!memcmp(out, op_enc ? ct : pt, len), cipher);
        } else {
            break;
        }
        ran = 1;
    }
    free(out);
    return ran;
}

static void test_vector_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        check(0, "vector file tests/vectors/evpciph_aes_common.txt readable");
        return;
    }
    char line[8192], cipher[64] = "";
    uint8_t key[32], iv[16], pt[4096], ct[4096];
    int klen = 0, ptl = -1, ctl = -1, enc = 1, dec = 1, stanzas = 0;
    for (int eof = 0; !eof;) {
        eof = !fgets(line, sizeof(line), f);
        line[strcspn(line, "\r\n")] = 0;
        if (eof || !line[0]) {   /* end of stanza */
            if (cipher[0] && ptl > 0 && ptl == ctl && !strncmp(cipher, "AES-", 4))
                stanzas += run_stanza(cipher, key, klen, iv, pt, ct, ptl, enc, dec);
            cipher[0] = 0; ptl = ctl = -1; enc = dec = 1; klen = 0;
            memset(iv, 0, 16);
            continue;
        }
        char *eq = strstr(line, " = ");
        if (!eq)
            continue;
        *eq = 0;
        const char *v = eq + 3;
        if (!strcmp(line, "Cipher")) {   /* the file spells names in mixed case */
            snprintf(cipher, sizeof(cipher), "%s", v);
            for (char *c = cipher; *c; c++)
                *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        }
        else if (!strcmp(line, "Key")) klen = unhex(v, key, sizeof(key));
        else if (!strcmp(line, "IV")) unhex(v, iv, sizeof(iv));
        else if (!strcmp(line, "Plaintext")) ptl = unhex(v, pt, sizeof(pt));
        else if (!strcmp(line, "Ciphertext")) ctl = unhex(v, ct, sizeof(ct));
        else if (!strcmp(line, "Operation")) { enc = !strcmp(v, "ENCRYPT"); dec = !strcmp(v, "DECRYPT"); }
    }
    fclose(f);
    printf("vector file: %d AES ECB/CBC/CTR stanzas checked\n", stanzas);
    check(stanzas >= 40, "at least 40 AES ECB/CBC/CTR stanzas found in the vector file");
}

/* ---- 3. random keys and data against EVP, every mode, plain and replicated layouts ---- */
static void test_random_vs_evp(void)
{
    static const char *modes[] = { "ECB", "CBC", "CTR" };
    static const int bits[] = { 128, 192, 256 };
    enum { MAXB = 67 };
    uint8_t key[32], iv[16], in[16 * MAXB], ref[16 * MAXB], got[16 * MAXB];
    for (int it = 0; it < 40; it++)
        for (int b = 0; b < 3; b++)
            for (int m = 0; m < 3; m++)
                for (int enc = 0; enc <= 1; enc++) {
                    size_t nb = 1 + (size_t)(it * 7 + b * 3 + m) % MAXB;
                    sched k;
                    RAND_bytes(key, sizeof(key));
                    RAND_bytes(iv, sizeof(iv));
                    RAND_bytes(in, sizeof(in));
                    if (m == 2 && it % 4 == 0)   /* counters near the 2^32 / 2^64 carry edges */
                        memset(iv + (it % 8 ? 12 : 8), 0xff, it % 8 ? 4 : 8);
                    sched_make(&k, key, bits[b]);
                    layout l = it % 2 ? lay_rep((unsigned)it % 32) : lay_plain();
                    char what[64];
                    snprintf(what, sizeof(what), "random AES-%d-%s %s vs EVP", bits[b], modes[m], enc ? "enc" : "dec");
                    if (!evp_run(modes[m], bits[b], enc, key, iv, in, ref, 16 * nb)) {
                        check(0, "EVP reference ran");
                        continue;
                    }
                    if (m == 0) m_ecb(&l, &k, enc, in, got, nb);
                    else if (m == 1 && enc) m_cbc_enc(&l, &k, iv, in, got, nb);
                    else if (m == 1) m_cbc_dec(&l, &k, iv, in, got, nb);
                    else m_ctr(&l, &k, iv, in, got, nb);
                    check(!memcmp(got, ref, 16 * nb), what);
                }
}

/* ---- 4. CTR carries: 2^32, 2^64 and 2^128 boundaries, whole and split into pieces ---- */
static void test_ctr_carry(void)
{
    const struct { int fill_from; } edges[] = { { 12 }, { 8 }, { 0 } };   /* low 32, low 64, all 128 bits set */
    enum { NB = 9 };
    uint8_t key[32], in[16 * NB], ref[16 * NB], got[16 * NB], ks[16 * NB];
    for (int e = 0; e < 3; e++)
        for (int b = 0; b < 3; b++) {
            int kb = 128 + 64 * b;
            uint8_t iv[16];
            sched k;
            RAND_bytes(key, sizeof(key));
            RAND_bytes(iv, sizeof(iv));
            RAND_bytes(in, sizeof(in));
            memset(iv + edges[e].fill_from, 0xff, 16 - edges[e].fill_from);
            iv[15] = 0xfc;   /* three blocks before the edge, six after */
            sched_make(&k, key, kb);
            layout l = lay_rep(3);
            evp_run("CTR", kb, 1, key, iv, in, ref, sizeof(in));
            m_ctr(&l, &k, iv, in, got, NB);
            check(!memcmp(got, ref, sizeof(in)), "CTR across a carry edge vs EVP");
            /* split as the host runtime splits a job over chunks: base of piece = iv + offset */
            for (size_t cut = 1; cut < NB; cut++) {
                uint8_t c2[16];
                memcpy(c2, iv, 16);
                m_ctr(&l, &k, c2, in, got, cut);
                acc_ctr_add(c2, cut);
                m_ctr(&l, &k, c2, in + 16 * cut, got + 16 * cut, NB - cut);
                check(!memcmp(got, ref, sizeof(in)), "CTR split at a piece boundary across a carry edge");
            }
            /* keystream only (in == NULL), XORed afterwards as the CPU does */
            m_ctr(&l, &k, iv, NULL, ks, NB);
            for (size_t i = 0; i < sizeof(in); i++)
                ks[i] ^= in[i];
            check(!memcmp(ks, ref, sizeof(in)), "CTR keystream + CPU XOR vs EVP");
        }
    /* large block indexes: the 128-bit add of the kernel matches acc_ctr_add */
    for (int i = 0; i < 2000; i++) {
        uint8_t c[16], c2[16];
        uint64_t idx, hi, lo;
        uint32_t s[4];
        RAND_bytes(c, 16);
        RAND_bytes((uint8_t *)&idx, sizeof(idx));
        if (i % 3 == 0)
            memset(c + 8, 0xff, 8);
        idx >>= (unsigned)(i % 64);
        memcpy(c2, c, 16);
        acc_ctr_add(c2, idx);
        ctr_split(c, &hi, &lo);
        acc_core_ctr_block(hi, lo, idx, s);
        uint8_t b[16];
        for (int w = 0; w < 4; w++)
            for (int j = 0; j < 4; j++)
                b[4 * w + j] = (uint8_t)(s[w] >> (24 - 8 * j));
        if (memcmp(b, c2, 16)) {
            check(0, "128-bit counter add matches acc_ctr_add");
            return;
        }
    }
    check(1, "128-bit counter add matches acc_ctr_add (2000 random cases)");
    uint8_t all[16];
    uint64_t hi, lo;
    uint32_t s[4];
    memset(all, 0xff, 16);
    ctr_split(all, &hi, &lo);
    acc_core_ctr_block(hi, lo, 1, s);
    check(!s[0] && !s[1] && !s[2] && !s[3], "counter 2^128-1 + 1 wraps to 0");
}

/* ---- 5. CBC decrypt split into pieces with the IV taken from the previous ciphertext ---- */
static void test_cbc_pieces(void)
{
    enum { NB = 20 };
    uint8_t key[32], iv[16], in[16 * NB], ref[16 * NB], got[16 * NB];
    for (int b = 0; b < 3; b++) {
        int kb = 128 + 64 * b;
        sched k;
        RAND_bytes(key, 32);
        RAND_bytes(iv, 16);
        RAND_bytes(in, sizeof(in));
        sched_make(&k, key, kb);
        layout l = lay_rep(31);
        evp_run("CBC", kb, 0, key, iv, in, ref, sizeof(in));
        for (size_t cut = 1; cut < NB; cut += 3) {
            m_cbc_dec(&l, &k, iv, in, got, cut);
            m_cbc_dec(&l, &k, in + 16 * (cut - 1), in + 16 * cut, got + 16 * cut, NB - cut);
            check(!memcmp(got, ref, sizeof(in)), "CBC decrypt split into pieces");
        }
        /* CBC encrypt continued from a chaining value, as a job spanning chunks */
        evp_run("CBC", kb, 1, key, iv, in, ref, sizeof(in));
        m_cbc_enc(&l, &k, iv, in, got, 7);
        m_cbc_enc(&l, &k, got + 16 * 6, in + 16 * 7, got + 16 * 7, NB - 7);
        check(!memcmp(got, ref, sizeof(in)), "CBC encrypt continued across pieces");
    }
}

int main(int argc, char **argv)
{
    const char *vecs = argc > 1 ? argv[1] : "tests/vectors/evpciph_aes_common.txt";
    acc_core_tables_init(&T);
    for (unsigned x = 0; x < 256; x++)
        for (unsigned lane = 0; lane < 32; lane++) {
            te_rep[x << 5 | lane] = T.te0[x];
            td_rep[x << 5 | lane] = T.td0[x];
            isb_rep[acc_tb_index(x, 5, lane)] = T.isbox[x];
        }
    test_fips197();
    test_vector_file(vecs);
    test_random_vs_evp();
    test_ctr_carry();
    test_cbc_pieces();
    return check_report();
}
