"""tests/conformance/ccm_quick.py: one CCM message through EVP for test_ccm_basic.py and its child process (which
imports this and not the test file: importing a test file imports conftest, which points the process at the
session's scheduler segment)."""

from ctypes import byref, c_int

import evp


def set_taglen(ctx, m):
    """The tag length alone: a "tag" parameter of m bytes with no data (EVP_CTRL_AEAD_SET_TAG, NULL)."""
    params = evp.Params([("tag", "octet", m)])
    params.arr[0].data = None
    return evp.C.EVP_CIPHER_CTX_set_params(ctx.ptr, params.ptr)


def errs():
    return [(e.lib, e.reason) for e in evp.drain_errors()]


def upd(ctx, data, out=True, inplace=False, inl=None):
    """EVP_CipherUpdate: data None = the length-only call (inl), out False = AAD."""
    src = evp.Mem(max(len(data or b""), 1) + 16)
    if data:
        src.write(data)
    dst = src if inplace else evp.Mem(max(len(data or b""), 1) + 16)
    outl = c_int(-1)
    n = len(data) if data is not None else inl
    ok = evp.C.EVP_CipherUpdate(ctx.ptr, dst.at() if out else None, byref(outl), src.at() if data is not None else None,
                                n)
    return ok, dst.read(max(outl.value, 0)) if out and data is not None else outl.value


def message(cipher, key, nonce, m, aad, data, enc, tag=None, inplace=False):
    """One CCM message as libssl and the man page run it; returns everything observable."""
    evp.clear_errors()
    ctx = evp.CipherCtx()
    out = [ctx.raw_init(cipher, None, None, enc)]
    ok, _ = ctx.set_params([("ivlen", "uint", len(nonce))])
    out.append(ok)
    if enc or tag is None:
        out.append(set_taglen(ctx, m))
    else:
        ok, _ = ctx.set_params([("tag", "octet", tag)])
        out.append(ok)
    out.append(ctx.raw_init(None, key, nonce, enc))
    out.append(upd(ctx, None, out=False, inl=len(data)))
    if aad is not None:
        out.append(upd(ctx, aad, out=False))
    out.append(upd(ctx, data, inplace=inplace))
    fin = evp.Mem(32)
    outl = c_int(-1)
    out.append((evp.C.EVP_CipherFinal_ex(ctx.ptr, fin.at(), byref(outl)), outl.value))
    if enc:
        ok, p = ctx.get_params([("tag", "octet", m)])
        out.append((ok, bytes(p.kinds[0][2])))
    out.append(errs())
    return out
