"""tests/unit/test_gpu_bench_harness.py: issue #16's measurement harness, run here on the CUDA plugin built against the
CPU emulation (conftest.cuda_mock_plugin): bench/scripts/gpu_multi.py (N processes through EVP, provider=accelaes) and
bench/scripts/gpu_issue16.sh (the device session and its summary line). Nothing here measures anything: the checks are
that the output parses, every worker's correctness checks ran and passed, accelaes-stat counted the bytes on the
GPU path, a run where nothing reached the GPU is a failure, and the summary line has the issue's fields and says
that an emulation is not a measurement."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, REPO

MULTI = REPO / "bench" / "scripts" / "gpu_multi.py"
ISSUE16 = REPO / "bench" / "scripts" / "gpu_issue16.sh"
ROW = re.compile(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+(\d+)\s+(ok|FAILED.*)$")
NUM = r"(\d+\.\d+)"
SUMMARY = re.compile(rf"^(?P<pre>(?:[a-z-]+: )*)accelaes-gpu-summary: ctr={NUM} ecb={NUM} cbcdec={NUM} GB/s "
                     rf"cpu={NUM} ns/B multi8={NUM} multi1={NUM}$")


@pytest.fixture(scope="module")
def harness(require_provider, stat_tool):
    for f in (BUILD / "accelaes-fakegpu.so", BUILD / "bench" / "gpu_bench"):
        if not f.exists():
            pytest.skip(f"{f} is not built (run `make build-only`)")


def multi(plugin, tmp_path, *args, env=None, timeout=600):
    out = tmp_path / "multi.jsonl"
    cmd = [sys.executable, str(MULTI), "--plugin", str(plugin), "--json", str(out), "--timeout", "240",
           "--build", str(BUILD), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ))
    docs = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return p, [r for d in docs for r in d["runs"]]


def test_gpu_multi_on_emulation(harness, cuda_mock_plugin, tmp_path):
    """2 processes x 2 requests x 4 MiB of each op: every check ran and passed, the bytes went through accelaes
    and reached the GPU path, the device is named as the emulation it is, and the table and JSON agree."""
    segments = set(os.listdir("/dev/shm"))
    p, runs = multi(cuda_mock_plugin, tmp_path, "--procs", "2", "--requests", "2", "--size", "4M",
                    "--op", "ctr,ecb,cbcdec")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    assert [r["op"] for r in runs] == ["ctr", "ecb", "cbcdec"], runs
    rows = [ROW.match(line) for line in p.stdout.splitlines() if ROW.match(line)]
    assert len(rows) == 3 and all(m.group(11) == "ok" for m in rows), p.stdout
    for r, m in zip(runs, rows):
        assert r["ok"] and r["problems"] == [] and r["procs"] == 2 and r["latencies"] == 4, r
        assert "mock CUDA device" in r["device"] and r["emulation"] is True, r["device"]
        assert f"{r['aggregate_gbps']:.2f}" == m.group(2) and r["aggregate_gbps"] > 0
        assert 0 < r["p50_ms"] <= r["p99_ms"] and r["cpu_ns_per_byte"] > 0 and r["gpu_share"] > 0
        if not shutil.which("nvidia-smi"):
            assert r["gpu_mem"].startswith("n/a (nvidia-smi not found"), r["gpu_mem"]
        assert len({w["pid"] for w in r["processes"]}) == 2
        for w in r["processes"]:
            assert w["first_ok"] and w["last_ok"] and w["bad_spots"] == 0 and w["spots"] >= 2 * 2, w
            assert w["accelaes_bytes"] == w["asked_bytes"] == 2 * (4 << 20) + (1 << 20), w
            assert w["gpu_bytes"] > 0, w
    assert "EMULATION, not a measurement" in p.stdout
    assert not [f for f in set(os.listdir("/dev/shm")) - segments if f.startswith("accelaes-gpumulti-")], \
        "a run's scheduler segment was left behind"


def test_gpu_multi_fresh_buffers(harness, cuda_mock_plugin, tmp_path):
    """Buffers malloc'd anew for every request, the previous ones freed first: the whole and sampled checks of
    every request still pass (the emulation has no registration to go stale, the real plugin does)."""
    p, runs = multi(cuda_mock_plugin, tmp_path, "--procs", "1", "--requests", "4", "--size", "2M",
                    "--op", "cbcdec", "--buffers", "fresh")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    (r,) = runs
    assert r["ok"] and r["buffers"] == "fresh" and r["processes"][0]["spots"] >= 4 * 2, r
    assert r["processes"][0]["buffers"] == "fresh", "the worker did not run with fresh buffers"


def test_gpu_multi_fails_when_nothing_reaches_the_gpu(harness, tmp_path):
    """The fake plugin failing every run: the provider does the work on the CPU (correct bytes), and the harness
    must call that a failed run, not a GPU figure."""
    p, runs = multi(BUILD / "accelaes-fakegpu.so", tmp_path, "--procs", "1", "--requests", "1", "--size", "2M",
                    "--env", "ACCELAES_FAKEGPU_FAIL=run")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    (r,) = runs
    assert not r["ok"] and r["gpu_share"] == 0 and any("no byte went to the GPU" in x for x in r["problems"]), r
    assert r["processes"][0]["first_ok"] and r["processes"][0]["cpu_bytes"] > 0, r
    assert re.search(r"^\s+1\s.*FAILED: no byte went to the GPU", p.stdout, re.M), p.stdout


def test_issue16_part1_summary_is_marked_emulation(harness, cuda_mock_plugin, tmp_path):
    """part1 of the device session on the emulation, small: its files (at most 8, what the device tool brings
    back), then the summary line with the issue's fields, marked as an emulation and never bare."""
    env = dict(os.environ, ISSUE16_BUILD=str(BUILD), ISSUE16_DIR=str(tmp_path / "r"),
               ISSUE16_PLUGIN=str(cuda_mock_plugin), ISSUE16_MIB="1", ISSUE16_REQUESTS="1", ISSUE16_DMA="staged",
               ISSUE16_ROUNDS="1", ISSUE16_TESTS="", ISSUE16_TIMEOUT="240", OUT="")
    p = subprocess.run(["sh", str(ISSUE16), "part1"], capture_output=True, text=True, timeout=900, env=env,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    files = sorted(os.listdir(tmp_path / "r"))
    assert files == ["part1-bench.txt", "part1-env.txt", "part1-multi.jsonl", "part1-multi.txt",
                     "part1-summary.txt"], files
    lines = p.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("accelaes-gpu-summary")], "a bare summary line from an emulation"
    found = [SUMMARY.match(ln) for ln in lines if SUMMARY.match(ln)]
    assert len(found) == 1, p.stdout[-3000:]
    assert found[0].group("pre").startswith("emulation: ") and "not-as-specified: " in found[0].group("pre")
    assert all(float(x) > 0 for x in found[0].groups()[1:]), found[0].group(0)
    assert "EMULATION: not a measurement" in p.stdout and "dma=staged" in p.stdout
    again = subprocess.run(["sh", str(ISSUE16), "summary"], capture_output=True, text=True, timeout=60, env=env)
    assert found[0].group(0) in again.stdout.splitlines(), again.stdout + again.stderr


