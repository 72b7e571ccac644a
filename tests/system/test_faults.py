"""tests/system/test_faults.py: fault injection against the provider under multi-process load.

Worker processes (build/tests/test_load_worker) run random work through accelaes and judge every
output by OpenSSL's default provider themselves. Against them:
  - kill -9 at random moments (also during start-up, plugin set-up, GPU batches, the table lock),
    then: survivors all correct, and no unit left BUSY for a dead owner once a fresh process has
    asked for every unit (recovery is lazy: a taker's sweep, at most every 50 ms per process);
  - random bytes written into the shared segment while they run (anywhere, in the header and
    unit entries, in the lock words): no crash, no hang, correct output, accelaes-stat survives;
  - a GPU slot or the table lock held for good by a live process: requests finish (CPU fallback);
  - GPU plugin failures (fake plugin: init, run, half) under concurrent load;
  - a hostile environment: a setuid program must ignore ACCELAES_* (above all the plugin path).

Iteration counts come from the environment (CI-sized defaults; bench/results/hardening.md has the
full runs): ACCELAES_FAULT_KILL_ITERS (6), ACCELAES_FAULT_PROCS (4), ACCELAES_FAULT_SECONDS (1.5),
ACCELAES_FAULT_CORRUPT_SECONDS (2.5). ACCELAES_HARDENING_LOG=path appends one JSON summary per test.
"""

import glob
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, MODULES, PROVIDER, SEED, lanes_missing
from test_sched import seg, stat, start_worker as start_sched_worker  # noqa: F401 (seg is a fixture)

WORKER = BUILD / "tests" / "test_load_worker"
FAKE = BUILD / "accelaes-fakegpu.so"
# ACCELAES_TEST_GPU_PLUGIN=build/accelaes-cuda.so (on a GPU machine) runs the kill, random-bytes,
# held-slot and load tests against the real plugin; the plugin-failure tests always use the fake.
PLUGIN = os.environ.get("ACCELAES_TEST_GPU_PLUGIN", str(FAKE))
PLUGIN_PATH = Path(PLUGIN)
WARN = "accelaes: backend=cuda but"

KILL_ITERS = int(os.environ.get("ACCELAES_FAULT_KILL_ITERS", "6"))
PROCS = int(os.environ.get("ACCELAES_FAULT_PROCS", "4"))
SECONDS = float(os.environ.get("ACCELAES_FAULT_SECONDS", "1.5"))
CORRUPT_SECONDS = float(os.environ.get("ACCELAES_FAULT_CORRUPT_SECONDS", "2.5"))

pytestmark = pytest.mark.skipif(PROVIDER != "accelaes", reason="fault injection needs the accelaes provider")


def need_worker():
    for path in (WORKER, FAKE, PLUGIN_PATH, MODULES / "accelaes.so", BUILD / "accelaes-stat"):
        if not path.exists():
            pytest.skip(f"{path} is not built (run `make build-only`)")


def log_summary(name, data):
    path = os.environ.get("ACCELAES_HARDENING_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": name, **data}) + "\n")


def envs(env, **extra):
    """(gpu, cpu) worker environments on the test's segment: the GPU one sends requests from
    16 KiB to the GPU plugin (the fake one unless ACCELAES_TEST_GPU_PLUGIN says otherwise); the
    CPU one splits requests from 64 KiB over the pool."""
    base = dict(env, OPENSSL_MODULES=str(MODULES))
    for k in ("ACCELAES_FAKEGPU_FAIL", "ACCELAES_FAKEGPU_DELAY_MS", "ACCELAES_FAKEGPU_LOG", "OPENSSL_CONF"):
        base.pop(k, None)
    gpu = dict(base, ACCELAES_BACKEND="cuda", ACCELAES_GPU_MIN="16384", ACCELAES_GPU_PLUGIN=PLUGIN)
    cpu = dict(base, ACCELAES_BACKEND="cpu", ACCELAES_SPLIT_MIN="65536")
    gpu.update(extra)
    cpu.update(extra)
    return gpu, cpu


