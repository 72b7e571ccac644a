"""tests/libcrypto.py: the system libcrypto through ctypes, for tests/evp.py: every function the driver
calls with its argtypes and restype declared once (_PROTOS, as C), the error queue (drain_errors,
OsslError), C buffers (Mem, GuardedMem) and OSSL_PARAM arrays (Params). Tests reach these through evp.
"""

import ctypes
import os
import re
import shutil
import subprocess
from ctypes import (POINTER, CFUNCTYPE, Structure, byref, c_char_p, c_int, c_size_t, c_uint,
                    c_ulong, c_void_p)



def module_libcrypto():
    """The soname of the libcrypto the module under test links (libcrypto.so.3 for OpenSSL 3.x,
    libcrypto.so.4 for 4.0; a system can carry both), else the openssl command's: ctypes must drive
    the same libcrypto the module calls. ACCELAES_TEST_LIBCRYPTO names another."""
    if os.environ.get("ACCELAES_TEST_LIBCRYPTO"):
        return os.environ["ACCELAES_TEST_LIBCRYPTO"]
    build = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         os.environ.get("ACCELAES_BUILD_DIR", "build"))
    module = os.path.join(os.environ.get("ACCELAES_TEST_MODULES", build), "accelaes.so")
    for elf in (module, shutil.which("openssl")):
        if soname_of(elf):
            return soname_of(elf)
    return "libcrypto.so.3"


def soname_of(elf):
    """The libcrypto soname a program or library links (ldd), or None."""
    if not elf or not os.path.exists(elf) or not shutil.which("ldd"):
        return None
    out = subprocess.run(["ldd", elf], capture_output=True, text=True).stdout
    m = re.search(r"^\s*(libcrypto\.so\.\d+)\s", out, re.M)
    return m.group(1) if m else None


def other_libcrypto(elf):
    """Why accelaes.so cannot serve program elf, or None: elf links another libcrypto than the
    module (sid carries OpenSSL 3.6's libcrypto.so.3 for its nginx, sshd and curl beside 4.0's
    libcrypto.so.4), and a provider only loads into the libcrypto it was built for."""
    theirs = soname_of(elf)
    if theirs and theirs != LIBCRYPTO:
        return f"{elf} links {theirs}, accelaes.so links {LIBCRYPTO}: the provider cannot load into it"
    return None


LIBCRYPTO = module_libcrypto()
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
    "OpenSSL_version_num": (c_ulong, []),
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
