/* fuzz/fuzz_params.c: the parameter side of the differential fuzzer: hostile OSSL_PARAM lists
 * (wrong types, odd widths, huge values), which of them only accelaes may see, get-params
 * requests compared field by field, and the state and TLS MAC checks. */
#include <stdio.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include "fuzz/fuzz_diff.h"

static const char *const set_keys[] = {
    OSSL_CIPHER_PARAM_PADDING, OSSL_CIPHER_PARAM_NUM, OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_IVLEN,
    OSSL_CIPHER_PARAM_TLS_VERSION, OSSL_CIPHER_PARAM_TLS_MAC_SIZE, OSSL_CIPHER_PARAM_USE_BITS,
    "fuzz-unknown",
};

/* TLS versions (known and not), MAC sizes around the limit, block-size edges. */
static const uint64_t notable[] = {
    0x0300, 0x0301, 0x0302, 0x0303, 0xFEFF, 0xFEFD, 0x0100, 0x0304, 0x0200,
    0, 1, 15, 16, 17, 20, 32, 48, 64, 65, 255, 256,
};

static uint64_t pick_value(fz_reader *r)
{
    unsigned sel = fz_u8(r);
    uint64_t v = 0;

    switch (sel & 7) {
    case 0: return fz_u8(r);
    case 1: return 14 + fz_u8(r) % 4;
    case 2: return notable[fz_u8(r) % (sizeof(notable) / sizeof(notable[0]))];
    case 3: return 0;
    case 4: return 0xFFFFFFFFu;
    case 5: return (uint64_t)1 << 32;
    case 6: return UINT64_MAX;
    default:
        fz_take(r, (uint8_t *)&v, sizeof(v));
        return v;
    }
}

void fz_params_build(fz_reader *r, fz_params *ps)
{
    size_t n = 1 + fz_u8(r) % FZ_MAXPARAMS;

    memset(ps, 0, sizeof(*ps));
    for (size_t i = 0; i < n; i++) {
        const char *key = set_keys[fz_u8(r) % (sizeof(set_keys) / sizeof(set_keys[0]))];
        unsigned type = fz_u8(r);
        uint64_t v = pick_value(r);
        size_t w;

        switch (type & 7) {
        case 0:
            ps->v[i].u32 = (uint32_t)v;
            ps->p[i] = OSSL_PARAM_construct_uint32(key, &ps->v[i].u32);
            break;
        case 1:
            ps->v[i].u64 = v;
            ps->p[i] = OSSL_PARAM_construct_uint64(key, &ps->v[i].u64);
            break;
        case 2:
            ps->v[i].i32 = (int32_t)v;
            ps->p[i] = OSSL_PARAM_construct_int32(key, &ps->v[i].i32);
            break;
        case 3:
            ps->v[i].i64 = (int64_t)v;
            ps->p[i] = OSSL_PARAM_construct_int64(key, &ps->v[i].i64);
            break;
        case 4:
            memcpy(ps->v[i].b, &v, sizeof(v));
            ps->p[i] = OSSL_PARAM_construct_octet_string(key, ps->v[i].b, (type >> 3) % 9);
            break;
        case 5:
            snprintf(ps->v[i].s, sizeof(ps->v[i].s), "%llu", (unsigned long long)v);
            ps->p[i] = OSSL_PARAM_construct_utf8_string(key, ps->v[i].s, 0);
            break;
        case 6:
            ps->v[i].d = (type & 8) ? (double)(int64_t)v : (double)v + 0.5 * ((type >> 4) & 1);
            ps->p[i] = OSSL_PARAM_construct_double(key, &ps->v[i].d);
            break;
        default:
            /* an unsigned integer of an odd width, in host byte order as OSSL_PARAM wants */
            w = (size_t[]){ 1, 2, 3, 16 }[(type >> 3) & 3];
            memcpy(ps->v[i].b, &v, w < sizeof(v) ? w : sizeof(v));
            ps->p[i] = OSSL_PARAM_construct_BN(key, ps->v[i].b, w);
            break;
        }
    }
    ps->p[n] = OSSL_PARAM_construct_end();
}

