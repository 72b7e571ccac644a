"""tests/conftest.py: shared fixtures for the pytest suite: repository paths, the provider under
test, an environment for child processes (OPENSSL_MODULES, a per-session ACCELAES_SHM_NAME) and a
library context with the provider loaded next to OpenSSL's default provider as the reference.

ACCELAES_TEST_PROVIDER=default runs the provider-core tests against OpenSSL's own provider, which
proves the driver and the tests themselves; the default is "accelaes".
"""

import fcntl
import glob
import json
import os
import random
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# ACCELAES_BUILD_DIR runs the suite against another build tree (scripts/ci/sanitize.sh: build/asan, build/tsan);
# a relative path is taken from the repository root. Tests name build outputs through BUILD only.
BUILD = REPO / os.environ.get("ACCELAES_BUILD_DIR", "build")
STAT_TOOL = BUILD / "accelaes-stat"

PROVIDER = os.environ.get("ACCELAES_TEST_PROVIDER", "accelaes")

# Set before anything loads a provider, so this process and every child sees the same values.
# ACCELAES_TEST_MODULES points the suite at another build of the module (a mutant, an install).
# ACCELAES_INSTALLED=1 tests the installed package instead (make test-deb, for the real-program and
# TLS tests): OpenSSL's own MODULESDIR with no OPENSSL_MODULES at all, /usr/bin/accelaes-stat and
# /usr/share/accelaes/accelaes.cnf.
# The shared segment gets a name of its own per session: tests never touch a user's real
# /accelaes.<uid> unit table, and sessions running side by side do not see each other's counters.
INSTALLED = os.environ.get("ACCELAES_INSTALLED", "") == "1"
CONF = REPO / "conf" / "accelaes.cnf"
if INSTALLED:
    _m = re.search(r'"(.*)"', subprocess.run(["openssl", "version", "-m"], capture_output=True,
                                               text=True).stdout)
    MODULES = Path(_m.group(1)) if _m else Path("/nonexistent-modulesdir")
    STAT_TOOL = Path("/usr/bin/accelaes-stat")
    CONF = Path("/usr/share/accelaes/accelaes.cnf")
    os.environ.pop("OPENSSL_MODULES", None)
else:
    MODULES = Path(os.environ.get("ACCELAES_TEST_MODULES", str(BUILD)))
    os.environ["OPENSSL_MODULES"] = str(MODULES)
MODULE = MODULES / "accelaes.so"
SHM_NAME = f"/accelaes-test-{os.getpid()}-{secrets.token_hex(4)}"
os.environ["ACCELAES_SHM_NAME"] = SHM_NAME

# scripts/ci/sanitize.sh sets ACCELAES_SANITIZER (asan, tsan) for a run against an instrumented build.
# Tests that need valgrind (which cannot run sanitized binaries) or an outside program that cannot
# take the sanitizer runtime skip under it, saying why.
SANITIZER = os.environ.get("ACCELAES_SANITIZER", "")

# One seed per session for every randomized test; ACCELAES_TEST_SEED replays a run.
SEED = int(os.environ.get("ACCELAES_TEST_SEED", str(random.SystemRandom().randrange(1 << 32))))


def pytest_configure(config):
    config.addinivalue_line("markers", "machine_wide: the test changes state every process on this machine sees "
                            "(a real user's /accelaes.<uid> segment); under pytest-xdist it runs alone")
    config.addinivalue_line("markers", "alone: the test judges CPU against wall time, which tests beside it "
                            "would spoil (it skips, saying so, on an oversubscribed machine); under pytest-xdist "
                            "it runs alone")


