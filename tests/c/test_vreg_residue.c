/* tests/c/test_vreg_residue.c: no round key left in a vector register or on the stack after an
 * engine call. A register's contents reach memory at the next xsave (lazy binding, a signal
 * frame), and a key the compiler spilled stays in the dead frame below the caller's, so every entry
 * point clears what it used (docs/SECURITY.md, accel/wipe.h). Each block mode and XTS, at lengths on
 * both sides of each engine's short-unit switch, on every engine this CPU has (the re-runs of
 * test_engine_common.h): right after the call, every 16-byte lane of every vector register, and
 * of the STACK_SCAN bytes below the caller's frame (zeroed before the call), is compared with
 * every round key of both schedules of both keys. Then accelaes's own GCM engine on ymm and on xmm
 * (the widths this file was checked on; the zmm one needs AVX-512): each message call, both
 * directions, lengths with and without a partial block. Which keys a compiler spills differs
 * between gcc releases: this runs on each Debian release's (make test-release). */
#include "tests/c/test_engine_common.h"
#include "accel/gcm.h"

enum { MAXREG = 32, LANES = MAXREG * 4 };

/* Each a function of its own, called right after the engine returns, before any vector code of
 * this file: the registers as the engine left them. */
static __attribute__((noinline)) void dump_xmm(uint8_t *b)
{
    __asm__ volatile("movdqu %%xmm0, 0(%0); movdqu %%xmm1, 16(%0); movdqu %%xmm2, 32(%0); movdqu %%xmm3, 48(%0);"
                     "movdqu %%xmm4, 64(%0); movdqu %%xmm5, 80(%0); movdqu %%xmm6, 96(%0); movdqu %%xmm7, 112(%0);"
                     "movdqu %%xmm8, 128(%0); movdqu %%xmm9, 144(%0); movdqu %%xmm10, 160(%0);"
                     "movdqu %%xmm11, 176(%0); movdqu %%xmm12, 192(%0); movdqu %%xmm13, 208(%0);"
                     "movdqu %%xmm14, 224(%0); movdqu %%xmm15, 240(%0)" : : "r"(b) : "memory");
}

#define YST(n) "vmovdqu %%ymm" #n ", " #n "*32(%0);"
static __attribute__((noinline, target("avx"))) void dump_ymm(uint8_t *b)
{
    __asm__ volatile(YST(0) YST(1) YST(2) YST(3) YST(4) YST(5) YST(6) YST(7) YST(8) YST(9) YST(10) YST(11) YST(12)
                         YST(13) YST(14) YST(15) : : "r"(b) : "memory");
}

#define ZST(n) "vmovdqu64 %%zmm" #n ", " #n "*64(%0);"
static __attribute__((noinline, target("avx512f"))) void dump_zmm(uint8_t *b)
{
    __asm__ volatile(ZST(0) ZST(1) ZST(2) ZST(3) ZST(4) ZST(5) ZST(6) ZST(7) ZST(8) ZST(9) ZST(10) ZST(11) ZST(12)
                         ZST(13) ZST(14) ZST(15) ZST(16) ZST(17) ZST(18) ZST(19) ZST(20) ZST(21) ZST(22) ZST(23)
                         ZST(24) ZST(25) ZST(26) ZST(27) ZST(28) ZST(29) ZST(30) ZST(31) : : "r"(b) : "memory");
}

/* The register file's 16-byte lanes into b; their count. */
static size_t dump_regs(uint8_t b[LANES * 16])
{
    if (acc_cpu_has(ACC_CPU_AVX512F)) {
        dump_zmm(b);
        return 32 * 4;
    }
    if (acc_cpu_has(ACC_CPU_AVX)) {
        dump_ymm(b);
        return 16 * 2;
    }
    dump_xmm(b);
    return 16;
}

/* The stack below the caller's frame, where the engine's frames were: zeroed before the call, read
 * after it (each a local array at the depth the engine ran at, called from the same function). */
#define STACK_SCAN 8192
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wuninitialized"
static __attribute__((noinline)) void stack_zero(void)
{
    volatile uint8_t b[STACK_SCAN] __attribute__((aligned(64)));

    for (size_t i = 0; i < STACK_SCAN; i++)
        b[i] = 0;
}

