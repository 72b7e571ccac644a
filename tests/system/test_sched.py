"""tests/system/test_sched.py: the device-slot scheduler across processes, and accelaes-stat.

Runs the C unit tests (build/tests/test_sched*), then drives `test_sched_mp worker ...`
processes: kill -9 of a holder, FIFO order across processes, a waiter killed in the queue,
counters per path, and accelaes-stat --json on live, absent and garbage segments. Every test
uses a segment name of its own (ACCELAES_SHM_NAME) and removes it afterwards.
"""

import glob
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD

TESTS = BUILD / "tests"
WORKER = TESTS / "test_sched_mp"
STAT = BUILD / "accelaes-stat"


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")


@pytest.fixture
def seg():
    """(name, env) for a fresh segment; the segment files are removed afterwards."""
    name = f"/accelaes-test-sched-{os.getpid()}-{secrets.token_hex(4)}"
    env = dict(os.environ)
    env["ACCELAES_SHM_NAME"] = name
    yield name, env
    for path in glob.glob("/dev/shm" + name + "*"):
        try:
            os.unlink(path)
        except OSError:
            pass


def stat(env, *extra, rc=0):
    need(STAT)
    proc = subprocess.run([str(STAT), "--json", *extra], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, f"accelaes-stat exited {proc.returncode}, not {rc}: {proc.stderr}"
    return json.loads(proc.stdout)


def run_worker(env, *args, timeout=60):
    need(WORKER)
    proc = subprocess.run([str(WORKER), "worker", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"worker {args} exited {proc.returncode}: {proc.stdout} {proc.stderr}"
    return proc.stdout


def start_worker(env, *args):
    need(WORKER)
    return subprocess.Popen([str(WORKER), "worker", *map(str, args)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(pred, what, timeout=20.0):
    """Poll until pred() is true; the timeout is a hang guard, not a performance claim."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def cpu_count():
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize("binary", ["test_sched", "test_sched_mp", "test_sched_pool"])
def test_c_unit_tests(binary):
    path = TESTS / binary
    need(path)
    args = [str(path)] + (["--no-latency"] if binary == "test_sched_pool" else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    m = re.search(r"^(\d+) passed, 0 failed$", proc.stdout, re.M)
    assert m and int(m.group(1)) > 0, proc.stdout[-3000:]


def test_stat_without_segment(seg):
    """No segment at the name is not "no traffic": exit 3, the reason on stderr, null totals (never zeros)."""
    name, env = seg
    data = stat(env, rc=3)
    assert data["shared"] is False and data["exists"] is False and data["segment"] == name
    assert data["units"] is None and data["processes"] is None and data["totals"] is None
    assert "no segment" in data["error"]
    text = subprocess.run([str(STAT)], env=env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 3 and "no segment" in text.stderr and name in text.stderr, text


def test_stat_bad_arguments():
    need(STAT)
    proc = subprocess.run([str(STAT), "--bogus"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_counters_land_in_their_path(seg):
    name, env = seg
    run_worker(env, "count", 1_000_000, 2_000_000, 3_000_000, 4_000_000, 5)
    data = stat(env)
    assert data["shared"] is True
    t = data["totals"]
    assert (t["inline_bytes"], t["inline_requests"]) == (1_000_000, 62_500)
    assert (t["split_bytes"], t["batch_bytes"], t["gpu_bytes"]) == (2_000_000, 3_000_000, 4_000_000)
    assert (t["split_requests"], t["batch_requests"], t["gpu_requests"]) == (1, 1, 1)
    assert t["gpu_fallbacks"] == 5 and t["recoveries"] == 0 and t["waits"] == 0
    procs = data["processes"]
    assert len(procs) == 1 and procs[0]["alive"] is False
    assert procs[0]["inline_bytes"] == 1_000_000 and procs[0]["gpu_bytes"] == 4_000_000
    cpus = [u for u in data["units"] if u["kind"] == "cpu"]
    assert len(cpus) == cpu_count()
    assert sorted(u["cpu"] for u in cpus) == sorted(os.sched_getaffinity(0))
    assert all(u["state"] == "idle" for u in data["units"])


def test_live_process_counts(seg):
    """A live process: split counts are published at once, inline ones lag by at most 64 KiB
    (the documented staleness) and are exact once it exits; exited slots stay listed."""
    name, env = seg
    w = start_worker(env, "count", 1_000_000, 2_000_000, 0, 0, 0, "stay")
    try:
        assert w.stdout.readline().strip() == "counted"
        data = stat(env)
        me = [p for p in data["processes"] if p["pid"] == w.pid]
        assert len(me) == 1 and me[0]["alive"] is True
        assert me[0]["split_bytes"] == 2_000_000
        assert 1_000_000 - 65536 <= me[0]["inline_bytes"] <= 1_000_000
    finally:
        w.stdin.close()
        w.wait(timeout=60)
    run_worker(env, "count", 160, 0, 0, 0)
    data = stat(env)
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[w.pid]["inline_bytes"] == 1_000_000 and by_pid[w.pid]["alive"] is False
    assert data["totals"]["inline_bytes"] == 1_000_160
    assert len(by_pid) == 2


def test_concurrent_first_attach(seg):
    """Eight processes racing to create the segment: all attach to one table, whose CPU units
    are registered once each (creation is a link of a complete table, discovery is locked)."""
    name, env = seg
    procs = [start_worker(env, "info") for _ in range(8)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(o.startswith("shared 1 ") for o in outs), outs
    data = stat(env)
    cpus = [u["cpu"] for u in data["units"] if u["kind"] == "cpu"]
    assert sorted(cpus) == sorted(os.sched_getaffinity(0))
    assert sorted(p["pid"] for p in data["processes"]) == sorted(p.pid for p in procs)
    # No temporary names left behind by the losers of the race.
    assert glob.glob("/dev/shm" + name + ".tmp.*") == []


def test_kill9_holder_is_recovered(seg):
    name, env = seg
    holder = start_worker(env, "hold", "cpu")
    line = holder.stdout.readline()
    m = re.match(r"held (\d+)", line)
    assert m, line
    unit = int(m.group(1))
    u = stat(env)["units"][unit]
    assert u["state"] == "busy" and u["owner_pid"] == holder.pid and u["owner_alive"] is True
    holder.kill()
    holder.wait(timeout=60)
    holder.stdin.close()
    u = stat(env)["units"][unit]
    assert u["state"] == "busy" and u["owner_alive"] is False
    text = subprocess.run([str(STAT)], env=env, capture_output=True, text=True, timeout=60).stdout
    assert re.search(rf"^\s+{unit} cpu .* dead ", text, re.M), text

    out = run_worker(env, "takeall")
    m = re.match(r"took (\d+) recoveries (\d+)", out)
    assert m and int(m.group(1)) == cpu_count() and int(m.group(2)) == 1, out
    data = stat(env)
    assert data["units"][unit]["state"] == "idle" and data["units"][unit]["recoveries"] == 1
    assert data["totals"]["recoveries"] == 1
    assert not [x for x in data["units"] if x["state"] == "busy"]


def test_fifo_order_across_processes(seg, tmp_path):
    name, env = seg
    assert "gpu_units 1" in run_worker(env, "gpu", 1)
    holder = start_worker(env, "hold", "gpu")
    assert holder.stdout.readline().startswith("held ")
    log = tmp_path / "order.log"
    tags = ["a", "b", "c", "d"]
    waiters = []
    try:
        for i, tag in enumerate(tags):
            waiters.append(start_worker(env, "wait", "gpu", log, tag))
            # The next one starts only once this one holds its ticket.
            wait_for(lambda: len(stat(env)["waiters"]) == i + 1, f"waiter {tag} to queue")
        q = stat(env)["waiters"]
        assert [w["pid"] for w in sorted(q, key=lambda w: w["ticket"])] == [w.pid for w in waiters]
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
        for w in waiters:
            assert w.wait(timeout=60) == 0, w.stderr.read()
    finally:
        for p in [holder] + waiters:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert log.read_text().split() == tags
    data = stat(env)
    assert data["totals"]["waits"] == len(tags) and data["waiters"] == []


def test_dead_waiter_does_not_block_the_queue(seg, tmp_path):
    name, env = seg
    run_worker(env, "gpu", 1)
    holder = start_worker(env, "hold", "gpu")
    assert holder.stdout.readline().startswith("held ")
    log = tmp_path / "order.log"
    doomed = start_worker(env, "wait", "gpu", log, "doomed")
    wait_for(lambda: len(stat(env)["waiters"]) == 1, "the first waiter to queue")
    survivor = start_worker(env, "wait", "gpu", log, "survivor")
    try:
        wait_for(lambda: len(stat(env)["waiters"]) == 2, "the second waiter to queue")
        doomed.kill()
        doomed.wait(timeout=60)
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
        assert survivor.wait(timeout=60) == 0, survivor.stderr.read()
    finally:
        for p in (holder, doomed, survivor):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert log.read_text().split() == ["survivor"]
    assert stat(env)["waiters"] == []


def test_waiter_gets_unit_of_killed_holder(seg, tmp_path):
    """The holder of the only GPU slot is killed while a waiter waits: the waiter recovers it."""
    name, env = seg
    run_worker(env, "gpu", 1)
    holder = start_worker(env, "hold", "gpu")
    assert holder.stdout.readline().startswith("held ")
    log = tmp_path / "order.log"
    waiter = start_worker(env, "wait", "gpu", log, "waiter")
    try:
        wait_for(lambda: len(stat(env)["waiters"]) == 1, "the waiter to queue")
        holder.kill()
        holder.wait(timeout=60)
        assert waiter.wait(timeout=60) == 0, waiter.stderr.read()
    finally:
        for p in (holder, waiter):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert log.read_text().split() == ["waiter"]
    data = stat(env)
    assert data["totals"]["recoveries"] == 1
    assert [u["recoveries"] for u in data["units"] if u["kind"] == "gpu"] == [1]


def valid_segment_bytes(env):
    run_worker(env, "info")
    with open("/dev/shm" + env["ACCELAES_SHM_NAME"], "rb") as f:
        return f.read()


def write_segment(name, data, mode=0o600):
    path = "/dev/shm" + name
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.fchmod(fd, mode)
    os.close(fd)


def check_unusable(env, reason_hint=None):
    """An unusable segment is an error exit (1) with the reason on stderr, and null totals in --json."""
    data = stat(env, rc=1)
    assert data["shared"] is False and data["exists"] is True and data["units"] is None
    assert data["totals"] is None and data["error"], data
    if reason_hint:
        assert reason_hint in data["error"], data["error"]
    text = subprocess.run([str(STAT)], env=env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 1 and reason_hint in text.stderr and text.stdout == "", text
    # A process meeting the same segment falls back to a private table and works.
    assert "shared 0" in run_worker(env, "info")


def test_stat_and_attach_on_bad_segments(seg):
    name, env = seg
    good = valid_segment_bytes(env)
    rng = random.Random(1)
    bad = dict(env)
    bad["ACCELAES_SHM_NAME"] = name + ".bad"
    for data, mode, hint in [
        (bytes(rng.getrandbits(8) for _ in range(len(good))), 0o600, "magic"),
        (good[:100], 0o600, "size"),
        (b"", 0o600, "size"),
        (good, 0o644, "mode"),
        (b"\x00" * len(good), 0o600, "magic"),
    ]:
        write_segment(bad["ACCELAES_SHM_NAME"], data, mode)
        check_unusable(bad, hint)
    if os.geteuid() == 0:
        write_segment(bad["ACCELAES_SHM_NAME"], good)
        os.chown("/dev/shm" + bad["ACCELAES_SHM_NAME"], 65534, 65534)
        check_unusable(bad, "another user")
    os.unlink("/dev/shm" + bad["ACCELAES_SHM_NAME"])
    os.symlink("/dev/shm" + name, "/dev/shm" + bad["ACCELAES_SHM_NAME"])
    check_unusable(bad, "symlink")


def test_stat_survives_fuzzed_segments(seg):
    """Byte flips anywhere in a valid segment: accelaes-stat reports or rejects it, never
    crashes, and always prints valid JSON."""
    name, env = seg
    good = bytearray(valid_segment_bytes(env))
    rng = random.Random(2)
    fuzz = dict(env)
    fuzz["ACCELAES_SHM_NAME"] = name + ".fuzz"
    # Header first (most checks live there), then anywhere.
    for i in range(40):
        data = bytearray(good)
        span = 256 if i < 20 else len(data)
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(span)] = rng.getrandbits(8)
        write_segment(fuzz["ACCELAES_SHM_NAME"], bytes(data))
        proc = subprocess.run([str(STAT), "--json"], env=fuzz, capture_output=True, text=True, timeout=60)
        out = json.loads(proc.stdout)
        if proc.returncode == 0:
            assert isinstance(out["units"], list) and isinstance(out["totals"], dict)
        else:   # refused: said, and no zeros in place of the counts
            assert proc.returncode == 1 and out["error"] and out["totals"] is None, (proc.returncode, out)


def test_stat_watch_stops_on_sigint(seg):
    name, env = seg
    need(STAT)
    run_worker(env, "info")
    p = subprocess.Popen([str(STAT), "--json", "--watch"], env=env, stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    p.send_signal(signal.SIGINT)
    rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    assert json.loads(first)["shared"] is True
    for line in rest.splitlines():
        json.loads(line)


@pytest.mark.parametrize("setup,reason", [
    ("mount -t tmpfs -o ro tmpfs /dev/shm", "cannot create"),
    ("mount -t tmpfs tmpfs /dev", "no /dev/shm"),
])
def test_without_usable_dev_shm(seg, setup, reason):
    """A read-only or missing /dev/shm (in a private mount namespace): private table, one
    line on stderr because the worker configures shm = on."""
    name, env = seg
    need(WORKER)
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to hide /dev/shm in a mount namespace")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", f"{setup} && exec {WORKER} worker info"],
                          env=env, capture_output=True, text=True, timeout=60)
    if "shared" not in proc.stdout:
        pytest.skip(f"cannot make a mount namespace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0 and "shared 0" in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0] and "private" in lines[0], proc.stderr
