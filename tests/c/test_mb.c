/* tests/c/test_mb.c: the multi-buffer engine (accel/cpu/mb.c) against OpenSSL's default
 * provider: random mixes of ops, key sizes, keys, IVs and lengths in one acc_mb_run call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "accel/engine.h"
#include "accel/mb.h"

static int passed, failed;

static void check(int cond, const char *what, int round, size_t i)
{
    if (cond) {
        passed++;
    } else {
        failed++;
        if (failed <= 20)
            fprintf(stderr, "FAIL: %s (round %d, request %zu)\n", what, round, i);
    }
}

static const EVP_CIPHER *evp_cipher(int op, int keybits)
{
    const char *mode = (op == ACC_OP_CTR) ? "CTR"
                     : (op == ACC_OP_ECB_ENC || op == ACC_OP_ECB_DEC) ? "ECB" : "CBC";
    static EVP_CIPHER *cache[3][3];
    int mi = mode[0] == 'C' ? (mode[1] == 'T' ? 2 : 1) : 0, ki = keybits / 64 - 2;
    char name[32];

    if (cache[mi][ki] == NULL) {
        snprintf(name, sizeof(name), "AES-%d-%s", keybits, mode);
        cache[mi][ki] = EVP_CIPHER_fetch(NULL, name, "provider=default");
    }
    return cache[mi][ki];
}

/* The reference: OpenSSL's default provider, and its updated IV. */
static int reference(int op, const uint8_t *key, int keybits, const uint8_t *iv,
                     const uint8_t *in, uint8_t *out, size_t len, uint8_t newiv[16])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int enc = op == ACC_OP_CBC_ENC || op == ACC_OP_ECB_ENC || op == ACC_OP_CTR, ol = 0, ok;

    ok = c != NULL && EVP_CipherInit_ex2(c, evp_cipher(op, keybits), key, iv, enc, NULL)
         && EVP_CIPHER_CTX_set_padding(c, 0)
         && EVP_CipherUpdate(c, out, &ol, in, (int)len) && (size_t)ol == len;
    if (ok && iv != NULL)
        ok = EVP_CIPHER_CTX_get_updated_iv(c, newiv, 16);
    EVP_CIPHER_CTX_free(c);
    return ok;
}

typedef struct tcase {
    acc_aes_key ks;
    uint8_t key[32], iv[16], iv0[16], refiv[16];
    uint8_t *in, *out, *ref;
    size_t nblocks;
    int op, keybits, inplace;
} tcase;

static size_t pick_blocks(void)
{
    unsigned r = (unsigned)rand() % 16;

    if (r < 7)
        return 1 + (size_t)rand() % 64;           /* small, odd counts included */
    if (r < 13)
        return 65 + (size_t)rand() % 2000;
    if (r < 15)
        return 4095 + (size_t)rand() % 5000;      /* >= 64 KiB: runs in pieces */
    return (size_t)rand() % 2 ? 0 : 4096;          /* empty, and exactly 64 KiB */
}

static void pick_iv(tcase *t)
{
    RAND_bytes(t->iv, 16);
    switch (rand() % 6) {
    case 0:   /* low 32 bits about to wrap: ipsec-mb's CTR carries only 32 bits */
        memset(t->iv + 12, 0xff, 4);
        t->iv[15] = (uint8_t)(0xff - rand() % 8);
        break;
    case 1:   /* low 64 bits about to wrap */
        memset(t->iv + 8, 0xff, 8);
        t->iv[15] = (uint8_t)(0xff - rand() % 8);
        break;
    case 2:   /* the whole 128-bit counter wraps to zero */
        memset(t->iv, 0xff, 16);
        t->iv[15] = (uint8_t)(0xff - rand() % 8);
        break;
    default:
        break;
    }
    memcpy(t->iv0, t->iv, 16);
}

