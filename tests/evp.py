"""tests/evp.py: a ctypes driver of the system libcrypto's EVP cipher API (OpenSSL 3.0), so the
pytest suite drives a provider exactly as an application does, through real C buffers.

Every libcrypto function used here has its argtypes and restype declared once, in tests/libcrypto.py
(which also holds the error queue, the buffers and OSSL_PARAM arrays; their names are re-exported here).
Buffers are ctypes arrays (Mem), so in-place and misaligned layouts are real pointers, not
Python copies. Failing calls raise OsslError carrying the drained OpenSSL error queue, so a
test can assert that a reason string was given.
"""

import ctypes
import json
import os
import subprocess
import sys
from ctypes import byref, c_int

# Re-exported: tests name them evp.X (evp.C, evp.Mem, evp.OsslError, ...).
from libcrypto import (C, NAMES_CB, ErrEntry, GuardedMem, Mem, OsslError, Params, _cbuf, _lib,  # noqa: F401
                       clear_errors, drain_errors, param_names)

MODE_ECB, MODE_CBC, MODE_CTR = 1, 2, 5
CIPHERS = [f"AES-{bits}-{mode}" for mode in ("ECB", "CBC", "CTR") for bits in (128, 192, 256)]


def cipher_mode(name):
    return {"ECB": MODE_ECB, "CBC": MODE_CBC, "CTR": MODE_CTR}[name.upper().rsplit("-", 1)[1]]


def cipher_keylen(name):
    return int(name.split("-")[1]) // 8


# ---------------------------------------------------------------- library context

class Cipher:
    """A fetched EVP_CIPHER."""

    def __init__(self, ptr, name, query):
        self.ptr, self.name, self.query = ptr, name, query

    @property
    def provider(self):
        prov = C.EVP_CIPHER_get0_provider(self.ptr)
        return C.OSSL_PROVIDER_get0_name(prov).decode() if prov else None

    @property
    def block_size(self):
        return C.EVP_CIPHER_get_block_size(self.ptr)

    @property
    def key_length(self):
        return C.EVP_CIPHER_get_key_length(self.ptr)

    @property
    def iv_length(self):
        return C.EVP_CIPHER_get_iv_length(self.ptr)

    @property
    def mode(self):
        return C.EVP_CIPHER_get_mode(self.ptr)

    @property
    def flags(self):
        return C.EVP_CIPHER_get_flags(self.ptr)

    @property
    def nid(self):
        return C.EVP_CIPHER_get_nid(self.ptr)

    def names(self):
        got = []
        cb = NAMES_CB(lambda name, _data: got.append(name.decode()))
        C.EVP_CIPHER_names_do_all(self.ptr, cb, None)
        return sorted(got)

    def get_params(self, specs):
        params = Params(specs)
        ok = C.EVP_CIPHER_get_params(self.ptr, params.ptr)
        return ok, params

    def gettable_ctx_params(self):
        return param_names(C.EVP_CIPHER_gettable_ctx_params(self.ptr))

    def settable_ctx_params(self):
        return param_names(C.EVP_CIPHER_settable_ctx_params(self.ptr))

    def gettable_params(self):
        return param_names(C.EVP_CIPHER_gettable_params(self.ptr))

    def __repr__(self):
        return f"<Cipher {self.name} @ {self.provider}>"


class LibCtx:
    """An OSSL_LIB_CTX with the given providers loaded from `modules_dir` (or the system's)."""

    def __init__(self, providers=("default",), modules_dir=None):
        self.ptr = C.OSSL_LIB_CTX_new()
        if not self.ptr:
            raise OsslError("OSSL_LIB_CTX_new")
        if modules_dir and not C.OSSL_PROVIDER_set_default_search_path(
                self.ptr, str(modules_dir).encode()):
            raise OsslError("OSSL_PROVIDER_set_default_search_path")
        self.providers = {}
        for name in providers:
            prov = C.OSSL_PROVIDER_load(self.ptr, name.encode())
            if not prov:
                raise OsslError(f"OSSL_PROVIDER_load({name!r})")
            self.providers[name] = prov
        self._ciphers = {}

    def fetch(self, name, provider=None, props=None):
        """EVP_CIPHER_fetch with "provider=<provider>" (or the given property query).
        Raises OsslError when nothing matches. Cached: fetched ciphers live with the context."""
        query = props if props is not None else (f"provider={provider}" if provider else None)
        key = (name, query)
        if key not in self._ciphers:
            ptr = C.EVP_CIPHER_fetch(self.ptr, name.encode(), query.encode() if query else None)
            if not ptr:
                raise OsslError(f"EVP_CIPHER_fetch({name!r}, {query!r})")
            self._ciphers[key] = Cipher(ptr, name, query)
        return self._ciphers[key]

    def try_fetch(self, name, provider=None, props=None):
        try:
            return self.fetch(name, provider, props)
        except OsslError:
            return None