def test_issue16_summary_rules(tmp_path):
    """The summary from result lines alone: the default DMA mode's 256 MiB AES-128 rows (median over rounds),
    cpu the worst of the three, multi from the CTR runs without MPS; bare only for a real device with every check
    passed, "failed-checks:" as soon as one failed."""
    def bench(op, gbps, cpu, dma="default", ok=1):
        return (f"gpu-bench-result: op={op} bits=128 mib=256 streams=1 gbps={gbps} median_gbps={gbps} "
                f"cpu_ns={cpu} dma={dma} buffers=reused identical={ok}\n")

    def mrun(procs, gbps, mps=False, ok=True):
        return "gpu-multi-result: " + json.dumps({
            "op": "ctr", "procs": procs, "mps": mps, "dma": "default", "buffers": "reuse", "ok": ok,
            "aggregate_gbps": gbps, "device": "NVIDIA H100 80GB HBM3", "gpu_mem": {"mean_mib": 500},
            "cpu_ns_per_byte": 0.02, "waits": 0, "gpu_share": 1.0, "p50_ms": 6.0, "p99_ms": 7.0}) + "\n"
    (tmp_path / "a.txt").write_text(
        "gpu-bench-device: NVIDIA H100 80GB HBM3\n" + bench("CTR", 46, 0.02) + bench("CTR", 50, 0.03)
        + bench("ECB-enc", 47, 0.025) + bench("CBC-dec", 45, 0.028) + bench("CTR", 99, 0.001, dma="pageable"))
    (tmp_path / "b.txt").write_text(mrun(1, 45.5) + mrun(8, 48.25) + mrun(8, 10, mps=True))
    env = dict(os.environ, ISSUE16_DIR=str(tmp_path / "none"))
    p = subprocess.run(["sh", str(ISSUE16), "summary", str(tmp_path)], capture_output=True, text=True, timeout=60,
                       env=env)
    assert ("accelaes-gpu-summary: ctr=48.00 ecb=47.00 cbcdec=45.00 GB/s cpu=0.028 ns/B multi8=48.25 multi1=45.50"
            in p.stdout.splitlines()), p.stdout + p.stderr
    assert "accelaes-gpu-summary-mps: multi8=10.00 multi1=n/a" in p.stdout
    (tmp_path / "c.txt").write_text(bench("ECB-enc", 47, 0.025, ok=0))
    p = subprocess.run(["sh", str(ISSUE16), "summary", str(tmp_path)], capture_output=True, text=True, timeout=60,
                       env=env)
    assert re.search(r"^failed-checks: accelaes-gpu-summary: ", p.stdout, re.M), p.stdout


