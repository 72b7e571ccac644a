/* provider/cipher/aead.c: the rules every AEAD here shares (provider/cipher/aead.h). */
#include <limits.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/cipher/aead.h"
#include "provider/base/compat.h"
#include "provider/route/prov.h"

int acc_aead_aad_add(acc_aead_aad *a, const uint8_t *data, size_t n, uint64_t max)
{
    if (n == 0)
        return 1; /* no memcpy to a buffer not yet made (UB even for 0 bytes) */
    if (a->len > max || n > max - a->len)
        return 0;
    if (n > a->cap - a->len) {
        size_t cap = a->cap < 64 ? 64 : a->cap;
        uint8_t *p;

        while (cap - a->len < n) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        /* not OPENSSL_realloc: the old AAD is cleansed, not left in freed memory */
        if ((p = OPENSSL_malloc(cap)) == NULL)
            return -1;
        if (a->len > 0)
            memcpy(p, a->p, a->len);
        OPENSSL_clear_free(a->p, a->cap);
        a->p = p;
        a->cap = cap;
    }
    memcpy(a->p + a->len, data, n);
    a->len += n;
    return 1;
}

int acc_aead_aad_dup(acc_aead_aad *d, const acc_aead_aad *s)
{
    d->p = NULL;
    d->cap = 0;
    if (s->p == NULL)
        return 1;
    if ((d->p = OPENSSL_malloc(s->cap)) == NULL)
        return 0;
    d->cap = s->cap;
    if (s->len > 0)
        memcpy(d->p, s->p, s->len);
    return 1;
}

void acc_aead_aad_free(acc_aead_aad *a)
{
    OPENSSL_clear_free(a->p, a->cap);
    a->p = NULL;
    a->len = a->cap = 0;
}

int acc_aead_piece_ok(const char *name, size_t inl)
{
    if (inl <= (size_t)INT_MAX)
        return 1;
    acc_raise(ACC_R_LENGTH_TOO_LARGE, "%s piece of %zu bytes", name, inl);
    return 0;
}

int acc_aead_out_ok(size_t inl, size_t outsize)
{
    if (outsize >= inl)
        return 1;
    acc_raise(ACC_PROV_R(PROV_R_OUTPUT_BUFFER_TOO_SMALL), "need %zu bytes of output, have %zu", inl, outsize);
    return 0;
}

int acc_aead_engine_failed(const char *aead, const char *engine, uint8_t *out, size_t len, const char *where)
{
    if (out != NULL && len > 0)
        OPENSSL_cleanse(out, len);
    acc_raise(ACC_R_ENGINE_FAILURE, "the %s %s engine failed in %s", engine, aead, where);
    return 0;
}

size_t acc_aead_tls_aad(uint8_t buf[ACC_AEAD_TLS_AAD_LEN], const unsigned char *aad, size_t aad_len, int enc,
                        size_t taglen)
{
    size_t len;

    if (aad_len != ACC_AEAD_TLS_AAD_LEN)
        return 0;
    memcpy(buf, aad, aad_len);
    len = (size_t)buf[aad_len - 2] << 8 | buf[aad_len - 1];
    if (len < ACC_AEAD_TLS_EXPLICIT)
        return 0;
    len -= ACC_AEAD_TLS_EXPLICIT;
    if (!enc) {
        if (len < taglen)
            return 0;
        len -= taglen;
    }
    buf[aad_len - 2] = (unsigned char)(len >> 8);
    buf[aad_len - 1] = (unsigned char)(len & 0xff);
    return taglen;
}

void acc_aead_ctr64_inc(uint8_t counter[8])
{
    for (int n = 7; n >= 0; n--)
        if (++counter[n] != 0)
            return;
}

int acc_aead_failed_to_set(const OSSL_PARAM *p)
{
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_SET_PARAMETER), "cannot return parameter '%s'", p->key);
    return 0;
}

int acc_aead_failed_to_get(const OSSL_PARAM *p)
{
    acc_raise(ACC_PROV_R(PROV_R_FAILED_TO_GET_PARAMETER), "cannot read parameter '%s'", p->key);
    return 0;
}

int acc_aead_get_size(OSSL_PARAM *p, size_t v)
{
    return OSSL_PARAM_set_size_t(p, v) || acc_aead_failed_to_set(p);
}

int acc_aead_get_iv(OSSL_PARAM *p, const uint8_t *iv, size_t ivlen, size_t n)
{
    if (ivlen > p->data_size) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "'%s' needs %zu bytes, has %zu", p->key, ivlen, p->data_size);
        return 0;
    }
    /* the string form first, as both defaults' IV answers (compat.c) */
    return acc_compat_set_iv(p, iv, n, 1) || acc_aead_failed_to_set(p);
}

int acc_aead_set_ivlen(const OSSL_PARAM *p, const char *aead, size_t min, size_t max, size_t *ivlen, int *iv_state)
{
    size_t sz;

    if (!OSSL_PARAM_get_size_t(p, &sz))
        return acc_aead_failed_to_get(p);
    if (sz < min || sz > max) {
        acc_raise(ACC_PROV_R(PROV_R_INVALID_IV_LENGTH), "%s IV of %zu bytes, expected %zu..%zu", aead, sz, min, max);
        return 0;
    }
    if (*ivlen != sz) {
        if (*iv_state != ACC_AEAD_IV_UNSET)
            *iv_state = ACC_AEAD_IV_FINISHED;
        *ivlen = sz;
    }
    return 1;
}

int acc_aead_set_tag(const OSSL_PARAM *p, const acc_aead_tag_rules *r, int enc, uint8_t *buf, size_t *taglen,
                     int *given)
{
    size_t sz = p->data_size;

    if (r->copy_first) {
        void *vp = buf;

        /* the running libcrypto's own reading, with its own error where it refuses (3.2+ raise one) */
        if (!OSSL_PARAM_get_octet_string(p, &vp, r->max, &sz))
            return acc_aead_failed_to_get(p);
    } else if (p->data_type != OSSL_PARAM_OCTET_STRING) {
        return acc_aead_failed_to_get(p);
    }
    if (sz < r->min || sz > r->max || (r->even && (sz & 1))) {
        acc_raise(r->bad_len, "%s tag of %zu bytes, expected %zu..%zu%s", r->aead, sz, r->min, r->max,
                  r->even ? " and even" : "");
        return 0;
    }
    if (p->data != NULL || !r->len_only) {
        if (enc) {
            acc_raise(r->on_enc, "a %s tag is set for decryption only: an encryption makes its own", r->aead);
            return 0;
        }
        if (!r->copy_first)
            memcpy(buf, p->data, sz);
        if (given != NULL)
            *given = 1;
    }
    *taglen = sz;
    return 1;
}

int acc_aead_set_tls_aad(const OSSL_PARAM *p, uint8_t buf[ACC_AEAD_TLS_AAD_LEN], int enc, size_t taglen, int reason,
                         size_t *aad_len, size_t *pad_sz)
{
    size_t sz;

    if (p->data_type != OSSL_PARAM_OCTET_STRING)
        return acc_aead_failed_to_get(p);
    /* the record's AAD is kept, its length field corrected to the payload's */
    sz = acc_aead_tls_aad(buf, p->data, p->data_size, enc, taglen);
    if (p->data_size == ACC_AEAD_TLS_AAD_LEN)
        *aad_len = p->data_size;
    if (sz == 0) {
        acc_raise(reason, "TLS AAD of %zu bytes or its length field", p->data_size);
        return 0;
    }
    *pad_sz = sz;
    return 1;
}
