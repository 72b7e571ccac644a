"""tests/test_offload.py: proof that the bytes really go through the provider's offload machinery:
a workload run under a fresh ACCELAES_SHM_NAME must show up in `build/accelaes-stat --json` totals."""

import json
import os
import secrets
import subprocess

import pytest

from conftest import PROVIDER

pytestmark = pytest.mark.usefixtures("require_provider")

PATHS = ("inline", "split", "batch", "gpu")


def path_bytes(doc):
    """Bytes per path from the totals of `accelaes-stat --json`, read leniently: a "totals"
    object holding, per path, either a number of bytes or an object with a "bytes" field
    (or "<path>_bytes" / "bytes_<path>" keys)."""
    totals = doc.get("totals", doc.get("total"))
    assert isinstance(totals, dict), f"no totals object in {sorted(doc)}"
    found = {}
    for path in PATHS:
        for key in (path, f"{path}_bytes", f"bytes_{path}"):
            v = totals.get(key)
            if isinstance(v, dict):
                v = v.get("bytes")
            if isinstance(v, (int, float)):
                found[path] = int(v)
                break
    if not found and isinstance(totals.get("bytes"), dict):
        found = {p: int(totals["bytes"][p]) for p in PATHS if p in totals["bytes"]}
    assert found, f"no per-path byte totals found in {totals}"
    return found


def stat(stat_tool, env):
    proc = subprocess.run([str(stat_tool), "--json"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, f"accelaes-stat --json exited {proc.returncode}: {proc.stderr[-800:]}"
    return json.loads(proc.stdout)


def test_offload_counts_bytes(stat_tool, openssl_bin, openssl_env, tmp_path):
    if PROVIDER != "accelaes":
        pytest.skip("counters belong to accelaes")
    env = dict(openssl_env)
    env["ACCELAES_SHM_NAME"] = f"/accelaes-test-{os.getpid()}-{secrets.token_hex(4)}"
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(8 << 20))
    total = 0
    try:
        for cipher, extra in (("-aes-128-ctr", ["-iv", "00" * 16]), ("-aes-256-cbc", ["-iv", "11" * 16]),
                              ("-aes-192-ecb", [])):
            out = tmp_path / "out.bin"
            proc = subprocess.run([openssl_bin, "enc", "-provider", PROVIDER, "-e", cipher,
                                   "-K", "ab" * (16 if "128" in cipher else 24 if "192" in cipher else 32)]
                                  + extra + ["-in", str(data), "-out", str(out)],
                                  env=env, capture_output=True, timeout=120)
            assert proc.returncode == 0, proc.stderr.decode()
            total += out.stat().st_size
        counted = path_bytes(stat(stat_tool, env))
        print(f"bytes per path for {total} bytes of work: {counted}")
        assert sum(counted.values()) >= total, \
            f"accelaes-stat counted {sum(counted.values())} bytes ({counted}), the workload was {total}"
    finally:
        seg = "/dev/shm" + env["ACCELAES_SHM_NAME"]
        if os.path.exists(seg):
            os.unlink(seg)
