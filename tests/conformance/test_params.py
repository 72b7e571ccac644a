"""tests/conformance/test_params.py: algorithm and context parameters of the nine ciphers (get and set, integer
widths, octet-string and octet-ptr forms), each compared with what the default provider answers."""

import pytest

import evp

KEY32 = bytes(range(32))
IV = bytes(range(100, 116))

# What EVP itself asks at fetch time (see evp_cipher_cache_constants), with the same C types.
ALG_PARAMS = [("blocksize", "uint", 0, 8), ("keylen", "uint", 0, 8), ("ivlen", "uint", 0, 8),
              ("mode", "uint", 0, 4), ("aead", "int", 0, 4), ("custom-iv", "int", 0, 4),
              ("cts", "int", 0, 4), ("tls-multi", "int", 0, 4), ("has-randkey", "int", 0, 4)]


def _answers(getter, specs):
    ok, params = getter(specs)
    return ok, [params.value(i) for i in range(len(specs))]


@pytest.mark.parametrize("name", evp.CIPHERS)
def test_cipher_get_params(pair, name):
    ciphers = pair(name)
    mode = evp.cipher_mode(name)
    want = {"blocksize": 1 if mode == evp.MODE_CTR else 16, "keylen": evp.cipher_keylen(name),
            "ivlen": 0 if mode == evp.MODE_ECB else 16, "mode": mode}
    # all at once
    got = _answers(ciphers.test.get_params, ALG_PARAMS)
    ref = _answers(ciphers.ref.get_params, ALG_PARAMS)
    assert got == ref, f"{name}: get_params {got} vs default {ref}"
    answered = dict(zip([p[0] for p in ALG_PARAMS], got[1]))
    for k, v in want.items():
        assert answered[k] == v, f"{name}: {k} = {answered[k]}, want {v}"
    # one at a time, and at other integer widths (the provider must use OSSL_PARAM_set_*)
    for spec in ALG_PARAMS:
        for kind, width in (("uint", 4), ("uint", 8), ("int", 4), ("int", 8)):
            one = [(spec[0], kind, 0, width)]
            got, ref = _answers(ciphers.test.get_params, one), _answers(ciphers.ref.get_params, one)
            assert got == ref, f"{name}: {spec[0]} as {kind}{width * 8}: {got} vs default {ref}"


@pytest.mark.parametrize("name", evp.CIPHERS)
def test_cipher_accessors(pair, name):
    """What EVP caches from get_params at fetch time, plus the names and the NID."""
    t, r = pair(name).test, pair(name).ref
    got = (t.block_size, t.key_length, t.iv_length, t.mode, t.flags, t.nid, t.names())
    ref = (r.block_size, r.key_length, r.iv_length, r.mode, r.flags, r.nid, r.names())
    assert got == ref, f"{name}: (block, key, iv, mode, flags, nid, names) {got} vs default {ref}"


@pytest.mark.parametrize("name", evp.CIPHERS)
def test_param_tables(pair, name):
    t = pair(name).test
    assert {"blocksize", "keylen", "ivlen", "mode"} <= set(t.gettable_params())
    assert {"keylen", "ivlen", "padding", "num", "iv", "updated-iv"} <= set(t.gettable_ctx_params())
    assert {"padding", "num"} <= set(t.settable_ctx_params())


ALL_CIPHERS = evp.CIPHERS + ["AES-128-GCM", "AES-256-XTS", "AES-128-CBC-HMAC-SHA1", "AES-256-CBC-HMAC-SHA256"]


@pytest.mark.parametrize("name", ALL_CIPHERS)
def test_param_tables_are_the_defaults(libctx, pair, name):
    """The three tables, in order, as the running release's default lists them (releases differ:
    3.5 adds GCM's iv-generated, 3.6 encrypt-then-mac and drops the stitched tls-version)."""
    if libctx.try_fetch(name, "default") is None:
        pytest.skip(f"the default provider has no {name} on this CPU")
    t, r = pair(name).test, pair(name).ref
    for table in ("gettable_params", "gettable_ctx_params", "settable_ctx_params"):
        assert getattr(t, table)() == getattr(r, table)(), f"{name}: {table}"
    if "encrypt-then-mac" in r.gettable_params():
        assert _answers(t.get_params, [("encrypt-then-mac", "int", 0, 4)]) == \
            _answers(r.get_params, [("encrypt-then-mac", "int", 0, 4)])


CTX_PARAMS = [("keylen", "uint", 0, 8), ("ivlen", "uint", 0, 8), ("padding", "uint", 0, 4),
              ("num", "uint", 0, 4), ("iv", "octet", 16), ("updated-iv", "octet", 16)]
PTR_PARAMS = [("iv", "octet_ptr"), ("updated-iv", "octet_ptr")]


