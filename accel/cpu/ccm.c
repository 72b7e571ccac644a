/* accel/cpu/ccm.c: AES-CCM (NIST SP 800-38C, RFC 3610) for the AEAD layer (accel/ccm.h). With
 * AES-NI the CBC-MAC chain, which is serial, runs beside the CTR chain: two independent aesenc
 * chains per block hide each other's latency. Without it the block engine does one block per
 * call. The steps are those of the default provider's CCM128 state (see accel/ccm.h); both
 * paths are constant time in the key, the data and the tag (AES-NI, no table lookups). */
#define _GNU_SOURCE   /* secure_getenv */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "accel/ccm.h"
#include "accel/cpu/aes_x.h"

/* Two blocks through AES in registers, round by round: the CTR chain and the CBC-MAC chain. */
TGT_NI static inline void ni_pair(const uint8_t *rk, int rounds, __m128i *x, __m128i *y)
{
    __m128i a = _mm_xor_si128(*x, XKEY(rk, 0)), b = _mm_xor_si128(*y, XKEY(rk, 0));

    for (int r = 1; r < rounds; r++) {
        a = _mm_aesenc_si128(a, XKEY(rk, r));
        b = _mm_aesenc_si128(b, XKEY(rk, r));
    }
    *x = _mm_aesenclast_si128(a, XKEY(rk, rounds));
    *y = _mm_aesenclast_si128(b, XKEY(rk, rounds));
}

TGT_NI static inline __m128i ni_one(const uint8_t *rk, int rounds, __m128i x)
{
    x = _mm_xor_si128(x, XKEY(rk, 0));
    for (int r = 1; r < rounds; r++)
        x = _mm_aesenc_si128(x, XKEY(rk, r));
    return _mm_aesenclast_si128(x, XKEY(rk, rounds));
}

/* One block and two blocks in place (AES-NI), through the register functions above. */
TGT_NI static void ni_enc1(const acc_aes_key *k, uint8_t b[16])
{
    XST(b, ni_one(k->enc, k->rounds, XLD(b)));
}

TGT_NI static void ni_enc2(const acc_aes_key *k, uint8_t a[16], uint8_t b[16])
{
    __m128i x = XLD(a), y = XLD(b);

    ni_pair(k->enc, k->rounds, &x, &y);
    XST(a, x);
    XST(b, y);
}

/* One block in place. ni: AES-NI; else the block engine's ECB, which only nested EVP can fail: the
 * block is wiped and the message marked failed (crypt then returns -1). */
static void enc1(acc_ccm_state *s, int ni, uint8_t b[16])
{
    if (ni)
        ni_enc1(&s->ks, b);
    else if (!s->eng->ecb_enc(&s->ks, b, b, 1)) {
        OPENSSL_cleanse(b, 16);
        s->failed = 1;
    }
}

static void enc2(acc_ccm_state *s, int ni, uint8_t a[16], uint8_t b[16])
{
    if (ni) {
        ni_enc2(&s->ks, a, b);
        return;
    }
    enc1(s, 0, a);
    enc1(s, 0, b);
}

/* The counter block's last 8 bytes count as one 64-bit big-endian number (as the default's). */
static void ctr64_inc(uint8_t c[16])
{
    store_be64(c + 8, load_be64(c + 8) + 1);
}

static int ccm_set_key(acc_ccm_state *s, const acc_engine *eng, const uint8_t *key, size_t keylen)
{
    uint8_t mac[16];

    /* the same AES-NI schedule again (a key per record, as libssl's CCM and openssl speed's): set_key
     * overwrites it whole and wipes its decryption half, so two ~500-byte cleanses per record are
     * spared (a fifth of a 16-byte record's time) */
    if (s->eng == eng && (eng->caps & ACC_CAP_NI_SCHEDULE)) {
        memset(s->nonce, 0, sizeof(s->nonce));
        s->failed = 0;
        return eng->set_key(&s->ks, key, keylen, 1);
    }
    /* the MAC outlives a new key, as in the default's CCM128 (its tag can be got again) */
    memcpy(mac, s->cmac, sizeof(mac));
    if (s->eng != NULL)
        s->eng->free_key(&s->ks);
    OPENSSL_cleanse(s, sizeof(*s));
    memcpy(s->cmac, mac, sizeof(mac));
    OPENSSL_cleanse(mac, sizeof(mac));
    if (!eng->set_key(&s->ks, key, keylen, 1))
        return 0;
    s->eng = eng;
    return 1;
}

static void ccm_cleanse(acc_ccm_state *s)
{
    if (s->eng != NULL)
        s->eng->free_key(&s->ks);
    OPENSSL_cleanse(s, sizeof(*s));
}

