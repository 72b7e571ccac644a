"""tests/evp.py: a ctypes driver of the system libcrypto's EVP cipher API (OpenSSL 3.0), so the
pytest suite drives a provider exactly as an application does, through real C buffers.

Every libcrypto function used here has its argtypes and restype declared once, in _PROTOS.
Buffers are ctypes arrays (Mem), so in-place and misaligned layouts are real pointers, not
Python copies. Failing calls raise OsslError carrying the drained OpenSSL error queue, so a
test can assert that a reason string was given.
"""

import ctypes
import json
import os
import subprocess
import sys
from ctypes import (POINTER, CFUNCTYPE, Structure, byref, c_char_p, c_int, c_size_t, c_uint,
                    c_ulong, c_void_p)

LIBCRYPTO = os.environ.get("ACCELAES_TEST_LIBCRYPTO", "libcrypto.so.3")
_lib = ctypes.CDLL(LIBCRYPTO)

# EVP_CIPHER_names_do_all(cipher, void (*fn)(const char *name, void *data), data)
NAMES_CB = CFUNCTYPE(None, c_char_p, c_void_p)


class OSSL_PARAM(Structure):
    _fields_ = [("key", c_char_p), ("data_type", c_uint), ("data", c_void_p),
                ("data_size", c_size_t), ("return_size", c_size_t)]


P_INT, P_UINT, P_UTF8, P_OCTET, P_UTF8_PTR, P_OCTET_PTR = 1, 2, 4, 5, 6, 7
P_UNMODIFIED = (1 << 64) - 1  # OSSL_PARAM_UNMODIFIED (SIZE_MAX)

_PROTOS = {
    "OSSL_LIB_CTX_new": (c_void_p, []),
    "OSSL_LIB_CTX_free": (None, [c_void_p]),
    "OSSL_PROVIDER_set_default_search_path": (c_int, [c_void_p, c_char_p]),
    "OSSL_PROVIDER_load": (c_void_p, [c_void_p, c_char_p]),
    "OSSL_PROVIDER_unload": (c_int, [c_void_p]),
    "OSSL_PROVIDER_available": (c_int, [c_void_p, c_char_p]),
    "OSSL_PROVIDER_get0_name": (c_char_p, [c_void_p]),
    "EVP_CIPHER_fetch": (c_void_p, [c_void_p, c_char_p, c_char_p]),
    "EVP_CIPHER_free": (None, [c_void_p]),
    "EVP_CIPHER_get0_provider": (c_void_p, [c_void_p]),
    "EVP_CIPHER_get0_name": (c_char_p, [c_void_p]),
    "EVP_CIPHER_get_block_size": (c_int, [c_void_p]),
    "EVP_CIPHER_get_key_length": (c_int, [c_void_p]),
    "EVP_CIPHER_get_iv_length": (c_int, [c_void_p]),
    "EVP_CIPHER_get_mode": (c_int, [c_void_p]),
    "EVP_CIPHER_get_flags": (c_ulong, [c_void_p]),
    "EVP_CIPHER_get_nid": (c_int, [c_void_p]),
    "EVP_CIPHER_get_params": (c_int, [c_void_p, c_void_p]),
    "EVP_CIPHER_gettable_params": (c_void_p, [c_void_p]),
    "EVP_CIPHER_gettable_ctx_params": (c_void_p, [c_void_p]),
    "EVP_CIPHER_settable_ctx_params": (c_void_p, [c_void_p]),
    "EVP_CIPHER_is_a": (c_int, [c_void_p, c_char_p]),
    "EVP_CIPHER_names_do_all": (c_int, [c_void_p, NAMES_CB, c_void_p]),
    "EVP_CIPHER_CTX_new": (c_void_p, []),
    "EVP_CIPHER_CTX_free": (None, [c_void_p]),
    "EVP_CIPHER_CTX_reset": (c_int, [c_void_p]),
    "EVP_CIPHER_CTX_copy": (c_int, [c_void_p, c_void_p]),
    "EVP_CipherInit_ex2": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_void_p]),
    "EVP_CipherInit_ex": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int]),
    "EVP_CipherUpdate": (c_int, [c_void_p, c_void_p, POINTER(c_int), c_void_p, c_int]),
    "EVP_CipherFinal_ex": (c_int, [c_void_p, c_void_p, POINTER(c_int)]),
    "EVP_Cipher": (c_int, [c_void_p, c_void_p, c_void_p, c_uint]),
    "EVP_CIPHER_CTX_set_padding": (c_int, [c_void_p, c_int]),
    "EVP_CIPHER_CTX_set_key_length": (c_int, [c_void_p, c_int]),
    "EVP_CIPHER_CTX_get_key_length": (c_int, [c_void_p]),
    "EVP_CIPHER_CTX_get_iv_length": (c_int, [c_void_p]),
    "EVP_CIPHER_CTX_get_block_size": (c_int, [c_void_p]),
    "EVP_CIPHER_CTX_get_updated_iv": (c_int, [c_void_p, c_void_p, c_size_t]),
    "EVP_CIPHER_CTX_get_original_iv": (c_int, [c_void_p, c_void_p, c_size_t]),
    "EVP_CIPHER_CTX_get_num": (c_int, [c_void_p]),
    "EVP_CIPHER_CTX_set_num": (c_int, [c_void_p, c_int]),
    "EVP_CIPHER_CTX_get_params": (c_int, [c_void_p, c_void_p]),
    "EVP_CIPHER_CTX_set_params": (c_int, [c_void_p, c_void_p]),
    "EVP_CIPHER_CTX_get0_cipher": (c_void_p, [c_void_p]),
    "EVP_CIPHER_CTX_is_encrypting": (c_int, [c_void_p]),
    "OSSL_PARAM_locate_const": (c_void_p, [c_void_p, c_char_p]),
    "ERR_get_error": (c_ulong, []),
    "ERR_peek_error": (c_ulong, []),
    "ERR_clear_error": (None, []),
    "ERR_error_string_n": (None, [c_ulong, c_char_p, c_size_t]),
    "ERR_reason_error_string": (c_char_p, [c_ulong]),
    "ERR_lib_error_string": (c_char_p, [c_ulong]),
    "ERR_get_error_all": (c_ulong, [POINTER(c_char_p), POINTER(c_int), POINTER(c_char_p),
                                    POINTER(c_char_p), POINTER(c_int)]),
}


