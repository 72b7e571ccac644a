/* provider/cipher/skey.c: the AES key management of opaque keys (OSSL_OP_SKEYMGMT, OpenSSL 3.5+) and the
 * shared key object. EVP_CipherInit_SKEY takes only a key made by the cipher's own provider, so
 * where accelaes's ciphers are preferred its "AES" key management must be too: what 3.5's default
 * offers (import and export of the raw bytes, free), nothing more. The schedule is expanded once
 * here, and the contexts that get the key share it (provider/cipher/cipher_core.c). */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include "provider/base/ctx_alloc.h"
#include "provider/base/names.h"
#include "provider/route/prov.h"
#include "provider/route/skey.h"

int acc_skey_ref(acc_skey *k)
{
    return __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED) > 1;
}

void acc_skey_release(acc_skey *k)
{
    if (k == NULL || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    k->eng->free_key(&k->ks);
    OPENSSL_cleanse(k, sizeof(*k));
    acc_ctx_free(k);
}

acc_skey *acc_skey_new(const acc_engine *eng, const uint8_t *raw, size_t keylen)
{
    acc_skey *k;

    if ((keylen != 16 && keylen != 24 && keylen != 32) || raw == NULL)
        return NULL;
    if ((k = acc_ctx_alloc(sizeof(*k))) == NULL)
        return NULL;
    memset(k, 0, sizeof(*k));
    k->eng = eng;
    k->refs = 1;
    k->keylen = keylen;
    memcpy(k->raw, raw, keylen);
    /* both directions at once: a key is imported once and used by many contexts */
    if (!eng->set_key(&k->ks, k->raw, keylen, 0)) {
        OPENSSL_cleanse(k, sizeof(*k));
        acc_ctx_free(k);
        return NULL;
    }
    return k;
}

/* As the default's: a secret key selected, raw bytes of an AES length; a refusal raises nothing
 * (EVP's import returns NULL and the caller sees no error there either). */
static void *aes_import(void *provctx, int selection, const OSSL_PARAM params[])
{
    const acc_prov_ctx *prov = provctx;
    const OSSL_PARAM *p;

    if ((selection & OSSL_SKEYMGMT_SELECT_SECRET_KEY) == 0
        || (p = OSSL_PARAM_locate_const(params, OSSL_SKEY_PARAM_RAW_BYTES)) == NULL
        || p->data_type != OSSL_PARAM_OCTET_STRING)
        return NULL;
    return acc_skey_new(prov->eng, p->data, p->data_size);
}

/* The raw bytes for a secret-key selection (EVP_SKEY_get0_raw_key, EVP_SKEY_to_provider); this
 * key has no other parameters, so any other selection gets an empty list, as the default's. */
static int aes_export(void *keydata, int selection, OSSL_CALLBACK *cb, void *cbarg)
{
    acc_skey *k = keydata;
    OSSL_PARAM params[2];
    int n = 0;

    if (k == NULL || selection == 0)
        return 0;
    if ((selection & OSSL_SKEYMGMT_SELECT_SECRET_KEY) != 0)
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_SKEY_PARAM_RAW_BYTES, k->raw, k->keylen);
    params[n] = OSSL_PARAM_construct_end();
    return cb(params, cbarg);
}

static void aes_free(void *keydata)
{
    acc_skey_release(keydata);
}

int acc_skey_init_raw(OSSL_FUNC_cipher_encrypt_init_fn *init, void *cctx, void *skeydata,
                      const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    const acc_skey *k = skeydata;

    return init(cctx, k != NULL ? k->raw : NULL, k != NULL ? k->keylen : 0, iv, ivlen, params);
}

static const OSSL_DISPATCH aes_skeymgmt_functions[] = {
    { OSSL_FUNC_SKEYMGMT_FREE, (void (*)(void))aes_free },
    { OSSL_FUNC_SKEYMGMT_IMPORT, (void (*)(void))aes_import },
    { OSSL_FUNC_SKEYMGMT_EXPORT, (void (*)(void))aes_export },
    { 0, NULL }
};

static const OSSL_ALGORITHM skeymgmt_algorithms[] = {
    { ACC_NAMES_AES_SKEY, ACC_PROPS, aes_skeymgmt_functions, "accelaes AES opaque secret key" },
    { NULL, NULL, NULL, NULL }
};

/* Decided by the libcrypto that loaded the module, not by the headers it was built with. */
const OSSL_ALGORITHM *acc_skeymgmt_query(void)
{
    return OpenSSL_version_num() >= 0x30500000UL ? skeymgmt_algorithms : NULL;
}
