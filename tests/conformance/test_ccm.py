"""tests/conformance/test_ccm.py: AES-128/192/256-CCM (issue 28's proof of the AEAD layer) through accelaes,
fetched with "provider=accelaes", on the NIST CAVP CCM files (cryptography_vectors' ciphers/AES/CCM: DVPT
decryption-verification with Pass/Fail results, VADT, VNT, VPT and VTT generation-encryption) and Project
Wycheproof's aes_ccm_test.json (tests/vectors/). Every message also runs on the running default provider,
and the two call-by-call logs (results, output bytes, tag, errors in order) must be equal: what is right for
a nonce or tag length a release refuses is asked of that release, never written down here.

Fails where accelaes does not serve CCM (no AES-*-CCM with provider=accelaes: OpenSSL 3.0 before the AEAD
layer); that accelaes did the work (its counters) is test_ccm_diff.py's."""

import importlib.resources
import json
import os
import random

import pytest

import evp
from ccm_driver import message
from conftest import PROVIDER

HERE = os.path.dirname(os.path.abspath(__file__))
WYCHEPROOF = os.path.join(HERE, "..", "vectors", "wycheproof_aes_ccm_test.json")
KINDS = ["DVPT", "VADT", "VNT", "VPT", "VTT"]
BITS = [128, 192, 256]


@pytest.fixture(scope="module")
def ccm_pair(libctx):
    """ccm_pair(bits) -> (the provider under test's AES-<bits>-CCM, the default's). A provider under test
    that does not offer it is a failure: serving CCM is what these tests are for."""
    def get(bits):
        name = f"AES-{bits}-CCM"
        test = libctx.try_fetch(name, PROVIDER)
        assert test is not None, f"{PROVIDER} does not serve {name} (EVP_CIPHER_fetch with provider={PROVIDER})"
        assert test.provider == PROVIDER, f"{name} came from {test.provider}"
        ref = libctx.fetch(name, "default")
        return test, ref
    return get


# ---------------------------------------------------------------- NIST CAVP

def cavp_cases(kind, bits):
    """The cases of ciphers/AES/CCM/<kind><bits>.rsp. A block (lines between blank lines) with a Count is
    a case; any other block, and the [..] headers, set what the cases after it share (Key, Nonce, Alen,
    Plen, Nlen, Tlen). Adata and Payload of length 0 are written as "00": the lengths cut them."""
    try:
        root = importlib.resources.files("cryptography_vectors")
    except ModuleNotFoundError:
        pytest.skip("the cryptography-vectors package is not installed (make test-deps)")
    path = root.joinpath(f"ciphers/AES/CCM/{kind}{bits}.rsp")
    if not path.is_file():
        pytest.skip(f"cryptography_vectors has no ciphers/AES/CCM/{kind}{bits}.rsp")
    shared, cases = {}, []
    for block in path.read_text().replace("\r", "").split("\n\n"):
        fields = {}
        for line in block.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            items = line.strip("[]").split(",") if line.startswith("[") else [line]
            for item in items:
                k, _, v = (s.strip() for s in item.partition("="))
                fields[k] = v
        target = {} if "Count" in fields else shared
        for k, v in fields.items():
            if k in ("Alen", "Plen", "Nlen", "Tlen", "Count"):
                target[k] = int(v)
            elif k == "Result":
                target[k] = v.split()[0]
            else:
                target[k] = bytes.fromhex(v)
        if "Count" in fields:
            case = dict(shared, **target)
            case["Adata"] = case["Adata"][:case["Alen"]]
            case["Payload"] = case.get("Payload", b"")[:case["Plen"]]
            cases.append(case)
    return cases


