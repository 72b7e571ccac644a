"""tests/gcm_driver.py: one EVP_CIPHER_CTX on a GCM cipher for the GCM tests (test_gcm.py,
test_gcm_rekey.py, and test_gcm_split.py's child, which imports this and not a test file: importing a
test file imports conftest, which points the process at the session's scheduler segment)."""

from ctypes import byref, c_int

import evp


class Gcm:
    """One EVP_CIPHER_CTX on a GCM cipher; every call returns what C returned, errors drained."""

    def __init__(self, cipher, key, iv, enc, ivlen=None):
        self.ctx = evp.CipherCtx()
        evp.clear_errors()
        params = evp.Params([("ivlen", "uint", ivlen)]) if ivlen is not None else None
        ok1 = self.ctx.raw_init(cipher, None, None, enc, params)
        ok2 = self.ctx.raw_init(None, key, iv, enc)
        assert ok1 and ok2, evp.drain_errors()

    def aad(self, data):
        src = evp.Mem(len(data))
        src.write(data)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherUpdate(self.ctx.ptr, None, byref(outl), src.at(), len(data))
        return ok, outl.value

    def data(self, data, inplace=False):
        src = evp.Mem(len(data) + 16)
        src.write(data)
        dst = src if inplace else evp.Mem(len(data) + 16)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherUpdate(self.ctx.ptr, dst.at(), byref(outl), src.at(), len(data))
        return ok, dst.read(max(outl.value, 0))

    def final(self):
        dst = evp.Mem(32)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherFinal_ex(self.ctx.ptr, dst.at(), byref(outl))
        return ok, outl.value

    def set_tag(self, tag):
        ok, _ = self.ctx.set_params([("tag", "octet", tag)])
        return ok

    def get_tag(self, n=16):
        ok, p = self.ctx.get_params([("tag", "octet", n)])
        return ok, p.value(0)

    def copy(self):
        other = Gcm.__new__(Gcm)
        other.ctx = self.ctx.copy()
        return other