def _ctx_state(ctx):
    """Every context parameter, each asked alone (a provider answers the first of a key only)."""
    state = {}
    for spec in CTX_PARAMS + PTR_PARAMS:
        ok, params = ctx.get_params([spec])
        state[f"{spec[0]}/{spec[1]}"] = (ok, params.value(0))
    evp.drain_errors()
    return state


def _compare_states(name, stage, t, r):
    st, sr = _ctx_state(t), _ctx_state(r)
    for k in sr:
        assert st[k] == sr[k], f"{name} {stage}: ctx param {k}: {st[k]} vs default {sr[k]}"


@pytest.mark.parametrize("enc", [1, 0], ids=["enc", "dec"])
@pytest.mark.parametrize("name", evp.CIPHERS)
def test_ctx_get_params(pair, name, enc):
    ciphers = pair(name)
    key = KEY32[:evp.cipher_keylen(name)]
    iv = None if evp.cipher_mode(name) == evp.MODE_ECB else IV
    t = evp.CipherCtx(ciphers.test, key, iv, enc)
    r = evp.CipherCtx(ciphers.ref, key, iv, enc)
    _compare_states(name, "after init", t, r)
    data = bytes(range(37))
    for n in (5, 16, 11, 5):                   # partial blocks in flight between the calls
        chunk, data = data[:n], data[n:]
        assert t.update(chunk) == r.update(chunk)
        _compare_states(name, f"{37 - len(data)} bytes in", t, r)
    t.set_padding(0), r.set_padding(0)
    _compare_states(name, "padding off", t, r)
    # too small a buffer for the IV: the same outcome as the default provider
    for key_name in ("iv", "updated-iv"):
        got = t.get_params([(key_name, "octet", 8)])[0]
        ref = r.get_params([(key_name, "octet", 8)])[0]
        evp.drain_errors()
        assert got == ref, f"{name}: {key_name} into 8 bytes: {got} vs default {ref}"
    # the EVP helpers built on these params
    assert (t.key_length, t.iv_length, t.block_size) == (r.key_length, r.iv_length, r.block_size)
    if iv is not None:
        assert t.original_iv() == r.original_iv() == IV
        assert t.updated_iv() == r.updated_iv()


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("name", evp.CIPHERS)
def test_ctx_set_padding(pair, name, width):
    """padding set through set_params (either integer width) and through the init params."""
    ciphers = pair(name)
    key = KEY32[:evp.cipher_keylen(name)]
    iv = None if evp.cipher_mode(name) == evp.MODE_ECB else IV
    for pad in (0, 1, 0):
        outs = []
        for cipher in (ciphers.test, ciphers.ref):
            ctx = evp.CipherCtx(cipher, key, iv, 1)
            ok, _ = ctx.set_params([("padding", "uint", pad, width)])
            ok_get, params = ctx.get_params([("padding", "uint", 0, 4)])
            outs.append((ok, ok_get, params.value(0), ctx.update(bytes(32)) + ctx.final()))
            via_init = evp.CipherCtx()
            via_init.init(cipher, key, iv, 1, evp.Params([("padding", "uint", pad, width)]))
            outs.append(via_init.update(bytes(32)) + via_init.final())
        assert outs[0:2] == outs[2:4], f"{name}: padding={pad}: {outs[0:2]} vs default {outs[2:4]}"
        if evp.cipher_mode(name) != evp.MODE_CTR:
            assert len(outs[0][3]) == (32 if pad == 0 else 48)


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("name", evp.CIPHERS)
def test_ctx_set_num(pair, name, width):
    """num set mid-stream. For CTR it moves the position in the keystream block and must match
    the default provider byte for byte; for ECB and CBC it must at least not disturb the data."""
    ciphers = pair(name)
    key = KEY32[:evp.cipher_keylen(name)]
    iv = None if evp.cipher_mode(name) == evp.MODE_ECB else IV
    results = []
    for cipher in (ciphers.test, ciphers.ref):
        ctx = evp.CipherCtx(cipher, key, iv, 1, padding=False)
        head = ctx.update(bytes(5))
        steps = []
        for num in (9, 0, 15, 3):
            ok, _ = ctx.set_params([("num", "uint", num, width)])
            got_num = ctx.num
            steps.append((ok, got_num, ctx.update(bytes(16))))
            # the EVP wrappers around the same parameter
            steps.append((ctx.set_num(num), ctx.num))
        evp.drain_errors()
        results.append((head, steps, ctx.update(bytes(11)) + ctx.final()))
    test, ref = results
    if evp.cipher_mode(name) == evp.MODE_CTR:
        assert test == ref, f"{name}: with num set mid-stream {test} vs default {ref}"
    else:
        # whatever num reads back, it is what was set when set succeeded, and the data path
        # is the default provider's
        for (ok, got_num, out), (ok_r, _, out_r) in zip(test[1][::2], ref[1][::2]):
            assert out == out_r, f"{name}: setting num changed the ECB/CBC output"
        assert test[0] == ref[0] and test[2] == ref[2]
