"""tests/unit/test_gpu_provider.py: the provider's GPU path (provider/route/gpu.c) end to end, through EVP in a
child process: with the fake GPU plugin outputs must equal the default provider's, accelaes-stat must
show the GPU bytes and fallbacks, failures must fall back silently (backend=auto) or with exactly one
stderr line (backend=cuda), and backend=cpu must never load a plugin. Requests that queue for a busy
slot work their tails meanwhile (here with threads; with the fake's device process, what that costs the
caller's CPU and how the calibration decides: tests/unit/test_gpu_queue.py).

With ACCELAES_TEST_GPU_PLUGIN=build/accelaes-cuda.so (on a machine with a GPU) the same identity and
counter checks run against the real plugin."""

import json
import os
import time
import secrets
import subprocess

import pytest

from conftest import BUILD, MODULE, PROVIDER, STAT_TOOL, cuda_not_built

FAKE = BUILD / "accelaes-fakegpu.so"
DEVICE = BUILD / "tests" / "fake_gpu_device"
CUDA = BUILD / "accelaes-cuda.so"
PLUGIN = os.environ.get("ACCELAES_TEST_GPU_PLUGIN", str(FAKE))
WARN = "accelaes: backend=cuda but"

pytestmark = pytest.mark.skipif(PROVIDER != "accelaes", reason="GPU path tests need the accelaes provider")

# Child: every mode, key size and direction, one big update, a fragmented sequence and in place,
# against the default provider in the same library context. emit() one result per case.
IDENTITY = r"""
import os
size = int(os.environ["T_SIZE"])
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
maps = open("/proc/self/maps").read()
for mode in ("ECB", "CBC", "CTR"):
    for bits in (128, 192, 256):
        for enc in (1, 0):
            key, iv = os.urandom(bits // 8), os.urandom(16)
            data = os.urandom(size + (5 if mode == "CTR" else 0))
            a, r = lc.fetch(f"AES-{bits}-{mode}", "accelaes"), lc.fetch(f"AES-{bits}-{mode}", "default")
            v = None if mode == "ECB" else iv
            for pattern in ("one", "frag", "inplace"):
                t = evp.CipherCtx(a, key, v, enc, padding=False)
                x = evp.CipherCtx(r, key, v, enc, padding=False)
                if pattern == "one":
                    got, want = t.update(data) + t.final(), x.update(data) + x.final()
                elif pattern == "frag":
                    cuts = [0, 7, 7 + 100003, len(data)]
                    got = b"".join(t.update(data[i:j]) for i, j in zip(cuts, cuts[1:])) + t.final()
                    want = x.update(data) + x.final()
                else:
                    n = len(data) & ~15
                    got, want = t.cipher_oneshot(data[:n], inplace=True)[1], x.cipher_oneshot(data[:n])[1]
                ivs = mode == "ECB" or pattern == "inplace" or t.updated_iv() == x.updated_iv()
                emit({"case": f"AES-{bits}-{mode} {'enc' if enc else 'dec'} {pattern}", "same": got == want,
                      "iv": ivs, "bytes": len(data)})
emit({"plugin_mapped": "accelaes-fakegpu" in open("/proc/self/maps").read()
      or "accelaes-cuda" in open("/proc/self/maps").read()})
"""


