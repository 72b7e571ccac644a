#!/usr/bin/env python3
"""bench/scripts/gpu_multi.py: N processes at once, each running R requests of S bytes (CTR, ECB-encrypt or
CBC-decrypt) through EVP with provider=accelaes on the GPU path, started together behind a barrier (issue #16).

Per N: aggregate GB/s, host CPU per byte (each worker's process CPU, all its threads, over its timed requests;
the whole life of each child from wait4 beside it), GPU memory per process (nvidia-smi), FIFO waits and the
GPU/CPU byte split (build/accelaes-stat --json, per pid, on a segment of the run's own), p50/p99 latency.
Each worker (bench/scripts/gpu_multi_worker.py) checks its first and last request whole against the default provider
and samples blocks of every request. The caller's buffers are malloc'd (pageable), reused, or fresh per request
(--buffers fresh: freed and mapped again, where a stale registration would show). --mps runs the workers as
clients of an MPS daemon of the run's own (one GPU context for all); --dma sets ACCELAES_CUDA_DMA. Python 3
stdlib only.

  python3 bench/scripts/gpu_multi.py [--procs 1,4,8,16] [--op ctr,ecb,cbcdec] [--size 256M] [--requests 8]
                             [--plugin SO] [--dma MODE] [--mps] [--buffers reuse|fresh] [--json FILE]
"""

import argparse
import json
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
TAG = "GPUMULTI "          # worker -> runner lines (bench/scripts/gpu_multi_worker.py); anything else is passed over
OPS = ("ctr", "ecb", "cbcdec")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_multi_worker.py")


def size_arg(text):
    mult = {"K": 1 << 10, "M": MIB, "G": 1 << 30}.get(text[-1:].upper(), 1)
    n = int(text[:-1] if mult > 1 else text) * mult
    if n <= 0 or n % 16:
        raise argparse.ArgumentTypeError(f"{text}: a size must be a positive multiple of 16 bytes")
    return n


def is_emulated(device):   # the plugin's own name for its device: "NVIDIA H100 80GB HBM3", "mock CUDA device ..."
    return not device.startswith("NVIDIA") or any(w in device.lower() for w in ("mock", "fake", "emulation"))


# ------------------------------------------------------------------ runner

class RunError(Exception):
    pass