int fz_tls_version_known(unsigned v)
{
    switch (v) {
    case 0x0300: case 0x0301: case 0x0302: case 0x0303: case 0xFEFF: case 0xFEFD: case 0x0100:
        return 1;
    default:
        return 0;
    }
}

int fz_params_acc_only(const fz_run *R, const OSSL_PARAM *params)
{
    const OSSL_PARAM *p;
    unsigned int u;
    size_t z;

    if (params == NULL || FZ_NEW_MODE(R->mode))
        return 0; /* GCM and XTS ignore num and the TLS record keys, as the default */
    /* num indexes the 16-byte CTR keystream block: the default reads past it (UB) */
    if (R->mode == FZ_CTR && (p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_NUM)) != NULL
        && OSSL_PARAM_get_uint(p, &u) && u >= 16)
        return 1;
    /* a MAC larger than any digest: the default takes it and trusts it later */
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_MAC_SIZE)) != NULL
        && OSSL_PARAM_get_size_t(p, &z) && z > 64)
        return 1;
    /* a version no CBC record layer speaks: the default takes it, accelaes refuses (documented) */
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION)) != NULL
        && OSSL_PARAM_get_uint(p, &u) && u != 0 && !fz_tls_version_known(u))
        return 1;
    return 0;
}

void fz_params_apply(const fz_run *R, fz_slot *s, const OSSL_PARAM *params)
{
    const OSSL_PARAM *p;
    unsigned int u;
    size_t z;

    if (params == NULL)
        return;
    /* GCM: a changed IV length drops the IV (the default's iv_state back to uninitialised); CCM keeps it */
    if (FZ_AEAD(R->mode) && (p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_IVLEN)) != NULL
        && OSSL_PARAM_get_size_t(p, &z) && z != fz_ivlen(R, s)) {
        s->ivlen = z;
        if (R->mode == FZ_GCM) {
            s->have_iv = 0;
            s->gcm = FZ_IV_UNSET;
        }
    }
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION)) != NULL
        && OSSL_PARAM_get_uint(p, &u))
        s->tls = u;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_MAC_SIZE)) != NULL
        && OSSL_PARAM_get_size_t(p, &z))
        s->tlsms = z;
}

/* ======================== Get-params ======================== */

static const char *const get_keys[] = {
    OSSL_CIPHER_PARAM_IV, OSSL_CIPHER_PARAM_UPDATED_IV, OSSL_CIPHER_PARAM_NUM, OSSL_CIPHER_PARAM_KEYLEN,
    OSSL_CIPHER_PARAM_IVLEN, OSSL_CIPHER_PARAM_PADDING, "fuzz-unknown", OSSL_CIPHER_PARAM_UPDATED_IV,
};

/* The same request, built twice over separate storage. */
static void build_get(fz_reader *r, fz_params *ps, fz_params *ps2)
{
    size_t n = 1 + fz_u8(r) % FZ_MAXPARAMS;

    memset(ps, 0, sizeof(*ps));
    for (size_t i = 0; i < n; i++) {
        const char *key = get_keys[fz_u8(r) % (sizeof(get_keys) / sizeof(get_keys[0]))];
        unsigned type = fz_u8(r);

        switch (type & 7) {
        case 0: case 1:
            ps->p[i] = OSSL_PARAM_construct_octet_string(key, ps->v[i].b, (type >> 3) % 33);
            break;
        case 2:
            ps->p[i] = OSSL_PARAM_construct_octet_ptr(key, &ps->v[i].ptr, 0);
            break;
        case 3:
            ps->p[i] = OSSL_PARAM_construct_uint32(key, &ps->v[i].u32);
            break;
        case 4:
            ps->p[i] = OSSL_PARAM_construct_size_t(key, (size_t *)&ps->v[i].u64);
            break;
        case 5:
            ps->p[i] = OSSL_PARAM_construct_int32(key, &ps->v[i].i32);
            break;
        case 6:
            ps->p[i] = OSSL_PARAM_construct_utf8_string(key, ps->v[i].s, 1 + (type >> 3) % 31);
            break;
        default:
            ps->p[i] = OSSL_PARAM_construct_int64(key, &ps->v[i].i64);
            break;
        }
    }
    ps->p[n] = OSSL_PARAM_construct_end();
    *ps2 = *ps;
    for (size_t i = 0; i < n; i++) {
        ps2->p[i].data = (unsigned char *)ps2->v + ((unsigned char *)ps->p[i].data - (unsigned char *)ps->v);
    }
}