def start(env, *args):
    return subprocess.Popen([str(WORKER), *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=120):
    """(returncode, summary dict or None, stderr) of a worker; a hang is a failure."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"worker {p.pid} hung (killed after {timeout} s): {err[-2000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return p.returncode, json.loads(lines[-1]) if lines else None, err


def check_clean(p, timeout=120):
    rc, res, err = finish(p, timeout)
    assert rc == 0 and res is not None, f"worker {p.pid} exited {rc}: {err[-3000:]}"
    assert res["mismatches"] == 0 and res["errors"] == 0 and res["started"] == res["threads"], res
    return res, err


def takeall(env):
    p = subprocess.run([str(WORKER), "--takeall"], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.startswith("{"), p.stderr
    return p.returncode, json.loads(p.stdout)


def prime(gpu_env):
    """Create the segment and register the plugin's GPU slots (one GPU-sized request)."""
    _, err = check_clean(start(gpu_env, "-t", 1, "-n", 1, "-a", 0, "--oneshot", "--size", 65536,
                               "--cipher", "AES-128-CTR"))
    gpus = [u for u in stat(gpu_env)["units"] if u["kind"] == "gpu"]
    assert gpus, f"the GPU plugin registered no slots: {err[-1000:]}"
    return len(gpus)


def test_worker_judge_can_fail(seg):
    """A deliberately wrong byte in every 50th accelaes output must be caught: the judge works."""
    need_worker()
    name, env = seg
    gpu, cpu = envs(env)
    rc, res, err = finish(start(cpu, "-t", 2, "-n", 200, "-m", 65536, "--corrupt", 50))
    assert rc == 1 and res["mismatches"] > 0 and "differs" in err, (rc, res, err[-500:])


def test_kill9_during_load(seg):
    need_worker()
    if KILL_ITERS < 1:
        pytest.skip("ACCELAES_FAULT_KILL_ITERS=0")
    name, env = seg
    gpu, cpu = envs(env)
    rng = random.Random(SEED)
    totals = {"iterations": 0, "killed": 0, "survivors": 0, "bytes_verified": 0, "ops": 0,
              "left_busy_after_survivors": 0, "takeall_recoveries": 0}
    for it in range(KILL_ITERS):
        n = max(2, PROCS)
        procs = [start(gpu if i % 2 == 0 else cpu, "-t", 2, "-s", SECONDS, "-S", rng.getrandbits(48))
                 for i in range(n)]
        t0 = time.monotonic()
        victims = set(rng.sample(range(n), rng.randint(1, n - 1)))
        # Kill times are measured from the start: some land in start-up and plugin set-up.
        for when, v in sorted((rng.uniform(0, SECONDS * 0.9), v) for v in victims):
            time.sleep(max(0.0, t0 + when - time.monotonic()))
            procs[v].send_signal(signal.SIGKILL)
        for i, p in enumerate(procs):
            if i in victims:
                rc, _, _ = finish(p)
                assert rc in (-signal.SIGKILL, 0), f"victim {p.pid} exited {rc}"
                totals["killed"] += rc == -signal.SIGKILL
                continue
            res, _ = check_clean(p)
            totals["survivors"] += 1
            totals["bytes_verified"] += res["bytes"]
            totals["ops"] += res["ops"]
        before = stat(env)
        totals["left_busy_after_survivors"] += sum(u["state"] == "busy" for u in before["units"])
        rc, took = takeall(env)
        assert rc == 0, f"iteration {it}: a fresh process could not take every unit: {took}"
        assert took["cpu_taken"] == took["cpu_units"] and took["gpu_taken"] == took["gpu_units"] >= 1, took
        totals["takeall_recoveries"] += took["recoveries"]
        after = stat(env)
        busy = [u for u in after["units"] if u["state"] != "idle"]
        assert not busy, f"iteration {it}: units BUSY after recovery: {busy}"
        assert not [w for w in after["waiters"] if w["alive"]], after["waiters"]
        assert not [p for p in after["processes"] if p["alive"]], "a worker outlived the test"
        totals["iterations"] += 1
    t = after["totals"]
    # Every path was exercised (the batch where the build has the lanes), and dead owners' units were
    # really recovered somewhere.
    no_lanes = lanes_missing()
    assert t["inline_bytes"] > 0 and t["gpu_bytes"] > 0 and (t["batch_bytes"] > 0 or no_lanes), t
    assert t["split_bytes"] > 0, t
    totals.update({"segment_totals": t, "procs": n, "seconds": SECONDS, "seed": SEED})
    log_summary("kill9", totals)
    if no_lanes:
        pytest.skip(f"recovery checked on the other paths, the batch path not: {no_lanes}")


def corrupt_targets(layout, mode):
    """Byte ranges the random writes aim at."""
    units = [(layout["units"] + i * layout["unit_size"], layout["unit_size"]) for i in range(8)]
    if mode == "anywhere":
        return [(0, layout["total"])]
    if mode == "header+units":
        return [(0, layout["hdr_size"])] + units
    lock = [tuple(layout["lock"])]
    return lock + [(a + layout["unit_lock"][0], layout["unit_lock"][1]) for a, _ in units]


@pytest.mark.parametrize("mode", ["anywhere", "header+units", "locks"])
def test_random_bytes_in_segment(seg, mode):
    """Random bytes into /dev/shm/<name> while workers run and new ones attach: every worker
    exits cleanly with correct output (it may fall back to a private table), and accelaes-stat
    always prints valid JSON."""
    need_worker()
    name, env = seg
    gpu, cpu = envs(env)
    rng = random.Random(f"{SEED}-{mode}")
    layout = json.loads(subprocess.run([str(WORKER), "--layout"], capture_output=True, text=True,
                                       check=True).stdout)
    prime(gpu)
    targets = corrupt_targets(layout, mode)
    procs = [start(gpu if i % 2 == 0 else cpu, "-t", 2, "-s", CORRUPT_SECONDS, "-S", rng.getrandbits(48))
             for i in range(max(2, PROCS))]
    late, writes, stats = [], 0, 0
    fd = os.open("/dev/shm" + name, os.O_RDWR)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < CORRUPT_SECONDS * 0.8:
            for _ in range(rng.randint(1, 8)):
                base, size = rng.choice(targets)
                os.pwrite(fd, bytes([rng.getrandbits(8)]), base + rng.randrange(size))
                writes += 1
            if rng.random() < 0.1 and len(late) < 3:   # processes that attach to a damaged table
                late.append(start(gpu if len(late) % 2 else cpu, "-t", 1, "-s", 0.5))
            # JSON every time: read (exit 0, lists) or refused as damaged (exit 1, an error, null counts)
            proc = subprocess.run([str(BUILD / "accelaes-stat"), "--json"], env=env, capture_output=True,
                                  text=True, timeout=60)
            data = json.loads(proc.stdout)
            if proc.returncode == 0:
                assert isinstance(data["units"], list)
            else:
                assert proc.returncode == 1 and data["error"] and data["totals"] is None, (proc.returncode, data)
            stats += 1
            time.sleep(0.02)
    finally:
        os.close(fd)
    verified = sum(check_clean(p)[0]["bytes"] for p in procs + late)
    log_summary(f"random_bytes[{mode}]", {"writes": writes, "stat_runs": stats, "workers": len(procs) + len(late),
                                          "bytes_verified": verified, "seconds": CORRUPT_SECONDS})


def test_gpu_slots_held_forever(seg):
    """Every GPU slot held by a live process that never lets go (as a stopped holder would): GPU
    requests wait a bounded time in the FIFO, then run on the CPU; outputs stay correct."""
    need_worker()
    name, env = seg
    gpu, cpu = envs(env)
    holders = [start_sched_worker(env, "hold", "gpu") for _ in range(prime(gpu))]
    try:
        held = [h.stdout.readline().split() for h in holders]
        assert sorted(int(x[1]) for x in held) == sorted(u["id"] for u in stat(env)["units"] if u["kind"] == "gpu")
        res, err = check_clean(start(gpu, "-t", 2, "-n", 1, "-a", 0, "--oneshot", "--size", 262144,
                                     "--cipher", "AES-128-CTR"), timeout=60)
        assert [ln for ln in err.splitlines() if ln.startswith(WARN)], err
        t = stat(env)["totals"]
        assert t["waits"] >= 1 and t["gpu_fallbacks"] >= 2, t
    finally:
        for h in holders:
            h.stdin.close()
            h.wait(timeout=60)


def test_table_lock_held_by_live_thread(seg):
    """The table lock word names a live thread that never unlocks (a stopped process, or a word
    written by someone else): a worker still attaches, works and exits correctly."""
    need_worker()
    name, env = seg
    gpu, cpu = envs(env)
    layout = json.loads(subprocess.run([str(WORKER), "--layout"], capture_output=True, text=True,
                                       check=True).stdout)
    prime(gpu)
    off, size = layout["lock"]
    assert size >= 8
    word = (os.getpid() << 32) | os.getpid()          # this test process's main thread: alive
    fd = os.open("/dev/shm" + name, os.O_RDWR)
    try:
        os.pwrite(fd, word.to_bytes(8, "little"), off)
    finally:
        os.close(fd)
    check_clean(start(cpu, "-t", 2, "-n", 20, "-m", 65536), timeout=60)
    check_clean(start(gpu, "-t", 2, "-n", 5, "-m", 65536), timeout=60)


@pytest.mark.parametrize("fail", ["init", "run", "half"])
def test_gpu_plugin_failures_under_load(seg, fail):
    need_worker()
    name, env = seg
    gpu, cpu = envs(env, ACCELAES_FAKEGPU_FAIL=fail, ACCELAES_GPU_PLUGIN=str(FAKE))
    procs = [start(gpu, "-t", 2, "-s", SECONDS, "-S", SEED + i) for i in range(max(2, PROCS))]
    verified, said = 0, 0
    for p in procs:
        res, err = check_clean(p)
        verified += res["bytes"]
        lines = [ln for ln in err.splitlines() if ln.startswith("accelaes:")]
        # once per process, naming its first fallback: the plugin's failure, or (run, half) a request that
        # queued while the other processes held both slots and finished on the CPU
        assert len(lines) == 1 and lines[0].startswith(WARN), err[-2000:]
        busy = "every GPU unit stayed busy" in lines[0]
        assert "fake GPU" in lines[0] or (busy and fail != "init"), err[-2000:]
        said += "fake GPU" in lines[0]
    assert said > 0, "no process reported the plugin's failure"
    t = stat(env)["totals"]
    if fail == "init":
        # The plugin never started: the policy does not even offer requests to the GPU.
        assert t["gpu_bytes"] == 0, t
    elif fail == "run":
        assert t["gpu_fallbacks"] > 0, t
        assert t["gpu_bytes"] == 0 and not [u for u in stat(env)["units"] if u["kind"] == "gpu" and u["bytes"]], t
    else:
        assert t["gpu_fallbacks"] > 0 and t["gpu_bytes"] > 0, t
    log_summary(f"plugin_fail[{fail}]", {"workers": len(procs), "bytes_verified": verified,
                                         "gpu_fallbacks": t["gpu_fallbacks"], "gpu_bytes": t["gpu_bytes"]})


@pytest.mark.machine_wide   # nobody's real /accelaes.65534 (test_stat_tool's users too)
def test_setuid_program_ignores_environment(tmp_path):
    """A setuid program that uses accelaes must not take settings, and above all not a GPU plugin
    path, from the user who runs it (secure_getenv). A setuid-nobody copy of the worker, started
    as root (so AT_SECURE is set), is told to load the fake plugin: it must not; the same run
    without setuid shows that the environment is otherwise honoured."""
    need_worker()
    if os.geteuid() != 0:
        pytest.skip("needs root to make a setuid-nobody copy of the worker")
    import shutil
    import tempfile
    nobody = 65534
    work = tempfile.mkdtemp(prefix="accelaes-suid-", dir="/tmp")   # reachable for nobody
    seg_path = f"/dev/shm/accelaes.{nobody}"
    had_seg = os.path.exists(seg_path)
    try:
        os.chmod(work, 0o777)
        exe, log = os.path.join(work, "w"), os.path.join(work, "plugin.log")
        shutil.copy(WORKER, exe)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELAES_", "OPENSSL_"))}
        env.update(ACCELAES_BACKEND="cuda", ACCELAES_GPU_MIN="16384", ACCELAES_GPU_PLUGIN=str(FAKE),
                   ACCELAES_FAKEGPU_LOG=log)
        args = [exe, "--modules", str(MODULES), "-t", "1", "-n", "2", "-a", "0", "--oneshot", "--size", "65536",
                "--cipher", "AES-128-CTR"]
        plain = subprocess.run(args, env=dict(env, ACCELAES_SHM_NAME=f"/accelaes-suid-{os.getpid()}"),
                               capture_output=True, text=True, timeout=60)
        assert plain.returncode == 0, plain.stderr
        assert os.path.exists(log), "control run: the plugin named in the environment was not loaded"
        os.unlink(log)
        os.chown(exe, nobody, nobody)
        os.chmod(exe, 0o4755)
        suid = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        if suid.returncode == 2 and "cannot load" in suid.stderr:
            pytest.skip(f"the provider cannot be read as uid {nobody} here: {suid.stderr.strip()[:200]}")
        assert suid.returncode == 0, suid.stderr
        assert not os.path.exists(log), "a setuid program loaded the GPU plugin named in the caller's environment"
        assert WARN not in suid.stderr, suid.stderr   # backend=cuda from the environment was ignored too
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for p in glob.glob(f"/dev/shm/accelaes-suid-{os.getpid()}*") + ([] if had_seg else [seg_path]):
            if os.path.exists(p):
                os.unlink(p)


def test_hostile_writer_costs_a_bounded_wait(openssl_env, shm_name):
    """Another process of the user holds the table lock through a live thread and keeps nwaiting[]
    at 1 (then also plants waiters): 1 MiB requests must stay near their inline time
    (tests/c/test_hostile_writer.c; before, every unit release waited 2 s for the lock)."""
    from conftest import run_c_test
    env = dict(openssl_env, ACCELAES_SHM_NAME=shm_name + "-hostile")
    out = run_c_test("test_hostile_writer", env, timeout=300)
    print("\n".join(ln for ln in out.splitlines() if ln.startswith("info:")))
