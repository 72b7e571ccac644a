"""tests/unit/test_gpu_plugin.py: the GPU plugin ABI (accel/gpu_plugin.h) driven through ctypes, checked
against OpenSSL's default provider: the fake plugin here, the CUDA plugin wherever a GPU answers.

Each scenario runs in a child process (`python3 tests/unit/test_gpu_plugin.py PLUGIN SCENARIO`), since a
plugin reads its environment once at init and a broken plugin must not take pytest down with it.
Scenarios: contract (every op, key size, size, in place or not), batch (many mixed jobs in one
call), threads (both slots at once), fail (a run stops early: prefix correct, rest untouched, IV
continues), readonly (the input in read-only pages), initfail (init refuses cleanly, run fails cleanly).

A plugin built against the CPU emulation of CUDA (tests/cuda_mock/) exports mock_cuda_stats(): the
child then prints what the emulation saw (registrations, bytes copied per kind of host memory, waits)
on a MOCK-STATS line, with the most registrations left live after any run() and the threads of the
process before the first run() and at the end.
"""

import ctypes
import os
import random
import subprocess
import sys
import threading
from ctypes import CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int, c_size_t, c_ubyte, c_void_p
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))  # run as a script (each scenario's child), conftest and evp are in tests/
from conftest import BUILD, cuda_not_built  # noqa: E402 (build/, or ACCELAES_BUILD_DIR)
FAKE = BUILD / "accelaes-fakegpu.so"
CUDA = BUILD / "accelaes-cuda.so"

ECB_ENC, ECB_DEC, CBC_ENC, CBC_DEC, CTR = 1, 2, 3, 4, 5
OPS = {ECB_ENC: ("ECB", 1), ECB_DEC: ("ECB", 0), CBC_ENC: ("CBC", 1), CBC_DEC: ("CBC", 0), CTR: ("CTR", 1)}
MIB = 1 << 20


class Job(Structure):
    _fields_ = [("op", c_int), ("keybits", c_int), ("key", c_void_p), ("iv", c_ubyte * 16),
                ("in_", c_void_p), ("out", c_void_p), ("len", c_size_t), ("done", c_size_t)]


class Info(Structure):
    _fields_ = [("name", c_char * 64), ("slots", c_int), ("numa_node", c_int)]


INIT_FN = CFUNCTYPE(c_int, POINTER(Info), c_char_p, c_size_t)
RUN_FN = CFUNCTYPE(c_int, c_int, POINTER(Job), c_size_t)
ERR_FN = CFUNCTYPE(c_char_p)
SHUT_FN = CFUNCTYPE(None)


class PluginStruct(Structure):
    _fields_ = [("abi", c_int), ("name", c_char_p), ("init", INIT_FN), ("run", RUN_FN),
                ("last_error", ERR_FN), ("shutdown", SHUT_FN)]


# ------------------------------------------------------------------ child-process driver

