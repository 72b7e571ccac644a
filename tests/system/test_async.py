"""tests/system/test_async.py: `openssl speed -async_jobs` through the provider: it runs to the end
(no job left waiting), and with 16 jobs the bytes really went through the multi-buffer batch,
as build/accelaes-stat --json reports for this test's own segment. GCM and XTS (which do not
batch) run to the end with 16 jobs as well, their bytes counted."""

import glob
import json
import os
import re
import secrets
import subprocess

import pytest

from conftest import MODULE, STAT_TOOL, require_lanes


@pytest.fixture
def seg_env(openssl_env):
    """This test's own segment (ACCELAES_SHM_NAME=/accelaes-test-<unique>), removed afterwards."""
    for need in (MODULE, STAT_TOOL):
        if not need.exists():
            pytest.skip(f"{need} is not built (run `make build-only`)")
    require_lanes()
    name = f"/accelaes-test-async-{os.getpid()}-{secrets.token_hex(4)}"
    env = dict(openssl_env, ACCELAES_SHM_NAME=name)   # OPENSSL_MODULES as openssl_env sets it
    yield env
    for path in glob.glob("/dev/shm" + name + "*"):
        try:
            os.unlink(path)
        except OSError:
            pass


def speed(env, jobs, nbytes, cipher="AES-128-CBC"):
    cmd = ["openssl", "speed", "-provider", "accelaes", "-provider", "default", "-async_jobs", str(jobs),
           "-evp", cipher.lower(), "-seconds", "1", "-bytes", str(nbytes)]
    # The timeout is a hang guard (a job left waiting for ever), not a performance claim.
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert re.search(rf"^{cipher}\s+[\d.]+k", proc.stdout, re.M), proc.stdout[-2000:]
    return proc


def totals(env):
    proc = subprocess.run([str(STAT_TOOL), "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["totals"]


def test_speed_async_16_batches(seg_env):
    speed(seg_env, 16, 16384)
    t = totals(seg_env)
    assert t["batch_bytes"] > 0 and t["batch_requests"] > 0, t


def test_speed_async_1_finishes(seg_env):
    # A lone job never waits for companions that do not come: speed must run to the end.
    speed(seg_env, 1, 16384)


def test_speed_async_small_requests_not_batched(seg_env):
    # Below the batch minimum every request runs inline, with 16 jobs in flight too.
    speed(seg_env, 16, 256)
    t = totals(seg_env)
    assert t["batch_bytes"] == 0 and t["inline_bytes"] > 0, t


@pytest.mark.parametrize("cipher", ["AES-128-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS"])
def test_speed_async_16_gcm_xts_finish(seg_env, cipher):
    # Neither batches (ipsec-mb runs a GCM job at once and has no XTS): 16 jobs must still run to
    # the end, every byte through accelaes.
    speed(seg_env, 16, 16384, cipher)
    t = totals(seg_env)
    assert t["inline_bytes"] + t["batch_bytes"] > 0, t
