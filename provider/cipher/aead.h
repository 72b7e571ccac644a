/* provider/cipher/aead.h: what every AEAD here shares (GCM: cipher_gcm*.c, CCM: cipher_ccm.c), so that a
 * new AEAD brings only its kinds, its state machine's differences and its engine: the AAD gathered
 * until the engine takes it, the piece-length and output-room rules of a data call, the engine-
 * failure rule (output wiped, accelaes's reason raised once), the TLS 1.2 record's AAD (its length
 * field corrected for the explicit IV and the tag) and explicit IV counter, the parameters
 * answered alike (sizes, IV, TLS AAD) and the parameter errors the default provider raises for
 * all its AEADs. The semantics are the default's (ciphercommon_gcm.c, ciphercommon_ccm.c); an
 * AEAD's own differences stay in its file. */
#ifndef ACCELAES_AEAD_H
#define ACCELAES_AEAD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <openssl/core.h>

#define ACC_AEAD_UNSET ((size_t)-1)   /* a tag length or TLS AAD length not given */
#define ACC_AEAD_TLS_AAD_LEN 13       /* EVP_AEAD_TLS1_AAD_LEN */
#define ACC_AEAD_TLS_FIXED 4          /* EVP_GCM_TLS_FIXED_IV_LEN = EVP_CCM_TLS_FIXED_IV_LEN */
#define ACC_AEAD_TLS_EXPLICIT 8       /* EVP_GCM_TLS_EXPLICIT_IV_LEN = EVP_CCM_TLS_EXPLICIT_IV_LEN */

/* The IV's state machine, the defaults' for GCM (ciphercommon_gcm.c), which CCM's "IV set" is a part
 * of: no IV yet; given, no message opened with it; a message open (AAD or data going in); the
 * message finished (the IV must not be used again: CCM's one message per nonce, GCM's IV after its
 * final, an IV given at a length since changed). */
enum { ACC_AEAD_IV_UNSET, ACC_AEAD_IV_BUFFERED, ACC_AEAD_IV_COPIED, ACC_AEAD_IV_FINISHED };

/* Whether a message may run under the IV: given, and not used up. */
static inline int acc_aead_iv_live(int iv_state)
{
    return iv_state == ACC_AEAD_IV_BUFFERED || iv_state == ACC_AEAD_IV_COPIED;
}

/* AAD gathered until the message's engine takes it (ipsec-mb's GCM init takes it whole). */
typedef struct acc_aead_aad {
    uint8_t *p;
    size_t len, cap;
} acc_aead_aad;

/* n more bytes: 1; 0 past max bytes in all (nothing added); -1 no memory. The old buffer is
 * cleansed, never left in freed memory. */
int acc_aead_aad_add(acc_aead_aad *a, const uint8_t *data, size_t n, uint64_t max);
/* d is a byte copy of s: its own buffer (1), or none and 0. */
int acc_aead_aad_dup(acc_aead_aad *d, const acc_aead_aad *s);
void acc_aead_aad_free(acc_aead_aad *a);

/* EVP hands a negative int length down as SIZE_MAX - k: no piece past INT_MAX is taken, as the
 * block modes (cipher_block.c); the default reads that far (stricter, documented in prov.h).
 * 1 to go on, 0 with LENGTH_TOO_LARGE raised. name: the AEAD, for the message. */
int acc_aead_piece_ok(const char *name, size_t inl);
/* Room for inl bytes of output: 1, or 0 with the default's OUTPUT_BUFFER_TOO_SMALL. */
int acc_aead_out_ok(size_t inl, size_t outsize);

/* The engine failed in the middle of a message: the output so far is wiped and accelaes's
 * ENGINE_FAILURE raised, naming the AEAD, the engine and the step. The caller ends its message
 * (its state machine's way). Returns 0. */
int acc_aead_engine_failed(const char *aead, const char *engine, uint8_t *out, size_t len, const char *where);

/* The TLS 1.2 record's AAD (13 bytes) into buf, its length field corrected to the payload's:
 * less the explicit IV, and decrypting, less the tag of taglen. Returns taglen (the padding the
 * record needs), or 0 for a bad AAD (buf may be written, as the default's). */