def run_child(code, extra, timeout=300):
    import evp
    env = dict(os.environ)
    env["OPENSSL_MODULES"] = str(BUILD)
    env["ACCELAES_SHM_NAME"] = f"/accelaes-gputest-{os.getpid()}-{secrets.token_hex(4)}"
    env.setdefault("T_SIZE", str((1 << 20) + 48))
    env.update({k: v for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:   # None: unset in the child only
        env.pop(k, None)
    try:
        rc, results, stderr = evp.run_isolated(code, env=env, timeout=timeout)
        stat = None
        if STAT_TOOL.exists():
            p = subprocess.run([str(STAT_TOOL), "--json"], env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            stat = json.loads(p.stdout)["totals"]
    finally:
        seg = "/dev/shm" + env["ACCELAES_SHM_NAME"]
        if os.path.exists(seg):
            os.unlink(seg)
    return rc, results, stderr, stat


def check_identity(results, rc, stderr):
    assert rc == 0, f"child exited {rc}: {stderr[-2000:]}"
    cases = [r for r in results if "case" in r]
    assert len(cases) == 3 * 3 * 2 * 3, f"only {len(cases)} cases ran: {stderr[-2000:]}"
    bad = [r["case"] for r in cases if not (r["same"] and r["iv"])]
    assert not bad, f"outputs differ from the default provider: {bad}"
    return next(r["plugin_mapped"] for r in results if "plugin_mapped" in r)


def warn_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("accelaes:")]


@pytest.fixture
def plugin(require_provider):
    if not os.path.exists(PLUGIN):
        pytest.skip(f"{PLUGIN} is not built (run `make build-only`)")
    return PLUGIN


@pytest.mark.parametrize("device", ["inline", "process"])
def test_gpu_path_identical_and_counted(plugin, tmp_path, device):
    if device == "process" and (plugin != str(FAKE) or not DEVICE.exists()):
        pytest.skip(f"the device process is the fake plugin's ({DEVICE})")
    log = tmp_path / "runs.log"
    rc, res, err, stat = run_child(IDENTITY, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16",
                                             "ACCELAES_GPU_PLUGIN": plugin, "ACCELAES_FAKEGPU_LOG": str(log),
                                             "ACCELAES_FAKEGPU_DEVICE": device})
    assert check_identity(res, rc, err), "the GPU plugin was never loaded"
    assert warn_lines(err) == [], err
    if plugin == str(FAKE):
        runs = log.read_text().splitlines()
        # ECB, CTR and CBC-decrypt go to the GPU; CBC-encrypt (serial per stream) does not.
        assert len(runs) >= 3 * 3 * 5, f"{len(runs)} run calls"
    if stat is None:
        pytest.skip(f"{STAT_TOOL} is not built: outputs checked, counters not")
    assert stat["gpu_bytes"] >= 3 * 3 * 5 * ((1 << 20) + 48) * 0.9, stat
    assert stat["gpu_fallbacks"] == 0, stat


@pytest.mark.parametrize("fail", ["run", "half", "init"])
def test_fake_gpu_failures_fall_back(require_provider, fail):
    if not FAKE.exists():
        pytest.skip(f"{FAKE} is not built")
    for backend in ("cuda", "auto"):
        rc, res, err, stat = run_child(IDENTITY, {"ACCELAES_BACKEND": backend, "ACCELAES_GPU_MIN": "16",
                                                 "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_FAIL": fail})
        check_identity(res, rc, err)
        lines = warn_lines(err)
        if backend == "cuda":
            assert len(lines) == 1 and lines[0].startswith(WARN) and lines[0].endswith("using the CPU"), err
            assert "fake GPU" in lines[0], lines
        else:
            assert lines == [], err
        if stat is None:
            continue
        if fail == "init":
            assert stat["gpu_bytes"] == 0, stat
        else:
            assert stat["gpu_fallbacks"] > 0, stat
            assert (stat["gpu_bytes"] > 0) == (fail == "half"), stat


def test_backend_cuda_missing_plugin_one_line(require_provider):
    rc, res, err, _ = run_child(IDENTITY, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16",
                                          "ACCELAES_GPU_PLUGIN": "/nonexistent/accelaes-cuda.so",
                                          "T_SIZE": "65536"})
    check_identity(res, rc, err)
    lines = warn_lines(err)
    assert len(lines) == 1 and "could not be loaded" in lines[0], err


def test_backend_auto_missing_plugin_silent(require_provider):
    rc, res, err, _ = run_child(IDENTITY, {"ACCELAES_BACKEND": "auto", "ACCELAES_GPU_MIN": "16",
                                          "ACCELAES_GPU_PLUGIN": "/nonexistent/accelaes-cuda.so",
                                          "T_SIZE": "65536"})
    check_identity(res, rc, err)
    assert warn_lines(err) == [], err


