"""tests/unit/test_gpu_queue.py: what the GPU offload costs the caller's CPU (issue #16), end to end through EVP
with the fake GPU plugin's device process (ACCELAES_FAKEGPU_DEVICE=process: the AES runs in another
process that reads and writes the caller's buffers, as a GPU does by DMA): a request that finds every
slot busy works its tail on the CPU while queued and the GPU takes the head left; the caller sleeps
while the device works; the calibration picks the GPU by CPU-seconds (never the in-process fake, which
costs the caller's CPU). Also the C units beneath: the scheduler's non-blocking FIFO ticket and the
calibration's decision. Helpers (run_child, the plugin paths) are test_gpu_provider.py's."""

import json
import os
import re
import secrets
import subprocess

import pytest

from conftest import BUILD, PROVIDER, STAT_TOOL
from test_gpu_provider import DEVICE, FAKE, run_child

pytestmark = pytest.mark.skipif(PROVIDER != "accelaes", reason="GPU path tests need the accelaes provider")


@pytest.mark.parametrize("binary", ["test_sched_ticket", "test_gpu_calib"])
def test_c_unit_tests(binary):
    """The C units under the GPU glue: the scheduler's non-blocking FIFO ticket (test_sched_ticket) and
    the calibration's decision by CPU-seconds on made-up figures (test_gpu_calib)."""
    path = BUILD / "tests" / binary
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")
    proc = subprocess.run([str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    m = re.search(r"^(\d+) passed, 0 failed$", proc.stdout, re.M)
    assert m and int(m.group(1)) > 0, proc.stdout[-3000:]


# Several processes of threads on the fake's two slots, its device a slow process of its own: most
# requests queue and run tails on the CPU. Every op the GPU takes, every key size, in place or not,
# split at a random block, against the default provider; "sent" is every byte given to accelaes (the
# IDENTITY child covers splits inside a block).
QUEUED = r"""
import os, random, threading
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
size, rng = int(os.environ["T_SIZE"]), random.Random(os.getpid())
sent, lock = [0], threading.Lock()
def case(mode, bits, enc, pattern):
    a, r = lc.fetch(f"AES-{bits}-{mode}", "accelaes"), lc.fetch(f"AES-{bits}-{mode}", "default")
    key, iv = os.urandom(bits // 8), None if mode == "ECB" else os.urandom(16)
    data = os.urandom(size + 16 * rng.randrange(64))
    t, x = evp.CipherCtx(a, key, iv, enc, padding=False), evp.CipherCtx(r, key, iv, enc, padding=False)
    cut = 16 * rng.randrange(len(data) // 16)   # whole blocks: CTR's partial ones are counted as used
    want = x.update(data) + x.final()
    if pattern == "inplace":                      # two updates in one buffer: the second needs the IV
        buf = evp.Mem(len(data))                  # the first left (in place, CBC: read before its tail ran)
        buf.write(data)
        ok1, n1 = t.raw_update(buf.at(), buf.at(), cut)
        ok2, n2 = t.raw_update(buf.at(cut), buf.at(cut), len(data) - cut)
        got = buf.read(len(data)) if ok1 and ok2 and n1 + n2 == len(data) else b""
    else:
        got = t.update(data[:cut]) + t.update(data[cut:]) + t.final()
    same = got == want and (mode == "ECB" or t.updated_iv() == x.updated_iv())
    with lock:
        sent[0] += len(data)
    return {"case": f"AES-{bits}-{mode} {'enc' if enc else 'dec'} {pattern}", "same": same}
def work():
    for mode, enc in (("ECB", 1), ("ECB", 0), ("CBC", 0), ("CTR", 1)):
        for bits in (128, 192, 256):
            for pattern in ("split", "inplace"):
                emit(case(mode, bits, enc, pattern))
ths = [threading.Thread(target=work) for _ in range(int(os.environ["T_THREADS"]))]
[th.start() for th in ths]
[th.join() for th in ths]
# A thread's inline counts are published by its thread-exit destructor, which runs after join() returns
# (Python lets go of a joined thread before the OS thread ends): wait until each thread is gone, or the
# process could exit first and its last counts with it (seen once in CI: 19680 bytes short).
import time
for th in ths:
    for _ in range(10000):
        if not os.path.exists(f"/proc/self/task/{th.native_id}"):
            break
        time.sleep(0.001)
emit({"sent": sent[0]})
"""


def run_children(code, extra, n, timeout=300):
    """n children of code at once on one segment: (results of each, stderr of each, stat totals)."""
    import concurrent.futures
    import evp
    env = dict(os.environ)
    env.update({"OPENSSL_MODULES": str(BUILD), "T_SIZE": str((1 << 20) + 48),
                "ACCELAES_SHM_NAME": f"/accelaes-gputest-{os.getpid()}-{secrets.token_hex(4)}"})
    env.update(extra)
    try:
        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            outs = list(ex.map(lambda _: evp.run_isolated(code, env=env, timeout=timeout), range(n)))
        p = subprocess.run([str(STAT_TOOL), "--json"], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return outs, json.loads(p.stdout)["totals"]
    finally:
        if os.path.exists("/dev/shm" + env["ACCELAES_SHM_NAME"]):
            os.unlink("/dev/shm" + env["ACCELAES_SHM_NAME"])


def need_device():
    if not FAKE.exists() or not DEVICE.exists() or not STAT_TOOL.exists():
        pytest.skip(f"{FAKE}, {DEVICE} or {STAT_TOOL} is not built (run `make build-only`)")


def test_queued_requests_work_their_tails(require_provider):
    need_device()
    outs, stat = run_children(QUEUED, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "65536",
                                       "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_DEVICE": "process",
                                       "ACCELAES_FAKEGPU_SLOW_US_PER_MIB": "20000", "T_THREADS": "3"}, 2)
    sent = 0
    for rc, res, err in outs:
        assert rc == 0, err[-2000:]
        cases = [r for r in res if "case" in r]
        assert len(cases) == 3 * 4 * 3 * 2, f"only {len(cases)} cases ran: {err[-2000:]}"
        bad = [r["case"] for r in cases if not r["same"]]
        assert not bad, f"outputs differ from the default provider: {bad}"
        sent += next(r["sent"] for r in res if "sent" in r)
    print({k: stat[k] for k in ("gpu_bytes", "inline_bytes", "split_bytes", "gpu_tail_cpu_bytes", "waits")})
    assert stat["gpu_bytes"] > 0 and stat["gpu_tail_cpu_bytes"] > 0 and stat["waits"] > 0, stat
    assert stat["gpu_tail_cpu_bytes"] <= stat["inline_bytes"], stat
    assert sum(stat[k] for k in ("inline_bytes", "split_bytes", "batch_bytes", "gpu_bytes")) == sent, (sent, stat)


# Two small requests hold both slots of a slow device; a large one that starts once both are held
# (the fake logs a run as it starts) queues, runs slices from its end on the CPU, and is given a slot
# while much of its head is left: the GPU's run for it is a head, shorter than the request, and the
# bytes still come out right. Should a holder finish before the large request asks (a preempted test
# thread), it runs on the GPU whole: the set-up is tried again, up to five times.
HEAD_AFTER_TAIL = r"""
import os, threading, time
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-128-CTR", "accelaes"), lc.fetch("AES-128-CTR", "default")
log, big = os.environ["ACCELAES_FAKEGPU_LOG"], 128 << 20
def lines():
    return open(log).read().splitlines() if os.path.exists(log) else []
def work(n, ok, seen, bar):
    key, iv, data = os.urandom(16), os.urandom(16), os.urandom(n)
    t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
    want = x.update(data)
    src, dst = evp.Mem(n), evp.Mem(n + 32)
    src.write(data)
    bar.wait()                              # all ready: the holders' calls start together
    if n == big:
        while len(lines()) < seen + 2:      # both holders are in their runs
            time.sleep(0.0001)              # (and have the GIL to get there)
    okc, outl = t.raw_update(dst.at(), src.at(), n)
    ok.append(okc and dst.read(outl) == want)
for attempt in range(5):
    seen, ok, bar = len(lines()), [], threading.Barrier(3)
    ths = [threading.Thread(target=work, args=(n, ok, seen, bar)) for n in (big, 1 << 20, 1 << 20)]
    [th.start() for th in ths]
    [th.join() for th in ths]
    runs = [int(ln.split()[1].split("=")[1]) for ln in lines()[seen:]]
    emit({"ok": len(ok) == 3 and all(ok), "runs": runs})
    if big not in runs:
        break
"""


def test_queued_request_gets_a_head(require_provider, tmp_path):
    need_device()
    log = tmp_path / "runs.log"
    rc, res, err, stat = run_child(HEAD_AFTER_TAIL, {
        "ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "65536", "ACCELAES_GPU_PLUGIN": str(FAKE),
        "ACCELAES_FAKEGPU_DEVICE": "process", "ACCELAES_FAKEGPU_SLOW_US_PER_MIB": "2000",
        "ACCELAES_FAKEGPU_LOG": str(log)})
    assert rc == 0 and res and all(r["ok"] for r in res), err[-2000:]
    runs = res[-1]["runs"]
    heads = [b for b in runs if b != 1 << 20]
    print(f"attempts {[r['runs'] for r in res]}; tail on the CPU {stat and stat['gpu_tail_cpu_bytes']}")
    assert len(heads) == 1 and 65536 <= heads[0] < 128 << 20, f"no attempt gave the large request a head: {res}"
    assert stat["gpu_tail_cpu_bytes"] == (128 << 20) - heads[0], stat
    assert stat["gpu_bytes"] == sum(sum(r["runs"]) for r in res), stat


# "Waits block": the same request through the fake's device process (the AES in another process, the
# caller asleep in read()) and through the in-process fake (the AES on the caller's thread). The
# ratio of the caller's CPU time to wall time tells them apart; it is no claim about speed.
WAITS = r"""
import os, time
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-256-CTR", "accelaes"), lc.fetch("AES-256-CTR", "default")
n, key, iv = 64 << 20, os.urandom(32), os.urandom(16)
data = os.urandom(n)
src, dst = evp.Mem(n), evp.Mem(n + 32)       # filled and faulted in before the clock starts
src.write(data)
t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
def timed(fn):
    c0, w0 = time.process_time(), time.monotonic()
    out = fn()
    c1, w1 = time.process_time(), time.monotonic()
    return out, (c1 - c0) / max(w1 - w0, 1e-9)
ratios, refs, same = [], [], True
for _ in range(3):
    (okc, outl), ratio = timed(lambda: t.raw_update(dst.at(), src.at(), n))
    want, ref = timed(lambda: x.update(data))      # the default provider: a caller that works
    ratios.append(ratio)
    refs.append(ref)
    same = same and okc and dst.read(outl) == want
# The largest of each: every run must have slept; the reference is what this machine's load lets a
# working caller reach right now (on a busy machine it is well below 1).
emit({"same": same, "ratio": max(ratios), "ref": max(refs)})
"""


@pytest.mark.alone
@pytest.mark.parametrize("device", ["process", "inline"])
def test_gpu_waits_block(require_provider, device):
    need_device()
    # One device thread: a caller that spun would then have a core of its own to spin on (on two
    # cores, two device threads and a spinning caller share them, and its ratio looks smaller).
    rc, res, err, stat = run_child(WAITS, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "65536",
                                          "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_DEVICE": device,
                                          "ACCELAES_FAKEGPU_DEVICE_THREADS": "1"})
    assert rc == 0 and res and res[-1]["same"], err[-2000:]
    assert stat["gpu_bytes"] == 3 * (64 << 20), stat
    ratio, ref = res[-1]["ratio"], res[-1]["ref"]
    print(f"{device}: caller CPU / wall = {ratio:.3f}; the default provider's in the same run {ref:.3f}")
    # Relative to a caller that works, measured in the same child: no absolute bound, which a loaded
    # machine (CI, other tests) would break. Where even the default provider's caller got under half a
    # CPU, the machine is too oversubscribed for CPU/wall to tell anything apart: said, not judged.
    if ref < 0.5:
        pytest.skip(f"machine oversubscribed: a working caller got {ref:.2f} CPU/wall ({device}'s: {ratio:.2f})")
    if device == "process":
        assert ratio < 0.5 * ref, f"the caller spent {ratio:.2f} of the wall time on the CPU while the device " \
                                  f"worked (a working caller: {ref:.2f})"
    else:
        # the same bound the other way: the measurement tells a caller that works from one that sleeps
        assert ratio >= 0.5 * ref, f"the in-process fake ran on the caller's CPU, yet the ratio is {ratio:.2f} " \
                                   f"(a working caller: {ref:.2f})"


# gpu_min on auto (backend=cuda, no ACCELAES_GPU_MIN): the calibration picks by CPU-seconds. The device
# process costs the caller almost no CPU and is chosen; the in-process fake runs the CPU engine on the
# caller's thread, is never cheaper than it, and is never chosen (whatever its wall time).
CALIB = r"""
import os
lc = evp.LibCtx(["default", "accelaes"], modules_dir=os.environ["OPENSSL_MODULES"])
a, r = lc.fetch("AES-128-CTR", "accelaes"), lc.fetch("AES-128-CTR", "default")
key, iv, data = os.urandom(16), os.urandom(16), os.urandom(32 << 20)
t, x = evp.CipherCtx(a, key, iv, 1, padding=False), evp.CipherCtx(r, key, iv, 1, padding=False)
emit({"same": all(t.update(data) == x.update(data) for _ in range(2))})
"""


def calibration(err):
    """The calibration's lines: [(KiB, gpu wall, gpu cpu, cpu wall, cpu cpu, verdict)], and what it picked."""
    sizes = re.findall(r"calibration CTR (\d+) KiB: GPU ([\d.]+) ms wall ([\d.]+) ms CPU, CPU engine ([\d.]+) ms wall "
                       r"([\d.]+) ms CPU: (GPU|CPU)", err)
    picked = re.findall(r"gpu_min calibrated to (never: )?(\d+)", err)
    assert sizes and len(picked) == 1, err[-2000:]
    # The verdicts follow from the figures printed (the rule itself is test_gpu_calib's), and the pick
    # is the first size the GPU won.
    for kib, gw, gc, cw, cc, verdict in sizes:
        gw, gc, cw, cc = map(float, (gw, gc, cw, cc))
        wins = cc > 0 and gc < 0.5 * cc and gw <= 8.0 * cw
        near = abs(gc - 0.5 * cc) < 0.002 or abs(gw - 8.0 * cw) < 0.002   # rounded to microseconds
        assert near or (verdict == "GPU") == wins, (kib, gw, gc, cw, cc, verdict)
    first = next((int(k) << 10 for k, *_, v in sizes if v == "GPU"), None)
    assert (picked[0][0] == "") == (first is not None) and (first is None or int(picked[0][1]) == first), err
    return sizes, None if picked[0][0] else int(picked[0][1])


@pytest.mark.parametrize("device", ["process", "inline"])
def test_calibration_by_cpu_seconds(require_provider, device):
    need_device()
    # The device process is chosen unless the wall guard refuses it: on a host loaded by other work its
    # two threads get less of the cores than the CPU engine's one-core run needs. That is the guard
    # doing its job, not the decision failing: the calibration runs again (at most three times).
    for attempt in range(3):
        rc, res, err, stat = run_child(CALIB, {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": None,
                                              "ACCELAES_GPU_PLUGIN": str(FAKE), "ACCELAES_FAKEGPU_DEVICE": device,
                                              "ACCELAES_GPU_VERBOSE": "1"})
        assert rc == 0 and res and res[-1]["same"], err[-2000:]
        sizes, picked = calibration(err)
        print(f"{device}: {sizes} -> {picked}")
        if device == "inline" or picked is not None:
            break
    if device == "process":
        load, cores = os.getloadavg()[0], len(os.sched_getaffinity(0))
        if picked is None and load > cores and all(float(gc) < 0.5 * float(cc) for _, _, gc, _, cc, _ in sizes):
            pytest.skip(f"the device freed the CPU at every size but the wall guard refused it three times on "
                        f"a host with load average {load:.1f} on {cores} cores: {sizes}")
        assert picked is not None and picked <= 16 << 20, err[-2000:]
        assert stat["gpu_bytes"] == 2 * (32 << 20), stat
    else:
        # the CPU engine on the caller's thread is never cheaper than itself: no size passes the CPU share
        assert picked is None and all(float(gc) >= 0.5 * float(cc) for _, _, gc, _, cc, _ in sizes), err[-2000:]
        assert stat["gpu_bytes"] == 0, stat