@pytest.fixture(autouse=True)
def machine_wide_lock(request, tmp_path_factory):
    """make check runs the suite in pytest-xdist workers. A machine_wide or alone test must not run beside any other,
    so every test holds a shared flock and such a test an exclusive one. Both pass a gate lock first:
    a machine_wide test waiting at the main lock holds the gate, so new tests cannot keep it starved.
    Outside xdist (or in a child pytest a test starts, which has no workerinput) nothing runs beside."""
    if not hasattr(request.config, "workerinput"):
        yield
        return
    # A worker's basetemp is <the run's basetemp>/<worker id>: the parent is this run's alone.
    run_dir = tmp_path_factory.getbasetemp().parent
    exclusive = any(request.node.get_closest_marker(m) is not None for m in ("machine_wide", "alone"))
    with open(run_dir / "machine-wide.gate", "a") as gate, open(run_dir / "machine-wide.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


# The `engine` fixture: a test that asks for it runs on every engine and path this machine has (tests/engines.py).
from engines import engine  # noqa: E402,F401  (a fixture: registered by being in this module)
import engines as _engines  # noqa: E402


def pytest_generate_tests(metafunc):
    _engines.generate(metafunc)


def pytest_collection_modifyitems(config, items):
    drop, keep = _engines.select(items)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """An item on another engine than this process's: no fixtures here, its outcome is that engine's child
    run's (tests/engines.py)."""
    if not _engines.elsewhere(item):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for when in ("setup", "call", "teardown"):
        # teardown: what the items before it set up and the next one does not need, as pytest's own teardown does
        call = pytest.CallInfo.from_call(
            lambda: _engines.outcome(item, SEED) if when == "call" else
            item.session._setupstate.teardown_exact(nextitem) if when == "teardown" else None, when=when)
        item.ihook.pytest_runtest_logreport(report=item.ihook.pytest_runtest_makereport(item=item, call=call))
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_runtest_logreport(report):
    _engines.report(report)


def pytest_report_header(config):
    mods = "unset (installed package)" if INSTALLED else os.environ["OPENSSL_MODULES"]
    return (f"accelaes: provider under test={PROVIDER}, OPENSSL_MODULES={mods}, "
            f"ACCELAES_SHM_NAME={SHM_NAME}, seed={SEED} (replay: ACCELAES_TEST_SEED={SEED})")


def pytest_sessionfinish(session, exitstatus):
    # Segments are created under /dev/shm by shm_open; remove the ones this session named.
    for path in glob.glob("/dev/shm" + SHM_NAME + "*"):
        try:
            os.unlink(path)
        except OSError:
            pass


@pytest.fixture(scope="session")
def repo_root():
    return REPO


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def provider_name():
    """The provider under test ("accelaes" unless ACCELAES_TEST_PROVIDER says otherwise)."""
    return PROVIDER


@pytest.fixture(scope="session")
def seed():
    return SEED


@pytest.fixture(scope="session")
def require_provider():
    """Skip (with the reason) when the provider module has not been built."""
    if PROVIDER == "accelaes" and not MODULE.exists():
        pytest.skip(f"{MODULE} is not built (run `make build-only`)")
    return PROVIDER


@pytest.fixture(scope="session")
def shm_name():
    return SHM_NAME


@pytest.fixture(scope="session")
def openssl_env():
    """Environment for child processes: OPENSSL_MODULES (none with ACCELAES_INSTALLED=1) and this
    session's ACCELAES_SHM_NAME."""
    env = dict(os.environ)
    if INSTALLED:
        env.pop("OPENSSL_MODULES", None)
    else:
        env["OPENSSL_MODULES"] = os.environ["OPENSSL_MODULES"]
    env["ACCELAES_SHM_NAME"] = SHM_NAME
    return env


@pytest.fixture(scope="session")
def openssl_bin():
    path = shutil.which("openssl")
    if path is None:
        pytest.skip("the openssl command is not installed")
    return path


def cuda_not_built(path):
    """The true reason BUILD has no CUDA plugin, for a skip: a sanitizer build leaves it out on purpose
    (scripts/ci/sanitize.sh builds with NVCC=), else nvcc is missing, else it was just not built yet."""
    if SANITIZER:
        return (f"{path} is not built: the {SANITIZER} build leaves the CUDA plugin out (device code no host "
                "sanitizer sees; scripts/ci/sanitize.sh builds with NVCC=)")
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if nvcc:
        return f"{path} is not built yet (nvcc is at {nvcc}: run make)"
    return f"{path} is not built: nvcc not found (no CUDA toolkit here)"


@pytest.fixture(scope="session")
def cuda_mock_plugin(tmp_path_factory):
    """The CUDA plugin's real host code (every accel/cuda/*.cu but kernels.cu) built by g++ against the CPU
    emulation of the CUDA runtime and kernels (tests/cuda_mock/): a .so that stands in for build/accelaes-cuda.so
    where no GPU is (tests/unit/test_cuda_host_pipeline.py, tests/unit/test_gpu_bench_harness.py). Built once per session."""
    cxx = shutil.which("g++")
    if not cxx:
        pytest.skip("g++ not found: the CUDA plugin cannot be built against the CPU emulation")
    out = tmp_path_factory.mktemp("cudamock") / "accelaes-cudamock.so"
    srcs = sorted(str(p) for p in (REPO / "accel/cuda").glob("*.cu") if p.name != "kernels.cu")
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra", "-Werror",
           f"-I{REPO / 'tests/cuda_mock'}", f"-I{REPO}", "-x", "c++", *srcs,
           *sorted(str(p) for p in (REPO / "tests/cuda_mock").glob("*.cc")), "-o", str(out),
           f"-Wl,--version-script={REPO / 'tests/cuda_mock/mock.map'}"]  # the plugin's entry + mock_cuda_stats
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


