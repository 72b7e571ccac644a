"""tests/unit/test_alloc_fail.py: runs build/tests/test_alloc_fail, which fails the Nth allocation (N = 1, 2, ...)
through CRYPTO_set_mem_functions while accelaes.so is loaded and while every cipher (and the stitched TLS
ciphers, and the DRBG delegate) runs, then checks that everything works again. Once with the AES-NI engine
after a warm-up, once with the nested-EVP engine cold (its one-time set-up then happens under injection; the
load runs, most of the time and the same for both engines, are left to the first), and with large requests
going to the fake GPU plugin (provider/route/gpu.c)."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, MODULE, PROVIDER

BINARY = BUILD / "tests" / "test_alloc_fail"
FAKE = BUILD / "accelaes-fakegpu.so"


@pytest.mark.parametrize("engine,args", [("aesni", []), ("evp", ["--cold", "--no-load"]), ("fakegpu", ["--no-load"])],
                         ids=["aesni-warm", "evp-cold", "fakegpu"])
def test_alloc_fail(openssl_env, engine, args):
    if PROVIDER != "accelaes":
        pytest.skip("injects into accelaes.so itself")
    if not BINARY.exists() or not MODULE.exists():
        pytest.skip(f"{BINARY} or {MODULE} is not built (run `make build-only`)")
    env = dict(openssl_env, ACCELAES_FORCE_EVP_ENGINE="1" if engine == "evp" else "0")
    if engine == "fakegpu":
        if not FAKE.exists():
            pytest.skip(f"{FAKE} is not built (run `make build-only`)")
        env.update(ACCELAES_BACKEND="cuda", ACCELAES_GPU_MIN="16", ACCELAES_GPU_PLUGIN=str(FAKE))
    p = subprocess.run([str(BINARY), *args], env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    m = re.search(r"^(\d+) passed, (\d+) failed$", p.stdout, re.M)
    assert p.returncode == 0 and m and m.group(2) == "0", out[-6000:]
    # Every scenario really injected: the per-run lines name how many allocations failed in turn.
    runs = dict(re.findall(r"^(.+?): (\d+) allocations, each made to fail once", p.stdout, re.M))
    ciphers = [f"AES-{b}-{m} {d}" for m in ("ECB", "CBC", "CTR") for b in (128, 192, 256) for d in ("encrypt", "decrypt")]
    assert all(int(runs.get(c, 0)) > 0 for c in ciphers), p.stdout[-3000:]
    assert ("--no-load" in args) != any(r.startswith("load") for r in runs), p.stdout[-3000:]
    assert int(m.group(1)) > 500, p.stdout[-3000:]