class _Lib:
    """The libcrypto functions, each with its prototype set."""

    def __init__(self, dll):
        for name, (restype, argtypes) in _PROTOS.items():
            fn = getattr(dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)


C = _Lib(_lib)

MODE_ECB, MODE_CBC, MODE_CTR = 1, 2, 5
CIPHERS = [f"AES-{bits}-{mode}" for mode in ("ECB", "CBC", "CTR") for bits in (128, 192, 256)]


def cipher_mode(name):
    return {"ECB": MODE_ECB, "CBC": MODE_CBC, "CTR": MODE_CTR}[name.upper().rsplit("-", 1)[1]]


def cipher_keylen(name):
    return int(name.split("-")[1]) // 8


# ---------------------------------------------------------------- errors

class ErrEntry:
    """One entry of the OpenSSL error queue."""

    def __init__(self, code, lib, reason, text, func, data):
        self.code, self.lib, self.reason, self.text = code, lib, reason, text
        self.func, self.data = func, data

    def __repr__(self):
        extra = f" ({self.data})" if self.data else ""
        return f"<{self.lib}:{self.func}: {self.reason}{extra}>"


def drain_errors():
    """Empty this thread's OpenSSL error queue and return its entries, oldest first."""
    out = []
    while True:
        func, data = c_char_p(), c_char_p()
        line, flags = c_int(), c_int()
        code = C.ERR_get_error_all(None, byref(line), byref(func), byref(data), byref(flags))
        if code == 0:
            return out
        buf = ctypes.create_string_buffer(256)
        C.ERR_error_string_n(code, buf, len(buf))
        reason = C.ERR_reason_error_string(code)
        lib = C.ERR_lib_error_string(code)
        out.append(ErrEntry(code, (lib or b"").decode(), (reason or b"").decode(),
                            buf.value.decode(errors="replace"),
                            (func.value or b"").decode(errors="replace"),
                            (data.value or b"").decode(errors="replace")))


def clear_errors():
    C.ERR_clear_error()


class OsslError(Exception):
    """A libcrypto call failed; .errors holds the error queue drained at that moment."""

    def __init__(self, what, errors=None):
        self.what = what
        self.errors = drain_errors() if errors is None else errors
        super().__init__(f"{what} failed: {self.errors!r}")

    def reasons(self):
        return [e.reason or e.data for e in self.errors]

    def has_reason(self):
        """True when at least one queued error carries a reason string (text, not a number)."""
        return any(e.reason for e in self.errors)


# ---------------------------------------------------------------- memory

class Mem:
    """A C buffer of `size` usable bytes starting `offset` bytes into a 16-aligned array, with
    slack on both sides, so misaligned pointers and overruns of a few bytes stay inside it."""

    SLACK = 64

    def __init__(self, size, offset=0, fill=0xA5):
        self.size, self.offset = size, offset
        total = size + offset + 2 * self.SLACK
        self.raw = (ctypes.c_ubyte * total)()
        ctypes.memset(self.raw, fill, total)
        self.base = ctypes.addressof(self.raw) + self.SLACK
        self.ptr = self.base + offset

    def at(self, pos=0):
        return c_void_p(self.ptr + pos)

    def write(self, data, pos=0):
        assert pos + len(data) <= self.size
        ctypes.memmove(self.ptr + pos, data, len(data))

    def read(self, n, pos=0):
        return ctypes.string_at(self.ptr + pos, n)

    def slack_intact(self, fill=0xA5):
        """True when the guard bytes around the usable area were not written."""
        lo = ctypes.string_at(self.base - self.SLACK, self.SLACK + self.offset)
        hi = ctypes.string_at(self.ptr + self.size, self.SLACK)
        return lo == bytes([fill]) * len(lo) and hi == bytes([fill]) * len(hi)


