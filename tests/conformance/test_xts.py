"""tests/conformance/test_xts.py: AES-128-XTS and AES-256-XTS against OpenSSL 3.0's default provider: the
registration (names, OIDs, parameters, flags), Wycheproof and NIST CAVP (XTSGenAES) vectors, every
data-unit length 16..600 and some large ones both ways, in place and not, and the refusals (the
duplicate-key check, short and too-large units, no key, no IV) with the default's error queue.
It runs on every engine and path this machine has (the `engine` fixture, tests/engines.py)."""

import os
import random
from pathlib import Path

import pytest

import errcmp
import evp
from conftest import PROVIDER

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

NAMES = ["AES-128-XTS", "AES-256-XTS"]
HERE = Path(__file__).resolve().parent.parent
MAX_UNIT = 16 << 20          # 2^20 blocks: the default's limit on one data unit (3.0.19, measured)


def keylen(name):
    return 32 if name == "AES-128-XTS" else 64


def good_key(rng, n):
    """A random XTS key whose halves differ."""
    while True:
        k = rng.randbytes(n)
        if k[:n // 2] != k[n // 2:]:
            return k


def run(cipher, key, iv, data, enc, inplace=False, in_off=0, out_off=0):
    """One data unit through one update: (ok, output, error queue)."""
    with evp.CipherCtx() as ctx:
        if not ctx.raw_init(cipher, key, iv, enc):
            return 0, None, errcmp.queue()
        return update(ctx, data, inplace, in_off, out_off)


def update(ctx, data, inplace=False, in_off=0, out_off=0):
    src = evp.Mem(max(len(data), 1), in_off)
    src.write(data)
    dst = src if inplace else evp.Mem(max(len(data), 1), out_off)
    ok, outl = ctx.raw_update(dst.at(), src.at(), len(data))
    errs = errcmp.queue()
    assert dst.slack_intact(), "update wrote outside its output"
    return ok, dst.read(len(data)) if ok else None, errs


# ---------------------------------------------------------------- registration

@pytest.mark.parametrize("name", NAMES)
def test_names_and_params_match_default(pair, name):
    p = pair(name)
    t, r = p.test, p.ref
    assert t.names() == r.names()
    assert (t.block_size, t.key_length, t.iv_length, t.mode, t.flags) == \
           (r.block_size, r.key_length, r.iv_length, r.mode, r.flags) == \
           (1, keylen(name), 16, 0x10001, r.flags)
    assert t.gettable_ctx_params() == r.gettable_ctx_params()
    assert t.settable_ctx_params() == r.settable_ctx_params() == ["keylen"]
    assert t.gettable_params() == r.gettable_params()
    specs = [("mode", "uint", 0, 4), ("keylen", "uint", 0), ("ivlen", "uint", 0), ("blocksize", "uint", 0),
             ("aead", "int", 0, 4), ("custom-iv", "int", 0, 4), ("cts", "int", 0, 4),
             ("tls-multi", "int", 0, 4), ("has-randkey", "int", 0, 4)]
    got = [(ok, [prm.value(i) for i in range(len(specs))]) for ok, prm in (c.get_params(specs) for c in (t, r))]
    assert got[0] == got[1]


def test_no_aes_192_xts(libctx):
    """OpenSSL has no AES-192-XTS; nor has the provider."""
    assert libctx.try_fetch("AES-192-XTS", "default") is None
    assert libctx.try_fetch("AES-192-XTS", PROVIDER) is None


# ---------------------------------------------------------------- vectors

WYCHE = __import__("json").loads((HERE / "vectors" / "wycheproof_aes_xts_test.json").read_text())
WCASES = [(g["keySize"], t) for g in WYCHE["testGroups"] for t in g["tests"]]


def test_wycheproof_count():
    assert len(WCASES) == WYCHE["numberOfTests"] == 123


@pytest.mark.parametrize("bits,tc", [c for c in WCASES if c[0] != 384],
                         ids=[f"tc{t['tcId']}-{b}" for b, t in WCASES if b != 384])
def test_wycheproof_xts(pair, bits, tc):
    cipher = pair(f"AES-{bits // 2}-XTS").test
    key, msg, ct = (bytes.fromhex(tc[f]) for f in ("key", "msg", "ct"))
    iv = bytes.fromhex(tc["iv"]).ljust(16, b"\0")    # the data-unit number, little-endian
    assert tc["result"] == "valid"
    assert run(cipher, key, iv, msg, 1)[1] == ct
    assert run(cipher, key, iv, ct, 0)[1] == msg
    assert run(cipher, key, iv, msg, 1, inplace=True)[1] == ct


def cavp_cases():
    try:
        import cryptography_vectors
    except ImportError:
        return []
    root = Path(cryptography_vectors.__file__).parent / "ciphers" / "AES" / "XTS"
    cases = []
    for path in sorted(root.glob("*/XTSGenAES*.rsp")):
        enc, cur = 1, {}
        for line in path.read_text().splitlines() + [""]:
            line = line.strip()
            if line in ("[ENCRYPT]", "[DECRYPT]"):
                enc = line == "[ENCRYPT]"
            elif " = " in line:
                k, v = line.split(" = ", 1)
                cur[k] = v
            elif not line and "CT" in cur and "PT" in cur:
                cases.append((path.parent.name, path.stem, enc, cur))
                cur = {}
    return cases


CAVP = cavp_cases()


def test_cavp_present():
    if not CAVP:
        pytest.skip("cryptography-vectors is not installed (make test-deps)")
    assert len(CAVP) == 4000


@pytest.mark.parametrize("group", sorted({(c[0], c[1]) for c in CAVP}), ids=lambda g: f"{g[0]}-{g[1]}")
def test_cavp_xts(pair, group):
    """Every byte-length case (a DataUnitLen that is not a multiple of 8 has no EVP counterpart)."""
    cases = [c for c in CAVP if (c[0], c[1]) == group and int(c[3]["DataUnitLen"]) % 8 == 0]
    assert len(cases) >= 600
    for _, stem, enc, tc in cases:
        key = bytes.fromhex(tc["Key"])
        cipher = pair(f"AES-{len(key) * 4}-XTS").test
        iv = bytes.fromhex(tc["i"]) if "i" in tc else int(tc["DataUnitSeqNumber"]).to_bytes(16, "little")
        pt, ct = bytes.fromhex(tc["PT"]), bytes.fromhex(tc["CT"])
        src, want = (pt, ct) if enc else (ct, pt)
        ok, got, errs = run(cipher, key, iv, src, enc)
        assert ok and got == want, f"{stem} COUNT {tc['COUNT']} enc={enc}: {errs}"


# ---------------------------------------------------------------- differential

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("enc", [1, 0])
def test_every_length_16_to_600(pair, seed, name, enc):
    """One context per provider, re-initialised with a new tweak per unit (key NULL), as disk code does."""
    rng = random.Random(seed ^ len(name) ^ enc)
    p = pair(name)
    key = good_key(rng, keylen(name))
    ctxs = [evp.CipherCtx(c, key, bytes(16), enc) for c in (p.test, p.ref)]
    for n in range(16, 601):
        iv, data = rng.randbytes(16), rng.randbytes(n)
        inplace, off = rng.random() < 0.5, rng.choice([0, 0, 1, 8, 15])
        outs = []
        for ctx in ctxs:
            assert ctx.raw_init(None, None, iv, -1)
            outs.append(update(ctx, data, inplace, off, off if inplace else rng.choice([0, 3])))
        assert outs[0] == outs[1], f"{name} enc={enc} len {n} inplace={inplace}"
        assert outs[0][0] == 1
    for ctx in ctxs:
        ctx.free()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1024, 4096 + 5, 65536, 65536 + 15, (1 << 20) + 7, MAX_UNIT - 1, MAX_UNIT])
