"""tests/conformance/test_gcm.py: AES-GCM (issue #18) against NIST CAVP (cryptography_vectors' gcmEncryptExtIV /
gcmDecrypt files, FAIL cases included), Wycheproof (tests/vectors/wycheproof_aes_gcm_test.json), and the
default provider: randomized streams (AAD and data split anywhere, in place or not, dupctx mid-stream,
IV and tag lengths), a wrong tag failing as the default's, parameters, flags and tables, and the
TLS 1.2 record mode. The same differential runs on the nested-EVP fallback engine in a child process
(ACCELAES_FORCE_EVP_ENGINE=1)."""

import importlib.resources
import json
import os
import random

import pytest

import evp
from gcm_driver import Gcm

# every engine and path this machine has (tests/engines.py); ENGINES_ONLY: the ones that run GCM differently
pytestmark = pytest.mark.usefixtures("engine")
ENGINES_ONLY = r"^(gcm-|evp$|split$)"

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GCM = [f"AES-{b}-GCM" for b in (128, 192, 256)]


def splits(rng, n):
    """Random piece lengths summing to n (some zero)."""
    out = []
    while n > 0:
        k = rng.choice([0, 1, 15, 16, 17, rng.randint(1, max(1, n))])
        k = min(k, n)
        out.append(k)
        n -= k
    return out or [0]


def run_message(cipher, key, iv, aad, data, enc, tag=None, rng=None, inplace=False, dup_at=None, ivlen=None):
    """A whole message: (update ok, output, final ok, tag or None, errors). AAD and data in random pieces
    when rng is given; dup_at: copy the context after that many data pieces and go on with the copy."""
    g = Gcm(cipher, key, iv, enc, ivlen)
    evp.clear_errors()
    ok, out = 1, b""
    for i, piece in enumerate(_pieces(aad, rng)):
        r, _ = g.aad(piece)
        ok &= r
    if tag is not None:
        ok &= g.set_tag(tag)
    for i, piece in enumerate(_pieces(data, rng)):
        if dup_at is not None and i == dup_at:
            g = g.copy()
        r, o = g.data(piece, inplace)
        ok &= r
        out += o
    fok, _ = g.final()
    t = g.get_tag()[1] if enc and fok else None
    return ok, out, fok, t, [(e.lib, e.reason) for e in evp.drain_errors()]


def _pieces(data, rng):
    if rng is None:
        return [data] if data else []
    out, pos = [], 0
    for k in splits(rng, len(data)):
        out.append(data[pos:pos + k])
        pos += k
    return out


# ---------------------------------------------------------------- names, flags, tables

@pytest.mark.parametrize("name", GCM)
def test_names_flags_tables(pair, name):
    p = pair(name)
    assert p.test.names() == p.ref.names()
    for attr in ("block_size", "key_length", "iv_length", "mode", "flags"):
        assert getattr(p.test, attr) == getattr(p.ref, attr), attr
    specs = [("mode", "uint", 0, 4), ("keylen", "uint"), ("ivlen", "uint"), ("blocksize", "uint"),
             ("aead", "int", 0, 4), ("custom-iv", "int", 0, 4), ("cts", "int", 0, 4),
             ("tls-multi", "int", 0, 4), ("has-randkey", "int", 0, 4)]
    ok_t, pt = p.test.get_params(specs)
    ok_r, pr = p.ref.get_params(specs)
    assert ok_t == ok_r == 1
    assert [pt.value(i) for i in range(len(specs))] == [pr.value(i) for i in range(len(specs))]
    assert p.test.gettable_ctx_params() == p.ref.gettable_ctx_params()
    assert p.test.settable_ctx_params() == p.ref.settable_ctx_params()
    assert p.test.gettable_params() == p.ref.gettable_params()


# ---------------------------------------------------------------- NIST CAVP

