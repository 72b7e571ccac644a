"""tests/errcmp.py: what tests/conformance/test_error_codes.py needs beyond evp.py to compare the errors of one
failing call between the default provider and accelaes: the error queue as numbers and texts; a
driver of a provider's cipher dispatch table itself (OSSL_PROVIDER_query_operation), for the calls
EVP never makes with bad arguments (a wrong key or IV length at init, an output size smaller than
the data) but that a provider must still answer as the default provider does; and the row
registry with the helpers the rows (tests/error_rows.py, tests/error_rows_tls.py) are written in."""

import ctypes
from ctypes import CFUNCTYPE, POINTER, Structure, byref, c_char_p, c_int, c_size_t, c_void_p

import evp

ERR_LIB_EVP, ERR_LIB_PROV = 6, 57
EVP_CTRL_AEAD_TLS1_AAD, EVP_CTRL_AEAD_SET_MAC_KEY = 0x16, 0x17


def _fn(name, restype, argtypes):
    # CDLL.__getitem__ makes a new function object: evp.C's prototypes stay as they are
    f = evp._lib[name]
    f.restype, f.argtypes = restype, argtypes
    return f


_query = _fn("OSSL_PROVIDER_query_operation", c_void_p, [c_void_p, c_int, POINTER(c_int)])
_provctx = _fn("OSSL_PROVIDER_get0_provider_ctx", c_void_p, [c_void_p])
_ctrl = _fn("EVP_CIPHER_CTX_ctrl", c_int, [c_void_p, c_int, c_int, c_void_p])
_set_keylen = evp.C.EVP_CIPHER_CTX_set_key_length


def queue():
    """Drain this thread's error queue: (library, reason, library text, reason text) per error,
    oldest first. The printf detail a provider adds is left out: it changes no reason text."""
    out = []
    for e in evp.drain_errors():
        out.append(((e.code >> 23) & 0xFF, e.code & 0x7FFFFF, e.lib, e.reason))
    return out


def show(errors):
    return " ".join(f"{lib:02X}/{reason}({text or '?'}: {rtext or '?'})"
                    for lib, reason, text, rtext in errors) or "-"


def ctrl(ctx, op, data):
    """EVP_CIPHER_CTX_ctrl(ctx, op, len(data), data), as libssl sets a stitched cipher's MAC key and
    record header."""
    buf = ctypes.create_string_buffer(bytes(data), max(len(data), 1))
    return _ctrl(ctx.ptr, op, len(data), buf)


def set_key_length(ctx, n):
    return _set_keylen(ctx.ptr, n)


# ---------------------------------------------------------------- the dispatch table itself

class _Dispatch(Structure):
    _fields_ = [("function_id", c_int), ("function", c_void_p)]


class _Algorithm(Structure):
    _fields_ = [("names", c_char_p), ("props", c_char_p), ("impl", POINTER(_Dispatch)),
                ("desc", c_char_p)]


_INIT = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_void_p)
_UPDATE = CFUNCTYPE(c_int, c_void_p, c_void_p, POINTER(c_size_t), c_size_t, c_void_p, c_size_t)
_FINAL = CFUNCTYPE(c_int, c_void_p, c_void_p, POINTER(c_size_t), c_size_t)
_PROTOS = {1: ("newctx", CFUNCTYPE(c_void_p, c_void_p)), 2: ("einit", _INIT), 3: ("dinit", _INIT),
           4: ("update", _UPDATE), 5: ("final", _FINAL), 6: ("cipher", _UPDATE),
           7: ("freectx", CFUNCTYPE(None, c_void_p)),
           11: ("set_ctx_params", CFUNCTYPE(c_int, c_void_p, c_void_p))}


class Raw:
    """One algorithm context made through a provider's own dispatch table: the calls as EVP
    would make them, with any lengths."""

    def __init__(self, libctx, provider, name):
        prov = libctx.providers[provider]
        nc = c_int(0)
        algs = ctypes.cast(_query(prov, 2, byref(nc)), POINTER(_Algorithm))
        table = None
        for i in range(64):
            if not algs or algs[i].names is None:
                break
            if name.upper() in algs[i].names.decode().upper().split(":"):
                table = algs[i].impl
                break
        assert table is not None, f"{provider} offers no {name}"
        self.f = {}
        for i in range(32):
            fid = table[i].function_id
            if fid == 0:
                break
            if fid in _PROTOS:
                attr, proto = _PROTOS[fid]
                self.f[attr] = proto(table[i].function)
        self.keep = []
        self.ctx = self.f["newctx"](_provctx(prov))
        assert self.ctx, f"{provider} {name}: newctx failed"

    def _buf(self, data):
        if data is None:
            return None
        b = ctypes.create_string_buffer(bytes(data), max(len(data), 1))
        self.keep.append(b)
        return ctypes.cast(b, c_void_p)

    def init(self, enc, key, keylen, iv, ivlen, params=None):
        self.keep.append(params)
        return self.f["einit" if enc else "dinit"](self.ctx, self._buf(key), keylen, self._buf(iv),
                                                   ivlen, params.ptr if params else None)

    def update(self, data, outsize, op="update", inplace=False):
        """(ret, outl) of update (or cipher, op="cipher") on data with that output size."""
        src = evp.Mem(max(len(data), 1) + 64)
        src.write(data)
        dst = src if inplace else evp.Mem(outsize + 64)
        outl = c_size_t(0)
        r = self.f[op](self.ctx, dst.at(), byref(outl), outsize, src.at(), len(data))
        return r, outl.value if r else None

    def final(self, outsize):
        dst = evp.Mem(outsize + 64)
        outl = c_size_t(0)
        r = self.f["final"](self.ctx, dst.at(), byref(outl), outsize)
        return r, outl.value if r else None

    def set_params(self, specs):
        p = evp.Params(specs)
        return self.f["set_ctx_params"](self.ctx, p.ptr)

    def free(self):
        if self.ctx:
            self.f["freectx"](self.ctx)
            self.ctx = None


