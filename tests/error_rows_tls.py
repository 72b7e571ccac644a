"""tests/error_rows_tls.py: the rows of tests/conformance/test_error_codes.py for TLS records: the plain AES
ciphers with OSSL_CIPHER_PARAM_TLS_VERSION set (provider/cipher/tls.c) and the stitched
AES-CBC-HMAC-SHA ciphers (record header, MAC key, records with a bad MAC or padding); and
ACCELAES_ONLY, the calls where accelaes deliberately answers otherwise than the default provider,
each with the reason."""

import evp
from errcmp import (ALL, BLOCK, CBC, CTR, ECB, ERR_LIB_EVP, EVP_CTRL_AEAD_SET_MAC_KEY, EVP_CTRL_AEAD_TLS1_AAD,
                    IV, KEY, MACKEY, STITCHED, V_TLS1, V_TLS1_2, ctrl, fin, keylen, oneshot,
                    plain_cbc, row, set_params, tls, upd, upd_inplace)

# ---------------------------------------------------------------- AES with a TLS version (tls.c)


def _record(env, name, last_block, blocks=3):
    """A TLS 1.2 record (explicit IV block first) whose plaintext ends with last_block."""
    return plain_cbc(env, name, bytes(16 * (blocks - 1)) + last_block)


_GOOD = bytes(10) + b"\x05" * 6
_BAD = bytes(10) + b"\x07\x05\x05\x05\x05\x05"
_TLS_DEC = [
    # id, cipher, version, mac size, record
    ("tls-decrypt-not-whole-blocks", [CBC], V_TLS1_2, 20, lambda env, n: bytes(40)),
    ("tls-decrypt-one-block", [CBC], V_TLS1_2, 20, lambda env, n: bytes(16)),
    ("tls-decrypt-shorter-than-mac", [CBC], V_TLS1_2, 20, lambda env, n: bytes(32)),
    ("tls1-decrypt-shorter-than-mac", [CBC], V_TLS1, 20, lambda env, n: bytes(16)),
    ("tls-etm-bad-padding", [CBC], V_TLS1_2, 0, lambda env, n: _record(env, n, _BAD)),
    ("tls-etm-good-padding", [CBC], V_TLS1_2, 0, lambda env, n: _record(env, n, _GOOD)),
    ("tls-mac-bad-padding", [CBC], V_TLS1_2, 20, lambda env, n: _record(env, n, _BAD, 4)),
]
for _rid, _ciphers, _ver, _ms, _rec in _TLS_DEC:
    @row(_rid, _ciphers)
    def _(env, name, ver=_ver, ms=_ms, rec=_rec):
        data = rec(env, name)
        ctx = env.ctx(name, enc=0)
        tls(ctx, ver, ms)
        env.go()
        got = upd_inplace(ctx, data)
        if got[0] and ms > 0 and ms <= 64 and "CTR" not in name:
            # the MAC (random where the padding was bad) is the caller's to compare, not ours
            ok, p = ctx.get_params([("tls-mac", "octet_ptr")])
            got += (ok, p.value(0) is not None and len(p.value(0)))
        return got


for _rid, _ver, _size in (("tls-encrypt", V_TLS1_2, 20), ("tls-encrypt-ssl3", 0x0300, 37)):
    @row(_rid, [CBC])
    def _(env, name, ver=_ver, size=_size):
        ctx = env.ctx(name)
        tls(ctx, ver, 20)
        env.go()
        return upd_inplace(ctx, bytes(range(size)), size + 16)


@row("tls-not-in-place", [CBC])
def _(env, name):
    ctx = env.ctx(name)
    tls(ctx)
    env.go()
    return upd(ctx, bytes(20))


@row("tls-padding-off", [CBC])
def _(env, name):
    ctx = env.ctx(name, pad=0)
    tls(ctx)
    env.go()
    return upd_inplace(ctx, bytes(20), 48)


@row("tls-final", [CBC])
def _(env, name):
    ctx = env.ctx(name)
    tls(ctx)
    env.go()
    return fin(ctx)


