/* accel/cuda/aes_core.h: AES tables, key expansion and the per-block mode steps, written once for
 * nvcc (the kernels) and gcc (tests/c/test_cuda_host.c), so the CPU test checks the code the GPU runs. */
#ifndef ACCELAES_AES_CORE_H
#define ACCELAES_AES_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACC_HD __host__ __device__ __forceinline__
#else
#define ACC_HD static inline
#endif
/* __CUDA_ARCH__ is defined only in nvcc's device pass: one instruction there, shifts on the host. */
#ifdef __CUDA_ARCH__
#define ACC_ROTR(x, n) __funnelshift_r((x), (x), (n))
#define ACC_BSWAP(x) __byte_perm((x), 0, 0x0123)
#else
#define ACC_ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define ACC_BSWAP(x) __builtin_bswap32(x)
#endif

/* State words are big-endian columns (byte 0 of the block is the top byte of s[0]), so one table
 * serves all four row positions by rotation.
 *   te0[x] = bytes (2.S[x], S[x], S[x], 3.S[x]), top byte first
 *   td0[x] = bytes (14.Si[x], 9.Si[x], 13.Si[x], 11.Si[x])
 * The tables are computed from GF(2^8) arithmetic at start-up (acc_core_tables), not typed in. */
typedef struct acc_core_tables {
    uint32_t te0[256];
    uint32_t td0[256];
    uint8_t sbox[256];
    uint8_t isbox[256];
} acc_core_tables;

/* ---- table lookups (the one place that knows the shared-memory layout) ----
 * Why this layout: a 256-entry table read with data-dependent indexes makes a warp's 32 lanes
 * collide in shared-memory banks (up to 32-way replays). Replicating the table 2^sh = 32 times,
 * copy `lane` at word (x << 5) | lane, puts every read of lane L in bank L whatever x is: no
 * conflicts ever, and the cost is 32 KiB per table. Only te0/td0 are stored; the other three
 * T-tables are rotations (one funnel-shift each), which keeps encryption at 32 KiB. The last
 * decryption round needs the inverse S-box, stored as bytes four to a word with the same rule.
 * On the host (and in the CPU test) sh = 0, lane = 0 reads a plain table with the same code. */
ACC_HD uint32_t acc_tw(const uint32_t *t, uint32_t x, unsigned sh, unsigned lane)
{
    return t[(x << sh) | lane];
}

ACC_HD uint32_t acc_tb(const uint8_t *t, uint32_t x, unsigned sh, unsigned lane)
{
    return t[((((x >> 2) << sh) | lane) << 2) | (x & 3)];
}

/* Index of entry x, copy lane, in a replicated byte table (used to fill one). */
ACC_HD uint32_t acc_tb_index(uint32_t x, unsigned sh, unsigned lane)
{
    return ((((x >> 2) << sh) | lane) << 2) | (x & 3);
}

/* ---- block functions ---- */

