"""tests/conformance/test_gcm_engines.py: every GCM engine this machine has (accel/gcm.h: accelaes's VAES engine,
intel-ipsec-mb, the nested default provider; ACCELAES_GCM_ENGINE=vaes|imb|evp picks one per process):
 - tests/c/test_gcm_engines.c: encrypt on one engine and decrypt on another (every pair, random key
   sizes, IV and AAD lengths, data sizes and update splits, in place), the 2^32 counter wrap on the VAES
   engine against intel-ipsec-mb, and the VAES engine's split hooks against its own update;
 - the GCM tests of the suite again in a child pytest per engine that the in-process run (the default
   engine) does not already cover."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, PROVIDER, run_c_test

HERE = Path(__file__).resolve().parent.parent
NAMES = {"vaes-gcm": "vaes", "intel-ipsec-mb": "imb", "nested EVP (default provider)": "evp"}
# The GCM tests; -k keeps the GCM cases of the files that cover every mode.
SUBSET = ["test_gcm.py", "test_gcm_split.py", "test_gcm_rekey.py", "test_vectors.py", "test_wycheproof.py",
          "test_differential.py", "test_tls_gcm.py", "test_fuzz_corpus.py"]


def engines_here(env):
    """The engines this build and CPU offer, in default order (the C test's first line says)."""
    path = BUILD / "tests" / "test_gcm_engines"
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")
    out = subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=300).stdout
    line = out.splitlines()[0] if out else ""
    assert line.startswith("engines:"), out[-2000:]
    return [short for name, short in NAMES.items() if name in line]


def test_gcm_engines_cross_c(openssl_env, seed):
    """Cross-engine encryption and decryption, the counter wrap, the split hooks (the C test)."""
    run_c_test("test_gcm_engines", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)), timeout=300)


@pytest.mark.parametrize("engine", ["vaes", "imb", "evp"])
def test_gcm_suite_per_engine(require_provider, openssl_env, seed, engine):
    """The GCM tests with ACCELAES_GCM_ENGINE=engine, in a child pytest (the engine is chosen once per
    process). The engine the in-process run already uses is not run twice."""
    if PROVIDER != "accelaes":
        pytest.skip("the GCM engines are accelaes's")
    have = engines_here(openssl_env)
    if engine not in have:
        pytest.skip(f"no {engine} GCM engine on this machine or build (engines here: {', '.join(have)})")
    chosen = os.environ.get("ACCELAES_GCM_ENGINE") or ("evp" if os.environ.get("ACCELAES_FORCE_EVP_ENGINE") == "1"
                                                        else have[0])
    if engine == chosen:
        pytest.skip(f"{engine} is this run's own GCM engine: the suite in this process covers it")
    env = dict(openssl_env, ACCELAES_GCM_ENGINE=engine, ACCELAES_TEST_SEED=str(seed))
    env.pop("ACCELAES_FORCE_EVP_ENGINE", None)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "-k", "gcm or GCM"] + \
        [str(HERE / f) for f in SUBSET]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1500, cwd=HERE.parent)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, f"ACCELAES_GCM_ENGINE={engine}: the GCM tests failed:\n{tail}"
    assert " passed" in proc.stdout, tail
