/* tests/fake_engine.c: a small legacy ENGINE (id "accelaes-test"), loadable with
 * `openssl ... -engine /path/accelaes-test-engine.so` or ENGINE_by_id("dynamic") + SO_PATH, that
 * registers the kind of methods OpenSSL's test engine dasync does: AES-128-CBC, AES-256-CTR (the
 * cipher of OpenSSL's CTR-DRBG, so set as default it reaches into every DRBG made afterwards) and
 * a digest; with ACCELAES_TEST_ENGINE_RAND=1 also a RAND method. Debian's libcrypto ships no
 * dasync; tests/system/test_exit.py needs an engine set as default for everything, because ENGINE
 * teardown at exit is what it exercises.
 * The ENGINE API is deprecated in OpenSSL 3.0 (still present): built with deprecation warnings off. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <openssl/aes.h>
#include <openssl/engine.h>
#include <openssl/evp.h>
#include <openssl/modes.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

static const char engine_id[] = "accelaes-test";
static const char engine_name[] = "accelaes test engine (AES-128-CBC, AES-256-CTR, SHA-256)";

/* ---- AES-128-CBC and AES-256-CTR on the low-level AES API (an EVP call here would come back
 * to this engine) ---- */

typedef struct {
    AES_KEY key;
    int enc;
} aes_state;

static int aes_init(EVP_CIPHER_CTX *ctx, const unsigned char *key, const unsigned char *iv, int enc)
{
    aes_state *s = EVP_CIPHER_CTX_get_cipher_data(ctx);
    int bits = EVP_CIPHER_CTX_get_key_length(ctx) * 8;

    (void)iv;   /* EVP keeps the IV in the context */
    if (key == NULL)
        return 1;
    /* CTR runs the block cipher forwards in both directions */
    s->enc = enc || EVP_CIPHER_CTX_get_mode(ctx) == EVP_CIPH_CTR_MODE;
    return (s->enc ? AES_set_encrypt_key(key, bits, &s->key) : AES_set_decrypt_key(key, bits, &s->key)) == 0;
}

static int cbc_do(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, size_t len)
{
    aes_state *s = EVP_CIPHER_CTX_get_cipher_data(ctx);

    AES_cbc_encrypt(in, out, len, &s->key, EVP_CIPHER_CTX_iv_noconst(ctx), s->enc);
    return 1;
}

static int ctr_do(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, size_t len)
{
    aes_state *s = EVP_CIPHER_CTX_get_cipher_data(ctx);
    unsigned int num = (unsigned int)EVP_CIPHER_CTX_get_num(ctx);

    CRYPTO_ctr128_encrypt(in, out, len, &s->key, EVP_CIPHER_CTX_iv_noconst(ctx),
                          EVP_CIPHER_CTX_buf_noconst(ctx), &num, (block128_f)AES_encrypt);
    return EVP_CIPHER_CTX_set_num(ctx, (int)num);
}

static EVP_CIPHER *cbc_cipher, *ctr_cipher;

static EVP_CIPHER *aes_make(int nid, int block, int keylen, unsigned long mode,
                            int (*fn)(EVP_CIPHER_CTX *, unsigned char *, const unsigned char *, size_t))
{
    EVP_CIPHER *c = EVP_CIPHER_meth_new(nid, block, keylen);

    if (c == NULL || !EVP_CIPHER_meth_set_iv_length(c, 16)
        || !EVP_CIPHER_meth_set_flags(c, mode | EVP_CIPH_FLAG_DEFAULT_ASN1)
        || !EVP_CIPHER_meth_set_init(c, aes_init) || !EVP_CIPHER_meth_set_do_cipher(c, fn)
        || !EVP_CIPHER_meth_set_impl_ctx_size(c, sizeof(aes_state))) {
        EVP_CIPHER_meth_free(c);
        return NULL;
    }
    return c;
}

