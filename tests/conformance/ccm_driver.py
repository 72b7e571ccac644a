"""tests/conformance/ccm_driver.py: one EVP_CIPHER_CTX on an AES-CCM cipher, driven call by call as an
application (or libssl) drives it, for the CCM tests (test_ccm.py, test_ccm_diff.py). Every call is
recorded in a log as (call, C result, output, errors as (library text, reason text)), so two providers'
logs can be compared whole: same results, same bytes, same errors in the same order."""

from ctypes import byref, c_int

import evp


class Ccm:
    """One context on a CCM cipher, initialised (cipher only) for enc; the key and nonce come later,
    after the nonce and tag lengths, as OpenSSL's CCM requires."""

    def __init__(self, cipher, enc):
        self.enc = enc
        self.log = []
        self.ctx = evp.CipherCtx()
        evp.clear_errors()
        self._rec("init", self.ctx.raw_init(cipher, None, None, enc))

    def _rec(self, what, ok, out=None):
        errs = [(e.lib, e.reason) for e in evp.drain_errors()]
        self.log.append((what, ok, out, errs))
        return ok, out

    def ivlen(self, n):
        ok, _ = self.ctx.set_params([("ivlen", "uint", n)])
        return self._rec(f"ivlen {n}", ok)

    def taglen(self, m):
        """The tag length alone: an octet-string "tag" parameter with a NULL buffer of m bytes
        (what EVP_CTRL_AEAD_SET_TAG with a NULL pointer becomes)."""
        prm = evp.Params([("tag", "octet", bytes(max(m, 1)))])
        prm.arr[0].data = None
        prm.arr[0].data_size = m
        ok = evp.C.EVP_CIPHER_CTX_set_params(self.ctx.ptr, prm.ptr)
        return self._rec(f"taglen {m}", ok)

    def set_tag(self, tag):
        ok, _ = self.ctx.set_params([("tag", "octet", tag)])
        return self._rec(f"set tag {len(tag)}", ok)

    def key_iv(self, key, nonce):
        # The nonce buffer is padded: where a nonce length was refused, both providers read the
        # default length from it, never past the buffer.
        iv = None if nonce is None else nonce + bytes(16)
        return self._rec("key/iv", self.ctx.raw_init(None, key, iv, self.enc))

    def length(self, n):
        """The message length first: EVP_CipherUpdate(ctx, NULL, &outl, NULL, n)."""
        outl = c_int(-1)
        ok = evp.C.EVP_CipherUpdate(self.ctx.ptr, None, byref(outl), None, n)
        return self._rec(f"length {n}", ok, outl.value)

    def aad(self, data):
        src = evp.Mem(len(data))
        src.write(data)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherUpdate(self.ctx.ptr, None, byref(outl), src.at(), len(data))
        return self._rec(f"aad {len(data)}", ok, outl.value)

    def data(self, data, inplace=False):
        src = evp.Mem(len(data) + 16)
        src.write(data)
        dst = src if inplace else evp.Mem(len(data) + 16)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherUpdate(self.ctx.ptr, dst.at(), byref(outl), src.at(), len(data))
        if not inplace:
            assert dst.slack_intact(), "CCM update wrote outside its output buffer"
        # A failed update's output is not the caller's: only what a success claims is compared.
        out = dst.read(outl.value) if ok > 0 and 0 <= outl.value <= len(data) + 16 else None
        return self._rec(f"data {len(data)}{' in place' if inplace else ''}", ok, (outl.value, out))

    def final(self):
        dst = evp.Mem(32)
        outl = c_int(-1)
        ok = evp.C.EVP_CipherFinal_ex(self.ctx.ptr, dst.at(), byref(outl))
        return self._rec("final", ok, outl.value)

    def get_tag(self, m):
        """The tag into an m-byte buffer. OpenSSL 3.0's CCM writes the buffer without setting the
        parameter's return size, so the buffer itself is read."""
        ok, prm = self.ctx.get_params([("tag", "octet", m)])
        store = prm.kinds[0][2]
        return self._rec(f"get tag {m}", ok, (prm.arr[0].return_size, bytes(store)) if ok else None)

    def get(self, specs):
        ok, prm = self.ctx.get_params(specs)
        return self._rec("get " + ",".join(s[0] for s in specs), ok,
                         [prm.value(i) for i in range(len(specs))] if ok else None)

    def set(self, specs):
        ok, _ = self.ctx.set_params(specs)
        return self._rec("set " + ",".join(s[0] for s in specs), ok)

    def copy(self):
        other = Ccm.__new__(Ccm)
        other.enc, other.log, other.ctx = self.enc, self.log, self.ctx.copy()
        return other


def message(cipher, enc, key, nonce, aad, data, taglen, tag=None, inplace=False, length_first=True):
    """One whole CCM message as an application sends it: nonce length, tag length (encrypt) or tag
    (decrypt), key and nonce, the length first, AAD, the data in one update, final, and the tag
    (encrypt). Returns (log, output or None, tag or None)."""
    c = Ccm(cipher, enc)
    c.ivlen(len(nonce))
    if enc:
        c.taglen(taglen)
    else:
        c.set_tag(tag)
    c.key_iv(key, nonce)
    if length_first:
        c.length(len(data))
    if aad:
        c.aad(aad)
    ok, (_, out) = c.data(data, inplace)
    c.final()
    got_tag = c.get_tag(taglen)[1] if enc else None
    got_tag = got_tag[1] if got_tag else None
    return c.log, (out if ok > 0 else None), got_tag