FAKE_MPS_CONTROL = """#!/bin/sh
# A stand-in for nvidia-cuda-mps-control: -d starts a daemon and its server (scripts under the real names, so that
# /proc/PID/comm reads as theirs), a line "quit" on stdin stops them.
d=$CUDA_MPS_PIPE_DIRECTORY
case ${1:-} in
-d) [ -d "$d" ] && [ -d "$CUDA_MPS_LOG_DIRECTORY" ] || exit 3
    setsid "$0" daemon </dev/null >/dev/null 2>&1 &
    while [ ! -e "$d/control" ]; do sleep 0.05; done ;;
daemon) "$(dirname "$0")/nvidia-cuda-mps-server" &
    : >"$d/control"
    while [ ! -e "$d/quit" ]; do sleep 0.05; done
    kill $! ;;
*) read -r cmd && [ "$cmd" = quit ] && : >"$d/quit" ;;
esac
"""


def mps_processes():
    found = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/comm") as f, open(f"/proc/{d}/environ", "rb") as e:
                if f.read().startswith("nvidia-cuda-mps") and b"accelaes-mps-" in e.read():
                    found.append(int(d))
        except (OSError, ValueError):
            pass
    return found


def test_gpu_multi_mps_daemon_started_and_stopped(harness, cuda_mock_plugin, tmp_path):
    """--mps against a stand-in daemon: the workers run with its pipe directory, the run sees its server, and
    afterwards none of its processes and none of its private 0700 directory is left."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-cuda-mps-control").write_text(FAKE_MPS_CONTROL)
    (fake / "nvidia-cuda-mps-server").write_text("#!/bin/sh\nwhile :; do sleep 0.05; done\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", TMPDIR=str(tmp))
    assert not mps_processes()
    p, runs = multi(cuda_mock_plugin, tmp_path, "--procs", "1", "--requests", "1", "--size", "1M", "--mps",
                    env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    (r,) = runs
    assert r["ok"] and r["mps"] is True and r["problems"] == [], r
    assert "mps=on" in p.stdout
    assert not mps_processes(), "the MPS stand-in is still running"
    assert os.listdir(tmp) == [], os.listdir(tmp)