/* Encrypt one block in place; s[] holds big-endian words. rk: 4*(rounds+1) words. */
ACC_HD void acc_core_enc(const uint32_t *te, unsigned sh, unsigned lane,
                         const uint32_t *rk, int rounds, uint32_t s[4])
{
    uint32_t s0 = s[0] ^ rk[0], s1 = s[1] ^ rk[1], s2 = s[2] ^ rk[2], s3 = s[3] ^ rk[3];
    uint32_t t0, t1, t2, t3;
#ifdef __CUDA_ARCH__
#pragma unroll 4
#endif
    for (int r = 1; r < rounds; r++) {
        rk += 4;
        t0 = acc_tw(te, s0 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(te, (s1 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(te, (s2 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(te, s3 & 0xff, sh, lane), 24) ^ rk[0];
        t1 = acc_tw(te, s1 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(te, (s2 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(te, (s3 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(te, s0 & 0xff, sh, lane), 24) ^ rk[1];
        t2 = acc_tw(te, s2 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(te, (s3 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(te, (s0 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(te, s1 & 0xff, sh, lane), 24) ^ rk[2];
        t3 = acc_tw(te, s3 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(te, (s0 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(te, (s1 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(te, s2 & 0xff, sh, lane), 24) ^ rk[3];
        s0 = t0; s1 = t1; s2 = t2; s3 = t3;
    }
    rk += 4;
    /* S[x] is the second byte of te0[x]: the last round needs no table of its own. */
#define ACC_SB(x) ((acc_tw(te, (x), sh, lane) >> 16) & 0xff)
    s[0] = (ACC_SB(s0 >> 24) << 24 | ACC_SB((s1 >> 16) & 0xff) << 16 | ACC_SB((s2 >> 8) & 0xff) << 8 | ACC_SB(s3 & 0xff)) ^ rk[0];
    s[1] = (ACC_SB(s1 >> 24) << 24 | ACC_SB((s2 >> 16) & 0xff) << 16 | ACC_SB((s3 >> 8) & 0xff) << 8 | ACC_SB(s0 & 0xff)) ^ rk[1];
    s[2] = (ACC_SB(s2 >> 24) << 24 | ACC_SB((s3 >> 16) & 0xff) << 16 | ACC_SB((s0 >> 8) & 0xff) << 8 | ACC_SB(s1 & 0xff)) ^ rk[2];
    s[3] = (ACC_SB(s3 >> 24) << 24 | ACC_SB((s0 >> 16) & 0xff) << 16 | ACC_SB((s1 >> 8) & 0xff) << 8 | ACC_SB(s2 & 0xff)) ^ rk[3];
#undef ACC_SB
}

/* Decrypt one block in place with the equivalent-inverse-cipher schedule dk (acc_core_dec_keys). */
ACC_HD void acc_core_dec(const uint32_t *td, const uint8_t *isb, unsigned sh, unsigned lane,
                         const uint32_t *dk, int rounds, uint32_t s[4])
{
    uint32_t s0 = s[0] ^ dk[0], s1 = s[1] ^ dk[1], s2 = s[2] ^ dk[2], s3 = s[3] ^ dk[3];
    uint32_t t0, t1, t2, t3;
#ifdef __CUDA_ARCH__
#pragma unroll 4
#endif
    for (int r = 1; r < rounds; r++) {
        dk += 4;
        t0 = acc_tw(td, s0 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(td, (s3 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(td, (s2 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(td, s1 & 0xff, sh, lane), 24) ^ dk[0];
        t1 = acc_tw(td, s1 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(td, (s0 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(td, (s3 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(td, s2 & 0xff, sh, lane), 24) ^ dk[1];
        t2 = acc_tw(td, s2 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(td, (s1 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(td, (s0 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(td, s3 & 0xff, sh, lane), 24) ^ dk[2];
        t3 = acc_tw(td, s3 >> 24, sh, lane) ^ ACC_ROTR(acc_tw(td, (s2 >> 16) & 0xff, sh, lane), 8)
           ^ ACC_ROTR(acc_tw(td, (s1 >> 8) & 0xff, sh, lane), 16) ^ ACC_ROTR(acc_tw(td, s0 & 0xff, sh, lane), 24) ^ dk[3];
        s0 = t0; s1 = t1; s2 = t2; s3 = t3;
    }
    dk += 4;
#define ACC_ISB(x) acc_tb(isb, (x), sh, lane)
    s[0] = (ACC_ISB(s0 >> 24) << 24 | ACC_ISB((s3 >> 16) & 0xff) << 16 | ACC_ISB((s2 >> 8) & 0xff) << 8 | ACC_ISB(s1 & 0xff)) ^ dk[0];
    s[1] = (ACC_ISB(s1 >> 24) << 24 | ACC_ISB((s0 >> 16) & 0xff) << 16 | ACC_ISB((s3 >> 8) & 0xff) << 8 | ACC_ISB(s2 & 0xff)) ^ dk[1];
    s[2] = (ACC_ISB(s2 >> 24) << 24 | ACC_ISB((s1 >> 16) & 0xff) << 16 | ACC_ISB((s0 >> 8) & 0xff) << 8 | ACC_ISB(s3 & 0xff)) ^ dk[2];
    s[3] = (ACC_ISB(s3 >> 24) << 24 | ACC_ISB((s2 >> 16) & 0xff) << 16 | ACC_ISB((s1 >> 8) & 0xff) << 8 | ACC_ISB(s0 & 0xff)) ^ dk[3];
#undef ACC_ISB
}

/* ---- per-block mode steps: what one GPU thread does for one block ---- */

/* Words of a 16-byte block as read from memory (little-endian 32-bit loads) <-> state words. */
ACC_HD void acc_core_load(uint32_t s[4], const uint32_t w[4])
{
    s[0] = ACC_BSWAP(w[0]); s[1] = ACC_BSWAP(w[1]); s[2] = ACC_BSWAP(w[2]); s[3] = ACC_BSWAP(w[3]);
}

/* Counter block number idx after base (hi:lo, the 128-bit big-endian counter as two 64-bit
 * halves): a full 128-bit add, so a counter whose low 64 bits wrap carries into the high half
 * and 2^128 wraps to 0, exactly as OpenSSL's ctr128_inc. */
ACC_HD void acc_core_ctr_block(uint64_t hi, uint64_t lo, uint64_t idx, uint32_t s[4])
{
    uint64_t l = lo + idx;
    uint64_t h = hi + (l < lo);
    s[0] = (uint32_t)(h >> 32); s[1] = (uint32_t)h; s[2] = (uint32_t)(l >> 32); s[3] = (uint32_t)l;
}

/* CTR: out = in ^ E(base + idx); in == NULL gives the keystream (the CPU XORs it later). */
ACC_HD void acc_core_ctr_step(const uint32_t *te, unsigned sh, unsigned lane, const uint32_t *rk, int rounds,
                              uint64_t hi, uint64_t lo, uint64_t idx, const uint32_t *in, uint32_t out[4])
{
    uint32_t s[4];
    acc_core_ctr_block(hi, lo, idx, s);
    acc_core_enc(te, sh, lane, rk, rounds, s);
    for (int i = 0; i < 4; i++)
        out[i] = ACC_BSWAP(s[i]) ^ (in ? in[i] : 0u);
}

/* CBC decrypt of one block: out = D(in) ^ prev, prev the previous ciphertext block (or the IV);
 * reads only input, so every block is independent (in and out must be separate buffers). */
ACC_HD void acc_core_cbc_dec_step(const uint32_t *td, const uint8_t *isb, unsigned sh, unsigned lane,
                                  const uint32_t *dk, int rounds, const uint32_t in[4],
                                  const uint32_t prev[4], uint32_t out[4])
{
    uint32_t s[4];
    acc_core_load(s, in);
    acc_core_dec(td, isb, sh, lane, dk, rounds, s);
    for (int i = 0; i < 4; i++)
        out[i] = ACC_BSWAP(s[i]) ^ prev[i];
}

/* CBC encrypt, serial: chain (state words) = E(chain ^ in) for nblk blocks, each written to out. */
ACC_HD void acc_core_cbc_enc_run(const uint32_t *te, unsigned sh, unsigned lane, const uint32_t *rk, int rounds,
                                 const uint32_t *in, uint32_t *out, size_t nblk, uint32_t chain[4])
{
    for (size_t b = 0; b < nblk; b++) {
        uint32_t s[4];
        acc_core_load(s, in + 4 * b);
        for (int i = 0; i < 4; i++)
            chain[i] ^= s[i];
        acc_core_enc(te, sh, lane, rk, rounds, chain);
        for (int i = 0; i < 4; i++)
            out[4 * b + i] = ACC_BSWAP(chain[i]);
    }
}

/* ---- host-side set-up (tables, key schedules) ---- */

static inline uint8_t acc_gf_xtime(uint8_t a)
{
    return (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
}

static inline uint8_t acc_gf_mul(uint8_t a, uint8_t b)
{
    uint8_t p = 0;
    while (b) {
        if (b & 1)
            p ^= a;
        a = acc_gf_xtime(a);
        b >>= 1;
    }
    return p;
}

/* S-box = affine map of the multiplicative inverse in GF(2^8) (FIPS-197 5.1.1). */
static inline void acc_core_tables_init(acc_core_tables *t)
{
    for (int x = 0; x < 256; x++) {
        uint8_t inv = 0;
        if (x) {   /* x^254 = x^-1 */
            uint8_t p = (uint8_t)x, r = 1;
            for (int e = 254; e; e >>= 1, p = acc_gf_mul(p, p))
                if (e & 1)
                    r = acc_gf_mul(r, p);
            inv = r;
        }
        uint8_t s = inv;
        for (int k = 1; k <= 4; k++)
            s ^= (uint8_t)((inv << k) | (inv >> (8 - k)));
        s ^= 0x63;
        t->sbox[x] = s;
        t->isbox[s] = (uint8_t)x;
    }
    for (int x = 0; x < 256; x++) {
        uint8_t s = t->sbox[x], i = t->isbox[x];
        t->te0[x] = (uint32_t)acc_gf_mul(s, 2) << 24 | (uint32_t)s << 16 | (uint32_t)s << 8 | acc_gf_mul(s, 3);
        t->td0[x] = (uint32_t)acc_gf_mul(i, 14) << 24 | (uint32_t)acc_gf_mul(i, 9) << 16
                  | (uint32_t)acc_gf_mul(i, 13) << 8 | acc_gf_mul(i, 11);
    }
}

/* ---- key schedules, in constant time ----
 * The schedules are derived from the key, so they take no table lookup indexed by key bytes (a
 * cache-timing channel on the host that expands every request's key): SubWord computes the S-box
 * as x^254 in GF(2^8) followed by the affine map, and InvMixColumns multiplies by its constants, both
 * with masks instead of branches, four bytes at a time. The exponent and the constants are public, so
 * the control flow is the same for every key. */

/* Four GF(2^8) elements packed in a word, byte by byte: 2 * a. */
static inline uint32_t acc_xtime4(uint32_t a)
{
    return ((a & 0x7f7f7f7fu) << 1) ^ (((a >> 7) & 0x01010101u) * 0x1bu);
}

/* a * b byte by byte, no branch on either operand. */
static inline uint32_t acc_gf_mul4_ct(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (int i = 0; i < 8; i++) {
        p ^= a & (((b >> i) & 0x01010101u) * 0xffu);
        a = acc_xtime4(a);
    }
    return p;
}

/* SubWord (FIPS-197 5.2) in constant time: each byte's S-box value as x^254 (= x^-1, and 0 for 0) by a
 * fixed addition chain, then the affine map (each byte XORed with its rotations by 1..4, then 0x63). */
static inline uint32_t acc_core_subword(uint32_t x)
{
    uint32_t x2 = acc_gf_mul4_ct(x, x), x3 = acc_gf_mul4_ct(x2, x), x6 = acc_gf_mul4_ct(x3, x3);
    uint32_t x12 = acc_gf_mul4_ct(x6, x6), x15 = acc_gf_mul4_ct(x12, x3), x30 = acc_gf_mul4_ct(x15, x15);
    uint32_t x60 = acc_gf_mul4_ct(x30, x30), x63 = acc_gf_mul4_ct(x60, x3), x126 = acc_gf_mul4_ct(x63, x63);
    uint32_t x127 = acc_gf_mul4_ct(x126, x), inv = acc_gf_mul4_ct(x127, x127), s = inv;
    for (int k = 1; k <= 4; k++) {
        uint32_t hi = (0xffu << k) & 0xffu, lo = 0xffu >> (8 - k);   /* per-byte masks of a rotation by k */
        s ^= ((inv << k) & hi * 0x01010101u) | ((inv >> (8 - k)) & lo * 0x01010101u);
    }
    return s ^ 0x63636363u;
}

/* InvMixColumns of one column (top byte first), in constant time: 9a, 11a, 13a and 14a from
 * 2a, 4a and 8a, then each output byte XORs the four products its row takes. */
static inline uint32_t acc_inv_mix_column(uint32_t w)
{
    uint32_t x2 = acc_xtime4(w), x4 = acc_xtime4(x2), x8 = acc_xtime4(x4);
    uint32_t m9 = x8 ^ w, m11 = x8 ^ x2 ^ w, m13 = x8 ^ x4 ^ w, m14 = x8 ^ x4 ^ x2;
    return m14 ^ ACC_ROTR(m11, 24) ^ ACC_ROTR(m13, 16) ^ ACC_ROTR(m9, 8);
}

/* FIPS-197 5.2 key expansion into rk[4*(rounds+1)] (60 words at most). Returns rounds, or 0
 * for a key size other than 128/192/256 bits. */
static inline int acc_core_enc_keys(const uint8_t *key, int keybits, uint32_t rk[60])
{
    if (keybits != 128 && keybits != 192 && keybits != 256)
        return 0;
    int nk = keybits / 32, rounds = nk + 6, total = 4 * (rounds + 1);
    uint8_t rcon = 1;
    for (int i = 0; i < nk; i++)
        rk[i] = (uint32_t)key[4 * i] << 24 | (uint32_t)key[4 * i + 1] << 16 | (uint32_t)key[4 * i + 2] << 8 | key[4 * i + 3];
    for (int i = nk; i < total; i++) {
        uint32_t w = rk[i - 1];
        if (i % nk == 0) {
            w = acc_core_subword((w << 8) | (w >> 24)) ^ ((uint32_t)rcon << 24);
            rcon = acc_gf_xtime(rcon);   /* public: depends on i only */
        } else if (nk > 6 && i % nk == 4) {
            w = acc_core_subword(w);
        }
        rk[i] = rk[i - nk] ^ w;
    }
    return rounds;
}

/* Equivalent inverse cipher schedule (FIPS-197 5.3.5): round keys in reverse order, with
 * InvMixColumns applied to the middle ones. */
static inline void acc_core_dec_keys(const uint32_t *rk, int rounds, uint32_t dk[60])
{
    for (int r = 0; r <= rounds; r++)
        for (int j = 0; j < 4; j++) {
            uint32_t w = rk[4 * (rounds - r) + j];
            if (r > 0 && r < rounds)
                w = acc_inv_mix_column(w);
            dk[4 * r + j] = w;
        }
}

#endif