class GuardedMem:
    """`size` usable bytes (rounded up to pages) that end right before an inaccessible page,
    so a read or write past the end faults at once instead of corrupting the heap. For
    the crash-prone cases run in a child process (run_isolated)."""

    def __init__(self, size):
        import mmap
        page = mmap.PAGESIZE
        self.size = (size + page - 1) // page * page
        self._map = mmap.mmap(-1, self.size + page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self._arr = (ctypes.c_ubyte * (self.size + page)).from_buffer(self._map)
        self.ptr = ctypes.addressof(self._arr)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [c_void_p, c_size_t, c_int]
        libc.mprotect.restype = c_int
        if libc.mprotect(self.ptr + self.size, page, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")

    def at(self, pos=0):
        return c_void_p(self.ptr + pos)

    def tail(self, n):
        """A pointer n bytes before the guard page."""
        return c_void_p(self.ptr + self.size - n)


def _cbuf(data):
    """A C copy of bytes (or None for a NULL pointer)."""
    if data is None:
        return None
    return ctypes.create_string_buffer(bytes(data), max(len(data), 1))


# ---------------------------------------------------------------- params

class Params:
    """An OSSL_PARAM array built from (name, kind, value-or-size) specs, kept alive with its
    storage. kinds: 'uint'/'int' with width 4 or 8, 'octet' (buffer), 'octet_ptr', 'utf8'."""

    def __init__(self, specs):
        self._keep = []
        self.arr = (OSSL_PARAM * (len(specs) + 1))()
        self.kinds = []
        for i, spec in enumerate(specs):
            name, kind = spec[0], spec[1]
            value = spec[2] if len(spec) > 2 else None
            width = spec[3] if len(spec) > 3 else 8
            p = self.arr[i]
            key = ctypes.create_string_buffer(name.encode())
            self._keep.append(key)
            p.key = ctypes.cast(key, c_char_p)
            p.return_size = P_UNMODIFIED
            if kind in ("uint", "int"):
                ctype = {("uint", 4): ctypes.c_uint32, ("uint", 8): ctypes.c_uint64,
                         ("int", 4): ctypes.c_int32, ("int", 8): ctypes.c_int64}[(kind, width)]
                store = ctype(value or 0)
                p.data_type = P_UINT if kind == "uint" else P_INT
                p.data_size = width
            elif kind == "octet":
                if isinstance(value, int):          # a receive buffer of that size
                    store = (ctypes.c_ubyte * value)()
                    p.data_size = value
                else:
                    store = ctypes.create_string_buffer(bytes(value), max(len(value), 1))
                    p.data_size = len(value)
                p.data_type = P_OCTET
            elif kind == "octet_ptr":
                store = c_void_p(0)
                p.data_type = P_OCTET_PTR
                p.data_size = 0
            elif kind == "utf8":
                store = ctypes.create_string_buffer(value.encode() if isinstance(value, str)
                                                    else value)
                p.data_type = P_UTF8
                p.data_size = len(store.value)
            else:
                raise ValueError(kind)
            self._keep.append(store)
            p.data = ctypes.cast(ctypes.pointer(store), c_void_p) if not isinstance(
                store, ctypes.Array) else ctypes.cast(store, c_void_p)
            self.kinds.append((name, kind, store))
        # the terminating OSSL_PARAM_END is the zeroed last element

    @property
    def ptr(self):
        return ctypes.cast(self.arr, c_void_p)

    def modified(self, i):
        return self.arr[i].return_size != P_UNMODIFIED

    def value(self, i):
        """What the callee left in param i (None when it did not answer it)."""
        name, kind, store = self.kinds[i]
        p = self.arr[i]
        if not self.modified(i):
            return None
        if kind in ("uint", "int"):
            return store.value
        if kind == "octet":
            return bytes(ctypes.string_at(ctypes.addressof(store), min(p.return_size,
                                                                       p.data_size)))
        if kind == "octet_ptr":
            if not store.value:
                return None
            return ctypes.string_at(store.value, p.return_size)
        if kind == "utf8":
            return store.value.decode()
        raise ValueError(kind)


def param_names(ptr):
    """The keys of an OSSL_PARAM array returned by a gettable/settable function."""
    names = []
    if not ptr:
        return names
    arr = ctypes.cast(ptr, POINTER(OSSL_PARAM))
    i = 0
    while arr[i].key is not None:
        names.append(arr[i].key.decode())
        i += 1
    return names


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
