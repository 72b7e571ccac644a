"""tests/conformance/test_split.py: the split path (provider/route/policy.c split_run over scheduler/pool.c's ranges)
while other processes keep the cores busy: every byte and the updated IV equal the default
provider's, in place and not, for CTR (counters about to carry past 2^64 and 2^128), ECB and
CBC decryption with non-zero IVs, at sizes that are and are not whole grains; and the pool's range
API, its rescue of a late helper and its gate (tests/c/test_pool_ranges.c). No timing is asserted:
bench/scripts/split_load.sh measures."""

import os
import subprocess
import time

import pytest

import evp
from conftest import MODULES, SEED, private_segment, run_c_test

pytestmark = pytest.mark.usefixtures("require_provider")

WORKLOAD = '''
import ctypes, random
rng = random.Random(SEED)
lc = evp.LibCtx(("default", "accelaes"), modules_dir=MODDIR)
CASES = [("AES-128-CTR", 1), ("AES-256-CTR", 1), ("AES-128-ECB", 1), ("AES-192-ECB", 0),
         ("AES-128-CBC", 0), ("AES-256-CBC", 0)]
SIZES = [SIZES_HERE]
checked = 0
for name, enc in CASES:
    bits = int(name[4:7])
    for size in SIZES:
        for inplace in (False, True):
            key = rng.randbytes(bits // 8)
            if name.endswith("CTR"):
                # the low 64 bits (or all 128) carry inside the first request
                low = (1 << 64) - rng.randrange(1, size // 16)
                high = rng.getrandbits(64) if rng.random() < 0.5 else (1 << 64) - 1
                iv = ((high << 64) | low).to_bytes(16, "big")
            else:
                iv = None if name.endswith("ECB") else rng.randbytes(16)
            ctxs = [evp.CipherCtx(lc.fetch(name, p), key, iv, enc, 0) for p in ("accelaes", "default")]
            for rep in range(3):
                data = rng.randbytes(size)
                outs = []
                for ctx in ctxs:
                    src = evp.Mem(size)
                    src.write(data)
                    dst = src if inplace else evp.Mem(size)
                    ok, outl = ctx.raw_update(dst.at(), src.at(), size)
                    assert ok and outl == size, (name, size, inplace, rep, ok, outl)
                    assert dst.slack_intact(), (name, size, inplace, rep, "wrote outside")
                    outs.append(dst.read(size))
                if outs[0] != outs[1]:
                    bad = next(i for i in range(size) if outs[0][i] != outs[1][i])
                    emit({"mismatch": [name, enc, size, inplace, rep, bad, iv.hex() if iv else None]})
                    raise SystemExit(1)
                checked += size
            if iv is not None:
                ivs = [c.updated_iv() for c in ctxs]
                if ivs[0] != ivs[1]:
                    emit({"iv_mismatch": [name, enc, size, inplace, ivs[0].hex(), ivs[1].hex()]})
                    raise SystemExit(1)
emit({"checked": checked})
'''


def hogs(n):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


@pytest.fixture
def split_env(openssl_env):
    yield from private_segment(openssl_env, "split", ACCELAES_BACKEND="cpu")


def split_bytes(stat_tool, env):
    import json
    proc = subprocess.run([str(stat_tool), "--json"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-800:]
    return json.loads(proc.stdout)["totals"]["split_bytes"]


def run_workload(env, sizes, seed):
    code = (f"MODDIR={str(MODULES)!r}\nSEED={seed!r}\n"
            + WORKLOAD.replace("SIZES_HERE", ", ".join(str(s) for s in sizes)))
    rc, results, stderr = evp.run_isolated(code, env=env, timeout=300)
    assert rc == 0 and results and "checked" in results[-1], \
        f"split differs from the default provider: {results[-1:] or stderr[-1500:]}"
    return results[-1]["checked"]


@pytest.mark.parametrize("load", [0, 2], ids=["idle", "2-busy-loops"])
def test_split_matches_default_under_load(stat_tool, split_env, load):
    """1 MiB and larger requests with the default split_min, whole grains and not, while `load`
    busy loops run: identical to the default provider. Some request was really split (the idle
    run); under load the gate may keep them inline, which must be just as right."""
    env = dict(split_env)
    procs = hogs(load)
    try:
        time.sleep(0.2)
        checked = run_workload(env, [1 << 20, (1 << 20) + 48, 3 * (1 << 20) + 16], f"{SEED}-load{load}")
    finally:
        stop(procs)
    assert checked > 0
    if load == 0 and os.cpu_count() >= 2:
        assert split_bytes(stat_tool, env) > 0, "no request was split"


def test_split_small_split_min(stat_tool, split_env):
    """split_min = 64 KiB: requests of a few grains, the last one short, all identical."""
    env = dict(split_env)
    env["ACCELAES_SPLIT_MIN"] = "65536"
    procs = hogs(1)
    try:
        run_workload(env, [65536, 65536 + 16, 100000 - 100000 % 16, 17 * 16384 + 32], f"{SEED}-small")
    finally:
        stop(procs)


def test_pool_ranges_c(openssl_env):
    """The pool's range API, the rescue of a late helper and the gate (tests/c/test_pool_ranges.c)."""
    run_c_test("test_pool_ranges", openssl_env, timeout=120)
