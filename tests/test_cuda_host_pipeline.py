"""tests/test_cuda_host_pipeline.py: the CUDA plugin's host side, tested where no GPU is.

1. build/tests/test_cuda_team: the host thread team and its copy / XOR loops (accel/cuda/host_team.cu).
2. The plugin's real runtime.cu + pipeline.cu + host_team.cu compiled by g++ against a CPU emulation
   of the CUDA calls and kernels (tests/cuda_mock/), then driven through the ABI scenarios of
   tests/test_gpu_plugin.py (contract, batch, threads, fail-after) with the host team on and off.
   MOCK_CUDA_MODE=lazy runs queued GPU work only when the host waits for it (catches a host that reads
   or refills a staging buffer too early), eager runs it at once (catches one that fills it too late).
"""

import re
import subprocess

import pytest

import test_gpu_plugin as tgp
from conftest import BUILD, REPO

TEAM_TEST = BUILD / "tests" / "test_cuda_team"


def test_host_team_unit():
    if not TEAM_TEST.exists():
        pytest.skip(f"{TEAM_TEST} is not built (run `make build-only`)")
    proc = subprocess.run([str(TEAM_TEST)], capture_output=True, text=True, timeout=120, cwd=REPO)
    m = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m and proc.returncode == 0 and m.group(2) == "0", proc.stdout[-3000:] + proc.stderr[-2000:]
    assert int(m.group(1)) >= 15, proc.stdout


@pytest.fixture(scope="session")
def mock_plugin(cuda_mock_plugin):
    """The plugin built against the CPU emulation (conftest.py builds it once per session)."""
    return cuda_mock_plugin


# (scenario, extra environment): team sizes 1 (the caller alone), 3 and 4 even on 2 cores.
CASES = [
    ("contract", {"ACCELAES_CUDA_HOST_THREADS": "4"}),
    ("contract", {"ACCELAES_CUDA_HOST_THREADS": "3", "ACCELAES_CUDA_CHUNK_KB": "64", "MOCK_CUDA_MODE": "eager"}),
    ("contract", {"ACCELAES_CUDA_HOST_THREADS": "1", "ACCELAES_CUDA_CHUNK_KB": "64"}),
    ("contract", {"ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64", "ACCELAES_CUDA_NT_KB": "0",
                  "ACCELAES_CUDA_STREAMS": "2", "ACCELAES_CUDA_CTR": "full"}),
    ("batch", {"ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64"}),
    ("batch", {"ACCELAES_CUDA_HOST_THREADS": "4", "MOCK_CUDA_MODE": "eager", "ACCELAES_CUDA_STREAMS": "4"}),
    ("threads", {"ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "1024"}),
]
# fail-after: 2 stops while the ring fills, 5 once it is full (a chunk is copied out and the next
# one staged into its buffer in one step)
for _after in ("2", "5"):
    for _ctr in ("keystream", "full"):
        CASES.append(("fail", {"ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64",
                               "ACCELAES_CUDA_FAIL_AFTER": _after, "ACCELAES_CUDA_CTR": _ctr}))
CASES.append(("fail", {"ACCELAES_CUDA_HOST_THREADS": "1", "ACCELAES_CUDA_CHUNK_KB": "64",
                       "ACCELAES_CUDA_FAIL_AFTER": "5", "MOCK_CUDA_MODE": "eager"}))


@pytest.mark.parametrize("scenario,env", CASES,
                         ids=[f"{s}-" + "-".join(f"{k.split('_')[-1].lower()}={v}" for k, v in e.items())
                              for s, e in CASES])
def test_plugin_pipeline_on_cpu_emulation(mock_plugin, scenario, env):
    full_env = {"MOCK_CUDA_MODE": "lazy", **env}
    r = tgp.run_child(mock_plugin, scenario, full_env, timeout=240)
    assert r.returncode == 0 and " 0 failed" in r.stdout, (r.stdout[-4000:] + r.stderr[-2000:])
    assert "mock CUDA device" in r.stdout, r.stdout[-2000:]
    # shutdown ran, and every device buffer (data, round keys, CBC chains) was zero when freed
    assert "SHUTDOWN-DONE" in r.stdout and "MOCK-UNWIPED" not in r.stdout, r.stdout[-3000:]