def _cavp(name):
    try:
        root = importlib.resources.files("cryptography_vectors")
    except ModuleNotFoundError:
        pytest.skip("the cryptography-vectors package is not installed (make test-deps)")
    path = root.joinpath(f"ciphers/AES/GCM/{name}")
    if not path.is_file():
        pytest.skip(f"cryptography_vectors has no {name}")
    cases, cur = [], {}
    for line in path.read_text().splitlines() + [""]:
        line = line.strip()
        if not line or line.startswith(("#", "[")):
            if "KEY" in cur:
                cases.append(cur)
            cur = {} if not line else cur
            continue
        if line == "FAIL":
            cur["FAIL"] = True
        elif "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            cur[k.upper()] = int(v) if k.upper() == "COUNT" else bytes.fromhex(v)
    return cases


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_cavp_encrypt(pair, bits):
    cipher = pair(f"AES-{bits}-GCM").test
    cases = _cavp(f"gcmEncryptExtIV{bits}.rsp")
    rng = random.Random(bits)
    for c in cases:
        use = rng if rng.random() < 0.2 else None
        ok, ct, fok, tag, errs = run_message(cipher, c["KEY"], c["IV"], c["AAD"], c["PT"], 1, rng=use,
                                             ivlen=len(c["IV"]))
        assert ok and fok, (c, errs)
        assert ct == c["CT"] and tag[:len(c["TAG"])] == c["TAG"], c
    assert len(cases) > 7000


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_cavp_decrypt(pair, bits):
    cipher = pair(f"AES-{bits}-GCM").test
    cases = _cavp(f"gcmDecrypt{bits}.rsp")
    fails = 0
    for c in cases:
        ok, pt, fok, _, _ = run_message(cipher, c["KEY"], c["IV"], c["AAD"], c["CT"], 0, tag=c["TAG"],
                                        ivlen=len(c["IV"]))
        assert ok, c
        if c.get("FAIL"):
            fails += 1
            assert not fok, c
        else:
            assert fok and pt == c["PT"], c
    assert fails > 1000


# ---------------------------------------------------------------- Wycheproof

def test_wycheproof(pair):
    with open(os.path.join(HERE, "vectors", "wycheproof_aes_gcm_test.json")) as f:
        doc = json.load(f)
    n = 0
    for group in doc["testGroups"]:
        bits = group["keySize"]
        if bits not in (128, 192, 256):
            continue
        p = pair(f"AES-{bits}-GCM")
        for t in group["tests"]:
            key, iv, aad, msg, ct, tag = (bytes.fromhex(t[k]) for k in ("key", "iv", "aad", "msg", "ct", "tag"))
            for cipher in (p.test, p.ref):
                outcome = _wycheproof_case(cipher, key, iv, aad, msg, ct, tag)
                if cipher is p.test:
                    mine = outcome
            ref = outcome
            assert mine == ref, (t["tcId"], t["comment"], mine, ref)
            if t["result"] == "valid" and 0 < len(iv) <= 128:
                assert mine[1] and mine[2] == msg, t["tcId"]
            elif t["result"] == "invalid" and 0 < len(iv) <= 128:
                assert not mine[1], t["tcId"]
            n += 1
    assert n > 200


def _wycheproof_case(cipher, key, iv, aad, msg, ct, tag):
    """(encrypt gives ct and tag, decrypt ok, plaintext) or None for an IV the cipher refuses."""
    if len(iv) == 0 or len(iv) > 128:
        g = evp.CipherCtx()
        evp.clear_errors()
        ok = g.raw_init(cipher, None, None, 0, evp.Params([("ivlen", "uint", len(iv))]))
        return ("refused", ok, [(e.lib, e.reason) for e in evp.drain_errors()])
    eok, ect, efok, etag, _ = run_message(cipher, key, iv, aad, msg, 1, ivlen=len(iv))
    enc_match = eok and efok and ect == ct and etag[:len(tag)] == tag
    dok, pt, dfok, _, _ = run_message(cipher, key, iv, aad, ct, 0, tag=tag, ivlen=len(iv))
    return (enc_match, bool(dok and dfok), pt if dok and dfok else None)


# ---------------------------------------------------------------- differential streams

@pytest.mark.parametrize("name", GCM)
def test_random_streams(pair, seed, name):
    p = pair(name)
    rng = random.Random(f"{seed}-{name}")
    for _ in range(300):
        key = rng.randbytes(p.test.key_length)
        ivlen = rng.choice([12, 12, 12, 1, 8, 13, 16, 60, 128])
        iv = rng.randbytes(ivlen)
        aad = rng.randbytes(rng.choice([0, 0, 1, 13, 16, 17, rng.randint(0, 600)]))
        data = rng.randbytes(rng.choice([0, 1, 15, 16, 17, 255, rng.randint(0, 5000)]))
        inplace = rng.random() < 0.5
        dup_at = rng.choice([None, 0, 1, 2])
        s = rng.random()
        mine = run_message(p.test, key, iv, aad, data, 1, rng=random.Random(s), inplace=inplace, dup_at=dup_at,
                           ivlen=ivlen)
        ref = run_message(p.ref, key, iv, aad, data, 1, rng=random.Random(s), inplace=inplace, dup_at=dup_at,
                          ivlen=ivlen)
        assert mine == ref, (ivlen, len(aad), len(data))
        tag = mine[3][:rng.choice([16, 16, 12, 8, 4, 1])]
        if rng.random() < 0.3:
            tag = bytes([tag[0] ^ 1 << rng.randrange(8)]) + tag[1:]
        s = rng.random()
        mine_d = run_message(p.test, key, iv, aad, mine[1], 0, tag=tag, rng=random.Random(s), inplace=inplace,
                             dup_at=dup_at, ivlen=ivlen)
        ref_d = run_message(p.ref, key, iv, aad, mine[1], 0, tag=tag, rng=random.Random(s), inplace=inplace,
                            dup_at=dup_at, ivlen=ivlen)
        assert mine_d == ref_d, (ivlen, len(aad), len(data), tag)