# ---------------------------------------------------------------- rows

ECB, CBC, CTR = "AES-128-ECB", "AES-256-CBC", "AES-192-CTR"
H1, H2 = "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA256"
BLOCK, ALL, STITCHED = [ECB, CBC], [ECB, CBC, CTR], [H1, H2]
# GCM (an AEAD: no padding, tag at final) and XTS (one update = one data unit of >= 16 bytes, a
# 16-byte tweak, a double-length key) go through every row whose call means something for them
GCM, XTS = ["AES-128-GCM", "AES-192-GCM", "AES-256-GCM"], ["AES-128-XTS", "AES-256-XTS"]
NEW = GCM + XTS
KEY, IV, MACKEY = bytes(range(96)), bytes(range(64, 80)), bytes(range(100, 120))
V_TLS1, V_TLS1_2 = 0x0301, 0x0303


def keylen(name):
    """The key length EVP wants: XTS takes two keys (data, tweak) of the named size."""
    return int(name.split("-")[1]) // 8 * (2 if name.endswith("XTS") else 1)


class Env:
    """One provider's side of a row: its fetched ciphers (checked to be that provider's)."""

    def __init__(self, lc, prov):
        self.lc, self.prov = lc, prov

    def fetch(self, name):
        c = self.lc.fetch(name, self.prov)
        assert c.provider == self.prov, f"{name} came from {c.provider}, not {self.prov}"
        return c

    def ctx(self, name, enc=1, key=True, iv=True, pad=None, params=None):
        c = evp.CipherCtx()
        k = KEY[:keylen(name)] if key else None
        v = IV if iv and "ECB" not in name else None
        assert c.raw_init(self.fetch(name), k, v, enc, params), f"setup init: {queue()}"
        if pad is not None:
            c.set_padding(pad)
        return c

    def raw(self, name):
        self.fetch(name)
        return Raw(self.lc, self.prov, name)

    @staticmethod
    def go():
        """Called right before the call under test: the setup left nothing on the queue."""
        left = queue()
        assert not left, f"setup raised {show(left)}"


def upd(ctx, data, out=True, inl=None):
    """EVP_CipherUpdate out of place: (ok, outl, output) (outl and output only on success)."""
    src, dst = evp.Mem(max(len(data), 1)), evp.Mem(len(data) + 32)
    src.write(data)
    ok, outl = ctx.raw_update(dst.at() if out else None, src.at() if data is not None else None,
                              len(data) if inl is None else inl)
    return (ok, outl, dst.read(outl).hex()) if ok else (ok,)


def upd_inplace(ctx, data, size=None):
    buf = evp.Mem(max(size or 0, len(data)) + 32)
    buf.write(data)
    ok, outl = ctx.raw_update(buf.at(), buf.at(), len(data))
    return (ok, outl, buf.read(outl).hex()) if ok else (ok,)


def fin(ctx, out=True):
    dst = evp.Mem(32)
    ok, outl = ctx.raw_final(dst.at() if out else None)
    return (ok, outl, dst.read(outl).hex()) if ok else (ok,)


def oneshot(ctx, data, inplace=False):
    ret, out = ctx.cipher_oneshot(data, inplace)
    return ret, out.hex() if ret > 0 else None


def set_params(ctx, specs):
    return ctx.set_params(specs)[0]


def get_params(ctx, specs):
    ok, p = ctx.get_params(specs)
    return ok, [p.value(i) for i in range(len(specs))] if ok else None


def tls(ctx, version=V_TLS1_2, macsize=20):
    assert ctx.set_params([("tls-version", "uint", version, 4)])[0]
    assert ctx.set_params([("tls-mac-size", "uint", macsize, 8)])[0]


def plain_cbc(env, name, data, enc=1):
    """data through the default provider's CBC (or ECB) with padding off: records built to order."""
    with evp.CipherCtx(env.lc.fetch(name, "default"), KEY[:keylen(name)],
                       None if "ECB" in name else IV, enc, 0) as c:
        return c.update(data) + c.final()


ROWS = {}   # id -> (ciphers, fn): calls where accelaes must answer exactly as default


def row(rid, ciphers):
    def add(fn):
        ROWS[rid] = (ciphers, fn)
        return fn
    return add


