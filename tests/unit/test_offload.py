"""tests/unit/test_offload.py: proof that the bytes really go through the provider's offload machinery:
workloads run under a fresh ACCELAES_SHM_NAME must show up in `build/accelaes-stat --json`."""

import json
import os
import subprocess

import pytest

from conftest import MODULES, PROVIDER, private_segment

pytestmark = pytest.mark.usefixtures("require_provider")

PATHS = ("inline", "split", "batch", "gpu")


@pytest.fixture
def fresh_env(openssl_env):
    """The session environment with a segment name of this test's own, removed afterwards."""
    yield from private_segment(openssl_env, "offload")


def stat(stat_tool, env):
    proc = subprocess.run([str(stat_tool), "--json"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, f"accelaes-stat --json exited {proc.returncode}: {proc.stderr[-800:]}"
    doc = json.loads(proc.stdout)
    assert doc.get("segment") == env["ACCELAES_SHM_NAME"], f"stat read {doc.get('segment')}"
    return doc


def path_bytes(doc):
    totals = doc["totals"]
    return {p: totals[f"{p}_bytes"] for p in PATHS}


def test_offload_counts_cli_bytes(stat_tool, openssl_bin, fresh_env, tmp_path):
    """`openssl enc` with only the provider loaded: every byte it encrypts is counted."""
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(4 << 20))
    total = 0
    for cipher, keylen, iv in (("-aes-128-ctr", 16, "00" * 16), ("-aes-256-cbc", 32, "11" * 16),
                               ("-aes-192-ecb", 24, None)):
        out = tmp_path / "out.bin"
        args = [openssl_bin, "enc", "-provider", PROVIDER, "-e", cipher, "-K", "ab" * keylen]
        args += (["-iv", iv] if iv else []) + ["-in", str(data), "-out", str(out)]
        proc = subprocess.run(args, env=fresh_env, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        total += out.stat().st_size
    doc = stat(stat_tool, fresh_env)
    counted = path_bytes(doc)
    print(f"bytes per path for {total} bytes of work: {counted}")
    assert sum(counted.values()) >= total, \
        f"accelaes-stat counted {sum(counted.values())} bytes ({counted}), the workload was {total}"
    assert len(doc["processes"]) >= 3, f"one process entry per openssl run: {doc['processes']}"


SPLIT_WORKLOAD = '''
lc = evp.LibCtx(("default", "accelaes"), modules_dir=MODDIR)
for name in ("AES-128-CTR", "AES-256-ECB", "AES-192-CBC"):
    c = lc.fetch(name, "accelaes")
    for enc in (1, 0):
        if name.endswith("CBC") and enc:
            continue                  # CBC encryption is serial: never split
        ctx = evp.CipherCtx(c, bytes(c.key_length), None if "ECB" in name else bytes(16), enc, 0)
        for i in range(8):
            ctx.update(bytes(4 << 20))
        ctx.final()
emit({"bytes": 5 * 8 * (4 << 20)})
'''


def test_offload_large_requests_split(stat_tool, fresh_env):
    """Large ECB, CTR and CBC-decrypt requests are split over the CPU units: split bytes are
    counted, and the units report the work they served."""
    env = dict(fresh_env)
    env["ACCELAES_SPLIT_MIN"] = "65536"
    env["ACCELAES_BACKEND"] = "cpu"
    import evp
    rc, results, stderr = evp.run_isolated(f"MODDIR={str(MODULES)!r}\n" + SPLIT_WORKLOAD, env=env)
    assert rc == 0 and results, f"workload failed (rc={rc}): {stderr[-800:]}"
    doc = stat(stat_tool, env)
    counted = path_bytes(doc)
    work = results[-1]["bytes"]
    print(f"bytes per path for {work} bytes of work: {counted}")
    assert sum(counted.values()) >= work, counted
    if os.cpu_count() < 2 or len([u for u in doc["units"] if u["kind"] == "cpu"]) < 2:
        pytest.skip("one CPU unit: nothing to split over")
    assert counted["split"] > 0, f"no request was split: {counted}"
    served = [(u["id"], u["requests"], u["bytes"]) for u in doc["units"] if u["kind"] == "cpu"]
    assert sum(r for _, r, _ in served) > 0, f"no CPU unit reports requests served: {served}"
    assert sum(b for _, _, b in served) > 0, \
        f"CPU units served requests but report no bytes (id, requests, bytes): {served}"