static void compare_got(const fz_run *R, const fz_params *d, const fz_params *a)
{
    for (size_t i = 0; d->p[i].key != NULL; i++) {
        const OSSL_PARAM *pd = &d->p[i], *pa = &a->p[i];
        const void *vd = pd->data, *va = pa->data;
        size_t n = pd->return_size;

        if (pd->return_size != pa->return_size)
            fz_diverge(R, "get-params '%s' (type %u): return_size default %zu, accelaes %zu",
                       pd->key, pd->data_type, pd->return_size, pa->return_size);
        if (n == OSSL_PARAM_UNMODIFIED)
            continue;
        if (pd->data_type == OSSL_PARAM_OCTET_PTR) {
            vd = *(void *const *)pd->data;
            va = *(void *const *)pa->data;
            if ((vd == NULL) != (va == NULL))
                fz_diverge(R, "get-params '%s': pointer %p vs accelaes %p", pd->key, vd, va);
            if (vd == NULL)
                continue;
        } else if (n > pd->data_size) {
            n = pd->data_size;
        }
        if (memcmp(vd, va, n) != 0)
            fz_diverge(R, "get-params '%s' (type %u, %zu bytes): values differ", pd->key, pd->data_type, n);
    }
}

void fz_op_get_params(fz_run *R, fz_slot *s)
{
    fz_params d, a;
    int ok_d, ok_a;

    build_get(&R->r, &d, &a);
    fz_trace(R, "pair %d: first '%s'", (int)(s - R->s), d.p[0].key);
    ERR_clear_error();
    ok_d = fz_get_params(&s->c[FZ_DEF], d.p);
    ERR_clear_error();
    ok_a = fz_get_params(&s->c[FZ_ACC], a.p);
    if (ok_d != ok_a) {
        for (size_t i = 0; d.p[i].key != NULL; i++)   /* what was asked, for the report */
            fprintf(stderr, "  get-params [%zu] '%s' type %u size %zu\n", i, d.p[i].key, d.p[i].data_type,
                    d.p[i].data_size);
        fz_diverge(R, "get-params: default %d, accelaes %d", ok_d, ok_a);
    }
    if (ok_a)
        compare_got(R, &d, &a);
    ERR_clear_error();      /* a refused request changes nothing: no rebuild */
}

/* The updated IV and num of a context (and its TLS MAC where asked); 1 if it answered. */
static int read_state(fz_ctx *c, uint8_t iv[16], unsigned int *num, void **mac)
{
    OSSL_PARAM p[4];
    int ok;

    size_t n = 0;

    memset(iv, 0, 16);
    *num = 0;
    /* From OpenSSL 4.0 asking a GCM encryption with no IV yet for its IV makes a random one: each
     * side would draw its own and the probe itself would make them differ. There the IV state is
     * left to the outputs that follow, which show any difference. */
    if (!(OpenSSL_version_num() >= 0x40000000L && EVP_CIPHER_CTX_get_mode(c->evp) == EVP_CIPH_GCM_MODE))
        p[n++] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, iv, 16);
    p[n++] = OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_NUM, num);
    if (mac != NULL)
        p[n++] = OSSL_PARAM_construct_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, mac, 0);
    p[n] = OSSL_PARAM_construct_end();
    ok = fz_get_params(c, p);
    ERR_clear_error();
    return ok;
}