for _rid, _enc, _size, _outsize in (("dispatch-tls-encrypt-no-room-for-padding", 1, 20, 20),
                                    ("dispatch-tls-output-smaller-than-record", 0, 48, 32)):
    @row(_rid, [CBC])
    def _(env, name, enc=_enc, size=_size, outsize=_outsize):
        raw = env.raw(name)
        assert raw.init(enc, KEY, keylen(name), IV, 16)
        assert raw.set_params([("tls-version", "uint", V_TLS1_2, 4)])
        env.go()
        return raw.update(bytes(size), outsize, inplace=True)

# ---------------------------------------------------------------- the stitched ciphers


def _aad(version, length, rtype=0x17):
    return bytes(8) + bytes([rtype, version >> 8, version & 0xFF, length >> 8, length & 0xFF])


def _stitched(env, name, enc, prov=None, mackey=MACKEY):
    c = evp.CipherCtx(env.lc.fetch(name, prov or env.prov), KEY[:keylen(name)], IV, enc)
    assert ctrl(c, EVP_CTRL_AEAD_SET_MAC_KEY, mackey) > 0
    return c


def _sealed(env, name, version, payload):
    """A record as libssl seals it, by the default provider: payload (explicit IV included for
    TLS 1.1+), its HMAC and padding, encrypted in place."""
    c = _stitched(env, name, 1, "default")
    pad = ctrl(c, EVP_CTRL_AEAD_TLS1_AAD, _aad(version, len(payload)))
    assert pad > 0
    buf = evp.Mem(len(payload) + pad)
    buf.write(payload)
    assert evp.C.EVP_Cipher(c.ptr, buf.at(), buf.at(), len(payload) + pad) > 0
    return buf.read(len(payload) + pad)


def _tamper(rec, pos):
    return rec[:pos] + bytes([rec[pos] ^ 1]) + rec[pos + 1:]


_PAYLOAD = bytes(range(16)) + b"record payload, 33 bytes of it.."
_RECORDS = [
    ("record-good", lambda r: r),
    ("record-tampered-payload", lambda r: _tamper(r, 20)),
    ("record-tampered-padding", lambda r: _tamper(r, len(r) - 17)),
    ("record-tampered-last-byte", lambda r: _tamper(r, len(r) - 1)),
    ("record-truncated-to-32", lambda r: r[:32]),
    ("record-not-whole-blocks", lambda r: r[:-3]),
]
for _rid, _mangle in _RECORDS:
    for _call in ("cipher", "update"):
        @row(f"{_rid}-{_call}", STITCHED)
        def _(env, name, mangle=_mangle, call=_call):
            rec = mangle(_sealed(env, name, V_TLS1_2, _PAYLOAD))
            c = _stitched(env, name, 0)
            if call == "update":
                assert set_params(c, [("tls-version", "uint", V_TLS1_2, 4)])
            assert ctrl(c, EVP_CTRL_AEAD_TLS1_AAD, _aad(V_TLS1_2, len(rec))) > 0
            env.go()
            if call == "cipher":
                return oneshot(c, rec, inplace=True)
            got = upd_inplace(c, rec)
            return got[:2] + ((got[2][:2 * (got[1] or 0)],) if got[0] else ())


@row("record-shorter-than-what-the-tls-version-strips", STITCHED)
def _(env, name):
    """A good TLS 1.0 record (MAC and padding only) read with tls-version TLS 1.2 set: the length
    left after the padding, MAC and an explicit IV would be negative."""
    rec = _sealed(env, name, V_TLS1, b"")
    c = _stitched(env, name, 0)
    assert set_params(c, [("tls-version", "uint", V_TLS1_2, 4)])
    assert ctrl(c, EVP_CTRL_AEAD_TLS1_AAD, _aad(V_TLS1, len(rec))) > 0
    env.go()
    return upd_inplace(c, rec)[:2]