def test_wrong_tag_and_misuse_like_default(pair):
    """Wrong tag, no tag, AAD after data, final twice, tag get before final, tag set on encrypt, bad IV
    lengths: the same return values and errors as the default's."""
    p = pair("AES-128-GCM")
    key, iv = bytes(range(16)), bytes(12)

    def script(cipher):
        out = []
        g = Gcm(cipher, key, iv, 1)
        out.append(g.get_tag())                  # before final: INVALID_TAG
        out.append(g.aad(b"a" * 20))
        out.append(g.data(b"x" * 33))
        out.append(g.aad(b"late"))               # AAD after data
        out.append(g.final())
        out.append(g.final())                    # the IV is finished
        out.append(g.get_tag(16))
        out.append(g.get_tag(17))
        out.append(g.set_tag(b"t" * 16))         # set on encrypt
        d = Gcm(cipher, key, iv, 0)
        out.append(d.data(b"y" * 5))
        out.append(d.final())                    # no tag set
        d2 = Gcm(cipher, key, iv, 0)
        out.append(d2.set_tag(b"\0" * 17))
        out.append(d2.set_tag(b""))
        out.append(d2.set_tag(b"\0" * 16))
        out.append(d2.final())                   # wrong tag
        ok, prm = d2.ctx.set_params([("ivlen", "uint", 0)])
        out.append(ok)
        ok, prm = d2.ctx.set_params([("ivlen", "uint", 129)])
        out.append(ok)
        ok, prm = d2.ctx.get_params([("ivlen", "uint"), ("keylen", "uint"), ("taglen", "uint"),
                                     ("iv", "octet", 16), ("updated-iv", "octet", 16)])
        out.append((ok, [prm.value(i) for i in range(5)]))
        ok, prm = d2.ctx.get_params([("iv", "octet", 4)])
        out.append(ok)
        out.append([(e.lib, e.reason) for e in evp.drain_errors()])
        return out

    evp.clear_errors()
    mine = script(p.test)
    evp.clear_errors()
    ref = script(p.ref)
    assert mine == ref


def test_encrypt_without_iv_makes_one(pair):
    """An encryption with no IV gets a random one (readable afterwards), as the default's."""
    c = pair("AES-256-GCM").test
    ctx = evp.CipherCtx()
    assert ctx.raw_init(c, bytes(32), None, 1)
    g = Gcm.__new__(Gcm)
    g.ctx = ctx
    assert g.data(b"abc")[0] and g.final()[0]
    ok, prm = ctx.get_params([("iv", "octet", 12)])
    assert ok and len(prm.value(0)) == 12
    d = Gcm(pair("AES-256-GCM").ref, bytes(32), prm.value(0), 1)
    assert d.data(b"abc")[0] and d.final()[0]
    assert d.get_tag() == g.get_tag()


# ---------------------------------------------------------------- TLS 1.2 records

def _tls_records(cipher, key, fixed, enc, records):
    """Set up a TLS 1.2 GCM context as libssl does, then run each (aad, buf) record in place through
    EVP_Cipher; returns [(ret, buf after, pad)] and the errors."""
    ctx = evp.CipherCtx()
    evp.clear_errors()
    assert ctx.raw_init(cipher, key, None, enc)
    out = [ctx.set_params([("tlsivfixed", "octet", fixed)])[0]]
    for aad, rec in records:
        ok, prm = ctx.set_params([("tlsaad", "octet", aad)])
        ok2, pad = ctx.get_params([("tlsaadpad", "uint")])
        buf = evp.Mem(len(rec))
        buf.write(rec)
        ret = evp.C.EVP_Cipher(ctx.ptr, buf.at(), buf.at(), len(rec))
        out.append((ok, pad.value(0), ret, buf.read(len(rec))))
    out.append([(e.lib, e.reason) for e in evp.drain_errors()])
    return out