_LANES = {}


def lanes_missing():
    """None when accelaes runs multi-buffer (intel-ipsec-mb) lanes here, else why not, as the provider's
    build info says it (`openssl list -providers -verbose`: "lanes 16 (intel-ipsec-mb 2.0.0)", "lanes none
    (built without intel-ipsec-mb)", "lanes none (intel-ipsec-mb 1.3.0: no hardware AES here)"). The one
    way tests learn it: a test that needs the lanes calls require_lanes()."""
    if "why" not in _LANES:
        env = dict(os.environ, ACCELAES_SHM_NAME=SHM_NAME)
        p = subprocess.run(["openssl", "list", "-providers", "-verbose", "-provider", "accelaes"], env=env,
                           capture_output=True, text=True, timeout=60)
        m = re.search(r"build info: .*?, lanes (\d+|none)(?: \(([^)]*)\))?", p.stdout)
        if m is None:
            _LANES["why"] = f"accelaes's build info names no lanes: {(p.stdout + p.stderr).strip()[-300:]}"
        else:
            _LANES["why"] = f"no multi-buffer lanes: {m.group(2)}" if m.group(1) == "none" else None
    return _LANES["why"]


def require_lanes():
    """Skip, saying why, where accelaes has no multi-buffer lanes (lanes_missing)."""
    why = lanes_missing()
    if why is not None:
        pytest.skip(why)


def stat_total(env):
    """Bytes done by accelaes on every path (inline, split, batch, GPU), all processes together, as
    build/accelaes-stat --json reports them for the segment env names. No segment there yet (exit 3: nothing has
    attached to the test's own name) counts as 0, for a count taken before a workload; a workload that should have
    counted bytes fails its own comparison then. Any other failure to read is a failure."""
    p = subprocess.run([str(STAT_TOOL), "--json"], env=env, capture_output=True, timeout=30)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    if p.returncode == 3 and doc.get("exists") is False:
        return 0
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    totals = doc["totals"]
    return sum(int(totals.get(k, 0)) for k in ("inline_bytes", "split_bytes", "batch_bytes", "gpu_bytes"))