def test_large_units(pair, seed, name, n):
    rng = random.Random(seed + n)
    p = pair(name)
    key, iv, data = good_key(rng, keylen(name)), rng.randbytes(16), os.urandom(n)
    ct = run(p.test, key, iv, data, 1)
    assert ct == run(p.ref, key, iv, data, 1)
    assert run(p.test, key, iv, ct[1], 0, inplace=True)[1] == data


@pytest.mark.parametrize("name", NAMES)
def test_oneshot_copy_and_params(pair, seed, name):
    """EVP_Cipher, EVP_CIPHER_CTX_copy mid-use, the IV parameters and final, as the default has them."""
    rng = random.Random(seed)
    p = pair(name)
    key, iv = good_key(rng, keylen(name)), rng.randbytes(16)
    got = []
    for c in (p.test, p.ref):
        ctx = evp.CipherCtx(c, key, iv, 1)
        row = [ctx.cipher_oneshot(rng.randbytes(0) + bytes(range(33))), ctx.cipher_oneshot(bytes(15)),
               ctx.cipher_oneshot(bytes(40), inplace=True)]
        twin = ctx.copy()
        row += [update(twin, bytes(50))[:2], update(ctx, bytes(50))[:2], ctx.final(), twin.final()]
        row += [ctx.updated_iv(), ctx.original_iv(), ctx.num, ctx.key_length, ctx.iv_length, ctx.block_size]
        row.append(ctx.set_key_length(keylen(name)))
        row.append(ctx.set_key_length(16))
        row.append(errcmp.queue())
        got.append(row)
    assert got[0] == got[1]