static __attribute__((noinline)) void stack_read(uint8_t *to)
{
    volatile uint8_t b[STACK_SCAN] __attribute__((aligned(64)));

    for (size_t i = 0; i < STACK_SCAN; i++)
        to[i] = b[i];
}

/* Lanes that equal a round key of k (either schedule); the last one found described in where_found. */
static char where_found[96];

static int lanes_with_key(const uint8_t *lanes, size_t n, const acc_aes_key *k)
{
    int hits = 0;

    for (size_t i = 0; i < n; i++)
        for (int r = 0; r <= k->rounds; r++) {
            int e = memcmp(lanes + 16 * i, k->enc + 16 * r, 16) == 0;
            int d = k->has_dec && memcmp(lanes + 16 * i, k->dec + 16 * r, 16) == 0;

            if (e || d)
                snprintf(where_found, sizeof(where_found), "lane %zu: %s round key %d", i, e ? "encryption" : "decryption",
                         r);
            hits += e || d;
        }
    return hits;
}

/* The scan's own check: a callee that leaves a round key in its dead frame must be seen. */
static __attribute__((noinline)) void leave_key_in_frame(const acc_aes_key *k)
{
    volatile uint8_t b[256] __attribute__((aligned(16)));

    for (size_t i = 0; i < 16; i++)
        b[128 + i] = k->enc[16 + i];
}

/* AddressSanitizer lays frames out its own way (red zones between locals, frames that may live on
 * its fake stack), so what lies below the caller is not the engine's frames: the stack scan is for
 * the builds users run, the registers are checked in both. */
#if defined(__SANITIZE_ADDRESS__)
#define STACK_SCANNED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STACK_SCANNED 0
#endif
#endif
#ifndef STACK_SCANNED
#define STACK_SCANNED 1
#endif

static void scan_sees_planted_key(const acc_engine *e, const acc_aes_key *k)
{
    static uint8_t stack[STACK_SCAN];

    stack_zero();
    leave_key_in_frame(k);
    stack_read(stack);
    check(lanes_with_key(stack, STACK_SCAN / 16, k) == 1, e, "the stack scan missed a planted round key");
}

static const char *const op_name[] = { "ecb-enc", "ecb-dec", "cbc-enc", "cbc-dec", "ctr", "xts-enc", "xts-dec" };

/* One call of op on n blocks (XTS: len bytes = n * 16 + tail), then the registers; hits reported. */
static void one(const acc_engine *e, const acc_aes_key *k1, const acc_aes_key *k2, int op, size_t len)
{
    static uint8_t in[4096], out[4096], lanes[LANES * 16], stack[STACK_SCAN];
    uint8_t iv[16] = { 7 };
    size_t n;
    int ok;

    rnd_bytes(in, len);
    stack_zero();
    switch (op) {
    case 0: ok = e->ecb_enc(k1, in, out, len / 16); break;
    case 1: ok = e->ecb_dec(k1, in, out, len / 16); break;
    case 2: ok = e->cbc_enc(k1, in, out, len / 16, iv); break;
    case 3: ok = e->cbc_dec(k1, in, out, len / 16, iv); break;
    case 4: ok = e->ctr(k1, in, out, len / 16, iv); break;
    default: ok = e->xts(k1, k2, iv, in, out, len, op == 6); break;
    }
    n = dump_regs(lanes);
    stack_read(stack);
    where_found[0] = 0;
    check(!STACK_SCANNED || (lanes_with_key(stack, STACK_SCAN / 16, k1) == 0
                             && lanes_with_key(stack, STACK_SCAN / 16, k2) == 0), e,
          "%s %zu bytes (%d-bit key): a round key is left on the stack (%s)", op_name[op], len, k1->keybits,
          where_found);
    check(ok == 1, e, "%s %zu bytes: the call failed", op_name[op], len);
    where_found[0] = 0;
    check(lanes_with_key(lanes, n, k1) == 0 && lanes_with_key(lanes, n, k2) == 0, e,
          "%s %zu bytes (%d-bit key): a round key is left in a vector register (%s)", op_name[op], len, k1->keybits,
          where_found);
}