static int run_round(int round, const acc_engine *eng, size_t n)
{
    static const int ops[] = { ACC_OP_CBC_ENC, ACC_OP_CBC_DEC, ACC_OP_ECB_ENC, ACC_OP_ECB_DEC, ACC_OP_CTR };
    static const int kb[] = { 128, 192, 256 };
    tcase *t = calloc(n, sizeof(*t));
    acc_req *r = calloc(n, sizeof(*r));
    size_t i;
    int ok = t != NULL && r != NULL, res;

    for (i = 0; ok && i < n; i++) {
        size_t len;

        t[i].op = ops[rand() % 5];
        t[i].keybits = kb[rand() % 3];
        t[i].nblocks = pick_blocks();
        t[i].inplace = rand() % 2;
        len = t[i].nblocks * 16;
        RAND_bytes(t[i].key, 32);
        pick_iv(&t[i]);
        t[i].in = malloc(len + 16);
        t[i].out = t[i].inplace ? t[i].in : malloc(len + 16);
        t[i].ref = malloc(len + 16);
        if (t[i].in == NULL || t[i].out == NULL || t[i].ref == NULL) {
            ok = 0;
            break;
        }
        RAND_bytes(t[i].in, (int)len);
        int dec = t[i].op == ACC_OP_CBC_DEC || t[i].op == ACC_OP_ECB_DEC;
        ok = eng->set_key(&t[i].ks, t[i].key, (size_t)t[i].keybits / 8, !dec);
        int ecb = t[i].op == ACC_OP_ECB_ENC || t[i].op == ACC_OP_ECB_DEC;
        ok = ok && reference(t[i].op, t[i].key, t[i].keybits, ecb ? NULL : t[i].iv0,
                             t[i].in, t[i].ref, len, t[i].refiv);
        r[i] = (acc_req){ t[i].op, &t[i].ks, ecb ? NULL : t[i].iv, t[i].in, t[i].out, t[i].nblocks };
    }
    check(ok, "set-up (allocation, key schedule, reference)", round, 0);
    if (!ok)
        n = i;
    res = ok && acc_mb_run(r, n);
    check(res, "acc_mb_run returned 1", round, n);
    for (i = 0; res && i < n; i++) {
        int ecb = t[i].op == ACC_OP_ECB_ENC || t[i].op == ACC_OP_ECB_DEC;

        check(memcmp(t[i].out, t[i].ref, t[i].nblocks * 16) == 0, "output equals OpenSSL's", round, i);
        if (memcmp(t[i].out, t[i].ref, t[i].nblocks * 16) != 0 && failed <= 20)
            fprintf(stderr, "  op %d, AES-%d, %zu blocks, %s\n", t[i].op, t[i].keybits,
                    t[i].nblocks, t[i].inplace ? "in place" : "out of place");
        if (!ecb)
            check(memcmp(t[i].iv, t[i].refiv, 16) == 0, "updated IV equals OpenSSL's", round, i);
    }
    for (i = 0; i < n; i++) {
        eng->free_key(&t[i].ks);
        if (t[i].out != t[i].in)
            free(t[i].out);
        free(t[i].in);
        free(t[i].ref);
    }
    free(t);
    free(r);
    return ok;
}

/* Bad requests are refused with 0 and nothing is written. */
static void bad_requests(const acc_engine *eng)
{
    acc_aes_key ks;
    uint8_t key[16] = { 1 }, iv[16] = { 0 }, buf[32] = { 0 }, zero[32] = { 0 };
    acc_req r = { ACC_OP_CBC_DEC, &ks, iv, buf, buf, 2 };

    check(acc_mb_run(NULL, 0) == 1, "n = 0 is a successful no-op", -1, 0);
    check(acc_mb_run(NULL, 1) == 0, "NULL requests refused", -1, 0);
    if (!eng->set_key(&ks, key, 16, 1)) {
        check(0, "set_key", -1, 0);
        return;
    }
    ks.has_dec = 0;
    check(acc_mb_run(&r, 1) == 0, "decrypt without a decryption schedule refused", -1, 0);
    r.op = 99;
    check(acc_mb_run(&r, 1) == 0, "unknown op refused", -1, 0);
    r.op = ACC_OP_CBC_ENC;
    r.iv = NULL;
    check(acc_mb_run(&r, 1) == 0, "CBC without IV refused", -1, 0);
    check(memcmp(buf, zero, sizeof(buf)) == 0, "refused requests wrote nothing", -1, 0);
    eng->free_key(&ks);
}

int main(void)
{
    const acc_engine *eng = acc_engine_default();
    unsigned seed = (unsigned)(getenv("TEST_SEED") ? strtoul(getenv("TEST_SEED"), NULL, 10) : 12345u);
    int round;

    if (!acc_mb_available()) {
        printf("skipped: built without intel-ipsec-mb or no hardware AES for it (acc_mb_available() = 0)\n");
        printf("0 passed, 0 failed\n");
        return 0;
    }
    if (eng == NULL || eng->set_key == NULL) {
        printf("no default engine\n0 passed, 1 failed\n");
        return 1;
    }
    srand(seed);
    printf("seed %u, engine %s, lanes %d\n", seed, eng->name, acc_mb_lanes());
    bad_requests(eng);
    for (round = 0; round < 24; round++) {
        /* Mostly lane-sized batches; some larger than the 64-request window. */
        size_t n = round % 6 == 5 ? 100 + (size_t)rand() % 60 : 1 + (size_t)rand() % 40;

        run_round(round, eng, n);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
