"""tests/conformance/test_cross_engine.py: what one engine encrypts, every other engine decrypts (tests/engines.py:
every engine and path this machine has, each in a child process since accelaes picks engines once per process).
Every mode: ECB, CBC, CTR, GCM (AAD, tag) and XTS, each key size, lengths from 0 to 64 KiB + 33 bytes (past the
split and GPU thresholds of those engines), whole and in two updates. Each engine's ciphertexts and tags must
equal the default provider's (asked in the same child), and each engine must decrypt every other's to the
plaintext (GCM: and accept its tag)."""

import json
import random

import pytest

import engines
from conftest import PROVIDER

CIPHERS = ["AES-128-ECB", "AES-256-ECB", "AES-128-CBC", "AES-192-CBC", "AES-256-CBC", "AES-128-CTR", "AES-256-CTR",
           "AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS"]
LENGTHS = [0, 1, 16, 17, 255, 4113, 65569]

CHILD = r'''
import binascii, json, evp
CASES, DECRYPT = json.load(open(INPUT))
from gcm_driver import Gcm
lc = evp.LibCtx(("default", "accelaes"), modules_dir=MODDIR)
h, u = binascii.hexlify, binascii.unhexlify

def run(prov, c, data, enc, tag):
    ciph = lc.fetch(c["name"], prov)
    key, iv, cut = u(c["key"]), u(c["iv"]), c["cut"]
    if "GCM" in c["name"]:
        g = Gcm(ciph, key, iv, enc)
        assert g.aad(u(c["aad"]))[0]
        parts = [g.data(data[:cut]), g.data(data[cut:])]
        if not enc:
            assert g.set_tag(tag)
        ok = g.final()[0]
        out = b"".join(p[1] for p in parts) if all(p[0] for p in parts) else None
        return (out if ok else None), (g.get_tag()[1] if enc else None)
    with evp.CipherCtx(ciph, key, iv, enc, padding=False) as ctx:
        if "XTS" in c["name"]:
            return ctx.update(data) + ctx.final(), None
        return ctx.update(data[:cut]) + ctx.update(data[cut:]) + ctx.final(), None

for c in CASES:
    if DECRYPT is None:
        ct, tag = run("accelaes", c, u(c["pt"]), 1, None)
        ref, rtag = run("default", c, u(c["pt"]), 1, None)
        emit({"ct": h(ct).decode(), "tag": tag and h(tag).decode(), "same": (ct, tag) == (ref, rtag)})
    else:
        bad = []
        for other, res in DECRYPT.items():
            got = res[c["id"]]
            pt, _ = run("accelaes", c, u(got["ct"]), 0, got["tag"] and u(got["tag"]))
            if pt is None or h(pt).decode() != c["pt"]:
                bad.append(other)
        emit(bad)
'''


def cases(seed):
    rng = random.Random(seed)
    out = []
    for name in CIPHERS:
        klen = int(name.split("-")[1]) // 8 * (2 if "XTS" in name else 1)
        for n in LENGTHS:
            if "XTS" in name and n < 16 or n % 16 and ("ECB" in name or "CBC" in name):
                n = max(16, n - n % 16)
            key = bytearray(rng.randbytes(klen))
            if "XTS" in name and key[:klen // 2] == key[klen // 2:]:
                key[0] ^= 1
            out.append({"id": len(out), "name": name, "key": key.hex(), "pt": rng.randbytes(n).hex(),
                        "iv": rng.randbytes(12 if "GCM" in name else 16).hex(), "aad": rng.randbytes(n % 40).hex(),
                        "cut": rng.randrange(n + 1) // 16 * 16})
    return out


def run_on(isolated, name, the_cases, decrypt=None):
    """The cases on engine `name` in a child: encrypted (decrypt None), else {engine: its ciphertexts} decrypted."""
    from conftest import MODULES
    results, rc, stderr = isolated(f"MODDIR={str(MODULES)!r}\n", (the_cases, decrypt), engines.ENGINES[name][0])
    assert rc == 0 and len(results) == len(the_cases), f"engine {name}: rc={rc}\n{stderr[-3000:]}"
    return results


def label(c):
    return f"{c['name']}/{len(c['pt']) // 2}"


@pytest.fixture(scope="module")
def isolated_on(openssl_env, tmp_path_factory):
    """(head, data, env) -> (results, rc, stderr): CHILD in a child process with the settings env (and no other
    engine's), data handed over in a file (too large for a command line)."""
    import evp
    path = tmp_path_factory.mktemp("cross") / "input.json"

    def run(head, data, env):
        path.write_text(json.dumps(data))
        e = {k: v for k, v in openssl_env.items() if not any(k in spec for spec, _, _ in engines.ENGINES.values())}
        e.update(env)
        rc, results, stderr = evp.run_isolated(head + f"INPUT={str(path)!r}\n" + CHILD, env=e, timeout=600)
        return results, rc, stderr
    return run


def test_cross_engine(require_provider, isolated_on, seed):
    if PROVIDER != "accelaes":
        pytest.skip("the engines are accelaes's")
    here = engines.engines_here()
    if len(here) < 2:
        pytest.skip(f"one engine here only ({here}): nothing to cross")
    the_cases = cases(seed)
    enc = {name: run_on(isolated_on, name, the_cases) for name in here}
    for name, res in enc.items():
        bad = [label(c) for c, r in zip(the_cases, res) if not r["same"]]
        assert not bad, f"engine {name}: ciphertext or tag differs from the default provider's: {bad}"
    for dec_name in here:
        res = run_on(isolated_on, dec_name, the_cases, {n: r for n, r in enc.items() if n != dec_name})
        bad = [f"{label(c)} from {', '.join(r)}" for c, r in zip(the_cases, res) if r]
        assert not bad, f"decrypted on {dec_name}: wrong plaintext or tag refused: {bad}"