# ---------------------------------------------------------------- cipher context

class CipherCtx:
    """An EVP_CIPHER_CTX. Methods raise OsslError on failure; the raw_* methods return the C
    result instead, for tests that look at failure outcomes themselves."""

    def __init__(self, cipher=None, key=None, iv=None, enc=1, padding=None, params=None):
        self.ptr = C.EVP_CIPHER_CTX_new()
        if not self.ptr:
            raise OsslError("EVP_CIPHER_CTX_new")
        if cipher is not None:
            self.init(cipher, key, iv, enc, params)
            if padding is not None:
                self.set_padding(padding)

    def free(self):
        if self.ptr:
            C.EVP_CIPHER_CTX_free(self.ptr)
            self.ptr = None

    def __del__(self):
        self.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    # -- init
    def raw_init(self, cipher, key, iv, enc, params=None):
        self._keep_init = (_cbuf(key), _cbuf(iv), params)
        k, v, _ = self._keep_init
        return C.EVP_CipherInit_ex2(self.ptr, cipher.ptr if cipher is not None else None,
                                    k, v, enc, params.ptr if params is not None else None)

    def init(self, cipher, key=None, iv=None, enc=1, params=None):
        if not self.raw_init(cipher, key, iv, enc, params):
            raise OsslError("EVP_CipherInit_ex2")
        return self

    def set_padding(self, pad):
        if not C.EVP_CIPHER_CTX_set_padding(self.ptr, 1 if pad else 0):
            raise OsslError("EVP_CIPHER_CTX_set_padding")

    # -- data
    def raw_update(self, out_ptr, in_ptr, inl):
        outl = c_int(-1)
        ok = C.EVP_CipherUpdate(self.ptr, out_ptr, byref(outl), in_ptr, inl)
        return ok, outl.value

    def raw_final(self, out_ptr):
        outl = c_int(-1)
        ok = C.EVP_CipherFinal_ex(self.ptr, out_ptr, byref(outl))
        return ok, outl.value

    def update(self, data):
        """Update out of place with fresh aligned buffers; returns the output bytes."""
        src = Mem(len(data))
        src.write(data)
        dst = Mem(len(data) + 32)
        ok, outl = self.raw_update(dst.at(), src.at(), len(data))
        if not ok:
            raise OsslError("EVP_CipherUpdate")
        assert 0 <= outl <= len(data) + 16, f"outl {outl} out of range for inl {len(data)}"
        assert dst.slack_intact(), "EVP_CipherUpdate wrote outside the output buffer"
        return dst.read(outl)

    def final(self):
        dst = Mem(32)
        ok, outl = self.raw_final(dst.at())
        if not ok:
            raise OsslError("EVP_CipherFinal_ex")
        assert 0 <= outl <= 16, f"final outl {outl}"
        assert dst.slack_intact(), "EVP_CipherFinal_ex wrote outside the output buffer"
        return dst.read(outl)

    def cipher_oneshot(self, data, inplace=False):
        """EVP_Cipher(ctx, out, in, inl): returns (ret, out bytes of len(data))."""
        if inplace:
            buf = Mem(len(data) + 16)
            buf.write(data)
            ret = C.EVP_Cipher(self.ptr, buf.at(), buf.at(), len(data))
            return ret, buf.read(len(data))
        src = Mem(len(data))
        src.write(data)
        dst = Mem(len(data) + 16)
        ret = C.EVP_Cipher(self.ptr, dst.at(), src.at(), len(data))
        return ret, dst.read(len(data))

    # -- state
    def copy(self):
        """A new context made with EVP_CIPHER_CTX_copy (OpenSSL 3.0 has no _dup)."""
        other = CipherCtx()
        if not C.EVP_CIPHER_CTX_copy(other.ptr, self.ptr):
            err = OsslError("EVP_CIPHER_CTX_copy")
            other.free()
            raise err
        return other

    def updated_iv(self, n=16):
        buf = (ctypes.c_ubyte * n)()
        if not C.EVP_CIPHER_CTX_get_updated_iv(self.ptr, buf, n):
            raise OsslError("EVP_CIPHER_CTX_get_updated_iv")
        return bytes(buf)

    def original_iv(self, n=16):
        buf = (ctypes.c_ubyte * n)()
        if not C.EVP_CIPHER_CTX_get_original_iv(self.ptr, buf, n):
            raise OsslError("EVP_CIPHER_CTX_get_original_iv")
        return bytes(buf)

    @property
    def num(self):
        return C.EVP_CIPHER_CTX_get_num(self.ptr)

    def set_num(self, num):
        return C.EVP_CIPHER_CTX_set_num(self.ptr, num)

    @property
    def key_length(self):
        return C.EVP_CIPHER_CTX_get_key_length(self.ptr)

    @property
    def iv_length(self):
        return C.EVP_CIPHER_CTX_get_iv_length(self.ptr)

    @property
    def block_size(self):
        return C.EVP_CIPHER_CTX_get_block_size(self.ptr)

    def set_key_length(self, n):
        return C.EVP_CIPHER_CTX_set_key_length(self.ptr, n)

    def get_params(self, specs):
        params = Params(specs)
        ok = C.EVP_CIPHER_CTX_get_params(self.ptr, params.ptr)
        return ok, params

    def set_params(self, specs):
        params = Params(specs)
        ok = C.EVP_CIPHER_CTX_set_params(self.ptr, params.ptr)
        return ok, params

    @property
    def provider(self):
        ciph = C.EVP_CIPHER_CTX_get0_cipher(self.ptr)
        if not ciph:
            return None
        prov = C.EVP_CIPHER_get0_provider(ciph)
        return C.OSSL_PROVIDER_get0_name(prov).decode() if prov else None


