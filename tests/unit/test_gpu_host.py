"""tests/unit/test_gpu_host.py: runs build/tests/test_cuda_host, the CUDA kernels' AES code
(accel/cuda/aes_core.h) compiled for the CPU, against FIPS-197 / SP 800-38A / RFC 3686 stanzas
and OpenSSL EVP (every mode the kernels build on it, CTR carries, pieces as the runtime cuts them)."""

import re
import subprocess

import pytest

from conftest import BUILD, REPO

BINARY = BUILD / "tests" / "test_cuda_host"


def test_cuda_aes_core_on_cpu():
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built (run `make build-only`)")
    vectors = REPO / "tests" / "vectors" / "evpciph_aes_common.txt"
    proc = subprocess.run([str(BINARY), str(vectors)], capture_output=True, text=True, timeout=120, cwd=REPO)
    out = proc.stdout + proc.stderr
    m = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m, f"no summary line:\n{out[-2000:]}"
    assert proc.returncode == 0 and m.group(2) == "0", out[-4000:]
    assert int(m.group(1)) >= 1000, f"only {m.group(1)} checks ran"
    assert "40 AES ECB/CBC/CTR stanzas checked" in proc.stdout, out[-2000:]
