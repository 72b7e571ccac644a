"""tests/unit/test_cuda_host_pipeline.py: the CUDA plugin's host side, tested where no GPU is.

1. build/tests/test_cuda_team: the host thread team and its copy / XOR loops (accel/cuda/host_team.cu).
2. The plugin's real runtime.cu + pipeline.cu + host_team.cu compiled by g++ against a CPU emulation
   of the CUDA calls and kernels (tests/cuda_mock/), then driven through the ABI scenarios of
   tests/unit/test_gpu_plugin.py (contract, batch, threads, fail-after) with the host team on and off.
   MOCK_CUDA_MODE=lazy runs queued GPU work only when the host waits for it (catches a host that reads
   or refills a staging buffer too early), eager runs it at once (catches one that fills it too late),
   reverse runs the latest stream first at each wait (catches output landing out of order).
3. The same scenarios under each ACCELAES_CUDA_DMA mode (accel/cuda/direct.cu), with what the emulation
   saw (the child's MOCK-STATS line) checked: direct modes copy the callers' memory by DMA only while it
   is registered (no MOCK-UNPINNED), stage nothing and start no host team; register mode leaves no
   registration after any run(), every mode none after shutdown; no wait spins; a kernel that fails
   with a sticky error (MOCK_CUDA_FAIL_KERNEL) still leaves the completion contract kept.
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


# (scenario, extra environment): the staged pipeline with team sizes 1 (the caller alone), 3 and 4 even on 2 cores.
STAGED = {"ACCELAES_CUDA_DMA": "staged"}
CASES = [
    ("contract", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4"}),
    ("contract", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "3", "ACCELAES_CUDA_CHUNK_KB": "64",
                  "MOCK_CUDA_MODE": "eager"}),
    ("contract", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "1", "ACCELAES_CUDA_CHUNK_KB": "64"}),
    ("contract", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64",
                  "ACCELAES_CUDA_NT_KB": "0", "ACCELAES_CUDA_STREAMS": "2", "ACCELAES_CUDA_CTR": "full"}),
    ("batch", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64"}),
    ("batch", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "MOCK_CUDA_MODE": "eager", "ACCELAES_CUDA_STREAMS": "4"}),
    ("threads", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "1024"}),
    ("fail", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64",
              "MOCK_CUDA_MODE": "reverse", "MOCK_CUDA_FAIL_KERNEL": "6"}),
]
# fail-after: 2 stops while the ring fills, 5 once it is full (a chunk is copied out and the next
# one staged into its buffer in one step)
for _after in ("2", "5"):
    for _ctr in ("keystream", "full"):
        CASES.append(("fail", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "4", "ACCELAES_CUDA_CHUNK_KB": "64",
                               "ACCELAES_CUDA_FAIL_AFTER": _after, "ACCELAES_CUDA_CTR": _ctr}))
CASES.append(("fail", {**STAGED, "ACCELAES_CUDA_HOST_THREADS": "1", "ACCELAES_CUDA_CHUNK_KB": "64",
                       "ACCELAES_CUDA_FAIL_AFTER": "5", "MOCK_CUDA_MODE": "eager"}))

# The direct path: every scenario under each DMA mode (pageable: offered by the emulation as HMM), in
# lazy, eager and reverse order; DIRECT_MIN_KB=0 sends every job direct, the default only the large ones.
ALL_DIRECT = {"ACCELAES_CUDA_DIRECT_MIN_KB": "0", "ACCELAES_CUDA_HOST_THREADS": "4"}
for _dma in ("register", "cache", "pageable"):
    _d = {"ACCELAES_CUDA_DMA": _dma, "MOCK_CUDA_PAGEABLE": "hmm"}
    CASES += [
        ("contract", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "64"}),
        ("contract", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "64", "MOCK_CUDA_MODE": "eager"}),
        ("contract", {**_d, **ALL_DIRECT, "MOCK_CUDA_MODE": "reverse", "ACCELAES_CUDA_STREAMS": "4"}),
        ("contract", {**_d, "ACCELAES_CUDA_HOST_THREADS": "4"}),
        ("batch", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "64"}),
        ("batch", {**_d, "MOCK_CUDA_MODE": "eager", "ACCELAES_CUDA_STREAMS": "4"}),
        ("threads", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "1024", "MOCK_CUDA_MODE": "reverse"}),
        ("readonly", {**_d, **ALL_DIRECT}),
        ("readonly", {**_d, **ALL_DIRECT, "MOCK_CUDA_RO_REGISTER": "0", "MOCK_CUDA_MODE": "eager"}),
    ]
    for _after, _mode in (("2", "lazy"), ("5", "lazy"), ("5", "eager"), ("5", "reverse")):
        CASES.append(("fail", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "64", "ACCELAES_CUDA_FAIL_AFTER": _after,
                               "MOCK_CUDA_MODE": _mode}))
    # A sticky error part-way: chunks that landed count, no more. Kernel 6 is the second chunk of the
    # first 3 MiB run (1-4: the 16 B and 64 KiB runs), failing while a third is queued, which reverse
    # order runs first: its output must not land. Kernel 8 fails once the ring is full.
    for _k, _mode in (("8", "lazy"), ("8", "eager"), ("6", "reverse"), ("8", "reverse")):
        CASES.append(("fail", {**_d, **ALL_DIRECT, "ACCELAES_CUDA_CHUNK_KB": "64", "MOCK_CUDA_FAIL_KERNEL": _k,
                               "MOCK_CUDA_MODE": _mode}))
# auto: pageable only where the device reads through the host's page tables; pageable asked where it
# is not offered: registered copies
CASES += [
    ("contract", {"ACCELAES_CUDA_DMA": "auto", "MOCK_CUDA_PAGEABLE": "ats", **ALL_DIRECT}),
    ("contract", {"ACCELAES_CUDA_DMA": "auto", "MOCK_CUDA_PAGEABLE": "hmm", **ALL_DIRECT}),
    ("contract", {"ACCELAES_CUDA_DMA": "pageable", **ALL_DIRECT}),
]


def effective_dma(env):
    dma, pageable = env.get("ACCELAES_CUDA_DMA", "auto"), env.get("MOCK_CUDA_PAGEABLE")
    if dma == "auto":
        return "pageable" if pageable == "ats" else "register"
    return "register" if dma == "pageable" and pageable not in ("hmm", "ats") else dma


def mock_stats(stdout):
    line = [ln for ln in stdout.splitlines() if ln.startswith("MOCK-STATS:")]
    assert len(line) == 1, stdout[-3000:]
    return {k: int(v) for k, v in (f.split("=") for f in line[0].split()[1:])}


def check_dma(scenario, env, st, out):
    """What the emulation saw must be what the DMA mode promises."""
    dma = effective_dma(env)
    assert st["live_regs"] == 0, f"registrations left after shutdown: {st}"
    assert st["spin_waits"] == 0, f"waits that spin instead of blocking: {st}"
    # waits block through blocking events, never by changing the device's flags: the runtime API shares the
    # primary context with the program's own CUDA work, whose waits must stay as the program set them
    assert st["dev_flags"] == 0, f"the plugin changed the device flags: {st}"
    if scenario in ("fail", "readonly"):
        # these runs use two slots of the four: a slot's device memory (its in/out buffers per stream, and
        # under 1 MiB of round keys, piece lists and chaining values) is made on its first run, the others'
        # never (made at start-up, all four: every case here fails)
        chunk = int(env.get("ACCELAES_CUDA_CHUNK_KB", "4096")) << 10
        one_slot = int(env.get("ACCELAES_CUDA_STREAMS", "3")) * 2 * chunk + (1 << 20)
        assert st["dev_peak"] <= 2 * one_slot, f"device memory beyond two slots': {st}"
    for bad in ("MOCK-UNPINNED", "MOCK-RO-WRITE", "MOCK-HOSTPTR"):
        assert bad not in out, out[-3000:]
    if dma == "staged":
        assert st["h2d_reg"] == st["d2h_reg"] == st["kern_host"] == 0, st
        if scenario == "contract" and env.get("ACCELAES_CUDA_HOST_THREADS", "1") != "1":
            assert st["threads_end"] > st["threads_start"], f"the staged path started no host team: {st}"
        return
    if dma == "register" and scenario != "threads":   # (threads: other callers' runs are in flight)
        assert st["max_live_regs_after_run"] == 0, f"a run() left registrations: {st}"
    assert (st["kern_host"] > 0) == (dma == "pageable"), f"kernels on callers' memory iff pageable: {st}"
    moved = st["d2h_reg"] + st["kern_host"]
    assert moved > 0, f"nothing went direct: {st}"
    # (batch under the cache: a group of up to 1024 jobs asks for up to 2048 ranges, more than the cache's 256
    # entries; what it cannot hold and cannot register beside its entries goes staged, still correct)
    if env.get("ACCELAES_CUDA_DIRECT_MIN_KB") == "0" and env.get("MOCK_CUDA_RO_REGISTER") != "0" \
            and not (scenario == "batch" and dma == "cache"):
        # every job direct: no staging buffer carried data, no host team started (the registration
        # cache's one monitor thread aside)
        monitor = 1 if dma == "cache" else 0
        assert st["d2h_pinned_blocks"] == 0 and st["threads_end"] == st["threads_start"] + monitor, st
    if scenario == "readonly" and env.get("MOCK_CUDA_RO_REGISTER") == "0" and dma != "pageable":
        assert st["d2h_pinned_blocks"] > 0, f"read-only inputs the device cannot pin were not staged: {st}"


@pytest.mark.parametrize("scenario,env", CASES,
                         ids=[f"{s}-" + "-".join(f"{k.split('_')[-1].lower()}={v}" for k, v in e.items())
                              for s, e in CASES])
def test_plugin_pipeline_on_cpu_emulation(mock_plugin, scenario, env):
    full_env = {"MOCK_CUDA_MODE": "lazy", **env}
    r = tgp.run_child(mock_plugin, scenario, full_env, timeout=240)
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("CHECK-FAIL")]
    if env.get("MOCK_CUDA_FAIL_KERNEL") == "6":
        # the failing chunk runs before the one ahead of it could, and the error is sticky: no run gets
        # part-way, so that one check cannot pass; every other must
        fails = [ln for ln in fails if "at least one run stopped part-way" not in ln]
    assert not fails and "plugin contract:" in r.stdout and r.stderr.count("Traceback") == 0, (
        r.stdout[-4000:] + r.stderr[-2000:])
    assert "mock CUDA device" in r.stdout, r.stdout[-2000:]
    # shutdown ran, and every device buffer (data, round keys, CBC chains) was zero when freed
    assert "SHUTDOWN-DONE" in r.stdout and "MOCK-UNWIPED" not in r.stdout, r.stdout[-3000:]
    check_dma(scenario, env, mock_stats(r.stdout), r.stdout)
