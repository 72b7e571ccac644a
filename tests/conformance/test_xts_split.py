"""tests/conformance/test_xts_split.py: one XTS data unit split over the pool (provider/route/xts_split.c): grains
start at T*x^b, the stealing tail runs after them on the caller. Against the default provider in a
child process with split_min 4096 (policy.c raises it to 64 KiB), sizes around grain edges (the
grain is a multiple of 64 blocks), with and without stealing, in place and not, both directions
and key sizes, on the engine the machine picks (VAES where it has it), the ymm VAES engine where
that is not the default, the xmm one (whose large pieces go to the nested default) and nested EVP;
accelaes-stat then shows split bytes, so the split really ran."""

import os

import pytest

import evp
from conftest import MODULES, SEED, private_segment
from engines import why_missing

pytestmark = pytest.mark.usefixtures("require_provider")

WORKLOAD = '''
import random
rng = random.Random(SEED)
lc = evp.LibCtx(("default", "accelaes"), modules_dir=MODDIR)
K = 1024
SIZES = [64 * K, 64 * K + 1, 64 * K + 15, 64 * K + 16, 64 * K + 17, 65 * K + 31, 80 * K - 1,
         96 * K + 1024 + 7, 128 * K - 16, 256 * K + 9, 1 << 20, (1 << 20) + 13, 3 * (1 << 20) + 16 * 65 + 5]
checked = 0
for name in ("AES-128-XTS", "AES-256-XTS"):
    klen = 32 if name == "AES-128-XTS" else 64
    for size in SIZES:
        for enc in (1, 0):
            inplace = rng.random() < 0.5
            key = rng.randbytes(klen)
            iv = rng.randbytes(16)
            data = rng.randbytes(size)
            outs = []
            for p in ("accelaes", "default"):
                ctx = evp.CipherCtx(lc.fetch(name, p), key, iv, enc, 0)
                src = evp.Mem(size)
                src.write(data)
                dst = src if inplace else evp.Mem(size)
                ok, outl = ctx.raw_update(dst.at(), src.at(), size)
                assert ok and outl == size, (name, size, enc, p, ok, outl)
                assert dst.slack_intact(), (name, size, "wrote outside")
                outs.append(dst.read(size))
            if outs[0] != outs[1]:
                bad = next(i for i in range(size) if outs[0][i] != outs[1][i])
                emit({"mismatch": [name, enc, size, inplace, bad]})
                raise SystemExit(1)
            checked += size
emit({"checked": checked})
'''

# "default": what the machine picks (zmm VAES on AVX-512, else ymm VAES, else xmm); "ymm": the ymm engine where
# it is not the default already (tests/engines.py says when it is missing).
ENGINES = {"default": {}, "ymm": {"ACCELAES_VAES": "ymm"}, "xmm": {"ACCELAES_NO_VAES": "1"},
           "evp": {"ACCELAES_FORCE_EVP_ENGINE": "1"}}


def run_workload(env, tag):
    code = f"MODDIR={str(MODULES)!r}\nSEED={str(SEED) + tag!r}\n" + WORKLOAD
    rc, results, stderr = evp.run_isolated(code, env=env, timeout=300)
    assert rc == 0 and results and "checked" in results[-1], \
        f"the XTS split differs from the default provider: {results[-1:] or stderr[-1500:]}"
    return results[-1]["checked"]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_xts_split_matches_default(openssl_env, engine):
    why = why_missing("aesni-ymm") if engine == "ymm" else None
    if why:
        pytest.skip(why)
    env = dict(openssl_env)
    env.update({"ACCELAES_SPLIT_MIN": "4096", "ACCELAES_BACKEND": "cpu", "ACCELAES_SHM": "off"})
    env.update(ENGINES[engine])
    assert run_workload(env, "-" + engine) > 0


@pytest.fixture
def split_env(openssl_env):
    yield from private_segment(openssl_env, "xtssplit", ACCELAES_BACKEND="cpu", ACCELAES_SPLIT_MIN="4096")


def test_xts_split_counted(stat_tool, split_env):
    """The split ran: accelaes-stat's split bytes grew (needs a second CPU unit)."""
    import json
    import subprocess
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU unit: nothing to split over")
    run_workload(dict(split_env), "-stat")
    proc = subprocess.run([str(stat_tool), "--json"], env=split_env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert json.loads(proc.stdout)["totals"]["split_bytes"] > 0, "no XTS unit was split"