void fz_check_state(fz_run *R, fz_slot *s)
{
    uint8_t iv[2][16];
    unsigned int num[2];
    int ok[2];

    for (int side = 0; side < 2; side++)
        ok[side] = read_state(&s->c[side], iv[side], &num[side], NULL);
    if (ok[0] != ok[1] || memcmp(iv[0], iv[1], 16) != 0 || num[0] != num[1])
        fz_diverge(R, "state after the call: default ok=%d num=%u, accelaes ok=%d num=%u, updated IV %s",
                   ok[0], num[0], ok[1], num[1], memcmp(iv[0], iv[1], 16) ? "differs" : "equal");
}

void fz_check_copy(fz_run *R, fz_slot *s, fz_ctx *copy)
{
    uint8_t iv[2][16];
    unsigned int num[2];
    void *mac[2] = { NULL, NULL };
    int ok[2];

    ok[0] = read_state(&s->c[FZ_ACC], iv[0], &num[0], &mac[0]);
    ok[1] = read_state(copy, iv[1], &num[1], &mac[1]);
    if (ok[0] != ok[1] || memcmp(iv[0], iv[1], 16) != 0 || num[0] != num[1])
        fz_diverge(R, "accelaes copy: ok=%d num=%u, the original ok=%d num=%u, updated IV %s",
                   ok[1], num[1], ok[0], num[0], memcmp(iv[0], iv[1], 16) ? "differs" : "equal");
    if ((mac[0] == NULL) != (mac[1] == NULL)
        || (mac[0] != NULL && (mac[0] == mac[1] || memcmp(mac[0], mac[1], s->tlsms) != 0)))
        fz_diverge(R, "accelaes copy: the TLS MAC is %s", mac[0] == mac[1] ? "shared with the original"
                                                                          : "missing or different");
}

/* RFC 5246 6.2.3.2 padding (SSL 3.0: any bytes, at most a block), not in constant time. */
static int padding_good(unsigned version, const uint8_t *rec, size_t len, size_t ms)
{
    size_t pad;

    if (len < 1 + ms)
        return 0;
    pad = rec[len - 1];
    if (len < ms + 1 + pad)
        return 0;
    if (version == 0x0300)
        return pad + 1 <= 16;
    for (size_t i = 0; i <= pad; i++)
        if (rec[len - 1 - i] != pad)
            return 0;
    return 1;
}

void fz_check_tls_mac(fz_run *R, fz_slot *s, const uint8_t *rec, size_t len)
{
    void *mac[2] = { NULL, NULL };
    size_t rs[2];
    int ok[2];

    for (int side = 0; side < 2; side++) {
        OSSL_PARAM p[2];

        p[0] = OSSL_PARAM_construct_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, &mac[side], 0);
        p[1] = OSSL_PARAM_construct_end();
        ok[side] = fz_get_params(&s->c[side], p);
        rs[side] = p[0].return_size;
    }
    ERR_clear_error();
    if (ok[0] != ok[1] || (ok[0] && rs[0] != rs[1]))
        fz_diverge(R, "tls-mac after a record: default ok=%d size %zu, accelaes ok=%d size %zu",
                   ok[0], rs[0], ok[1], rs[1]);
    if (!ok[0] || s->tlsms == 0 || !padding_good(s->tls, rec, len, s->tlsms))
        return;
    if (mac[0] == NULL || mac[1] == NULL || memcmp(mac[0], mac[1], s->tlsms) != 0)
        fz_diverge(R, "tls-mac of a record with good padding differs (%zu bytes)", s->tlsms);
}