def both(pair, enc, *args, **kw):
    """One message on the provider under test and on the default; their logs must be equal."""
    test, ref = pair
    mine = message(test, enc, *args, **kw)
    theirs = message(ref, enc, *args, **kw)
    assert mine[0] == theirs[0], f"{PROVIDER}: {mine[0]}\ndefault: {theirs[0]}"
    return mine


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("kind", KINDS)
def test_cavp(ccm_pair, kind, bits):
    """Encrypt every case whose result is known (all but DVPT's Fail) to CT (ciphertext || tag); decrypt
    every CT with its tag: a Pass gives the payload, a Fail is refused. Some cases run in place."""
    pair = ccm_pair(bits)
    cases = cavp_cases(kind, bits)
    rng = random.Random(f"{kind}{bits}")
    fails = 0
    for c in cases:
        key, nonce, aad, pt, m = c["Key"], c["Nonce"], c["Adata"], c["Payload"], c["Tlen"]
        assert len(nonce) == c["Nlen"] and len(c["CT"]) == c["Plen"] + m, c
        ct, tag = c["CT"][:c["Plen"]], c["CT"][c["Plen"]:]
        inplace = rng.random() < 0.25
        if c.get("Result", "Pass") == "Pass":
            _, out, got = both(pair, 1, key, nonce, aad, pt, m, inplace=inplace)
            assert out == ct and got == tag, (kind, bits, c["Count"], "encryption differs from CT")
        else:
            fails += 1
        _, out, _ = both(pair, 0, key, nonce, aad, ct, m, tag=tag, inplace=inplace)
        if c.get("Result", "Pass") == "Pass":
            assert out == pt, (kind, bits, c["Count"], "decryption differs from the payload")
        else:
            assert out is None, (kind, bits, c["Count"], "a Fail case was decrypted")
    assert len(cases) >= 70, f"{kind}{bits}.rsp: only {len(cases)} cases parsed"
    assert kind != "DVPT" or fails > 50, f"{kind}{bits}.rsp: only {fails} Fail cases parsed"


# ---------------------------------------------------------------- Wycheproof

def wycheproof_groups():
    with open(WYCHEPROOF) as f:
        doc = json.load(f)
    return doc


def test_wycheproof_count():
    doc = wycheproof_groups()
    assert sum(len(g["tests"]) for g in doc["testGroups"]) == doc["numberOfTests"] == 552


@pytest.mark.parametrize("bits", BITS)
def test_wycheproof(ccm_pair, bits):
    """Each case encrypted and decrypted on both providers, logs equal. Where the running default accepts
    the nonce and tag lengths, a valid case must give ct || tag and decrypt back, an invalid one (a
    modified tag) must be refused; nonce and tag lengths CCM does not have are refused as the default does."""
    pair = ccm_pair(bits)
    n = refused = 0
    for g in wycheproof_groups()["testGroups"]:
        if g["keySize"] != bits:
            continue
        m = g["tagSize"] // 8
        for t in g["tests"]:
            key, nonce, aad, msg, ct, tag = (bytes.fromhex(t[k]) for k in ("key", "iv", "aad", "msg", "ct", "tag"))
            where = (t["tcId"], t["comment"], t["flags"])
            elog, out, got = both(pair, 1, key, nonce, aad, msg, m)
            dlog, back, _ = both(pair, 0, key, nonce, aad, ct, m, tag=tag)
            lengths_ok = all(step[1] == 1 for step in elog[:3])     # init, nonce length, tag length
            n += 1
            if not lengths_ok:
                refused += 1
                assert t["result"] == "invalid", (where, "the default refuses a valid case's lengths", elog)
                continue
            if t["result"] == "valid":
                assert out == ct and got == tag and back == msg, where
            else:
                assert back is None, (where, "an invalid case was decrypted")
    assert n == 184 and refused > 0, (n, refused)


def test_flags_names_tables(ccm_pair):
    """Names, sizes, mode, flags, cipher parameters and the parameter lists as the default's."""
    for bits in BITS:
        test, ref = ccm_pair(bits)
        assert test.names() == ref.names()
        for attr in ("block_size", "key_length", "iv_length", "mode", "flags", "nid"):
            assert getattr(test, attr) == getattr(ref, attr), (bits, attr)
        specs = [("mode", "uint", 0, 4), ("keylen", "uint"), ("ivlen", "uint"), ("blocksize", "uint"),
                 ("aead", "int", 0, 4), ("custom-iv", "int", 0, 4), ("cts", "int", 0, 4),
                 ("tls-multi", "int", 0, 4), ("has-randkey", "int", 0, 4)]
        ok_t, pt = test.get_params(specs)
        ok_r, pr = ref.get_params(specs)
        assert ok_t == ok_r
        assert [pt.value(i) for i in range(len(specs))] == [pr.value(i) for i in range(len(specs))]
        assert test.gettable_ctx_params() == ref.gettable_ctx_params()
        assert test.settable_ctx_params() == ref.settable_ctx_params()
        assert test.gettable_params() == ref.gettable_params()
