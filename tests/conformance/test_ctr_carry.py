"""tests/conformance/test_ctr_carry.py: AES-CTR counter carry across the 2^32, 2^64, 2^96 and 2^128 boundaries
(OpenSSL increments the whole 128-bit big-endian block), over several updates with partial blocks
and over requests large enough to be split, checked against a keystream built independently from
the default provider's AES-ECB and against the default provider's own AES-CTR."""

import random

import pytest

import evp
from conftest import PROVIDER, SEED

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

BOUNDARIES = [32, 64, 96, 128]
SPLITS = {
    "partials": [5, 17, 3, 40, 1, 15, 16, 100, 2, 31],
    "bytewise": [1] * 70,
    "blocks": [16, 32, 48, 64],
    "big": [7, 1 << 20, 9],          # a large request straddling the boundary
}


def reference_ctr(ecb, key, counter, data):
    """CTR by hand: keystream block i = AES(key, counter + i mod 2^128)."""
    nblocks = (len(data) + 15) // 16
    blocks = b"".join(((counter + i) % (1 << 128)).to_bytes(16, "big") for i in range(nblocks))
    stream = evp.crypt(ecb, key, None, blocks, 1, padding=False)
    return bytes(a ^ b for a, b in zip(data, stream))


def start_counter(rng, boundary, blocks_before):
    high = rng.getrandbits(128 - boundary) if boundary < 128 else 0
    return ((high << boundary) | ((1 << boundary) - blocks_before)) % (1 << 128)


@pytest.mark.parametrize("split", list(SPLITS), ids=list(SPLITS))
@pytest.mark.parametrize("boundary", BOUNDARIES, ids=[f"2^{b}" for b in BOUNDARIES])
@pytest.mark.parametrize("bits", [128, 192, 256])
def test_ctr_carry(pair, bits, boundary, split):
    rng = random.Random(f"{SEED}-{bits}-{boundary}-{split}")
    chunks = SPLITS[split]
    total = sum(chunks)
    # start a little before the boundary so it is crossed inside the sequence
    before = 1000 if split == "big" else 3
    counter = start_counter(rng, boundary, before)
    key = rng.randbytes(bits // 8)
    data = rng.randbytes(total)
    iv = counter.to_bytes(16, "big")
    ciphers = pair(f"AES-{bits}-CTR")
    want = reference_ctr(pair(f"AES-{bits}-ECB").ref, key, counter, data)
    where = f"seed={SEED} AES-{bits}-CTR iv={iv.hex()} chunks={split}"

    test = evp.CipherCtx(ciphers.test, key, iv, 1)
    ref = evp.CipherCtx(ciphers.ref, key, iv, 1)
    assert test.provider == PROVIDER
    got, pos = b"", 0
    for n in chunks:
        piece = test.update(data[pos:pos + n])
        ref_piece = ref.update(data[pos:pos + n])
        assert len(piece) == n, f"{where}: update of {n} returned {len(piece)} bytes"
        assert piece == want[pos:pos + n], \
            f"{where}: bytes {pos}..{pos + n} differ from the reference keystream"
        assert piece == ref_piece, f"{where}: bytes {pos}..{pos + n} differ from the default provider"
        pos += n
        got += piece
        # the counter block and num after every update: counter + ceil(pos/16), pos mod 16
        want_iv = ((counter + (pos + 15) // 16) % (1 << 128)).to_bytes(16, "big")
        assert test.updated_iv() == want_iv == ref.updated_iv(), \
            f"{where}: counter after {pos} bytes: {test.updated_iv().hex()} want {want_iv.hex()}"
        assert test.num == ref.num == pos % 16, f"{where}: num after {pos} bytes: {test.num}"
    assert test.final() == b""
    assert got == want
    # decrypting is the same operation
    back = evp.CipherCtx(ciphers.test, key, iv, 0)
    assert back.update(got) + back.final() == data, f"{where}: decrypt did not restore the data"


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=[f"2^{b}" for b in BOUNDARIES])
def test_ctr_carry_oneshot(pair, boundary):
    """EVP_Cipher across the boundary, then again on the same context (the counter carries on)."""
    rng = random.Random(f"{SEED}-oneshot-{boundary}")
    counter = start_counter(rng, boundary, 2)
    key, iv = rng.randbytes(16), counter.to_bytes(16, "big")
    data = rng.randbytes(16 * 5 + 3)
    want = reference_ctr(pair("AES-128-ECB").ref, key, counter, data + data)
    with evp.CipherCtx(pair("AES-128-CTR").test, key, iv, 1) as ctx:
        ret1, out1 = ctx.cipher_oneshot(data)
        ret2, out2 = ctx.cipher_oneshot(data, inplace=True)
    assert (ret1, ret2) == (len(data), len(data))
    assert out1 + out2 == want, f"seed={SEED} iv={iv.hex()}"