for _rid, _enc, _aadv in (("aad-12-bytes", 1, lambda: _aad(V_TLS1_2, 20)[:12]),
                          ("aad-12-bytes-decrypt", 0, lambda: _aad(V_TLS1_2, 64)[:12]),
                          ("aad-14-bytes", 1, lambda: _aad(V_TLS1_2, 20) + b"\x00"),
                          ("aad-record-shorter-than-explicit-iv", 1, lambda: _aad(V_TLS1_2, 8)),
                          ("aad-tls1-short-record", 1, lambda: _aad(V_TLS1, 8))):
    @row(_rid, STITCHED)
    def _(env, name, enc=_enc, aad=_aadv):
        c = _stitched(env, name, enc)
        env.go()
        return ctrl(c, EVP_CTRL_AEAD_TLS1_AAD, aad())


for _rid, _spec in (("set-tlsaad-wrong-type", ("tlsaad", "utf8", "x")),
                    ("set-tlsaad-param-12-bytes", ("tlsaad", "octet", bytes(12))),
                    ("set-mackey-wrong-type", ("mackey", "utf8", "x")),
                    ("set-mackey-100-bytes", ("mackey", "octet", bytes(range(100)))),
                    ("set-mackey-empty", ("mackey", "octet", b"")),
                    ("set-tls-version-tls1", ("tls-version", "uint", V_TLS1, 4))):
    @row(_rid, STITCHED)
    def _(env, name, spec=_spec):
        c = _stitched(env, name, 1)
        env.go()
        return set_params(c, [spec])


for _rid, _specs in (("set-multiblock-max-send-fragment-wrong-type",
                       [("tls1multi_maxsndfrag", "utf8", "x")]),
                      ("set-multiblock-aad-without-interleave", [("tls1multi_aad", "octet", bytes(13))]),
                      ("set-multiblock-enc-without-input", [("tls1multi_enc", "octet", bytes(64)),
                                                            ("tls1multi_interleave", "uint", 4, 4)])):
    @row(_rid, STITCHED)
    def _(env, name, specs=_specs):
        c = _stitched(env, name, 1)
        env.go()
        return set_params(c, specs)


# TLS1_1_MULTIBLOCK_AAD's refusals (libssl then writes one record at a time): OpenSSL 3.5.9's
# default checks the interleave and the lengths first, with an error; 3.0.19's takes them and
# refuses only a short write, TLS 1.0 or a decryption, without one (provider/base/compat.h)
_MB_AAD = [  # id, enc, version, length field, the parameter's size (the write), interleave
    ("mb-aad-interleave-5", 1, V_TLS1_2, 0, 4 * 16384, 5), ("mb-aad-interleave-12", 1, V_TLS1_2, 0, 4 * 16384, 12),
    ("mb-aad-size-12", 1, V_TLS1_2, 0, 12, 4), ("mb-aad-size-past-4-records", 1, V_TLS1_2, 0, 4 * 16384 + 1, 4),
    ("mb-aad-size-past-8-records", 1, V_TLS1_2, 0, 8 * 16384 + 1, 8),
    ("mb-aad-field-past-a-record", 1, V_TLS1_2, 16385, 16385, 8),
    ("mb-aad-field-too-short", 1, V_TLS1_2, 4000, 4000, 8), ("mb-aad-tls1", 1, V_TLS1, 0, 4 * 16384, 4),
    ("mb-aad-tls1-interleave-5", 1, V_TLS1, 0, 4 * 16384, 5), ("mb-aad-decrypt", 0, V_TLS1_2, 0, 4 * 16384, 4),
    ("mb-aad-accepted", 1, V_TLS1_2, 0, 4 * 16384, 4)]