@pytest.mark.parametrize("name", ["AES-128-GCM", "AES-256-GCM"])
def test_tls12_records(pair, seed, name):
    """Records encrypted by accelaes decrypt with the default and back; the explicit nonce counts up from
    the decrypting side's fixed IV (the encrypting side's random part differs per context, so the
    comparison is across directions); tampered records fail as the default's."""
    p = pair(name)
    rng = random.Random(f"{seed}-tls-{name}")
    key = rng.randbytes(p.test.key_length)
    fixed = rng.randbytes(4)
    plain, records = [], []
    for i in range(20):
        n = rng.choice([0, 1, 16, 100, 1500, rng.randint(0, 16384)])
        payload = rng.randbytes(n)
        plain.append(payload)
        # libssl's write AAD counts the explicit nonce in the record length; its read AAD the tag too
        hdr = bytes(8) + bytes([23, 3, 3]) + (8 + len(payload)).to_bytes(2, "big")
        hdr = i.to_bytes(8, "big") + hdr[8:]
        records.append((hdr, bytes(8) + payload + bytes(16)))
    for enc_c, dec_c in ((p.test, p.ref), (p.ref, p.test), (p.test, p.test)):
        enc = _tls_records(enc_c, key, fixed, 1, records)
        assert enc[0] == 1 and enc[-1] == []
        nonces = [r[3][:8] for r in enc[1:-1]]
        assert [int.from_bytes(x, "big") for x in nonces] == list(range(int.from_bytes(nonces[0], "big"),
                                                                           int.from_bytes(nonces[0], "big") + 20))
        dec_in = []
        for (hdr, _), r in zip(records, enc[1:-1]):
            assert r[0] == 1 and r[1] == 16 and r[2] == len(r[3])
            hdr_d = hdr[:11] + len(r[3]).to_bytes(2, "big")
            dec_in.append((hdr_d, r[3]))
        bad = list(dec_in)
        k = rng.randrange(20)
        rec = bytearray(bad[k][1])
        rec[-1] ^= 1
        bad[k] = (bad[k][0], bytes(rec))
        for recs in (dec_in, bad):
            mine = _tls_records(dec_c, key, fixed, 0, recs)
            ref = _tls_records(p.ref, key, fixed, 0, recs)
            assert mine == ref
            if recs is dec_in:
                assert [r[3][8:8 + len(pl)] for r, pl in zip(mine[1:-1], plain)] == plain
                assert all(r[2] == len(r[3]) for r in mine[1:-1])
            else:
                assert [r[2] for r in mine[1:-1]].count(-1) == 1


def test_tls12_misuse_like_default(pair):
    p = pair("AES-128-GCM")

    def script(cipher):
        ctx = evp.CipherCtx()
        evp.clear_errors()
        assert ctx.raw_init(cipher, bytes(16), None, 0)
        out = [ctx.set_params([("tlsaad", "octet", bytes(12))])[0],
               ctx.set_params([("tlsaad", "octet", bytes(13))])[0],          # length field < 8 + 16
               ctx.set_params([("tlsivfixed", "octet", bytes(3))])[0],
               ctx.set_params([("tlsivfixed", "octet", bytes(4))])[0],
               ctx.set_params([("tlsivinv", "octet", bytes(8))])[0]]
        buf = evp.Mem(40)
        out.append(evp.C.EVP_Cipher(ctx.ptr, buf.at(), buf.at(), 20))        # too short a record
        out.append([(e.lib, e.reason) for e in evp.drain_errors()])
        return out

    assert script(p.test) == script(p.ref)


def test_rekey_same_context(pair):
    """One context re-keyed per record (as openssl speed does; the same key keeps its tables) and with
    other keys in between: every record as the default's."""
    p = pair("AES-192-GCM")
    rng = random.Random(7)
    keys = [rng.randbytes(24) for _ in range(3)]
    outs = []
    for cipher in (p.test, p.ref):
        ctx = evp.CipherCtx()
        assert ctx.raw_init(cipher, None, None, 1)
        g = Gcm.__new__(Gcm)
        g.ctx = ctx
        got = []
        for i in range(12):
            assert ctx.raw_init(None, keys[i % 3 if i % 4 else 0], bytes([i]) * 12, 1)
            got.append((g.aad(b"hdr" * i), g.data(bytes(range(i * 7))), g.final(), g.get_tag()))
        outs.append(got)
    assert outs[0] == outs[1]
