/* provider/cipher/cipher_hmac_stitch.c: the encrypt side of the stitched ciphers in one loop: per 64
 * bytes, one SHA-1 or SHA-256 block and four AES-CBC blocks, by the kernels of accel/hmac_stitch.h
 * (SHA-NI and AES-NI); here, what of the record is hashed and the MAC state around them. Only with
 * the AES-NI engine, whose key schedule is laid out for aesenc (accel/engine.h). */
#include "accel/hmac_stitch.h"
#include "provider/cipher/cipher_hmac.h"

int acc_hmac_stitch_usable(const acc_hmac_ctx *h)
{
    return acc_stitch_kernels_get() != NULL && h->aes.key_set && acc_engine_has(h->aes.eng, ACC_CAP_NI_SCHEDULE);
}

/* ======================== The record's payload ======================== */

/* Fill the running hash (head + AAD) to a block boundary with SHA*_Update, then run whole
 * 64-byte steps: the hash at out + *hashed, AES-CBC at out + done (done <= *hashed, so every
 * byte is hashed before it is encrypted in place). Returns the bytes encrypted from out. */
size_t acc_hmac_stitch(acc_hmac_ctx *h, uint8_t *out, size_t iv, size_t plen, size_t *hashed)
{
    const int sha1 = h->sha->md_size == 20;
    size_t num = sha1 ? h->md.s1.num : h->md.s256.num, fill = (64 - num) % 64, n;
    const acc_stitch_kernels *kern = acc_stitch_kernels_get();
    uint64_t bits;

    *hashed = iv;
    if (kern == NULL || plen < iv + fill + 64)
        return 0;
    h->sha->update(&h->md, out + iv, fill);
    *hashed += fill;
    n = (plen - *hashed) / 64;
    if (sha1) {
        uint32_t hs[5] = { h->md.s1.h0, h->md.s1.h1, h->md.s1.h2, h->md.s1.h3, h->md.s1.h4 };

        kern->sha1_cbc(hs, out + *hashed, out, n, acc_cipher_key(&h->aes), h->aes.iv);
        h->md.s1.h0 = hs[0]; h->md.s1.h1 = hs[1]; h->md.s1.h2 = hs[2]; h->md.s1.h3 = hs[3]; h->md.s1.h4 = hs[4];
    } else {
        kern->sha256_cbc(h->md.s256.h, out + *hashed, out, n, acc_cipher_key(&h->aes), h->aes.iv);
    }
    /* the hash's bit count, as SHA*_Update keeps it (low word, high word) */
    bits = (uint64_t)n * 512;
    if (sha1) {
        uint64_t t = ((uint64_t)h->md.s1.Nh << 32 | h->md.s1.Nl) + bits;
        h->md.s1.Nl = (uint32_t)t;
        h->md.s1.Nh = (uint32_t)(t >> 32);
    } else {
        uint64_t t = ((uint64_t)h->md.s256.Nh << 32 | h->md.s256.Nl) + bits;
        h->md.s256.Nl = (uint32_t)t;
        h->md.s256.Nh = (uint32_t)(t >> 32);
    }
    *hashed += 64 * n;
    return 64 * n;
}
