"""tests/conformance/test_vectors.py: OpenSSL's own AES ECB/CBC/CTR stanzas (tests/vectors/evpciph_aes_common.txt)
run the way OpenSSL's evp_test runs them: whole, in place, misaligned, fragmented 1 / n-2 / 1,
padding off, NextIV checked, and a context copied mid-way finishing identically."""

import re
from pathlib import Path

import pytest

import evp
from conftest import PROVIDER

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "evpciph_aes_common.txt"
WANTED = re.compile(r"^aes-(128|192|256)-(ecb|cbc|ctr)$", re.I)


class Stanza:
    def __init__(self, line, fields):
        self.line = line
        self.cipher = fields["Cipher"]
        self.key = bytes.fromhex(fields["Key"])
        self.iv = bytes.fromhex(fields["IV"]) if "IV" in fields else None
        self.next_iv = bytes.fromhex(fields["NextIV"]) if "NextIV" in fields else None
        self.pt = bytes.fromhex(fields.get("Plaintext", ""))
        self.ct = bytes.fromhex(fields.get("Ciphertext", ""))
        self.op = fields.get("Operation", "").upper()
        assert "Result" not in fields, "stanzas expecting failure are not expected in this file"

    def directions(self):
        # Like evp_test: no Operation means both ways. CTR is its own inverse, so its
        # ENCRYPT-only stanzas are run as decryption too (same expected bytes).
        if self.op == "ENCRYPT" and evp.cipher_mode(self.cipher) != evp.MODE_CTR:
            return [1]
        if self.op == "DECRYPT":
            return [0]
        return [1, 0]

    def __repr__(self):
        return f"L{self.line}-{self.cipher}"


def parse_stanzas(path):
    stanzas, fields, start = [], {}, None
    for lineno, raw in enumerate(path.read_text().splitlines() + [""], 1):
        line = raw.strip()
        if not line:
            if fields.get("Cipher") and WANTED.match(fields["Cipher"]):
                stanzas.append(Stanza(start, fields))
            fields, start = {}, None
            continue
        if line.startswith("#") or "=" not in line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if start is None:
            start = lineno
        fields[key] = value
    return stanzas


STANZAS = parse_stanzas(VECTORS)
CASES = [(st, enc) for st in STANZAS for enc in st.directions()]
CASE_IDS = [f"{st!r}-{'enc' if enc else 'dec'}" for st, enc in CASES]


def test_stanza_count():
    """The file holds the AES ECB (16), CBC (13) and CTR (11) stanzas the README names."""
    modes = [evp.cipher_mode(st.cipher) for st in STANZAS]
    assert (modes.count(evp.MODE_ECB), modes.count(evp.MODE_CBC), modes.count(evp.MODE_CTR)) \
        == (16, 13, 11)


def _io(st, enc):
    return (st.pt, st.ct) if enc else (st.ct, st.pt)


def _check_ivs(ctx, st, where):
    if st.next_iv is not None:
        got = ctx.updated_iv()
        assert got == st.next_iv, f"{where}: NextIV expected {st.next_iv.hex()} got {got.hex()}"
    if st.iv is not None:
        got = ctx.original_iv()
        assert got == st.iv, f"{where}: original IV expected {st.iv.hex()} got {got.hex()}"


LAYOUTS = ["aligned", "inplace", "misaligned", "inplace-misaligned"]


@pytest.mark.parametrize("frag", ["whole", "frag"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_stanza(pair, case, layout, frag):
    st, enc = case
    cipher = pair(st.cipher).test
    src, expected = _io(st, enc)
    inplace = layout.startswith("inplace")
    # misaligned: every output offset 1..15, the input at a different offset
    offsets = [(0, 0)] if "misaligned" not in layout else \
        [(o, (o * 7) % 15 + 1) for o in range(1, 16)]
    chunks = evp.frag_chunks(len(src)) if frag == "frag" else ([len(src)] if src else [])
    for out_off, in_off in offsets:
        where = f"{st!r} {'enc' if enc else 'dec'} {layout} {frag} out+{out_off} in+{in_off}"
        with evp.CipherCtx(cipher, st.key, st.iv, enc, padding=False) as ctx:
            assert ctx.provider == PROVIDER, f"{where}: ran on {ctx.provider}"
            got = evp.stream(ctx, src, chunks, out_off, in_off, inplace)
            assert got == expected, f"{where}: expected {expected.hex()} got {got.hex()}"
            _check_ivs(ctx, st, where)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_stanza_copy_midway(pair, case):
    """EVP_CIPHER_CTX_copy at every split point: the original and the copy both finish with
    the published bytes and NextIV, and the copy still works after the original is freed."""
    st, enc = case
    cipher = pair(st.cipher).test
    src, expected = _io(st, enc)
    for split in sorted({0, 1, len(src) // 2, max(len(src) - 1, 0), len(src)}):
        where = f"{st!r} {'enc' if enc else 'dec'} copy after {split} bytes"
        a = evp.CipherCtx(cipher, st.key, st.iv, enc, padding=False)
        head = a.update(src[:split]) if split else b""
        b = a.copy()
        assert b.provider == PROVIDER
        got_a = head + a.update(src[split:]) + a.final()
        assert got_a == expected, f"{where}: original expected {expected.hex()} got {got_a.hex()}"
        _check_ivs(a, st, where + " (original)")
        a.free()    # the copy must own its state, not share the original's
        got_b = head + b.update(src[split:]) + b.final()
        assert got_b == expected, f"{where}: copy expected {expected.hex()} got {got_b.hex()}"
        _check_ivs(b, st, where + " (copy)")
        b.free()


@pytest.mark.parametrize("inplace", [False, True], ids=["out-of-place", "inplace"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_stanza_oneshot(pair, case, inplace):
    """EVP_Cipher (the one-shot call) on the whole message returns its length and the bytes."""
    st, enc = case
    cipher = pair(st.cipher).test
    src, expected = _io(st, enc)
    with evp.CipherCtx(cipher, st.key, st.iv, enc, padding=False) as ctx:
        ret, got = ctx.cipher_oneshot(src, inplace=inplace)
        assert ret == len(src), f"{st!r}: EVP_Cipher returned {ret}, errors {evp.drain_errors()}"
        assert got == expected, f"{st!r}: expected {expected.hex()} got {got.hex()}"
