/* bench/src/ovpn_cbc.c: OpenVPN 2.6's CBC data channel per packet, as its openvpn_encrypt_v1/decrypt_v1 call
 * EVP: a new IV on the kept key (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, -1)), one EVP_CipherUpdate
 * of the packet, EVP_CipherFinal_ex (PKCS#7 padding), then HMAC over IV + ciphertext (EVP_MAC, as its
 * hmac_ctx_* do). Default provider against accelaes in one process, taking turns, thread CPU time per
 * packet, the minimum over the rounds (bench/results/servers.md).
 *
 * Build: make build/bench/ovpn_cbc
 * Run:   OPENSSL_MODULES=build build/bench/ovpn_cbc enc|dec|enc-nomac|dec-nomac ROUNDS LEN...
 * (-nomac: the cipher calls alone, without the HMAC both providers share) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

static int with_mac = 1;
static unsigned char key[16] = { 1, 2, 3 }, mkey[32] = { 4 }, iv[16] = { 2 }, in[2048], ct[2048 + 32], out[2048 + 32];

static double cpu_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* one packet: re-IV, update, final, HMAC; returns the output length */
static int packet(EVP_CIPHER_CTX *x, EVP_MAC_CTX *m, const unsigned char *src, int len, unsigned char *dst)
{
    int n = 0, f = 0;
    unsigned char tag[32];
    size_t tl;

    if (x != NULL && EVP_CIPHER_CTX_is_encrypting(x))
        iv[0]++; /* a fresh IV per packet; a decrypting run keeps the one its packet was made with */
    if (!EVP_CipherInit_ex(x, NULL, NULL, NULL, iv, -1) || !EVP_CipherUpdate(x, dst, &n, src, len)
        || !EVP_CipherFinal_ex(x, dst + n, &f)
        || (with_mac
            && (!EVP_MAC_init(m, NULL, 0, NULL) || !EVP_MAC_update(m, iv, 16) || !EVP_MAC_update(m, dst, n + f)
                || !EVP_MAC_final(m, tag, &tl, 32)))) {
        fprintf(stderr, "EVP failed\n");
        exit(1);
    }
    return n + f;
}

static double run(EVP_CIPHER_CTX *x, EVP_MAC_CTX *m, int dec, long n, int len)
{
    double t0 = cpu_ns();

    for (long i = 0; i < n; i++)
        packet(x, m, dec ? ct : in, len, out);
    return (cpu_ns() - t0) / n;
}

int main(int argc, char **argv)
{
    const char *props[2] = { "provider=default", "provider=accelaes" };
    EVP_CIPHER_CTX *x[2];
    EVP_MAC_CTX *m;
    EVP_MAC *hmac;
    OSSL_PARAM mp[2] = { OSSL_PARAM_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_END };
    int dec, rounds;

    if (argc < 4 || !OSSL_PROVIDER_load(NULL, "default") || !OSSL_PROVIDER_load(NULL, "accelaes")) {
        fprintf(stderr, "usage: %s enc|dec[-nomac] ROUNDS LEN... (with accelaes loadable)\n", argv[0]);
        return 2;
    }
    dec = strncmp(argv[1], "dec", 3) == 0;
    with_mac = strstr(argv[1], "nomac") == NULL;
    rounds = atoi(argv[2]);
    hmac = EVP_MAC_fetch(NULL, "HMAC", "provider=default");
    m = EVP_MAC_CTX_new(hmac);
    if (m == NULL || !EVP_MAC_init(m, mkey, sizeof(mkey), mp))
        return 1;
    for (int p = 0; p < 2; p++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, "AES-128-CBC", props[p]);

        x[p] = EVP_CIPHER_CTX_new();
        if (c == NULL || !EVP_CipherInit_ex(x[p], c, NULL, key, iv, !dec))
            return 1;
        EVP_CIPHER_free(c);
    }
    printf("%-6s %6s %12s %12s %7s\n", "op", "len", "default ns", "accelaes ns", "ratio");
    for (int a = 3; a < argc; a++) {
        int len = atoi(argv[a]);
        double best[2] = { 1e30, 1e30 };
        long n = 2000000 / (len + 200) + 100;

        if (dec) { /* a valid packet to decrypt: encrypt it once with the default provider */
            EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, "AES-128-CBC", "provider=default");
            EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
            int k, f;

            EVP_EncryptInit_ex(e, c, NULL, key, iv);
            EVP_EncryptUpdate(e, ct, &k, in, len);
            EVP_EncryptFinal_ex(e, ct + k, &f);
            len = k + f;
            EVP_CIPHER_CTX_free(e);
            EVP_CIPHER_free(c);
        }
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 2; k++) {
                int p = (r + k) % 2; /* who goes first alternates */
                double t = run(x[p], m, dec, n, len);

                if (t < best[p])
                    best[p] = t;
            }
        printf("%-6s %6d %12.0f %12.0f %7.3f\n", argv[1], len, best[0], best[1], best[1] / best[0]);
    }
    return 0;
}