/* B0: flags, the nonce, mlen in the last l bytes (higher bits dropped, as the default's). */
static int ccm_setiv(acc_ccm_state *s, const uint8_t *nonce, size_t nlen, size_t mlen)
{
    /* L and M come from the flags the key's set-up wrote (or the last message left): the default's
     * CCM128 reads them there, so an IV or tag length set after the key takes effect at the next key,
     * and a message that failed its length check leaves M spoilt */
    size_t L = (size_t)(s->nonce[0] & 7) + 1;

    if (L < 2 || nlen < 15 - L)
        return 0;
    s->failed = 0;
    s->nonce[0] &= (uint8_t)~0x40;
    memcpy(s->nonce + 1, nonce, 15 - L);
    for (size_t i = 0; i < L; i++)
        s->nonce[15 - i] = (uint8_t)(i < sizeof(mlen) ? mlen >> (8 * i) : 0);
    return 1;
}

static void ccm_aad(acc_ccm_state *s, int ni, const uint8_t *aad, size_t alen)
{
    size_t i;

    if (alen == 0)
        return;
    s->nonce[0] |= 0x40;
    memcpy(s->cmac, s->nonce, 16);
    enc1(s, ni, s->cmac);
    /* the AAD's length: 2 bytes below 2^16 - 2^8, else 0xfffe and 4 bytes, else 0xffff and 8 */
    if (alen < 0xff00) {
        s->cmac[0] ^= (uint8_t)(alen >> 8);
        s->cmac[1] ^= (uint8_t)alen;
        i = 2;
    } else if ((uint64_t)alen >> 32 != 0) {
        s->cmac[0] ^= 0xff;
        s->cmac[1] ^= 0xff;
        for (int b = 0; b < 8; b++)
            s->cmac[2 + b] ^= (uint8_t)((uint64_t)alen >> (56 - 8 * b));
        i = 10;
    } else {
        s->cmac[0] ^= 0xff;
        s->cmac[1] ^= 0xfe;
        for (int b = 0; b < 4; b++)
            s->cmac[2 + b] ^= (uint8_t)(alen >> (24 - 8 * b));
        i = 6;
    }
    do {
        for (; i < 16 && alen > 0; i++, aad++, alen--)
            s->cmac[i] ^= *aad;
        enc1(s, ni, s->cmac);
        i = 0;
    } while (alen > 0);
}

/* The data: the MAC of each plaintext block beside the keystream of the next counter block.
 * Decrypting, the MAC of block i-1 runs beside the keystream of block i. */
static void ccm_blocks(acc_ccm_state *s, int ni, int enc, const uint8_t *in, uint8_t *out, size_t len)
{
    uint8_t ks[16], prev[16];
    int pending = 0;

    for (; len > 0; in += 16, out += 16, len -= len < 16 ? len : 16) {
        size_t n = len < 16 ? len : 16;

        memcpy(ks, s->nonce, 16);
        if (enc) {
            for (size_t i = 0; i < n; i++)
                s->cmac[i] ^= in[i];
            enc2(s, ni, s->cmac, ks);
            for (size_t i = 0; i < n; i++)
                out[i] = in[i] ^ ks[i];
        } else {
            if (pending) {
                for (size_t i = 0; i < 16; i++)
                    s->cmac[i] ^= prev[i];
                enc2(s, ni, s->cmac, ks);
            } else {
                enc1(s, ni, ks);
            }
            for (size_t i = 0; i < n; i++)
                out[i] = prev[i] = in[i] ^ ks[i];
            for (size_t i = n; i < 16; i++)
                prev[i] = 0;
            pending = 1;
        }
        ctr64_inc(s->nonce);
        if (n < 16)
            break;
    }
    if (pending) {
        for (size_t i = 0; i < 16; i++)
            s->cmac[i] ^= prev[i];
        enc1(s, ni, s->cmac);
    }
    OPENSSL_cleanse(ks, sizeof(ks));
    OPENSSL_cleanse(prev, sizeof(prev));
}

/* The message's whole blocks with AES-NI, kept in registers (ccm_blocks' memory round trips per block
 * cost three times the default's time): the same arithmetic as ccm_blocks. Decrypting, the MAC of block
 * i-1 runs beside the keystream of block i, and the last whole block's MAC is finished here, so that
 * ccm_blocks can take a partial tail as a message of its own. Returns the bytes done. */
TGT_NI static size_t ni_whole(acc_ccm_state *s, int enc, const uint8_t *in, uint8_t *out, size_t len)
{
    const uint8_t *rk = s->ks.enc;
    const int rounds = s->ks.rounds;
    const size_t nb = len / 16;
    uint64_t c = load_be64(s->nonce + 8);
    __m128i base = XLD(s->nonce), mac = XLD(s->cmac), prev = _mm_setzero_si128(), x;

    if (nb == 0)
        return 0;
    for (size_t i = 0; i < nb; i++, in += 16, out += 16) {
        __m128i d = XLD(in);

        x = _mm_insert_epi64(base, (long long)__builtin_bswap64(c++), 1);
        if (enc) {
            mac = _mm_xor_si128(mac, d);
            ni_pair(rk, rounds, &x, &mac);
            XST(out, _mm_xor_si128(d, x));
        } else {
            if (i > 0) {
                mac = _mm_xor_si128(mac, prev);
                ni_pair(rk, rounds, &x, &mac);
            } else
                x = ni_one(rk, rounds, x);
            prev = _mm_xor_si128(d, x);
            XST(out, prev);
        }
    }
    if (!enc)
        mac = ni_one(rk, rounds, _mm_xor_si128(mac, prev));
    XST(s->cmac, mac);
    store_be64(s->nonce + 8, c);
    return nb * 16;
}