for _rid, _enc, _version, _field, _size, _il in _MB_AAD:
    @row(_rid, STITCHED)
    def _(env, name, enc=_enc, version=_version, field=_field, size=_size, il=_il):
        c = _stitched(env, name, enc)
        # the parameter's size is the write's length (the field 0) and its data the header, as
        # libssl passes them: the 13 bytes are there even where the size says fewer
        p = evp.Params([("tls1multi_aad", "octet", _aad(version, field) + bytes(max(size - 13, 0))),
                        ("tls1multi_interleave", "uint", il, 4)])
        p.arr[0].data_size = size
        env.go()
        ok = evp.C.EVP_CIPHER_CTX_set_params(c.ptr, p.ptr)
        if not ok:
            return ok
        ok, p = c.get_params([("tls1multi_aadpacklen", "uint", 0, 4), ("tls1multi_interleave", "uint", 0, 4)])
        return ok, p.value(0), p.value(1)


@row("get-multiblock-max-bufsize-wrong-type", STITCHED)
def _(env, name):
    c = _stitched(env, name, 1)
    assert set_params(c, [("tls1multi_maxsndfrag", "uint", 4096, 8)])
    env.go()
    ok, _p = c.get_params([("tls1multi_maxbufsz", "utf8", "")])
    return ok


@row("set-tls-version-tls1-before-key", STITCHED)
def _(env, name):
    c = env.ctx(name, key=False)
    env.go()
    return set_params(c, [("tls-version", "uint", V_TLS1, 4)])


@row("encrypt-record-wrong-length", STITCHED)
def _(env, name):
    c = _stitched(env, name, 1)
    assert ctrl(c, EVP_CTRL_AEAD_TLS1_AAD, _aad(V_TLS1_2, 36)) > 0
    env.go()
    return oneshot(c, bytes(32), inplace=True)


@row("final-with-key", STITCHED)
def _(env, name):
    c = _stitched(env, name, 1)
    env.go()
    return fin(c)


@row("update-partial-block-without-aad", STITCHED)
def _(env, name):
    c = _stitched(env, name, 1)
    env.go()
    return upd(c, bytes(20))

# ---------------------------------------------------------------- accelaes's own conditions


def _evp_cipher_partial(env, name):
    c = env.ctx(name)
    env.go()
    return oneshot(c, bytes(5))


def _ctr_num(env, name):
    c = env.ctx(name)
    env.go()
    return c.set_num(16)


def _negative(n):
    def fn(env, name):
        c = env.ctx(name)
        env.go()
        src, dst = evp.GuardedMem(4096), evp.GuardedMem(4096)
        return c.raw_update(dst.at(), src.at(), -n)
    return fn


def _evp_cipher_4gib(env, name):
    c = env.ctx(name)
    env.go()
    src, dst = evp.GuardedMem(4096), evp.GuardedMem(4096)
    return evp.C.EVP_Cipher(c.ptr, dst.at(), src.at(), 2**32 - 1)


def _null_in(env, name):
    c = env.ctx(name)
    env.go()
    ok, outl = c.raw_update(evp.Mem(48).at(), None, 16)
    return (ok,)


def _null_out(env, name):
    c = env.ctx(name)
    env.go()
    return upd(c, bytes(32), out=False)


def _set(spec):
    def fn(env, name):
        c = env.ctx(name)
        env.go()
        return set_params(c, [spec])
    return fn


def _tls_record(enc, data):
    def fn(env, name):
        c = env.ctx(name, enc=enc)
        tls(c, V_TLS1_2, 20 if "CTR" in name else 0)
        env.go()
        return upd_inplace(c, data, len(data) + 16)
    return fn


# Where releases differ, whether a condition is still accelaes's own on the running release is
# asked of its default provider, with a call that is safe on every release:


def _default_takes_ctr_num(lc, name):
    """OpenSSL 3.0.19's default takes any num; 3.5.9's refuses one at or past the block size
    (CTR's is 1), as accelaes then does (provider/base/compat.h): the row is compared there."""
    c = evp.CipherCtx()
    assert c.raw_init(lc.fetch(name, "default"), KEY[:keylen(name)], IV, 1, None)
    ok = c.set_num(16)
    evp.drain_errors()
    return bool(ok)