class Driver:
    def __init__(self, path):
        self.dll = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        entry = self.dll.accelaes_gpu_plugin
        entry.restype = POINTER(PluginStruct)
        self.pl = entry().contents
        self.passed = self.failed = 0
        try:
            self.stats_fn = self.dll.mock_cuda_stats
        except AttributeError:
            self.stats_fn = None
        self.max_live_regs = 0
        self.threads_start = self.threads()
        import evp
        self.evp = evp
        self.lc = evp.LibCtx(("default",))

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("CHECK-FAIL:", what, flush=True)

    def ref(self, op, bits, key, iv, data):
        mode, enc = OPS[op]
        if not data:
            return b""
        c = self.lc.fetch(f"AES-{bits}-{mode}", "default")
        ctx = self.evp.CipherCtx(c, key, None if mode == "ECB" else iv, enc, padding=False)
        return ctx.update(data)

    @staticmethod
    def next_iv(op, iv, data, out, n):
        """The IV to continue from offset n, as the ABI defines it."""
        if op == CTR:
            return ((int.from_bytes(iv, "big") + n // 16) % (1 << 128)).to_bytes(16, "big")
        if op == CBC_ENC:
            return out[n - 16:n] if n else iv
        if op == CBC_DEC:
            return data[n - 16:n] if n else iv
        return None

    def make(self, op, bits, size, inplace, iv=None):
        key = os.urandom(bits // 8)
        iv = iv if iv is not None else os.urandom(16)
        data = os.urandom(size)
        src = ctypes.create_string_buffer(data, size + 1)
        dst = src if inplace else ctypes.create_string_buffer(b"\xa5" * size, size + 1)
        kb = ctypes.create_string_buffer(key, len(key))
        j = Job(op, bits, ctypes.addressof(kb), (c_ubyte * 16)(*iv), ctypes.addressof(src),
                ctypes.addressof(dst), size, 12345)
        return {"job": j, "key": key, "iv": iv, "data": data, "src": src, "dst": dst, "kb": kb,
                "inplace": inplace}

    def verify(self, t, rc, what, expect_full):
        j, op = t["job"], t["job"].op
        data, iv = t["data"], t["iv"]
        ref = self.ref(op, j.keybits, t["key"], iv, data)
        out = t["dst"].raw[:j.len]
        done = j.done
        self.check(done % 16 == 0 and done <= j.len, f"{what}: done={done} is a block multiple within len")
        if expect_full:
            self.check(rc == 0 and done == j.len, f"{what}: rc={rc} done={done} len={j.len}")
        self.check(out[:done] == ref[:done], f"{what}: out[0, done) matches the default provider")
        untouched = data[done:] if t["inplace"] else b"\xa5" * (j.len - done)
        self.check(out[done:] == untouched, f"{what}: out[done, len) untouched")
        want_iv = self.next_iv(op, iv, data, ref, done)
        if want_iv is not None:
            self.check(bytes(j.iv) == want_iv, f"{what}: iv continues at done={done}")

    def run(self, slot, tasks):
        arr = (Job * max(1, len(tasks)))(*[t["job"] for t in tasks])
        rc = self.pl.run(slot, arr, len(tasks))
        for t, j in zip(tasks, arr):
            t["job"] = j
        if self.stats_fn:
            self.max_live_regs = max(self.max_live_regs, self.mock_stats()["live_regs"])
        return rc

    @staticmethod
    def threads():
        return len(os.listdir("/proc/self/task"))

    def mock_stats(self):
        buf = ctypes.create_string_buffer(1024)
        self.stats_fn(buf, len(buf))
        return {k: int(v) for k, v in (f.split("=") for f in buf.value.decode().split())}

    def print_mock_stats(self, threads_end):
        if self.stats_fn:
            line = " ".join(f"{k}={v}" for k, v in self.mock_stats().items())
            print(f"MOCK-STATS: {line} max_live_regs_after_run={self.max_live_regs} "
                  f"threads_start={self.threads_start} threads_end={threads_end}", flush=True)

    def make_readonly(self, op, bits, size):
        """A job whose input lies in pages mapped read-only (as a file mapped PROT_READ would)."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = c_void_p
        libc.mmap.argtypes = [c_void_p, c_size_t, c_int, c_int, c_int, ctypes.c_long]
        libc.mprotect.argtypes = [c_void_p, c_size_t, c_int]
        span = (size + 4095) // 4096 * 4096 or 4096
        addr = libc.mmap(None, span, 3, 0x22, -1, 0)   # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
        assert addr not in (None, ctypes.c_void_p(-1).value), "mmap failed"
        t = self.make(op, bits, size, False)
        ctypes.memmove(addr, t["data"], size)
        assert libc.mprotect(addr, span, 1) == 0, "mprotect failed"   # PROT_READ
        t["job"].in_ = addr
        t["ro"] = addr   # never unmapped: the child exits after the scenario
        return t


def scenario_contract(d, slots, full):
    sizes = [16, 4096 + 48, MIB + 16, 9 * MIB + 48]
    for op in OPS:
        for bits in (128, 192, 256):
            for size in sizes:
                for inplace in (False, True):
                    if size > MIB and (bits == 192 or inplace != (op % 2 == 0)):
                        continue   # big sizes: one key size fewer, one layout per op
                    t = d.make(op, bits, size, inplace)
                    rc = d.run(size % slots, [t])
                    d.verify(t, rc, f"op {op} AES-{bits} {size} B {'in place' if inplace else ''}", full)
    # CTR counters about to carry over 2^32, 2^64 and 2^128, across chunk boundaries
    for fill in (12, 8, 0):
        iv = os.urandom(fill) + b"\xff" * (16 - fill)
        iv = iv[:15] + bytes([0xf0])
        for size in (16 * 40, 5 * MIB + 32):
            t = d.make(CTR, 256, size, False, iv)
            d.verify(t, d.run(0, [t]), f"CTR carry fill={fill} size={size}", full)


def scenario_batch(d, slots, full):
    rnd = random.Random(int.from_bytes(os.urandom(4), "big"))
    for rep in range(3):
        tasks = []
        for i in range(64 if rep < 2 else 1500):
            op = rnd.choice(list(OPS))
            size = 16 * rnd.choice([0, 1, 2, 17, 255, 4096, 20000]) if rep < 2 else 16 * rnd.randint(0, 40)
            tasks.append(d.make(op, rnd.choice((128, 192, 256)), size, rnd.random() < 0.3))
        rc = d.run(rep % slots, tasks)
        for i, t in enumerate(tasks):
            d.verify(t, rc, f"batch {rep} job {i} (op {t['job'].op}, {t['job'].len} B)", full)
    # many CBC-encrypt streams in one call: the one-thread-per-stream path
    tasks = [d.make(CBC_ENC, 128, 16 * 64, False) for _ in range(300)]
    rc = d.run(0, tasks)
    for i, t in enumerate(tasks):
        d.verify(t, rc, f"CBC-enc stream {i}", full)


def scenario_threads(d, slots, full):
    errors = []

    def worker(slot):
        for i in range(8):
            op = list(OPS)[(i + slot) % 5]
            t = d.make(op, 128, 3 * MIB + 16 * i, False)
            rc = d.run(slot, [t])
            errors.append((t, rc, f"thread on slot {slot} run {i}"))
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(min(slots, 4))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t, rc, what in errors:
        d.verify(t, rc, what, full)


def scenario_fail(d, slots, full):
    """The plugin is told to fail part-way: every output must honour the completion contract."""
    saw_partial = False
    for op in OPS:
        for size in (16, 64 * 1024, 3 * MIB + 16):
            for inplace in (False, True):
                t = d.make(op, 128, size, inplace)
                rc = d.run(0, [t])
                d.check((rc != 0) == (t["job"].done < size), f"fail op {op} {size}: rc={rc} iff unfinished")
                d.check(rc == 0 or bool(d.pl.last_error()), "failed run has a last_error text")
                saw_partial |= 0 < t["job"].done < size
                d.verify(t, rc, f"fail op {op} {size} B {'in place' if inplace else ''}", False)
    tasks = [d.make(op, 256, 200 * 1024, False) for op in OPS for _ in range(2)]
    rc = d.run(1 % slots, tasks)
    d.check(rc == 0 or any(t["job"].done < t["job"].len for t in tasks), "a failed run left some job unfinished")
    for i, t in enumerate(tasks):
        d.verify(t, rc, f"fail batch job {i}", False)
    d.check(saw_partial, "at least one run stopped part-way (prefix done, rest left)")


def scenario_readonly(d, slots, full):
    """Inputs the plugin cannot pin for writing: it must pin them read-only or stage them."""
    for op in OPS:
        for size in (64 * 1024, 3 * MIB + 16):
            t = d.make_readonly(op, 128, size)
            d.verify(t, d.run(0, [t]), f"read-only input op {op} {size} B", full)
    tasks = [d.make_readonly(op, 256, 200 * 1024) for op in OPS] + [d.make(CTR, 256, 200 * 1024, False)]
    rc = d.run(1 % slots, tasks)
    for i, t in enumerate(tasks):
        d.verify(t, rc, f"read-only batch job {i}", full)


def child_main(argv):
    path, scenario = argv[1], argv[2]
    d = Driver(path)
    d.check(d.pl.abi == 1, "ABI version 1")
    info = Info()
    err = ctypes.create_string_buffer(256)
    rc = d.pl.init(ctypes.byref(info), err, len(err))
    if scenario == "initfail" and rc == 0:
        print("INIT-SUCCEEDED: a device answers")
        return 4
    if scenario == "initfail":
        d.check(rc < 0, f"init refused (rc={rc})")
        d.check(len(err.value) > 0, "init gave a reason")
        d.check(bool(d.pl.last_error()), "last_error has text")
        print("INIT-REASON:", err.value.decode(errors="replace"))
        t = d.make(CTR, 128, 4096, False)
        rrc = d.run(0, [t])
        d.check(rrc < 0 and t["job"].done == 0, f"run after a failed init fails cleanly (rc={rrc})")
        d.verify(t, rrc, "run after failed init", False)
    elif rc != 0:
        print("INIT-FAILED:", err.value.decode(errors="replace"))
        return 3
    else:
        print(f"plugin {d.pl.name.decode()}: {info.name.decode()}, slots={info.slots}, numa={info.numa_node}")
        d.check(1 <= info.slots <= 64, "slots in range")
        full = scenario != "fail"
        {"contract": scenario_contract, "batch": scenario_batch, "threads": scenario_threads,
         "fail": scenario_fail, "readonly": scenario_readonly}[scenario](d, info.slots, full)
        bad = d.run(info.slots, [d.make(CTR, 128, 32, False)])
        d.check(bad < 0, "a slot out of range is refused")
        badjob = d.make(CTR, 100, 32, False)
        d.check(d.run(0, [badjob]) < 0 and badjob["job"].done == 0, "a bad key size is refused")
        threads_end = d.threads()
        d.pl.shutdown()   # releases (and wipes) everything; the CPU emulation reports an unwiped buffer
        print("SHUTDOWN-DONE", flush=True)
        d.print_mock_stats(threads_end)
    print(f"plugin contract: {d.passed} passed, {d.failed} failed")
    return 0 if d.failed == 0 else 1


# ------------------------------------------------------------------ pytest side

def run_child(plugin, scenario, extra_env=None, timeout=300):
    env = dict(os.environ)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, str(Path(__file__)), str(plugin), scenario], env=env,
                          capture_output=True, text=True, timeout=timeout)


def cuda_plugin_or_skip():
    if not CUDA.exists():
        pytest.skip(cuda_not_built(CUDA))
    probe = run_child(CUDA, "initfail")
    if probe.returncode == 4 and "INIT-SUCCEEDED" in probe.stdout:
        return CUDA
    assert "INIT-REASON" in probe.stdout, probe.stdout + probe.stderr
    pytest.skip("no usable CUDA GPU here: " + probe.stdout.split("INIT-REASON:")[1].splitlines()[0].strip())


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")
    return path


@pytest.mark.parametrize("scenario", ["contract", "batch", "threads"])
def test_fake_plugin(scenario):
    r = run_child(need(FAKE), scenario)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("mode", ["half", "run"])
def test_fake_plugin_fail(mode):
    r = run_child(need(FAKE), "fail", {"ACCELAES_FAKEGPU_FAIL": mode})
    if mode == "run":   # nothing is ever done, so "stopped part-way" is the one check that fails
        assert "CHECK-FAIL: at least one run stopped part-way" in r.stdout, r.stdout + r.stderr
        assert r.stdout.count("CHECK-FAIL") == 1, r.stdout
    else:
        assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout + r.stderr


def test_fake_plugin_initfail():
    r = run_child(need(FAKE), "initfail", {"ACCELAES_FAKEGPU_FAIL": "init"})
    assert r.returncode == 0 and "INIT-REASON: fake GPU: init failure" in r.stdout, r.stdout + r.stderr


def test_fake_plugin_log(tmp_path):
    log = tmp_path / "runs.log"
    r = run_child(need(FAKE), "batch", {"ACCELAES_FAKEGPU_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = log.read_text().splitlines()
    assert len(lines) >= 4 and all(ln.startswith("njobs=") for ln in lines), lines[:5]
    assert any(ln.startswith("njobs=1500 ") for ln in lines), "the 1500-job call is one log line"


def test_cuda_plugin_without_gpu_fails_cleanly():
    """Where no GPU answers, init must refuse with a reason and run must fail without a crash."""
    if not CUDA.exists():
        pytest.skip(cuda_not_built(CUDA))
    r = run_child(CUDA, "initfail")
    if r.returncode == 4 and "INIT-SUCCEEDED" in r.stdout:
        pytest.skip("a CUDA GPU answers here: the refusal path is not reachable")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "INIT-REASON:" in r.stdout


@pytest.mark.parametrize("scenario,chunk_kb", [("contract", "4096"), ("contract", "64"), ("batch", "64"),
                                               ("threads", "1024")])
def test_cuda_plugin(scenario, chunk_kb):
    plugin = cuda_plugin_or_skip()
    r = run_child(plugin, scenario, {"ACCELAES_CUDA_CHUNK_KB": chunk_kb})
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("ctr", ["keystream", "full"])
def test_cuda_plugin_fail_after(ctr):
    plugin = cuda_plugin_or_skip()
    r = run_child(plugin, "fail", {"ACCELAES_CUDA_FAIL_AFTER": "2", "ACCELAES_CUDA_CHUNK_KB": "64",
                                   "ACCELAES_CUDA_CTR": ctr})
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout + r.stderr


if __name__ == "__main__":
    sys.exit(child_main(sys.argv))
