"""tests/conformance/test_vaes_groups.py: the VAES CTR code makes its counters two ways: a 32-bit add on the big-endian
block when the counter's last byte cannot overflow within a group of registers, and byte-reversed 64-bit
lanes otherwise (accel/cpu/vaes.c z_ctr_blocks). Every starting value of the last byte near and across the
switch, every group size (1..8 registers, whole and partial) and a few longer requests, in one call each,
against the default provider, on every engine and path this machine has (the `engine` fixture, tests/engines.py)."""

import random

import pytest

import evp
from conftest import PROVIDER, SEED

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

LOW_BYTES = [0, 1, 2, 3, 4, 5, 15, 16, 31, 32, 100, 127, 128, 191, 192, 200, 220, 221, 222, 223, 224, 225,
             226, 228, 231, 232, 240, 248, 250, 251, 252, 253, 254, 255]
BLOCKS = list(range(1, 41)) + [63, 64, 65, 95, 96, 97, 127, 128, 129, 255, 256, 257, 1024 + 7]


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_ctr_every_low_byte(pair, bits):
    rng = random.Random(f"{SEED}-lowbyte-{bits}")
    ciphers = pair(f"AES-{bits}-CTR")
    key = rng.randbytes(bits // 8)
    data = rng.randbytes(16 * max(BLOCKS))
    for low in LOW_BYTES:
        # the bytes above the last one: random, with a carry chain of 0xff bytes now and then
        head = rng.randbytes(15) if low % 2 else rng.randbytes(12) + b"\xff\xff\xff"
        iv = head + bytes([low])
        for nb in BLOCKS:
            msg = data[:16 * nb]
            got = evp.crypt(ciphers.test, key, iv, msg, 1, padding=False)
            want = evp.crypt(ciphers.ref, key, iv, msg, 1, padding=False)
            assert got == want, f"seed={SEED} AES-{bits}-CTR iv={iv.hex()} blocks={nb}: differs from default"



@pytest.mark.parametrize("mode", ["CBC", "ECB", "CTR"])
@pytest.mark.parametrize("bits", [128, 192, 256])
def test_every_group_size(pair, bits, mode):
    """ECB, CBC and CTR through every register count, whole and partial (vaes.c's tails and its 32-block groups),
    in one update each, in place and not, at every 16-byte placement modulo 64, both directions, against the
    default provider."""
    rng = random.Random(f"{SEED}-groups-{mode}-{bits}")
    ciphers = pair(f"AES-{bits}-{mode}")
    key, iv = rng.randbytes(bits // 8), (rng.randbytes(16) if mode != "ECB" else None)
    for nb in list(range(1, 70)) + [95, 96, 97, 127, 128, 129, 1024 + 5]:
        msg = rng.randbytes(16 * nb)
        for enc in (1, 0):
            want = evp.crypt(ciphers.ref, key, iv, msg, enc, padding=False)
            # every placement modulo 64 (the xmm head up to a 64-byte boundary, vaes.c xmm_head), and an odd one
            for inplace, off in [(False, 0), (False, 5)] + [(True, o) for o in (0, 16, 32, 48, 5)]:
                ctx = evp.CipherCtx(ciphers.test, key, iv, enc, padding=False)
                got = evp.stream(ctx, msg, [len(msg)], out_off=off, in_off=off, inplace=inplace)
                assert got == want, f"seed={SEED} AES-{bits}-{mode} enc={enc} blocks={nb} inplace={inplace} " \
                                    f"offset={off}: differs from default"