size_t acc_aead_tls_aad(uint8_t buf[ACC_AEAD_TLS_AAD_LEN], const unsigned char *aad, size_t aad_len, int enc,
                        size_t taglen);
/* The 64-bit invocation field (an IV's last 8 bytes, big-endian) counts records. */
void acc_aead_ctr64_inc(uint8_t counter[8]);

/* PROV's "failed to set parameter" / "failed to get parameter", naming p. Return 0. */
int acc_aead_failed_to_set(const OSSL_PARAM *p);
int acc_aead_failed_to_get(const OSSL_PARAM *p);

/* The parameters every AEAD answers the same way, each in its default's words; the rules that
 * differ (tag lengths and when a tag is there, IV lengths, the TLS fixed IV) stay in the AEAD's
 * file. */
/* A size (IV, key or tag length, TLS padding) out: 1, or 0 with "failed to set". */
int acc_aead_get_size(OSSL_PARAM *p, size_t v);
/* IV or UPDATED_IV out: n bytes from iv, where p has room for the ivlen bytes of the IV (else
 * INVALID_IV_LENGTH); 0 with "failed to set" where p's type does not take them. */
int acc_aead_get_iv(OSSL_PARAM *p, const uint8_t *iv, size_t ivlen, size_t n);
/* The IV length set ("ivlen"), from min to max bytes: 1 with *ivlen the new length, an IV given at
 * another length made unusable (*iv_state FINISHED); or 0 with "failed to get" (not a size) or
 * INVALID_IV_LENGTH naming aead. The same length again changes nothing. */
int acc_aead_set_ivlen(const OSSL_PARAM *p, const char *aead, size_t min, size_t max, size_t *ivlen, int *iv_state);
/* How an AEAD's default takes the tag parameter ("tag", set): the lengths it accepts, and where
 * its defaults differ. GCM (ciphercommon_gcm.c) reads the bytes with OSSL_PARAM_get_octet_string
 * into its buffer before any check (copy_first: an encryption's tag is overwritten, then refused),
 * and raises INVALID_TAG for a bad length and for an encryption; CCM (ciphercommon_ccm.c) checks
 * the type, then the length (INVALID_TAG_LENGTH), takes a tag with no bytes as its length alone
 * (len_only: the M of the next message), and raises TAG_NOT_NEEDED for an encryption's bytes. */
typedef struct acc_aead_tag_rules {
    const char *aead;
    size_t min, max;      /* the tag lengths accepted (max: the buffer's room) */
    int even;             /* only even lengths (CCM) */
    int copy_first;       /* the bytes copied before the checks (GCM) */
    int len_only;         /* a tag with no bytes sets the length (CCM) */
    int bad_len, on_enc;  /* the reasons for a bad length and for a tag given to an encryption */
} acc_aead_tag_rules;

/* The tag parameter in, by the AEAD's rules: 1 with *taglen its length and, where bytes came, them
 * in buf and *given 1 (given may be NULL); or 0 with "failed to get" (not an octet string, or for
 * copy_first what OSSL_PARAM_get_octet_string refuses, with that function's own error) or the
 * rules' reason. */
int acc_aead_set_tag(const OSSL_PARAM *p, const acc_aead_tag_rules *r, int enc, uint8_t *buf, size_t *taglen,
                     int *given);
/* The TLS 1.2 record's AAD in (acc_aead_tls_aad, into buf): *aad_len is 13 once an AAD of that
 * length is given, even a bad one (as the defaults), *pad_sz the padding the record needs. 1, or
 * 0 with "failed to get" (not an octet string) or reason (the AEAD's: bad length or field). */
int acc_aead_set_tls_aad(const OSSL_PARAM *p, uint8_t buf[ACC_AEAD_TLS_AAD_LEN], int enc, size_t taglen, int reason,
                         size_t *aad_len, size_t *pad_sz);
/* OSSL_PARAM_locate with the first two bytes compared before strcmp: a small record's calls ask a
 * one-element array for each known key, and the strcmp calls were a sixth of CCM's 16-byte time. */
static inline const OSSL_PARAM *acc_aead_param_find(const OSSL_PARAM *params, const char *key)
{
    for (; params->key != NULL; params++)
        if (params->key[0] == key[0] && params->key[1] == key[1] && strcmp(params->key, key) == 0)
            return params;
    return NULL;
}

#endif