def _evp_passes_negative_length(lc, name):
    """OpenSSL 3.0's EVP hands a negative length on to the provider; 3.5's refuses it itself, and
    neither provider sees the call: the row is compared there. Asked with the default's ECB,
    which 3.0's answers safely (the output size wraps below the length: too small)."""
    c = evp.CipherCtx()
    assert c.raw_init(lc.fetch(ECB, "default"), KEY[:16], None, 1, None)
    src, dst = evp.GuardedMem(4096), evp.GuardedMem(4096)
    c.raw_update(dst.at(), src.at(), -1)
    return not any((e.code >> 23) & 0xFF == ERR_LIB_EVP for e in evp.drain_errors())


# id -> (ciphers, fn, accelaes's own reason for refusing, or None where accelaes succeeds and the
# default provider answers otherwise without an error; whether the default may be run; why;
# optionally own_here(libctx, cipher): False where the running release's default answers as
# accelaes does, and the row is then compared with it as test_same_as_default's are)
ACCELAES_ONLY = {
    "set-tls-version-0x9999": (ALL, _set(("tls-version", "uint", 0x9999, 4)), "invalid parameter", True,
                               "a version no CBC record layer speaks: the default takes it (then pads "
                               "records as TLS and fails every decrypt); accelaes refuses it when set"),
    "set-tls-mac-size-100": (ALL, _set(("tls-mac-size", "uint", 100, 8)), "invalid parameter", True,
                             "a MAC larger than any digest: the default takes it and trusts it when it "
                             "decrypts; accelaes refuses it when set"),
    "tls-record-on-ecb": ([ECB], _tls_record(1, bytes(20)), "invalid tls record", True,
                          "the default pads and encrypts TLS records with ECB too; accelaes does "
                          "records for CBC only, as every TLS suite"),
    "tls-ctr-decrypt-takes-a-mac": ([CTR], _tls_record(0, bytes(48)), None, True,
                                    "with a TLS version and MAC size set, the default's stream update "
                                    "takes the MAC size off every CTR decrypt (28 bytes of 48 "
                                    "reported); accelaes ignores TLS settings on CTR (48)"),
    "tls-ctr-decrypt-shorter-than-mac": ([CTR], _tls_record(0, bytes(16)), None, True,
                                         "likewise: the default fails a 16-byte CTR decrypt with a "
                                         "20-byte MAC size, with no error; accelaes decrypts it"),
    "evp-cipher-partial-block": (BLOCK, _evp_cipher_partial, "wrong final block length", True,
                                 "EVP_Cipher on 5 bytes: default returns 5 having written nothing "
                                 "(ECB: the output left as it was) or a whole block (CBC: 16 bytes "
                                 "written for 5); accelaes refuses what is not whole blocks"),
    "ctr-num-16": ([CTR], _ctr_num, "invalid parameter", True,
                   "default accepts any num and then indexes its 16-byte keystream block with it "
                   "(reads past it); accelaes refuses num >= 16", _default_takes_ctr_num),
    "update-length-minus-1": ([CTR], _negative(1), "length too large", False,
                              "OpenSSL 3.0.19's EVP passes inl = -1 on as SIZE_MAX, and CTR's output "
                              "size as the same: the default encrypts on and crashes",
                              _evp_passes_negative_length),
    "update-length-minus-17": (BLOCK, _negative(17), "length too large", False,
                               "inl = -17 reaches the provider as SIZE_MAX - 16 with an output size "
                               "that does not wrap (-1 to -16 do: output too small, as the default "
                               "says, in the compared table): the default encrypts on and crashes",
                               _evp_passes_negative_length),
    "evp-cipher-4-gib": (ALL, _evp_cipher_4gib, "length too large", False,
                         "EVP_Cipher of 2^32 - 1 bytes: the default encrypts them and crashes; "
                         "accelaes refuses what an int cannot report"),
    "update-null-input": (ALL, _null_in, "null pointer", False,
                          "16 bytes from a NULL input: default reads through the NULL pointer"),
    "update-null-output": (ALL, _null_out, "null pointer", False,
                           "32 bytes to a NULL output: default writes through the NULL pointer"),
}
