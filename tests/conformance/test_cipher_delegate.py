"""tests/conformance/test_cipher_delegate.py: on OpenSSL 3.5+ accelaes offers every AES cipher of the running default
provider that it does not serve itself (OCB, CFB, OFB, wrap, SIV, ... whatever the release has) as a
delegate to the default's own functions (provider/cipher/cipher_delegate.c), so that an application's EVP_SKEY,
imported from accelaes where accelaes is preferred, works with every AES mode (tests/conformance/test_skey.py). A delegate
must be the default itself: the same bytes, the same errors in the same order, the same parameter lists.
On a libcrypto without EVP_SKEY (3.0) nothing is delegated."""

import ctypes
from ctypes import POINTER, byref, c_char_p, c_int, c_void_p

import pytest

import evp
from libcrypto import LIBCRYPTO, drain_errors

pytestmark = pytest.mark.usefixtures("require_provider")

OSSL_OP_CIPHER = 2
SKEY_RELEASE = 0x30500000
SET_IVLEN, GET_TAG, SET_TAG = 0x9, 0x10, 0x11

# a handle of this file's own: the prototypes below must not change those evp.py declared for the others
L = ctypes.CDLL(LIBCRYPTO)

L.OpenSSL_version_num.restype = ctypes.c_ulong
L.OSSL_PROVIDER_query_operation.restype = c_void_p
L.OSSL_PROVIDER_query_operation.argtypes = [c_void_p, c_int, POINTER(c_int)]
L.EVP_CIPHER_CTX_ctrl.restype = c_int
L.EVP_CIPHER_CTX_ctrl.argtypes = [c_void_p, c_int, c_int, c_void_p]
L.EVP_CipherInit_ex2.restype = c_int
L.EVP_CipherInit_ex2.argtypes = [c_void_p, c_void_p, c_char_p, c_char_p, c_int, c_void_p]
L.EVP_CipherUpdate.restype = c_int
L.EVP_CipherUpdate.argtypes = [c_void_p, c_void_p, POINTER(c_int), c_char_p, c_int]
L.EVP_CipherFinal_ex.restype = c_int
L.EVP_CipherFinal_ex.argtypes = [c_void_p, c_void_p, POINTER(c_int)]


def provider_cipher_names(prov):
    """Every name of every cipher a provider answers the query with, as one set per algorithm."""
    nc = c_int(0)
    algs = L.OSSL_PROVIDER_query_operation(prov, OSSL_OP_CIPHER, byref(nc))
    entries = ctypes.cast(algs, POINTER(c_char_p * 4)) if algs else None
    out, i = [], 0
    while entries is not None and entries[i][0] is not None:
        out.append(frozenset(n.upper() for n in entries[i][0].decode().split(":")))
        i += 1
    return out


def aes(entries):
    return {e for e in entries if any(n.startswith("AES") for n in e)}


def test_delegates_offered_where_skey_exists(libctx):
    """3.5+: every AES cipher of the running default is accelaes's too (served or delegated), under the
    default's own names; 3.0: the default's AES ciphers that accelaes does not serve stay the default's alone."""
    default = aes(provider_cipher_names(libctx.providers["default"]))
    ours = provider_cipher_names(libctx.providers["accelaes"])
    assert len(ours) == len(set(ours)), "an algorithm offered twice"
    missing = default - set(ours)
    if L.OpenSSL_version_num() < SKEY_RELEASE:
        assert any("AES-128-OCB" in e for e in missing), sorted(map(sorted, missing))
        assert aes(ours) <= default, "accelaes offers an AES cipher the default does not have"
    else:
        assert not missing, f"default AES ciphers accelaes does not offer: {sorted(map(sorted, missing))}"
        assert aes(ours) == set(ours) and set(ours) == default, "accelaes's list is not the default's AES list"


