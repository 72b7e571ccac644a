"""tests/conformance/test_differential.py: randomized differential test of the provider under test against
OpenSSL's default provider in the same process: sizes 0 B to 4 MiB, random update splits, padding on
and off, in place, a context copied mid-stream, encrypt and decrypt, all nine ciphers, and the
one-shot EVP_Cipher path. Seeded; the seed is in the session header and in every failure message
(replay with ACCELAES_TEST_SEED)."""

import random

import pytest

import evp
from conftest import PROVIDER, SEED

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

MIB = 1 << 20
TRIALS = 20


def pick_size(rng):
    r = rng.random()
    if r < 0.35:
        return rng.randrange(0, 65)
    if r < 0.6:
        return rng.randrange(65, 4097)
    if r < 0.85:
        return rng.randrange(4097, 256 * 1024)
    return rng.randrange(256 * 1024, 4 * MIB + 1)


def random_splits(rng, n):
    if n == 0:
        return [] if rng.random() < 0.5 else [0]
    cuts = sorted(rng.sample(range(1, n), min(rng.randrange(0, 8), n - 1))) if n > 1 else []
    bounds = [0] + cuts + [n]
    chunks = [b - a for a, b in zip(bounds, bounds[1:])]
    if rng.random() < 0.2:          # an empty update in the middle is legal too
        chunks.insert(rng.randrange(len(chunks) + 1), 0)
    return chunks


def drive(ctx, data, chunks, inplace, copy_at=None):
    """Stream data through ctx; output written contiguously; in place means input and output
    share one buffer (the output never runs ahead of the input). Returns (ok, out, copy)."""
    n = len(data)
    buf = evp.Mem(n + 48)
    src = buf if inplace else evp.Mem(n)
    src.write(data)
    total = pos = 0
    copied = None
    for idx, size in enumerate(chunks):
        if idx == copy_at:
            clone = ctx.copy()
            ok, rest, _ = drive(clone, data[pos:], chunks[idx:], inplace=False)
            copied = (ok, buf.read(total) + rest)
            clone.free()
        ok, outl = ctx.raw_update(buf.at(total), src.at(pos), size)
        if not ok:
            evp.drain_errors()
            return False, buf.read(total), copied
        assert 0 <= outl <= size + 16
        total += outl
        pos += size
    ok, outl = ctx.raw_final(buf.at(total))
    if not ok:
        evp.drain_errors()
        return False, buf.read(total), copied
    total += outl
    assert buf.slack_intact(), "output written outside its buffer"
    return True, buf.read(total), copied


@pytest.mark.parametrize("padding", [1, 0], ids=["pad", "nopad"])
@pytest.mark.parametrize("enc", [1, 0], ids=["enc", "dec"])
@pytest.mark.parametrize("name", evp.CIPHERS)
def test_differential(pair, name, enc, padding):
    rng = random.Random(f"{SEED}-{name}-{enc}-{padding}")
    ciphers = pair(name)
    mode = evp.cipher_mode(name)
    keylen = evp.cipher_keylen(name)
    sizes = [0, 4 * MIB] + [pick_size(rng) for _ in range(TRIALS - 2)]
    for trial, size in enumerate(sizes):
        key = rng.randbytes(keylen)
        iv = None if mode == evp.MODE_ECB else rng.randbytes(16)
        if mode != evp.MODE_CTR and not padding and rng.random() < 0.8:
            size -= size % 16            # mostly whole blocks; the rest must fail alike
        data = rng.randbytes(size)
        if not enc and padding and mode != evp.MODE_CTR and rng.random() < 0.8:
            data = evp.crypt(ciphers.ref, key, iv, data, 1)     # mostly valid padding
        chunks = random_splits(rng, len(data))
        inplace = rng.random() < 0.5
        copy_at = rng.randrange(len(chunks)) if chunks and rng.random() < 0.5 else None
        where = (f"seed={SEED} {name} {'enc' if enc else 'dec'} pad={padding} trial={trial} "
                 f"size={len(data)} chunks={chunks if len(chunks) < 12 else len(chunks)} "
                 f"inplace={inplace} copy_at={copy_at}")

        test = evp.CipherCtx(ciphers.test, key, iv, enc, padding)
        ref = evp.CipherCtx(ciphers.ref, key, iv, enc, padding)
        assert test.provider == PROVIDER
        ok, out, copied = drive(test, data, chunks, inplace, copy_at)
        ok_ref, out_ref, _ = drive(ref, data, chunks, False)
        assert ok == ok_ref, f"{where}: outcome {ok}, default provider {ok_ref}"
        assert out == out_ref, f"{where}: output differs from the default provider's " \
                               f"(first difference at byte {_first_diff(out, out_ref)})"
        if copied is not None:
            assert copied == (ok_ref, out_ref), f"{where}: the mid-stream copy finished differently"
        if ok and mode != evp.MODE_ECB:
            assert test.updated_iv() == ref.updated_iv(), f"{where}: updated IV differs"
        if ok and mode == evp.MODE_CTR:
            assert test.num == ref.num, f"{where}: num differs"
        test.free()
        ref.free()


def _first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else None


@pytest.mark.parametrize("enc", [1, 0], ids=["enc", "dec"])
@pytest.mark.parametrize("name", evp.CIPHERS)
def test_differential_oneshot(pair, name, enc):
    """EVP_Cipher, called several times on one context (the chaining state carries on),
    out of place and in place, against the default provider."""
    rng = random.Random(f"{SEED}-oneshot-{name}-{enc}")
    ciphers = pair(name)
    mode = evp.cipher_mode(name)
    key = rng.randbytes(evp.cipher_keylen(name))
    iv = None if mode == evp.MODE_ECB else rng.randbytes(16)
    test = evp.CipherCtx(ciphers.test, key, iv, enc, padding=False)
    ref = evp.CipherCtx(ciphers.ref, key, iv, enc, padding=False)
    for call in range(6):
        size = pick_size(rng)
        if mode != evp.MODE_CTR:
            size -= size % 16        # EVP_Cipher takes whole blocks for ECB and CBC
        data = rng.randbytes(size)
        inplace = rng.random() < 0.5
        ret, out = test.cipher_oneshot(data, inplace=inplace)
        ret_ref, out_ref = ref.cipher_oneshot(data)
        where = f"seed={SEED} {name} {'enc' if enc else 'dec'} call={call} size={size} inplace={inplace}"
        assert ret == ret_ref == size, f"{where}: EVP_Cipher returned {ret}, default {ret_ref}"
        assert out == out_ref, f"{where}: output differs at byte {_first_diff(out, out_ref)}"
    test.free()
    ref.free()