def test_backend_cuda_real_plugin_without_gpu(require_provider):
    """The real plugin beside the module (the default lookup), on a machine where CUDA does not
    answer: correct output and exactly one line saying why."""
    if not CUDA.exists():
        pytest.skip(cuda_not_built(CUDA))
    env = {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16", "T_SIZE": "65536", "ACCELAES_GPU_PLUGIN": None}
    rc, res, err, stat = run_child(IDENTITY, env)
    check_identity(res, rc, err)
    lines = warn_lines(err)
    if not lines and stat and stat["gpu_bytes"] > 0:
        pytest.skip("a CUDA GPU answers here: the no-GPU path is not reachable")
    assert len(lines) == 1 and "cuda GPU plugin did not start" in lines[0], err


def test_backend_cpu_never_loads_plugin(require_provider, tmp_path):
    if not FAKE.exists():
        pytest.skip(f"{FAKE} is not built")
    log = tmp_path / "runs.log"
    rc, res, err, stat = run_child(IDENTITY, {"ACCELAES_BACKEND": "cpu", "ACCELAES_GPU_MIN": "16",
                                             "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_FAIL": "init",
                                             "ACCELAES_FAKEGPU_LOG": str(log), "T_SIZE": "65536"})
    assert not check_identity(res, rc, err), "backend=cpu mapped a GPU plugin"
    assert not log.exists() and warn_lines(err) == [], err
    if stat is not None:
        assert stat["gpu_bytes"] == 0 and stat["gpu_fallbacks"] == 0, stat


# Threads that arrive while both fake slots are busy take a FIFO ticket without blocking and run their
# request's tail on the CPU until a slot is theirs (the GPU then gets the head left) or the head is too
# small to pay: with runs of 1 ms some get a slot, with runs of 300 ms none does and every queued request
# is finished on the CPU, byte for byte. A forked child redoes the plugin set-up.
CONCURRENT = r"""
import os, threading
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-128-CTR", "accelaes"), lc.fetch("AES-128-CTR", "default")
n = 8
ok = []
def round_():
    bar = threading.Barrier(n)
    def work(i):
        key, iv, data = os.urandom(16), os.urandom(16), os.urandom(256 * 1024 + 16 * i)
        t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
        bar.wait()
        ok.append(t.update(data) == x.update(data))
    ths = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    [th.start() for th in ths]
    [th.join() for th in ths]
for _ in range(int(os.environ["ROUNDS"])):
    round_()
emit({"threads_ok": len(ok) == n * int(os.environ["ROUNDS"]) and all(ok)})
pid = os.fork()
if pid == 0:
    key, iv, data = os.urandom(16), os.urandom(16), os.urandom(100000)
    t, x = evp.CipherCtx(a, key, iv, 0, padding=False), evp.CipherCtx(r, key, iv, 0, padding=False)
    os._exit(0 if t.update(data) == x.update(data) else 1)
emit({"child_ok": os.waitpid(pid, 0)[1] == 0, "parent": os.getpid(), "child": pid})
"""


def run_concurrent(tmp_path, delay_ms, rounds):
    if not FAKE.exists():
        pytest.skip(f"{FAKE} is not built")
    log = tmp_path / f"runs-{delay_ms}.log"
    rc, res, err, stat = run_child(CONCURRENT, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "4096",
                                               "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_LOG": str(log),
                                               "ACCELAES_FAKEGPU_DELAY_MS": str(delay_ms), "ROUNDS": str(rounds)})
    assert rc == 0, err
    got = {k: v for r in res for k, v in r.items()}
    assert got.get("threads_ok") and got.get("child_ok"), (res, err)
    runs = [dict(kv.split("=") for kv in ln.split()) for ln in log.read_text().splitlines()]
    assert all(r["slot"] in ("0", "1") for r in runs), runs
    assert any(int(r["pid"]) == got["child"] for r in runs), "the forked child never reached the GPU plugin"
    return got, [r for r in runs if int(r["pid"]) == got["parent"]], err, stat


