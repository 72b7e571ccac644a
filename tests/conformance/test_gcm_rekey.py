"""tests/conformance/test_gcm_rekey.py: a key given while a GCM message is open (EVP_CipherInit_ex with a key and no
IV, after AAD or data). The default provider's setkey wipes the message's GCM state and keeps its IV
state, so the message goes on from a zero counter block with its AAD and data so far forgotten and a
tag that is the bare GHASH. A misuse, but "transparent" means the same bytes: every transcript here
(outputs, return values, tags, errors) must be the default's, encrypting and decrypting, on the
ipsec-mb engine and, in a child, on the nested-EVP fallback (ACCELAES_FORCE_EVP_ENGINE=1)."""

import random

import pytest

import evp
from gcm_driver import Gcm

# every engine and path this machine has (tests/engines.py); ENGINES_ONLY: the ones that run GCM differently
pytestmark = pytest.mark.usefixtures("engine")
ENGINES_ONLY = r"^(gcm-|evp$|split$)"

RNG = random.Random(18)
K1, K2 = RNG.randbytes(32), RNG.randbytes(32)
IV = RNG.randbytes(12)

# (name, ops): ops are ("aad", n) / ("data", n) / ("rekey", "same"|"other") / ("copy",) / ("final",)
SCRIPTS = [
    ("after-data", [("aad", 20), ("data", 33), ("rekey", "other"), ("data", 40), ("final",)]),
    ("after-aad-same-key", [("aad", 20), ("rekey", "same"), ("aad", 7), ("data", 17), ("final",)]),
    ("no-data-after", [("data", 16), ("rekey", "other"), ("final",)]),
    ("aad-after-rekey", [("data", 5), ("rekey", "same"), ("aad", 37), ("data", 64), ("final",)]),
    ("twice", [("data", 20), ("rekey", "other"), ("data", 3), ("rekey", "same"), ("data", 50), ("final",)]),
    ("large", [("aad", 3), ("data", 1000), ("rekey", "other"), ("data", 70000), ("final",)]),
    ("copy-after", [("data", 31), ("rekey", "other"), ("copy",), ("data", 45), ("final",)]),
]


def transcript(cipher, bits, ops, enc, feed, tag=None):
    """Runs ops; feed(i, n) gives the i-th data piece. Returns (outputs, tag or final's result, errors)."""
    klen = bits // 8
    evp.clear_errors()
    g = Gcm(cipher, K1[:klen], IV, enc)
    out, pieces = [], 0
    for op in ops:
        if op[0] == "aad":
            out.append(g.aad(bytes(range(op[1] % 251)) * (op[1] // 251) + bytes(range(op[1] % 251))))
        elif op[0] == "data":
            out.append(g.data(feed(pieces, op[1])))
            pieces += 1
        elif op[0] == "rekey":
            key = (K1 if op[1] == "same" else K2)[:klen]
            out.append(g.ctx.raw_init(None, key, None, -1))
        elif op[0] == "copy":
            g = g.copy()
        else:
            if not enc:
                out.append(g.set_tag(tag))
            out.append(g.final())
            if enc:
                out.append(g.get_tag())
    out.append([(e.lib, e.reason) for e in evp.drain_errors()])
    return out


@pytest.mark.parametrize("bits", [128, 192, 256])
@pytest.mark.parametrize("name,ops", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_rekey_mid_message_like_default(pair, bits, name, ops):
    p = pair(f"AES-{bits}-GCM")
    plain = {}

    def pt(i, n):
        return plain.setdefault((i, n), RNG.randbytes(n))

    mine = transcript(p.test, bits, ops, 1, pt)
    ref = transcript(p.ref, bits, ops, 1, pt)
    assert mine == ref, f"encrypt {name}: accelaes {mine!r} / default {ref!r}"
    # decrypt the default's ciphertext with the same calls and its tag: both must accept it
    cts = [o[1] for o in ref if isinstance(o, tuple) and len(o) == 2 and isinstance(o[1], bytes) and o[0] == 1]
    tag = ref[-2][1]
    data_outs = iter(cts)
    ct = {}

    def feed(i, n):
        return ct.setdefault(i, next(data_outs))

    mine = transcript(p.test, bits, ops, 0, feed, tag)
    ct.clear()
    data_outs = iter(cts)
    ref_dec = transcript(p.ref, bits, ops, 0, feed, tag)
    assert mine == ref_dec, f"decrypt {name}: accelaes {mine!r} / default {ref_dec!r}"
    assert ref_dec[-2] == (1, 0), f"decrypt {name}: the default refused its own tag: {ref_dec!r}"


def switched(cipher, bits, first, data, tag=None, copy=False):
    """A message begun in direction `first`, then init with only the other direction, more data, final
    (decrypting: tag set first; encrypting: the tag got after). Returns the transcript."""
    klen = bits // 8
    evp.clear_errors()
    g = Gcm(cipher, K1[:klen], IV, first)
    out = [g.aad(b"header" * 3), g.data(data[0]), g.ctx.raw_init(None, None, None, 1 - first)]
    if copy:
        g = g.copy()
    out.append(g.data(data[1]))
    if first == 1:
        out += [g.set_tag(tag), g.final()]
    else:
        out += [g.final(), g.get_tag()]
    out.append([(e.lib, e.reason) for e in evp.drain_errors()])
    return out


@pytest.mark.parametrize("bits", [128, 256])
@pytest.mark.parametrize("first", [1, 0], ids=["enc-then-dec", "dec-then-enc"])
@pytest.mark.parametrize("copy", [False, True], ids=["", "copy"])
def test_direction_change_mid_message_like_default(pair, bits, first, copy):
    """The default goes on in the new direction: its updates and its final are the new direction's."""
    p = pair(f"AES-{bits}-GCM")
    data = [RNG.randbytes(33), RNG.randbytes(1000)]
    tag = None
    if first == 1:
        # the right tag: encrypting data[0] and then the plaintext the switched message made of
        # data[1] hashes the same ciphertext
        probe = switched(p.ref, bits, 1, data, b"\0" * 16)
        g = Gcm(p.ref, K1[:bits // 8], IV, 1)
        g.aad(b"header" * 3)
        g.data(data[0])
        g.data(probe[3][1])
        g.final()
        tag = g.get_tag()[1]
    mine = switched(p.test, bits, first, data, tag, copy)
    ref = switched(p.ref, bits, first, data, tag, copy)
    assert mine == ref, f"accelaes {mine!r} / default {ref!r}"
    assert ref[-2][0] == 1, f"the default's final failed: {ref!r}"