def gpu_memory():
    """{pid: MiB} from nvidia-smi, or a string saying why there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "n/a (nvidia-smi not found: no NVIDIA driver on this machine)"
    try:
        p = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"n/a (nvidia-smi: {e})"
    if p.returncode != 0:
        return f"n/a (nvidia-smi exit {p.returncode}: {p.stderr.strip()[:200]})"
    mem = {}
    for line in p.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            mem[int(parts[0])] = max(mem.get(int(parts[0]), 0), int(parts[1]))
    return mem


class Mps:
    """An MPS control daemon of this run's own: pipe and log directories in a private temporary
    directory (mode 0700), stopped with `quit`, and any of its processes still there after 15 s ended."""

    def __init__(self):
        self.exe = shutil.which("nvidia-cuda-mps-control")
        if not self.exe:
            raise RunError("n/a: nvidia-cuda-mps-control not found (no CUDA MPS on this machine)")
        self.dir = tempfile.mkdtemp(prefix="accelaes-mps-")
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(self.dir, "pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": os.path.join(self.dir, "log")}
        for d in self.env.values():
            os.mkdir(d, 0o700)
        p = subprocess.run([self.exe, "-d"], env=dict(os.environ, **self.env), capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            self.stop()
            raise RunError(f"MPS daemon did not start (exit {p.returncode}: {p.stderr.strip()[:200]})")

    def pids(self):
        """Processes of this daemon (control and server): they carry our pipe directory."""
        mine, key = [], ("CUDA_MPS_PIPE_DIRECTORY=" + self.env["CUDA_MPS_PIPE_DIRECTORY"]).encode()
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/comm") as f:
                    if not f.read().startswith("nvidia-cuda-mps"):
                        continue
                with open(f"/proc/{d}/environ", "rb") as f:
                    if key in f.read().split(b"\0"):
                        mine.append(int(d))
            except (OSError, ValueError):
                continue
        return mine

    def cpu_s(self):
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    total += sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])   # utime, stime
            except (OSError, ValueError):
                pass
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self):
        try:
            subprocess.run([self.exe], input="quit\n", env=dict(os.environ, **self.env), capture_output=True,
                           text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        end = time.monotonic() + 15
        while self.pids() and time.monotonic() < end:
            time.sleep(0.2)
        for pid in self.pids():   # ours: they carry the pipe directory this run made
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Worker:
    def __init__(self, a, env):
        self.err = tempfile.TemporaryFile()
        cmd = [sys.executable, WORKER, "--op", a.op, "--bits", str(a.bits),
               "--size", str(a.size), "--requests", str(a.requests), "--buffers", a.buffers,
               "--gpu-min", str(a.gpu_min)]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)
        self.msgs, self.rusage, self.done = {}, None, False

    def send(self, word):
        try:
            self.p.stdin.write(word.encode() + b"\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise RunError(f"worker {self.p.pid} is gone: {self.stderr_tail()}") from None

    def stderr_tail(self):
        self.err.seek(0)
        return self.err.read()[-1500:].decode(errors="replace")


def collect(workers, kind, deadline):
    """Wait until every worker has said `kind`; a worker that ends first, or the deadline, fails the run."""
    sel = selectors.DefaultSelector()
    for w in workers:
        if kind not in w.msgs:
            sel.register(w.p.stdout, selectors.EVENT_READ, w)
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            raise RunError(f"timeout waiting for '{kind}' from {len(sel.get_map())} worker(s)")
        for key, _ in sel.select(left):
            w, line = key.data, key.fileobj.readline()
            if not line:
                raise RunError(f"worker {w.p.pid} ended before '{kind}': {w.stderr_tail()}")
            if line.startswith(TAG.encode()):
                msg = json.loads(line[len(TAG):])
                w.msgs[msg["kind"]] = msg
                if msg["kind"] == kind:
                    sel.unregister(key.fileobj)
    sel.close()


def reap(workers, deadline):
    for w in workers:
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(w.p.pid, os.WNOHANG)
            if pid:
                w.p.returncode, w.rusage, w.done = os.waitstatus_to_exitcode(status), ru, True
                break
            time.sleep(0.02)
        if not w.done:
            raise RunError(f"worker {w.p.pid} did not exit")
        if w.p.returncode != 0:
            raise RunError(f"worker {w.p.pid} exited {w.p.returncode}: {w.stderr_tail()}")


def stat_json(a, env):
    p = subprocess.run([os.path.join(a.build, "accelaes-stat"), "--json"], env=env, capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0:
        raise RunError(f"accelaes-stat --json failed: {p.stderr.strip()[:300]}")
    return json.loads(p.stdout)


def pct(values, p):
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def summarize(a, n, mps, workers, mem, stat, mps_cpu):
    res = [w.msgs["result"] for w in workers]
    byte_sum = sum(r["bytes"] for r in res)
    span = max(r["t_end"] for r in res) - min(r["t_start"] for r in res)
    lat = [x for r in res for x in r["lat_s"]]
    procs = {p["pid"]: p for p in stat.get("processes", [])}
    devs = sorted({u.get("device", "") for u in stat.get("units", []) if u.get("kind") == "gpu"})
    device = ", ".join(devs) or "none (no GPU unit registered: the plugin did not start)"
    per = []
    for w, r in zip(workers, res):
        s = procs.get(r["pid"], {})
        cpu_b = sum(int(s.get(k, 0)) for k in ("inline_bytes", "split_bytes", "batch_bytes"))
        gpu_b, want = int(s.get("gpu_bytes", 0)), r["bytes"] + r["warm_bytes"]
        why = [w for w, bad in (("first request differs from the default provider's", not r["first_ok"]),
                                ("last request differs", not r["last_ok"]),
                                (f"{r['bad_spots']} sampled blocks differ", r["bad_spots"]),
                                (f"accelaes-stat counted {gpu_b + cpu_b} of {want} bytes", gpu_b + cpu_b < want))
               if bad]
        per.append({"pid": r["pid"], "ok": not why, "why": why, "first_ok": r["first_ok"],
                    "last_ok": r["last_ok"], "buffers": r["buffers"],
                    "spots": r["spots"], "bad_spots": r["bad_spots"], "accelaes_bytes": gpu_b + cpu_b,
                    "asked_bytes": want, "gpu_bytes": gpu_b, "cpu_bytes": cpu_b, "waits": int(s.get("waits", 0)),
                    "gpu_fallbacks": int(s.get("gpu_fallbacks", 0)), "cpu_s": r["cpu_s"], "warm_ms": r["warm_ms"],
                    "cpu_life_s": w.rusage.ru_utime + w.rusage.ru_stime,
                    "gpu_mib": mem.get(r["pid"]) if isinstance(mem, dict) else None})
    if isinstance(mem, dict):
        mine = [p["gpu_mib"] for p in per if p["gpu_mib"] is not None]
        others = {pid: v for pid, v in mem.items() if pid not in {p["pid"] for p in per}}
        gpu_mem = ({"mean_mib": sum(mine) / len(mine), "max_mib": max(mine), "other_pids": others} if mine else
                   f"n/a (nvidia-smi listed none of this run's pids; it listed {others or 'nothing'})")
    else:
        gpu_mem = mem
    gpu_total = sum(p["gpu_bytes"] for p in per)
    problems = [f"pid {p['pid']}: {'; '.join(p['why'])}" for p in per if p["why"]]
    problems += ["no byte went to the GPU (accelaes-stat: gpu_bytes 0 in every worker)"] * (gpu_total == 0)
    return {"op": a.op, "bits": a.bits, "procs": n, "mps": mps, "size": a.size, "requests": a.requests,
            "buffers": a.buffers, "dma": os.environ.get("ACCELAES_CUDA_DMA", "default") if a.dma is None else a.dma,
            "device": device, "emulation": is_emulated(device), "ok": not problems, "problems": problems,
            "aggregate_gbps": byte_sum / span / 1e9, "span_s": span,
            "cpu_ns_per_byte": sum(p["cpu_s"] for p in per) / byte_sum * 1e9,
            "cpu_life_ns_per_byte": sum(p["cpu_life_s"] for p in per) / byte_sum * 1e9,
            "mps_server_cpu_s": mps_cpu, "gpu_mem": gpu_mem, "waits": sum(p["waits"] for p in per),
            "gpu_share": gpu_total / max(1, sum(p["accelaes_bytes"] for p in per)),
            "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3, "latencies": len(lat),
            "warm_ms_max": max(p["warm_ms"] for p in per), "processes": per}


def worker_env(a, shm, mps):
    env = dict(os.environ, OPENSSL_MODULES=os.path.abspath(a.build), ACCELAES_SHM_NAME=shm,
               ACCELAES_BACKEND=a.backend, ACCELAES_GPU_MIN=str(a.gpu_min), PYTHONUNBUFFERED="1")
    env.pop("CUDA_MPS_PIPE_DIRECTORY", None)   # without --mps no worker may find a daemon left elsewhere
    if a.plugin:
        env["ACCELAES_GPU_PLUGIN"] = os.path.abspath(a.plugin)
    if a.dma is not None:
        env["ACCELAES_CUDA_DMA"] = a.dma
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    return dict(env, **(mps.env if mps else {}))


def run_n(a, n, mps):
    shm = f"/accelaes-gpumulti-{os.getpid()}-{secrets.token_hex(4)}"
    env, workers = worker_env(a, shm, mps), []
    deadline = time.monotonic() + a.timeout
    try:
        workers = [Worker(a, env) for _ in range(n)]
        collect(workers, "ready", deadline)
        mem0, cpu0 = gpu_memory(), mps.cpu_s() if mps else 0.0
        # Clients that found the daemon made it start its server: a control process alone means they did not.
        servers = len(mps.pids()) - 1 if mps else 0
        for w in workers:   # the barrier: every worker has started, warmed up and waits on its stdin
            w.send("go")
        collect(workers, "result", deadline)
        mem1, cpu1 = gpu_memory(), mps.cpu_s() if mps else 0.0
        if isinstance(mem0, dict) and isinstance(mem1, dict):
            mem1 = {pid: max(mem0.get(pid, 0), mem1.get(pid, 0)) for pid in set(mem0) | set(mem1)}
        for w in workers:
            w.send("exit")
        reap(workers, deadline)
        r = summarize(a, n, mps is not None, workers, mem1, stat_json(a, env), cpu1 - cpu0)
        if mps and not servers:
            r["problems"].append("no MPS server process appeared: the workers did not use the daemon")
            r["ok"] = False
        return r
    finally:
        for w in workers:
            if not w.done:
                w.p.kill()
                w.p.wait()
            w.err.close()
        if os.path.exists("/dev/shm" + shm):
            os.unlink("/dev/shm" + shm)


def show(r):
    if "error" in r:
        return f"{r['procs']:>5}  {r['error']}"
    mem = r["gpu_mem"]
    mem = f"{mem['mean_mib']:.0f}/{mem['max_mib']:.0f}" if isinstance(mem, dict) else "n/a"
    return (f"{r['procs']:>5} {r['aggregate_gbps']:9.2f} {r['cpu_ns_per_byte']:8.3f} {r['cpu_life_ns_per_byte']:8.3f}"
            f" {mem:>11} {r['waits']:6d} {100 * r['gpu_share']:6.1f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}"
            f" {r['warm_ms_max']:8.0f}  {'ok' if r['ok'] else 'FAILED: ' + ' | '.join(r['problems'])}")


def runner(a):
    out, rc = [], 0
    mps = None
    try:
        for op in a.op.split(","):
            if a.mps:
                try:
                    mps = Mps()
                except RunError as e:
                    out.append({"op": op, "mps": True, "skipped": str(e)})
                    print(f"gpu-multi: op={op} mps=on: skipped: {e}\ngpu-multi-result: {json.dumps(out[-1])}")
                    continue
            b = argparse.Namespace(**dict(vars(a), op=op))
            print(f"gpu-multi: op={op} AES-{a.bits} size={a.size // MIB if a.size >= MIB else a.size / MIB}MiB "
                  f"requests={a.requests} buffers={a.buffers} (malloc'd, pageable) dma={a.dma or 'default'} "
                  f"mps={'on' if mps else 'off'}")
            print(" procs  aggr GB/s  cpu ns/B  life ns/B  GPU MiB/proc  waits  gpu %   p50 ms   p99 ms  start ms")
            for n in a.procs:
                try:
                    r = run_n(b, n, mps)
                except RunError as e:
                    r, rc = {"op": op, "procs": n, "mps": mps is not None, "error": str(e)}, 1
                rc |= 0 if r.get("ok") else 1
                out.append(r)
                print(show(r), flush=True)
                print("gpu-multi-result: " + json.dumps({k: v for k, v in r.items() if k != "processes"}), flush=True)
            if out and "device" in out[-1]:
                tag = "EMULATION, not a measurement" if out[-1]["emulation"] else "measured"
                print(f"gpu-multi: device {out[-1]['device']} ({tag})")
            if mps:
                mps.stop()
                mps = None
    finally:
        if mps:
            mps.stop()
        if a.json:   # JSON Lines: one invocation a line, so that a session's runs can share one file
            with open(a.json, "a") as f:
                f.write(json.dumps({"args": vars(a), "runs": out}) + "\n")
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8, 16])
    ap.add_argument("--op", default="ctr", help="ctr, ecb (encrypt), cbcdec, or a comma list")
    ap.add_argument("--bits", type=int, choices=(128, 192, 256), default=128)
    ap.add_argument("--size", type=size_arg, default=256 * MIB, help="bytes per request (K, M, G suffixes)")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--buffers", choices=("reuse", "fresh"), default="reuse")
    ap.add_argument("--plugin", help="ACCELAES_GPU_PLUGIN (default: accelaes-cuda.so beside the module)")
    ap.add_argument("--dma", help="ACCELAES_CUDA_DMA for the workers (staged, register, cache, pageable, auto)")
    ap.add_argument("--mps", action="store_true", help="run the workers as clients of an MPS daemon of our own")
    ap.add_argument("--gpu-min", type=int, default=MIB, help="ACCELAES_GPU_MIN (bytes)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--build", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     "..", "..", "build")))
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="more environment for the workers")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run (one op, one N)")
    ap.add_argument("--json", help="append every run, every process, here (one JSON line per invocation)")
    a = ap.parse_args()
    if not all(o in OPS for o in a.op.split(",")):
        ap.error(f"--op: one or more of {', '.join(OPS)}")
    if a.requests < 1 or min(a.procs) < 1:
        ap.error("--requests and --procs must be at least 1")
    # SIGTERM (a timeout around us) unwinds like ^C: workers killed, the MPS daemon stopped, the segment removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return runner(a)


if __name__ == "__main__":
    sys.exit(main())
