"""tests/conformance/test_ccm_diff.py: AES-CCM through accelaes against the running default provider, call by
call (tests/conformance/ccm_driver.py logs results, bytes, tags and errors): random messages (key sizes,
nonce 7..13 bytes, tag 4..16 even, AAD 0..300, payload 0..4 KiB, in place or not, with and without the
length first), right and wrong tags, calls in the wrong order, parameters got and set, the TLS 1.2 record
mode (tlsaad / tlsivfixed through EVP_Cipher), and accelaes-stat showing accelaes did the bytes (a child
process on a segment of its own: a process publishes its counters when it exits)."""

import ctypes
import os
import random
import textwrap

import pytest

import conftest
import evp
from ccm_driver import Ccm, message
from conftest import PROVIDER, stat_total

BITS = [128, 192, 256]


def _ctx_list(name):
    # not among tests/libcrypto.py's declarations; CDLL.__getitem__ gives a function object of our own
    f = evp._lib[name]
    f.restype, f.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    return f


CTX_GETTABLE, CTX_SETTABLE = _ctx_list("EVP_CIPHER_CTX_gettable_params"), _ctx_list("EVP_CIPHER_CTX_settable_params")


@pytest.fixture(scope="module")
def ccm_pair(libctx):
    def get(bits):
        name = f"AES-{bits}-CCM"
        test = libctx.try_fetch(name, PROVIDER)
        assert test is not None, f"{PROVIDER} does not serve {name} (EVP_CIPHER_fetch with provider={PROVIDER})"
        assert test.provider == PROVIDER, f"{name} came from {test.provider}"
        return test, libctx.fetch(name, "default")
    return get


def same(pair, script):
    """script(cipher) -> a log; the provider under test's must equal the default's."""
    evp.clear_errors()
    mine = script(pair[0])
    evp.clear_errors()
    theirs = script(pair[1])
    assert mine == theirs, f"\n{PROVIDER}: {mine}\ndefault:  {theirs}"
    return mine