static int ccm_crypt(acc_ccm_state *s, int ni, int enc, int whole_enc, const uint8_t *in, uint8_t *out,
                     size_t len)
{
    uint8_t flags0 = s->nonce[0], s0[16];
    unsigned int l = flags0 & 7;   /* L - 1 */
    uint64_t n = 0;
    size_t done, whole = len & ~(size_t)15;

    if (!(flags0 & 0x40)) {   /* no AAD: the MAC starts from B0 alone */
        memcpy(s->cmac, s->nonce, 16);
        enc1(s, ni, s->cmac);
    }
    s->nonce[0] = (uint8_t)l;   /* the counter blocks' flags: L - 1 */
    for (unsigned int i = 15 - l; i < 16; i++) {
        n = n << 8 | s->nonce[i];
        s->nonce[i] = 0;
    }
    s->nonce[15] = 1;
    if (n != (uint64_t)len)
        return s->failed ? -1 : 0;   /* the state stays as the default's leaves it: its flags spoilt */
    done = ni ? ni_whole(s, whole_enc, in, out, whole) : 0;
    if (whole > done)
        ccm_blocks(s, ni, whole_enc, in + done, out + done, whole - done);
    if (len > whole)   /* the partial block: a message of its own to ccm_blocks, in the call's direction */
        ccm_blocks(s, ni, enc, in + whole, out + whole, len - whole);
    for (unsigned int i = 15 - l; i < 16; i++)
        s->nonce[i] = 0;
    memcpy(s0, s->nonce, 16);
    enc1(s, ni, s0);
    for (int i = 0; i < 16; i++)
        s->cmac[i] ^= s0[i];
    OPENSSL_cleanse(s0, sizeof(s0));
    s->nonce[0] = flags0;
    return s->failed ? -1 : 1;
}

static int ccm_tag(const acc_ccm_state *s, uint8_t *tag, size_t len)
{
    size_t m = (size_t)((s->nonce[0] >> 3) & 7) * 2 + 2;

    if (len != m)
        return 0;
    memcpy(tag, s->cmac, m);
    return 1;
}

/* ---- The two tables: AES-NI, and any block engine ---- */

static int ni_set_key(acc_ccm_state *s, const acc_engine *eng, const uint8_t *key, size_t keylen)
{
    (void)eng;
    return ccm_set_key(s, acc_engine_aesni(), key, keylen);
}

static void ni_aad(acc_ccm_state *s, const uint8_t *aad, size_t len)
{
    ccm_aad(s, 1, aad, len);
    acc_clear_xmm();
}

static int ni_crypt(acc_ccm_state *s, int enc, int whole_enc, const uint8_t *in, uint8_t *out, size_t len)
{
    int r = ccm_crypt(s, 1, enc, whole_enc, in, out, len);

    acc_clear_xmm();
    acc_stack_scrub_sse();
    return r;
}

static const acc_ccm_engine ni_ccm = { "aesni", ni_set_key, ccm_cleanse, ccm_setiv, ni_aad, ni_crypt, ccm_tag };

static int blk_set_key(acc_ccm_state *s, const acc_engine *eng, const uint8_t *key, size_t keylen)
{
    return eng != NULL && ccm_set_key(s, eng, key, keylen);
}

static void blk_aad(acc_ccm_state *s, const uint8_t *aad, size_t len)
{
    ccm_aad(s, 0, aad, len);
}

static int blk_crypt(acc_ccm_state *s, int enc, int whole_enc, const uint8_t *in, uint8_t *out, size_t len)
{
    return ccm_crypt(s, 0, enc, whole_enc, in, out, len);
}

static const acc_ccm_engine blk_ccm = { "block", blk_set_key, ccm_cleanse, ccm_setiv, blk_aad, blk_crypt, ccm_tag };

static const acc_ccm_engine *ccm_chosen;

/* As the block engine's choice (engine_select.c): AES-NI unless ACCELAES_FORCE_EVP_ENGINE=1. */
static void ccm_choose(void)
{
    const char *force = secure_getenv("ACCELAES_FORCE_EVP_ENGINE");

    ccm_chosen = acc_engine_aesni() != NULL && !(force != NULL && strcmp(force, "1") == 0) ? &ni_ccm : &blk_ccm;
}

const acc_ccm_engine *acc_ccm_engine_default(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, ccm_choose);
    return ccm_chosen;
}