# ---------------------------------------------------------------- whole-message helpers

def crypt(cipher, key, iv, data, enc, padding=True):
    """Encrypt or decrypt data in one update plus final; raises OsslError on failure."""
    with CipherCtx(cipher, key, iv, enc, padding) as ctx:
        return ctx.update(data) + ctx.final()


def crypt_outcome(cipher, key, iv, data, enc, padding=True, splits=None):
    """Like crypt, but returns (ok, output bytes claimed, errors) instead of raising, for
    comparing failure outcomes between providers. splits: list of chunk sizes."""
    ctx = CipherCtx()
    out = b""
    try:
        ctx.init(cipher, key, iv, enc)
        ctx.set_padding(padding)
        pos = 0
        for n in (splits or [len(data)]):
            out += ctx.update(data[pos:pos + n])
            pos += n
        if pos < len(data):
            out += ctx.update(data[pos:])
        out += ctx.final()
        return True, out, []
    except OsslError as e:
        return False, out, e.errors
    finally:
        ctx.free()


def stream(ctx, data, chunks, out_off=0, in_off=None, inplace=False):
    """Run data through ctx in the given chunk sizes, OpenSSL-test style: output written
    contiguously from out_off, input either a separate buffer at in_off or the output buffer
    itself (in place; then output may lag input, out <= in). Returns (output, final bytes)."""
    n = len(data)
    out = Mem(n + 48, out_off)
    if inplace:
        out.write(data)
        src = out
    else:
        src = Mem(n, in_off if in_off is not None else 0)
        src.write(data)
    total, pos = 0, 0
    for size in chunks:
        ok, outl = ctx.raw_update(out.at(total), src.at(pos), size)
        if not ok:
            raise OsslError(f"EVP_CipherUpdate(chunk {size} at {pos})")
        assert 0 <= outl <= size + 16
        total += outl
        pos += size
    assert pos == n, "chunks must cover the input"
    ok, outl = ctx.raw_final(out.at(total))
    if not ok:
        raise OsslError("EVP_CipherFinal_ex")
    total += outl
    assert out.slack_intact(), "output written outside its buffer"
    return out.read(total)


def frag_chunks(n):
    """OpenSSL's evp_test fragmentation: 1 byte, n-2 bytes, 1 byte (as far as n allows)."""
    if n == 0:
        return []
    if n == 1:
        return [1]
    if n == 2:
        return [1, 1]
    return [1, n - 2, 1]


# ---------------------------------------------------------------- isolation

def run_isolated(code, env=None, timeout=120):
    """Run a Python snippet in a child process with this driver importable, so a crash
    (SIGSEGV, abort) in libcrypto or a provider cannot take the test runner down.
    The snippet calls emit(obj) to report JSON results as it goes. Returns (returncode, results,
    stderr): the list of emitted objects (those before a crash survive it); returncode < 0 is the
    signal that ended the child."""
    prologue = (
        "import sys, json\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import evp\n"
        "def emit(obj):\n"
        "    sys.stdout.write('@@RESULT@@' + json.dumps(obj) + '\\n'); sys.stdout.flush()\n"
    )
    proc = subprocess.run([sys.executable, "-c", prologue + code], env=env,
                          capture_output=True, text=True, timeout=timeout)
    results = [json.loads(line[len("@@RESULT@@"):]) for line in proc.stdout.splitlines()
               if line.startswith("@@RESULT@@")]
    return proc.returncode, results, proc.stderr
