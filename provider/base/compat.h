/* provider/base/compat.h: what the running OpenSSL release's default provider does where releases
 * differ, decided once per process from the loaded libcrypto (never from the headers accelaes was
 * built with), so that a module built on one 3.x release behaves like the default provider of the
 * release that loads it. Each flag says which release changed what (provider/base/compat.c). */
#ifndef ACC_PROVIDER_COMPAT_H
#define ACC_PROVIDER_COMPAT_H

#include <stddef.h>
#include <openssl/core.h>

typedef struct {
    /* set_ctx_params refuses a num at or past the cipher's reported block size (16 for ECB and CBC,
     * 1 for CTR: only 0), with PROV's "failed to get parameter". OpenSSL 3.5.9 and 3.6 (the DES
     * OFB/CFB num over-read fix, openssl#30284, taken into ciphercommon.c); 3.0.19 takes any num. */
    int num_below_blocksize;
    /* GCM answers and lists "iv-generated" (1 once it made a random IV for an encryption, 0 from
     * each init). OpenSSL 3.5 (3.4's FIPS indicator work); 3.0 does not know the parameter. */
    int gcm_iv_generated;
    /* The stitched ciphers' TLS1_1_MULTIBLOCK_AAD checks its arguments before anything else, with
     * PROV's "failed to get parameter": an interleave of exactly 4 or 8 (3.0 rounds 5..7 down to
     * 4 and 9..11 to 8), a length of 13 to 16384 x interleave bytes, a length field of at most
     * 16384 (one record's plaintext). OpenSSL 3.5.9; 3.0.19 takes any length. */
    int mb_aad_checked;
    /* get iv / updated-iv sets the form the caller's parameter has (octet string or pointer) and
     * tries no other, raising nothing for it. OpenSSL 3.6 (generated parameter decoders); up to
     * 3.5 both forms are tried in turn, and from 3.2 libcrypto raises for the one that does not
     * fit ("param of incompatible type"), in the order tried (provider/cipher/cipher_core.c). */
    int iv_param_by_type;
    /* Every cipher lists and answers "encrypt-then-mac" (0) among its algorithm parameters.
     * OpenSSL 3.6 (for the AES-CBC-HMAC-SHA*-ETM ciphers); 3.0 and 3.5.9 do not know it. */
    int alg_encrypt_then_mac;
    /* The stitched ciphers list "tls-version" among their settable context parameters (3.0 and
     * 3.5.9); OpenSSL 3.6's list leaves it out (it still takes it). */
    int stitched_lists_tls_version;
    /* The stitched ciphers' settable list puts the five multiblock parameters first (then mac key,
     * TLS AAD, key length, TLS version). OpenSSL 4.0. */
    int stitched_settable_multiblock_first;
    /* GCM: a decryption's final without a tag raises PROV's "tag not set" (before: fails silently),
     * and get-iv on an encryption context with no IV yet makes the random IV and returns it
     * (before: fails, nothing raised). OpenSSL 4.0. */
    int gcm_final_tag_not_set;
    int gcm_get_iv_generates;
    /* GCM's get_ctx_params walks the request in its order and answers every parameter it knows, each
     * occurrence of a repeated one too, stopping at the first that fails. OpenSSL 3.5 (its decoder
     * loop); 3.0 and 3.6 look each of their keys up in their own order (3.0: the first occurrence
     * alone; 3.6 refuses a repeated one first: repeated_param_refused). */
    int gcm_get_walks_request;
    /* get/set_ctx_params refuse a request that names one of the cipher's known parameters twice,
     * with PROV's "repeated parameter" ("param %s is repeated"), before reading or writing any, per
     * decoder (acc_param_decoder): the plain modes' and GCM's from OpenSSL 3.6 (generated decoders),
     * the stitched ciphers' and XTS's set from 4.0 (hand-written in 3.6); before, the first is used. */
    int repeated_param_refused[3];
    /* CCM's final refuses a decryption begun and not completed (not checked, or checked and refused).
     * OpenSSL 3.5.9; 3.0.19 does not. */
    int ccm_final_strict;
    /* CCM's final makes an encryption begun (a nonce) with no data call the empty message: its tag is
     * then there (over the AAD, if any); a length fixed other than 0 makes the final fail. OpenSSL 3.5.9;
     * 3.0.19's final does nothing (no tag to get). */
    int ccm_final_runs_empty;
    /* CCM raises PROV's "tag not set" for a decryption's data with no tag set (before: fails silently).
     * OpenSSL 4.0. */
    int ccm_tag_not_set;
    /* The bytes CCM gives for IV [0] and UPDATED_IV [1] into a buffer over 16 bytes: 32 (as many as asked,
     * its nonce buffer and the next: 3.0.19, 3.5.9 for UPDATED_IV) or 16. */
    int ccm_iv_room[2];
    /* CCM's whole blocks are MACed in the direction the key was set up in, whichever way the data
     * then goes (the partial last block in the data's): the default's AES-NI CCM picks its block
     * function (encrypting or decrypting) at the key. Where the default has no such function (no
     * AES-NI), 0. Every release so far. */
    int ccm_blocks_dir_at_key;
} acc_compat_flags;

/* The running release's flags, found on first use (thread-safe) and then fixed. */
const acc_compat_flags *acc_compat(void);

/* Sets get-iv / get-updated-iv as the running release's default does: by the parameter's type
 * (3.6), else both forms in turn, the string first where string_first (the stitched ciphers) and
 * the pointer first otherwise (where libcrypto raises for the form that does not fit: 3.2+). */
int acc_compat_set_iv(OSSL_PARAM *p, const void *iv, size_t len, int string_first);

/* Whose parameter decoder a get/set mirrors (the releases changed them one group at a time) */
enum acc_param_decoder { ACC_DECODER_COMMON, ACC_DECODER_STITCHED, ACC_DECODER_XTS_SET };

/* 1 if params may go on; 0, raised as the running release's default does, where it names a key of
 * known (a parameter table) or of keys (NULL-ended) twice (repeated_param_refused). */
int acc_compat_unrepeated(const OSSL_PARAM params[], const OSSL_PARAM *known, int decoder);
int acc_compat_unrepeated_keys(const OSSL_PARAM params[], const char *const keys[], int decoder);

#endif