/* After each GCM message call on g (key kb bits), the registers against the key's schedule. */
static void gcm_residue(const acc_gcm_engine *g, const acc_engine *e, int kb)
{
    static const size_t lens[] = { 13, 16, 100, 128, 129, 1024, 4096 };
    static acc_gcm_state s;
    static uint8_t buf[4096], lanes[LANES * 16], stack[STACK_SCAN];
    uint8_t key[32], iv[12] = { 9 }, tag[16];
    acc_aes_key k;
    size_t n;

    rnd_bytes(key, sizeof(key));
    memset(&k, 0, sizeof(k));
    if (!e->set_key(&k, key, kb / 8, 0) || !g->set_key(&s, key, kb / 8)) {
        check(0, e, "%s set_key %d", g->name, kb);
        return;
    }
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (int enc = 0; enc < 2; enc++) {
            int ok[3];
            size_t bad = 0;

            stack_zero();
            ok[0] = g->start(&s, enc, iv, sizeof(iv), buf, 13);
            n = dump_regs(lanes);
            bad += lanes_with_key(lanes, n, &k);
            ok[1] = g->update(&s, buf, buf, lens[i]);
            n = dump_regs(lanes);
            bad += lanes_with_key(lanes, n, &k);
            ok[2] = enc ? g->finish(&s, tag, 16) : 1;
            if (!enc)
                g->finish(&s, tag, 16);   /* a wrong tag: its answer does not matter here */
            n = dump_regs(lanes);
            bad += lanes_with_key(lanes, n, &k);
            stack_read(stack);
            where_found[0] = 0;
            check(!STACK_SCANNED || lanes_with_key(stack, STACK_SCAN / 16, &k) == 0, e,
                  "%s %zu bytes (%d-bit key, enc %d): a round key is left on the stack (%s)", g->name, lens[i], kb,
                  enc, where_found);
            check(ok[0] && ok[1] && ok[2], e, "%s %zu bytes: a call failed", g->name, lens[i]);
            check(bad == 0, e, "%s %zu bytes (%d-bit key, enc %d): a round key is left in a vector register",
                  g->name, lens[i], kb, enc);
        }
    g->cleanse(&s);
    e->free_key(&k);
}

static void test_residue(const acc_engine *e)
{
    static const size_t lens[] = { 16, 48, 64, 100, 112, 128, 136, 256, 1024, 4096 };
    acc_aes_key k1, k2;
    uint8_t key[64];

    if (!acc_engine_has(e, ACC_CAP_NI_SCHEDULE)) {
        printf("skip [%s]: its schedule is not in acc_aes_key (nested EVP: the default provider's own code)\n",
               e->name);
        return;
    }
    for (int kb = 128; kb <= 256; kb += 64) {
        rnd_bytes(key, sizeof(key));
        memset(&k1, 0, sizeof(k1));
        memset(&k2, 0, sizeof(k2));
        if (!e->set_key(&k1, key, kb / 8, 0) || !e->set_key(&k2, key + 32, kb / 8, 0)) {
            check(0, e, "set_key %d", kb);
            continue;
        }
        if (STACK_SCANNED)
            scan_sees_planted_key(e, &k1);
        else if (kb == 128)
            printf("skip [%s]: the stack scan under AddressSanitizer (its own frame layout); registers checked\n",
                   e->name);
        for (int op = 0; op < 7; op++)
            for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
                if (op >= 5 ? kb != 192 : lens[i] % 16 == 0)   /* XTS: AES-128 and AES-256 only */
                    one(e, &k1, &k2, op, lens[i]);
        e->free_key(&k1);
        e->free_key(&k2);
        if (e == acc_engine_aesni()) {
            const acc_gcm_engine *gcm[2] = { acc_gcm_engine_vaesy(), acc_gcm_engine_vaesx() };
            for (int i = 0; i < 2; i++)
                if (gcm[i] != NULL)
                    gcm_residue(gcm[i], e, kb);
        }
    }
}

int main(int argc, char **argv)
{
    return engine_test_main(argc, argv, "test_vreg_residue", test_residue);
}