def child_counted(openssl_env, code, args, tag):
    """Run the Python `code` in a child on a segment of its own (tests/ as its argv[1], then args); its last
    output line is the bytes it had processed. Returns (that, what accelaes-stat counted on the segment)."""
    import sys
    env = dict(openssl_env, ACCELAES_SHM_NAME=f"/accelaes-test-{tag}-{os.getpid()}")
    try:
        p = subprocess.run([sys.executable, "-c", code, str(REPO / "tests"), *args], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        return int(p.stdout.split()[-1]), stat_total(env)
    finally:
        try:
            os.unlink("/dev/shm" + env["ACCELAES_SHM_NAME"])
        except OSError:
            pass


@pytest.fixture(scope="session")
def stat_tool():
    if not STAT_TOOL.exists():
        pytest.skip(f"{STAT_TOOL} is not built (run `make build-only`)")
    return STAT_TOOL


@pytest.fixture(scope="session")
def libctx(require_provider):
    """A library context with `default` (the reference) and the provider under test loaded.
    A module that exists but fails to load is a failure, not a skip."""
    import evp
    names = ["default"] + ([PROVIDER] if PROVIDER != "default" else [])
    return evp.LibCtx(names, modules_dir=MODULES)


class CipherPair:
    """The provider-under-test cipher and the default provider's, by one name."""

    def __init__(self, test, ref):
        self.test, self.ref = test, ref


@pytest.fixture(scope="session")
def pair(libctx):
    """pair(name) -> CipherPair, asserting that the test cipher really is the tested provider's."""
    cache = {}

    def get(name):
        if name not in cache:
            test = libctx.fetch(name, PROVIDER)
            ref = libctx.fetch(name, "default")
            assert test.provider == PROVIDER, f"{name} fetched from {test.provider}, not {PROVIDER}"
            assert ref.provider == "default"
            cache[name] = CipherPair(test, ref)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def isolated(openssl_env):
    """isolated(code) runs a snippet in a child process (see evp.run_isolated) with the
    session's environment, for cases that could crash the runner if a provider misbehaves."""
    import evp

    def run(code, timeout=120):
        return evp.run_isolated(code, env=openssl_env, timeout=timeout)
    return run


def active_provider_names(list_output):
    """The providers `openssl list -providers` prints as active."""
    names, cur = set(), None
    for line in list_output.splitlines():
        if re.match(r"^  \S", line):
            cur = line.strip()
        elif "status: active" in line and cur:
            names.add(cur)
    return names


def private_segment(base_env, tag, **extra):
    """A generator for fixtures: base_env with a scheduler segment of the test's own (ACCELAES_SHM_NAME) and
    the extra variables, the segment removed afterwards; skips where the provider under test is not accelaes."""
    if PROVIDER != "accelaes":
        pytest.skip("the scheduler segment is accelaes's")
    env = dict(base_env, **extra)
    env["ACCELAES_SHM_NAME"] = f"/accelaes-test-{tag}-{os.getpid()}-{secrets.token_hex(4)}"
    yield env
    seg = "/dev/shm" + env["ACCELAES_SHM_NAME"]
    if os.path.exists(seg):
        os.unlink(seg)


def run_c_test(name, env, timeout=120, args=(), quiet=False):
    """Run build/tests/NAME; it must exit 0 and end with "N passed, 0 failed". N == 0 is a skip
    whose reason is the program's "skipped: ..." line. quiet: nothing may appear on stderr (the
    provider prints nothing where the default provider would not)."""
    path = BUILD / "tests" / name
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")
    proc = subprocess.run([str(path), *args], env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert not quiet or proc.stderr == "", proc.stderr[-3000:]
    last = out.strip().splitlines()[-1] if out.strip() else ""
    m = re.fullmatch(r"(\d+) passed, 0 failed", last)
    assert m, f"unexpected last line {last!r}\n{out[-3000:]}"
    if int(m.group(1)) == 0:
        reason = next((l for l in out.splitlines() if l.startswith("skipped")), "no checks ran")
        pytest.skip(f"{name}: {reason}")
    return out