@pytest.mark.parametrize("name", NAMES)
def test_direction_change_without_key_as_default(pair, name):
    """3.0's default keeps the key's direction when re-initialised the other way with no key."""
    key, iv, data = bytes(range(keylen(name))), bytes(16), bytes(range(48))
    outs = []
    for c in (pair(name).test, pair(name).ref):
        ctx = evp.CipherCtx(c, key, iv, 1)
        ctx.init(None, None, None, 0)
        outs.append(update(ctx, data)[:2])
    assert outs[0] == outs[1]


# ---------------------------------------------------------------- refusals, errors as the default's

def outcome(cipher, key, iv, data, enc, keylen_=None):
    with evp.CipherCtx() as ctx:
        ok = ctx.raw_init(cipher, key, iv, enc)
        if not ok:
            return ("init", errcmp.queue())
        got = update(ctx, data)
        fin = ctx.raw_final(evp.Mem(32).at())
        return ("update", got, fin, errcmp.queue())


def cases(name):
    n = keylen(name)
    k = bytes(range(n))
    dup = bytes(range(n // 2)) * 2
    yield "dup-key-encrypt", (dup, bytes(16), bytes(32), 1)
    yield "dup-key-decrypt", (dup, bytes(16), bytes(32), 0)
    for ln in (0, 1, 15):
        yield f"short-{ln}", (k, bytes(16), bytes(ln), 1)
    yield "no-iv", (k, None, bytes(32), 1)
    yield "no-key", (None, bytes(16), bytes(32), 0)
    yield "too-large", (k, bytes(16), bytes(MAX_UNIT + 16), 1)
    yield "too-large-partial", (k, bytes(16), bytes(MAX_UNIT + 1), 0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", [c for c, _ in cases("AES-128-XTS")])
def test_refusals_as_default(pair, name, case):
    args = dict(cases(name))[case]
    got = outcome(pair(name).test, *args)
    ref = outcome(pair(name).ref, *args)
    assert got == ref, f"{name} {case}: {got} vs default {ref}"


@pytest.mark.parametrize("name", NAMES)
def test_raw_calls_as_default(libctx, name):
    """Calls EVP never makes: wrong key and IV lengths at init, an output smaller than the unit."""
    n = keylen(name)
    rows = []
    for prov in (PROVIDER, "default"):
        row = []
        for enc, kl, ivl in ((1, n - 1, 16), (0, n + 1, 16), (1, n, 8), (0, n, 17)):
            raw = errcmp.Raw(libctx, prov, name)
            row.append((raw.init(enc, bytes(range(64)), kl, bytes(32), ivl), errcmp.queue()))
            raw.free()
        raw = errcmp.Raw(libctx, prov, name)
        row.append((raw.init(1, bytes(range(64)), n, bytes(16), 16), errcmp.queue()))
        row.append((raw.update(bytes(40), 39), errcmp.queue()))
        row.append((raw.update(bytes(40), 40, op="cipher", inplace=True), errcmp.queue()))
        row.append((raw.set_params([("keylen", "uint", n + 1)]), errcmp.queue()))
        raw.free()
        rows.append(row)
    assert rows[0] == rows[1]