def test_queued_threads_and_fork(require_provider, tmp_path):
    """The leader/follower batching is gone (a follower slept on a condition variable while its own core
    could work): every run call carries one request, and a queued request works its tail instead."""
    got, parent, err, stat = run_concurrent(tmp_path, 1, 6)
    assert all(int(r["njobs"]) == 1 for r in parent), parent
    if stat is None:
        pytest.skip(f"{STAT_TOOL} is not built: outputs checked, counters not")
    assert stat["waits"] > 0 and stat["gpu_tail_cpu_bytes"] > 0, stat
    assert stat["gpu_tail_cpu_bytes"] <= stat["inline_bytes"], stat


def test_busy_gpu_costs_a_bounded_wait(require_provider, tmp_path):
    t0 = time.monotonic()
    got, parent, err, stat = run_concurrent(tmp_path, 300, 1)
    # The two requests that found a slot ran there; the six others did not wait 300 ms for one: they
    # ran their tails, then the rest, on the CPU (one stderr line says the GPU did not take them).
    assert sum(int(r["njobs"]) for r in parent) == 2, parent
    assert "backend=cuda but the GPU failed a request" in err, err
    if stat is not None:
        assert stat["gpu_tail_cpu_bytes"] > 0 and stat["gpu_fallbacks"] >= 6, stat
    print(f"8 requests, 2 slots busy 300 ms each: {time.monotonic() - t0:.2f} s in all")


# A process that used the GPU forks: the child must not touch the parent's device state. With the
# fake plugin it sets the plugin up again; with CUDA (which does not survive fork) it uses the CPU.
FORK = r"""
import os
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-256-CTR", "accelaes"), lc.fetch("AES-256-CTR", "default")
def once(n):
    key, iv, data = os.urandom(32), os.urandom(16), os.urandom(n)
    t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
    return t.update(data) == x.update(data)
ok = once(3 << 20)
pid = os.fork()
if pid == 0:
    os._exit(0 if once(3 << 20) and once(5000) else 1)
st = os.waitpid(pid, 0)[1]
emit({"parent_ok": ok and once(3 << 20), "child_ok": st == 0})
"""


def test_fork_after_gpu_use(plugin):
    rc, res, err, stat = run_child(FORK, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "4096",
                                         "ACCELAES_GPU_PLUGIN": plugin}, timeout=120)
    assert rc == 0, err
    got = {k: v for r in res for k, v in r.items()}
    assert got.get("parent_ok") and got.get("child_ok"), (res, err)
    lines = warn_lines(err)
    if os.path.basename(plugin) == "accelaes-cuda.so":
        assert len(lines) <= 1 and all("fork" in ln for ln in lines), err
    else:
        assert lines == [], err
    if stat is not None:
        assert stat["gpu_bytes"] >= 2 * (3 << 20), stat


# backend=auto with gpu_min on auto: a process that has asked about little data never loads the
# plugin (CUDA start-up would cost it more than it could win); one that goes on does.
DEFER = r"""
import os
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-128-CTR", "accelaes"), lc.fetch("AES-128-CTR", "default")
key, iv = os.urandom(16), os.urandom(16)
t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
mapped = lambda: "accelaes-fakegpu" in open("/proc/self/maps").read()
data = os.urandom(1 << 20)
ok = all(t.update(data) == x.update(data) for _ in range(16))
emit({"early_ok": ok, "early_mapped": mapped()})
data = os.urandom(32 << 20)
ok = all(t.update(data) == x.update(data) for _ in range(10))
emit({"late_ok": ok, "late_mapped": mapped()})
"""


def test_auto_defers_plugin_load(require_provider):
    if not FAKE.exists():
        pytest.skip(f"{FAKE} is not built")
    env = {"ACCELAES_BACKEND": "auto", "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_GPU_MIN": None}
    rc, res, err, _ = run_child(DEFER, env)
    assert rc == 0, err
    got = {k: v for r in res for k, v in r.items()}
    assert got.get("early_ok") and got.get("late_ok"), (res, err)
    assert not got["early_mapped"], "the plugin was loaded after only 16 MiB of requests"
    assert got["late_mapped"], "the plugin was never loaded after 336 MiB of requests"
    assert warn_lines(err) == [], err