static int cipher_select(ENGINE *e, const EVP_CIPHER **cipher, const int **nids, int nid)
{
    static const int list[] = { NID_aes_128_cbc, NID_aes_256_ctr };

    (void)e;
    if (cipher == NULL) {
        *nids = list;
        return 2;
    }
    *cipher = nid == NID_aes_128_cbc ? cbc_cipher : nid == NID_aes_256_ctr ? ctr_cipher : NULL;
    return *cipher != NULL;
}

/* ---- SHA-256 on the low-level SHA API ---- */

static int sha_init(EVP_MD_CTX *ctx) { return SHA256_Init(EVP_MD_CTX_md_data(ctx)); }
static int sha_update(EVP_MD_CTX *ctx, const void *d, size_t n) { return SHA256_Update(EVP_MD_CTX_md_data(ctx), d, n); }
static int sha_final(EVP_MD_CTX *ctx, unsigned char *md) { return SHA256_Final(md, EVP_MD_CTX_md_data(ctx)); }

static EVP_MD *sha_md;

static EVP_MD *sha_make(void)
{
    EVP_MD *m = EVP_MD_meth_new(NID_sha256, NID_sha256WithRSAEncryption);

    if (m == NULL || !EVP_MD_meth_set_result_size(m, SHA256_DIGEST_LENGTH)
        || !EVP_MD_meth_set_input_blocksize(m, SHA256_CBLOCK)
        || !EVP_MD_meth_set_app_datasize(m, sizeof(SHA256_CTX))
        || !EVP_MD_meth_set_init(m, sha_init) || !EVP_MD_meth_set_update(m, sha_update)
        || !EVP_MD_meth_set_final(m, sha_final)) {
        EVP_MD_meth_free(m);
        return NULL;
    }
    return m;
}

static int digest_select(ENGINE *e, const EVP_MD **md, const int **nids, int nid)
{
    static const int list[] = { NID_sha256 };

    (void)e;
    if (md == NULL) {
        *nids = list;
        return 1;   /* the number of nids */
    }
    *md = nid == NID_sha256 ? sha_md : NULL;
    return *md != NULL;
}

/* ---- RAND: the kernel's generator ---- */

static int rand_bytes(unsigned char *buf, int num)
{
    for (size_t done = 0; done < (size_t)num;) {
        ssize_t n = getrandom(buf + done, (size_t)num - done, 0);
        if (n <= 0)
            return 0;
        done += (size_t)n;
    }
    return 1;
}

static int rand_status(void) { return 1; }

static RAND_METHOD rand_meth = { NULL, rand_bytes, NULL, NULL, rand_bytes, rand_status };

/* ---- binding ---- */

static int engine_destroy(ENGINE *e)
{
    (void)e;
    EVP_CIPHER_meth_free(cbc_cipher);
    EVP_CIPHER_meth_free(ctr_cipher);
    EVP_MD_meth_free(sha_md);
    cbc_cipher = ctr_cipher = NULL;
    sha_md = NULL;
    return 1;
}

static int bind_helper(ENGINE *e, const char *id)
{
    const char *with_rand = getenv("ACCELAES_TEST_ENGINE_RAND");

    if (id != NULL && strcmp(id, engine_id) != 0)
        return 0;
    if ((cbc_cipher == NULL
         && (cbc_cipher = aes_make(NID_aes_128_cbc, 16, 16, EVP_CIPH_CBC_MODE, cbc_do)) == NULL)
        || (ctr_cipher == NULL
            && (ctr_cipher = aes_make(NID_aes_256_ctr, 1, 32, EVP_CIPH_CTR_MODE, ctr_do)) == NULL)
        || (sha_md == NULL && (sha_md = sha_make()) == NULL))
        return 0;
    if (with_rand != NULL && strcmp(with_rand, "1") == 0 && !ENGINE_set_RAND(e, &rand_meth))
        return 0;
    return ENGINE_set_id(e, engine_id) && ENGINE_set_name(e, engine_name)
        && ENGINE_set_ciphers(e, cipher_select) && ENGINE_set_digests(e, digest_select)
        && ENGINE_set_destroy_function(e, engine_destroy);
}

IMPLEMENT_DYNAMIC_BIND_FN(bind_helper)
IMPLEMENT_DYNAMIC_CHECK_FN()
