"""bench/scripts/benchlib.py: what the benchmark sections share: running `openssl speed` and parsing its -mr output,
the machine description, medians and Jain's fairness index."""

import os
import platform
import re
import shutil
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BUILD = REPO / "build"
OPENSSL = os.environ.get("OPENSSL", "openssl")


def bench_env():
    """The environment every child gets: the provider module from build/."""
    env = dict(os.environ)
    env["OPENSSL_MODULES"] = str(BUILD)
    return env


def machine():
    model = "unknown cpu"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            model = m.group(1).strip()
    except OSError:
        pass
    version = subprocess.run([OPENSSL, "version"], capture_output=True, text=True).stdout.strip()
    gpu = "none"
    if shutil.which("nvidia-smi"):
        res = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True)
        if res.returncode == 0 and res.stdout.strip():
            gpu = ", ".join(res.stdout.split("\n")).strip(", ")
    return {"cpu": model, "nproc": os.cpu_count(), "openssl": version, "kernel": platform.release(), "gpu": gpu}


def machine_line(m):
    return f"machine: {m['cpu']}, {m['nproc']} CPUs, {m['openssl']}, Linux {m['kernel']}, GPU: {m['gpu']}"


def median(values):
    return statistics.median(values) if values else None


def jain(values):
    """Jain's fairness index: 1 when every process got the same, 1/n when one got everything."""
    values = [v for v in values if v is not None]
    if not values or sum(v * v for v in values) == 0:
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def speed_args(provider, cipher, decrypt=False, size=None, multi=None, async_jobs=None, seconds=1):
    """openssl speed arguments. -provider comes before -evp: the other way round, speed fetches the cipher
    before the provider is loaded and silently measures the default provider. -elapsed divides by wall-clock
    time: user CPU time would count pool threads' work against the provider and miss time spent on a device."""
    args = [OPENSSL, "speed", "-mr", "-elapsed", "-seconds", str(seconds), "-provider", provider]
    if size is not None:
        args += ["-bytes", str(size)]
    if multi is not None:
        args += ["-multi", str(multi)]
    if async_jobs is not None:
        args += ["-async_jobs", str(async_jobs)]
    args += ["-evp", cipher]
    if decrypt:
        args.append("-decrypt")
    return args


def parse_speed(text):
    """-> (total {size: bytes/s}, per-process [{size: bytes/s}] from -multi's "Got: ... from N" lines)."""
    total, per, sizes = {}, {}, []
    for line in text.splitlines():
        got = re.match(r"Got: (\+\S+) from (\d+)", line)
        body = got.group(1) if got else line.strip()
        fields = body.split(":")
        if fields[0] == "+H":
            sizes = [int(x) for x in fields[1:] if x]
        elif fields[0] == "+F" and len(fields) >= 4:
            vals = dict(zip(sizes, (float(x) for x in fields[3:])))
            if got:
                per[int(got.group(2))] = vals
            else:
                total = vals
    return total, [per[k] for k in sorted(per)]


def run_speed(provider, cipher, timeout=600, **kw):
    """One openssl speed run -> dict with the command, totals and per-process figures (or an error)."""
    args = speed_args(provider, cipher, **kw)
    cmd = " ".join(args[1:] if args[0] == OPENSSL else args)
    try:
        res = subprocess.run(args, capture_output=True, text=True, env=bench_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"cmd": "openssl " + cmd, "error": "timeout"}
    total, per = parse_speed(res.stdout + res.stderr)
    out = {"cmd": "openssl " + cmd, "total": total, "per_process": per}
    if res.returncode != 0 or not total:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        out["error"] = f"exit {res.returncode}: " + " | ".join(tail)
    return out


def alternate(rounds, sides):
    """Round r runs the sides in turn, starting one further each round, so slow spells of a shared machine
    fall on every side alike."""
    for r in range(rounds):
        k = r % len(sides)
        yield r, sides[k:] + sides[:k]