def random_case(rng):
    bits = rng.choice(BITS)
    n = rng.choice([0, 0, 1, 15, 16, 17, 4096, rng.randint(0, 4096)])
    a = rng.choice([0, 0, 1, 14, 15, 16, 300, rng.randint(0, 300)])
    return (bits, rng.randbytes(bits // 8), rng.randbytes(rng.randint(7, 13)), rng.randbytes(a), rng.randbytes(n),
            rng.choice(range(4, 17, 2)))


def test_random_messages(ccm_pair, seed):
    rng = random.Random(f"{seed}-ccm")
    for _ in range(400):
        bits, key, nonce, aad, data, m = random_case(rng)
        pair = ccm_pair(bits)
        inplace = rng.random() < 0.5
        first = rng.random() < 0.85      # without the length first: refused where there is AAD
        enc = same(pair, lambda c: message(c, 1, key, nonce, aad, data, m, inplace=inplace, length_first=first))
        _, ct, tag = enc
        if ct is None:
            continue
        tag = tag[:m]
        dec = same(pair, lambda c: message(c, 0, key, nonce, aad, ct, m, tag=tag, inplace=inplace,
                                           length_first=first))
        assert dec[1] == data, (bits, len(nonce), m, len(aad), len(data))
        bad = bytearray(tag)
        bad[rng.randrange(m)] ^= 1 << rng.randrange(8)
        if ct and rng.random() < 0.3:
            bad, ct = tag, bytes([ct[0] ^ 0x80]) + ct[1:]
        out = same(pair, lambda c: message(c, 0, key, nonce, aad, ct, m, tag=bytes(bad), inplace=inplace))
        assert out[1] is None, "a damaged message was decrypted"


def test_wrong_order_like_default(ccm_pair):
    """Misuse, each answered as the default answers it: AAD before the length, data without the length and
    with another length than announced, data twice, final before data, a tag set on encryption, no tag on
    decryption, the tag got before final and twice, nonce and tag lengths CCM has not, a nonce length
    changed after the key, a copy in the middle of a message, a new nonce on the same key."""
    key, nonce = bytes(range(16)), bytes(range(7))

    def script(cipher):
        c = Ccm(cipher, 1)
        for m in (3, 5, 18, 2, 0, 8):
            c.taglen(m)
        for n in (6, 14, 15, 0, 13):
            c.ivlen(n)
        c.get_tag(8)                     # before anything
        c.key_iv(key, nonce + bytes(6))
        c.aad(b"A" * 20)                 # before the length
        c.length(10)
        c.aad(b"A" * 20)
        c.data(b"d" * 11)                # not the announced length
        c.final()
        d = Ccm(cipher, 1)
        d.taglen(8)
        d.key_iv(key, nonce)
        d.final()                        # before any data
        d.length(5)
        d.aad(b"")
        d.set_tag(b"t" * 8)              # on encryption
        f = d.copy()                     # in the middle of a message
        d.data(b"x" * 5)
        d.data(b"y" * 5)                 # twice
        d.get_tag(8)
        d.get_tag(8)                     # twice
        d.get_tag(4)
        f.data(b"x" * 5, inplace=True)
        f.final()
        f.get_tag(8)
        f.key_iv(None, bytes(7))         # a new nonce on the same key, no length first
        f.data(b"z" * 40)
        f.final()
        f.get_tag(16)                    # not the tag length
        f.get_tag(8)
        g = Ccm(cipher, 1)
        g.key_iv(key, nonce)
        g.ivlen(9)                       # after the key
        g.length(3)
        g.data(b"abc")
        g.final()
        g.get_tag(12)
        e = Ccm(cipher, 0)
        e.key_iv(key, nonce)
        e.length(3)
        e.data(b"abc")                   # no tag set
        e.final()
        e.set_tag(b"\0" * 17)
        e.set_tag(b"\0" * 3)
        e.set_tag(b"\0" * 12)
        e.key_iv(None, nonce)
        e.data(b"abc")                   # no length first, a wrong tag
        e.data(b"abc")
        e.final()
        return c.log + d.log + g.log + e.log

    same(ccm_pair(128), script)


def test_direction_changed_without_key(ccm_pair):
    """A context keyed for one direction and turned to the other by an init with a nonce alone: the
    default's AES-NI CCM keeps the block function its key chose (on a CPU with AES-NI, whole blocks
    are MACed as the key's direction; without, as the data's), so bytes, tags and verdicts must
    follow the running default whichever it is (found by CI's fuzz-smoke: regress-ccm-blocks-dir-at-key)."""
    nonce = bytes(range(7))

    def script(cipher, key):
        logs = []
        for key_enc in (0, 1):
            for n in (0, 5, 16, 41, 64):
                c = Ccm(cipher, key_enc)
                c.key_iv(key, nonce)
                c.enc = 1 - key_enc          # the other direction, the key kept
                c.key_iv(None, nonce)
                if c.enc:
                    c.data(bytes(range(n)))
                    c.get_tag(12)
                else:
                    c.set_tag(bytes(12))
                    c.data(bytes(range(n)))   # the verdict and, where it passes, the bytes
                c.final()
                logs += c.log
        return logs

    for bits in BITS:
        same(ccm_pair(bits), lambda cipher: script(cipher, bytes(range(bits // 8))))


def test_final_without_data_like_default(ccm_pair):
    """An encryption's final with no data call, as the running default answers it: a nonce alone, the
    length 0 fixed, another length fixed, the length 0 and AAD (authenticating the AAD alone), a 0-byte
    data call, a nonce gone with the tag got (OpenSSL 3.5.9's final makes the empty message, whose tag
    can then be got; 3.0.19's does nothing), each final twice, the tag got twice."""
    key, nonce = bytes(range(16)), bytes(range(7))

    def script(cipher):
        logs = []
        for case in range(6):
            c = Ccm(cipher, 1)
            c.key_iv(key, nonce)
            if case == 5:
                c.data(b"p" * 5)
                c.get_tag(12)
            if case in (1, 3):
                c.length(0)
            if case == 2:
                c.length(5)
            if case == 3:
                c.aad(b"A" * 10)
            if case == 4:
                c.data(b"")
            c.final()
            c.final()
            c.get_tag(12)
            c.get_tag(12)
            logs += c.log
        return logs

    same(ccm_pair(128), script)


def test_params_like_default(ccm_pair):
    """Context parameters got and set at each stage, and the context's gettable and settable lists."""
    specs = [("ivlen", "uint"), ("keylen", "uint"), ("taglen", "uint"), ("iv", "octet", 15),
             ("updated-iv", "octet", 15), ("tlsaadpad", "uint")]

    def stages(cipher):
        c = Ccm(cipher, 1)
        for s in specs:
            c.get([s])
        c.ivlen(11)
        c.taglen(10)
        c.get(specs[:3])
        c.key_iv(bytes(32), bytes(range(11)))
        for s in specs:
            c.get([s])
        c.get([("iv", "octet", 4)])
        c.set([("keylen", "uint", 32)])
        c.set([("keylen", "uint", 16)])
        c.set([("ivlen", "uint", 13), ("tag", "octet", bytes(6))])
        c.length(3)
        c.data(b"abc")
        c.final()
        c.get([("taglen", "uint")])
        c.get_tag(10)
        return c.log

    same(ccm_pair(256), stages)
    for bits in BITS:
        test, ref = ccm_pair(bits)
        for enc in (1, 0):
            lists = []
            for cipher in (test, ref):
                ctx = evp.CipherCtx(cipher, bytes(bits // 8), bytes(7), enc)
                lists.append((evp.param_names(CTX_GETTABLE(ctx.ptr)),
                              evp.param_names(CTX_SETTABLE(ctx.ptr))))
                ctx.free()
            assert lists[0] == lists[1], (bits, enc)


def tls_records(cipher, key, fixed, m, enc, records):
    """A TLS 1.2 CCM context as libssl sets it up (tag length, fixed nonce part), then each (aad, record)
    in place through EVP_Cipher: [(tlsaad ok, tlsaadpad, ret, record after)] and the errors."""
    ctx = evp.CipherCtx()
    assert ctx.raw_init(cipher, None, None, enc)
    c = Ccm.__new__(Ccm)
    c.ctx, c.enc, c.log = ctx, enc, []
    c.ivlen(12)
    c.taglen(m) if enc else c.set_tag(bytes(m))
    c.key_iv(key, None)
    c.set([("tlsivfixed", "octet", fixed)])
    for aad, rec in records:
        ok, _ = c.set([("tlsaad", "octet", aad)])
        _, pad = c.get([("tlsaadpad", "uint")])
        buf = evp.Mem(len(rec))
        buf.write(rec)
        ret = evp.C.EVP_Cipher(ctx.ptr, buf.at(), buf.at(), len(rec))
        c.log.append(("record", ok, pad, ret, buf.read(len(rec)) if ret > 0 else None))
    c._rec("errors", 1)
    return c.log


@pytest.mark.parametrize("m", [16, 8], ids=["CCM", "CCM_8"])
def test_tls12_records(ccm_pair, seed, m):
    """Records encrypted by each provider decrypt on the other; a damaged record is refused as the default
    refuses it."""
    rng = random.Random(f"{seed}-ccm-tls-{m}")
    test, ref = pair = ccm_pair(128)
    key, fixed = rng.randbytes(16), rng.randbytes(4)
    records, plain = [], []
    for i in range(12):
        payload = rng.randbytes(rng.choice([0, 1, 16, 1000, rng.randint(0, 16384)]))
        plain.append(payload)
        hdr = i.to_bytes(8, "big") + bytes([23, 3, 3]) + (8 + len(payload)).to_bytes(2, "big")
        records.append((hdr, i.to_bytes(8, "big") + payload + bytes(m)))
    enc = same(pair, lambda c: tls_records(c, key, fixed, m, 1, records))
    sealed = [r[4] for r in enc if r[0] == "record"]
    assert all(s is not None for s in sealed), enc
    dec_in = [(h[:11] + len(s).to_bytes(2, "big"), s) for (h, _), s in zip(records, sealed)]
    k = rng.randrange(len(dec_in))
    bad = list(dec_in)
    bad[k] = (bad[k][0], bad[k][1][:-1] + bytes([bad[k][1][-1] ^ 1]))
    for recs in (dec_in, bad):
        got = same(pair, lambda c: tls_records(c, key, fixed, m, 0, recs))
        opened = [r[4] for r in got if r[0] == "record"]
        if recs is dec_in:
            assert [o[8:8 + len(p)] for o, p in zip(opened, plain)] == plain
        else:
            assert opened.count(None) == 1
    for enc_c, dec_c in ((test, ref), (ref, test)):
        sealed = [r[4] for r in tls_records(enc_c, key, fixed, m, 1, records) if r[0] == "record"]
        dec_in = [(h[:11] + len(s).to_bytes(2, "big"), s) for (h, _), s in zip(records, sealed)]
        opened = [r[4] for r in tls_records(dec_c, key, fixed, m, 0, dec_in) if r[0] == "record"]
        assert [o[8:8 + len(p)] for o, p in zip(opened, plain)] == plain


# ---------------------------------------------------------------- counted by accelaes

CHILD = """
import random, sys
sys.path.insert(0, {conf!r})
from ccm_driver import message
lc = evp.LibCtx(["default", "accelaes"], modules_dir={mods!r})
rng = random.Random(5)
done = 0
for i in range(48):
    bits = (128, 192, 256)[i % 3]
    c = lc.fetch(f"AES-{{bits}}-CCM", {prov!r})
    key, nonce, data = rng.randbytes(bits // 8), rng.randbytes(7 + i % 7), rng.randbytes(4096 + i)
    _, ct, tag = message(c, 1, key, nonce, b"hdr" * (i % 5), data, 16)
    _, back, _ = message(c, 0, key, nonce, b"hdr" * (i % 5), ct, 16, tag=tag[:16])
    assert back == data
    done += 2 * len(data)
emit({{"bytes": done, "provider": c.provider}})
"""


@pytest.fixture
def own_segment(openssl_env):
    yield from conftest.private_segment(openssl_env, "ccm")


def counted_run(env, prov):
    code = CHILD.format(conf=os.path.dirname(os.path.abspath(__file__)), mods=str(conftest.MODULES), prov=prov)
    before = stat_total(env)
    rc, results, err = evp.run_isolated(textwrap.dedent(code), env=env)
    assert rc == 0 and results, err[-3000:]
    return results[-1], stat_total(env) - before


def test_counted_by_accelaes(own_segment, stat_tool):
    """About 390 KiB of CCM encrypted and decrypted through accelaes in a child: accelaes-stat must count
    at least those bytes (a delegate to the default's own CCM counts none). The same work on the default
    provider in the same child set-up counts nothing: the count is CCM's."""
    got, grown = counted_run(own_segment, "accelaes")
    assert got["provider"] == "accelaes"
    assert grown >= got["bytes"], f"accelaes-stat counted {grown} of the {got['bytes']} CCM bytes"
    got, grown = counted_run(own_segment, "default")
    assert got["provider"] == "default" and grown == 0, f"the default's CCM counted {grown} bytes"