def run_steps(cipher, steps):
    """Drives one context through steps; returns, per step, (result, output bytes, error reasons)."""
    ctx = evp.CipherCtx()
    got, keep = [], []
    for step in steps:
        out = ctypes.create_string_buffer(256)
        n = c_int(-1)
        data = b""
        if step[0] == "init":                         # ("init", key, iv, enc)
            ok = L.EVP_CipherInit_ex2(ctx.ptr, cipher.ptr if step[3] is not None else None, step[1], step[2],
                                      step[3] if step[3] is not None else -1, None)
        elif step[0] == "ctrl":                       # ("ctrl", type, arg, bytes or None)
            buf = ctypes.create_string_buffer(step[3], step[2]) if step[3] else (
                ctypes.create_string_buffer(step[2]) if step[1] == GET_TAG else None)
            keep.append(buf)
            ok = L.EVP_CIPHER_CTX_ctrl(ctx.ptr, step[1], step[2], buf)
            data = buf.raw if step[1] == GET_TAG and ok else b""
        elif step[0] == "len":                        # ("len", total): CCM's message length, no output
            ok = L.EVP_CipherUpdate(ctx.ptr, None, byref(n), None, step[1])
        elif step[0] == "aad":                        # ("aad", bytes)
            ok = L.EVP_CipherUpdate(ctx.ptr, None, byref(n), step[1], len(step[1]))
        elif step[0] == "update":                     # ("update", bytes)
            ok = L.EVP_CipherUpdate(ctx.ptr, out, byref(n), step[1], len(step[1]))
            data = out.raw[:max(n.value, 0)]
        else:                                         # ("final",)
            ok = L.EVP_CipherFinal_ex(ctx.ptr, out, byref(n))
            data = out.raw[:max(n.value, 0)]
        got.append((step[0], ok, data.hex(), [(e.lib, e.reason) for e in drain_errors()]))
    ctx.free()
    return got


KEY, NONCE, AAD, MSG = bytes(range(16)), bytes(range(100, 112)), b"header", b"delegated plaintext, 37 bytes long"


def ccm(enc, tag=None, ivlen=12, ct=b""):
    steps = [("init", None, None, enc), ("ctrl", SET_IVLEN, ivlen, None),
             ("ctrl", SET_TAG, 12, tag), ("init", KEY, NONCE[:ivlen] + bytes(max(0, ivlen - 12)), None),
             ("len", len(MSG)), ("aad", AAD)]
    return steps + ([("update", MSG), ("final",), ("ctrl", GET_TAG, 12, None)] if enc else [("update", ct)])


def ocb(enc, tag=None, ivlen=12, ct=b""):
    steps = [("init", None, None, enc), ("ctrl", SET_IVLEN, ivlen, None)]
    if not enc:
        steps.append(("ctrl", SET_TAG, 16, tag))
    steps += [("init", KEY, NONCE[:min(ivlen, 12)] + bytes(max(0, ivlen - 12)), None), ("aad", AAD)]
    return steps + ([("update", MSG), ("final",), ("ctrl", GET_TAG, 16, None)] if enc else
                    [("update", ct), ("final",)])


@pytest.mark.parametrize("mode, script", [("CCM", ccm), ("OCB", ocb)])
def test_delegated_mode_is_the_default(libctx, mode, script):
    """A delegated mode fetched from accelaes gives the default's bytes and errors: encryption, decryption,
    a decryption with a wrong tag, and an IV length the mode refuses; and the same parameter lists."""
    if L.OpenSSL_version_num() < SKEY_RELEASE:
        pytest.skip("accelaes delegates modes only where the running libcrypto has EVP_SKEY (3.5+); this one is "
                    f"{L.OpenSSL_version_num():#x}")
    name = f"AES-128-{mode}"
    ours, ref = libctx.fetch(name, "accelaes"), libctx.fetch(name, "default")
    assert ours.provider == "accelaes" and ref.provider == "default"
    assert ours.names() == ref.names()
    for table in ("gettable_params", "gettable_ctx_params", "settable_ctx_params"):
        assert getattr(ours, table)() == getattr(ref, table)(), table
    enc = run_steps(ref, script(1))
    assert all(ok == 1 for _, ok, _, _ in enc), enc
    tag = bytes.fromhex(enc[-1][2])
    ct = bytes.fromhex("".join(s[2] for s in enc if s[0] in ("update", "final")))
    wrong = bytes([tag[0] ^ 1]) + tag[1:]
    for steps in (script(1), script(0, tag, ct=ct), script(0, wrong, ct=ct), script(1, None, 16)):
        assert run_steps(ours, steps) == run_steps(ref, steps), steps
    back = run_steps(ours, script(0, tag, ct=ct))
    assert bytes.fromhex("".join(s[2] for s in back if s[0] in ("update", "final"))) == MSG
    refused = run_steps(ours, script(0, wrong, ct=ct))
    assert any(ok != 1 for _, ok, _, _ in refused), f"{mode}: a wrong tag was accepted: {refused}"
