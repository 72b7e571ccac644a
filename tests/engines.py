"""tests/engines.py: every engine and path this machine gives accelaes, and the one `engine` fixture that runs a
conformance test on each (tests/conftest.py registers it).

accelaes picks its engines once per process (ACCELAES_NO_VAES, ACCELAES_FORCE_EVP_ENGINE, ACCELAES_GCM_ENGINE,
the split and GPU settings), so a test cannot switch engines in place. A test that asks for `engine` is
parametrised over the engines here: on this process's own engine ("default" unless ACCELAES_TEST_ENGINE says
otherwise) its body runs in this process; on any other, one child pytest per (test file, engine) runs that file's
tests with ACCELAES_TEST_ENGINE set, and each parent item reports its own child outcome (passed, the child's
failure text, or the child's skip reason). An engine the machine lacks is not parametrised at all:
tests/conformance/test_engines_here.py says once per engine why it is missing. An engine that only concerns some
tests (a GCM engine: GCM tests) is parametrised for those only (`only`, matched against the test's name and file).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
BUILD = REPO / os.environ.get("ACCELAES_BUILD_DIR", "build")
THIS = os.environ.get("ACCELAES_TEST_ENGINE", "default")
REPORT = os.environ.get("ACCELAES_TEST_ENGINE_REPORT")

# name: (environment, only: a regular expression a test's file or name must match, or None for every test,
# what it is). Known answer files that hold no engine-specific shapes (CAVP GFSbox/KeySbox/VarKey/VarTxt) are
# left to the default engine (SKIP_ELSEWHERE).
ENGINES = {
    "default": ({}, None, "what this machine picks by itself (VAES where it has it; the first GCM engine)"),
    "aesni-xmm": ({"ACCELAES_NO_VAES": "1"}, None, "the xmm AES-NI engine, no VAES"),
    "aesni-ymm": ({"ACCELAES_VAES": "ymm"}, None, "the ymm VAES engine (cores without AVX-512)"),
    "evp": ({"ACCELAES_FORCE_EVP_ENGINE": "1"}, None, "nested EVP into the default provider (no AES-NI)"),
    "split": ({"ACCELAES_SPLIT_MIN": "4096", "ACCELAES_BACKEND": "cpu", "ACCELAES_SHM": "off"}, None,
              "requests from 4 KiB split over the worker pool, a private unit table"),
    "gcm-vaes": ({"ACCELAES_GCM_ENGINE": "vaes"}, "gcm", "accelaes's VAES GCM engine"),
    "gcm-vaesy": ({"ACCELAES_GCM_ENGINE": "vaesy"}, "gcm", "accelaes's VAES GCM engine on ymm (no AVX-512)"),
    "gcm-vaesx": ({"ACCELAES_GCM_ENGINE": "vaesx"}, "gcm", "accelaes's GCM engine on xmm (AES-NI and PCLMULQDQ, SSE only)"),
    "gcm-imb": ({"ACCELAES_GCM_ENGINE": "imb"}, "gcm", "intel-ipsec-mb's GCM"),
    "gcm-evp": ({"ACCELAES_GCM_ENGINE": "evp"}, "gcm", "GCM by nested EVP"),
    "fakegpu": ({"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16",
                 "ACCELAES_GPU_PLUGIN": str(BUILD / "accelaes-fakegpu.so")}, None,
                "the GPU path from 16 bytes on, through the fake GPU plugin"),
    "cuda": ({"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16",
              "ACCELAES_GPU_PLUGIN": str(BUILD / "accelaes-cuda.so")}, None, "the GPU path on the CUDA plugin"),
}
SKIP_ELSEWHERE = re.compile(r"GFSbox|KeySbox|VarKey|VarTxt")
GCM_NAMES = {"vaes-gcm": "gcm-vaes", "vaes-gcm-ymm": "gcm-vaesy", "aesni-gcm": "gcm-vaesx",
             "intel-ipsec-mb": "gcm-imb",
             "nested EVP (default provider)": "gcm-evp"}

# This process's engine is set before anything loads the provider (this module is imported by conftest.py).
if THIS not in ENGINES:
    raise SystemExit(f"ACCELAES_TEST_ENGINE={THIS}: not one of {', '.join(ENGINES)}")
os.environ.update(ENGINES[THIS][0])

_missing = {}
MARK = "tests/engines.py"  # the first of the `engine` parameter's pairs, told apart from a test's own "engine"


def _gcm_engines():
    """The GCM engines this build and CPU offer, in default order (build/tests/test_gcm_engines' first line)."""
    path = BUILD / "tests" / "test_gcm_engines"
    if not path.exists():
        return None, f"{path} is not built (run `make build-only`)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELAES_") or k == "ACCELAES_SHM_NAME"}
    out = subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=300).stdout
    lines = out.splitlines()
    line = lines[0] if lines else ""
    if not line.startswith("engines:") or len(lines) < 2 or not lines[1].startswith("default: "):
        return None, f"{path} did not name the GCM engines and the default: {out[-300:]!r}"
    # the default engine first where it is one of them; where it chooses per message (gcm_dual.c:
    # "vaes-gcm+intel-ipsec-mb") none of them is the default and each is a path of its own
    default = GCM_NAMES.get(lines[1][len("default: "):])
    # each name whole ("vaes-gcm" is also the start of "vaes-gcm-ymm" and of the dual's name)
    names = " " + line.split(":", 1)[1] + " "
    have = [short for name, short in GCM_NAMES.items() if f" {name} " in names]
    return [default] + [h for h in have if h != default] if default else [None] + have, None


def _cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    m = re.search(r"^flags\s*:(.*)$", text, re.M)
    return set(m.group(1).split()) if m else set()


def _why_missing(name):
    """None when this machine has the engine `name` as a path of its own, else why not."""
    from conftest import PROVIDER, SANITIZER
    if name == "default":
        return None
    if PROVIDER != "accelaes":
        return f"the provider under test is {PROVIDER}: the engines are accelaes's"
    if name == "aesni-xmm":
        flags = _cpu_flags()
        if "aes" not in flags:
            return "no AES-NI here: no xmm engine"
        return None if "vaes" in flags else "no VAES here: the default is the xmm engine already"
    if name == "aesni-ymm":
        flags = _cpu_flags()
        if not {"aes", "vaes", "avx2", "vpclmulqdq"} <= flags:
            return "no VAES with AVX2 here: no ymm engine"
        return None if "avx512f" in flags else "no AVX-512 here: the default is the ymm engine already"
    if name.startswith("gcm-"):
        have, why = _gcm_engines()
        if have is None:
            return why
        if name not in have:
            return f"no {name} on this machine or build (GCM engines here: {', '.join(h for h in have if h)})"
        return f"{name} is the default engine's GCM here" if name == have[0] else None
    if name == "fakegpu":
        plugin = Path(ENGINES[name][0]["ACCELAES_GPU_PLUGIN"])
        return None if plugin.exists() else f"{plugin} is not built (run `make build-only`)"
    if name == "cuda":
        from conftest import cuda_not_built
        plugin = Path(ENGINES[name][0]["ACCELAES_GPU_PLUGIN"])
        if not plugin.exists():
            return cuda_not_built(plugin)
        if SANITIZER:
            return f"no GPU runs under {SANITIZER}"
        if not any(Path("/dev").glob("nvidia[0-9]*")):
            return "no NVIDIA GPU here (/dev/nvidia*)"
        return None
    return None


def why_missing(name):
    if name not in _missing:
        _missing[name] = _why_missing(name)
    return _missing[name]


def engines_here():
    return [n for n in ENGINES if why_missing(n) is None]


def concerns(name, nodeid):
    """The engine `name` is a path the test `nodeid` (file::name) takes."""
    only = ENGINES[name][1]
    # the test's own id, without the engine's (a GCM engine's name says "gcm")
    own = re.sub(rf"(?<=[\[-]){re.escape(name)}(?=[\]-])", "", nodeid)
    if only and not re.search(only, own, re.I):
        return False
    return name == "default" or not SKIP_ELSEWHERE.search(nodeid)


# ---------------------------------------------------------------- pytest hooks (tests/conftest.py imports them)

def generate(metafunc):
    """pytest_generate_tests: `engine` over this machine's engines (in a child: its own engine only)."""
    if "engine" not in metafunc.fixturenames:
        return
    if any("engine" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")):
        return
    names = [THIS] if REPORT else engines_here()
    only = getattr(metafunc.module, "ENGINES_ONLY", None)  # a file whose tests only some engines run differently
    if only and not REPORT:
        names = [n for n in names if n == THIS or re.search(only, n)]
    metafunc.parametrize("engine", [(MARK, n) for n in names], ids=names, indirect=True, scope="session")


def _param(item):
    """The engine name `item` is parametrised with by this module (not a test's own "engine" parameter)."""
    cs = getattr(item, "callspec", None)
    p = cs.params.get("engine") if cs is not None else None
    return p[1] if isinstance(p, tuple) and len(p) == 2 and p[0] == MARK else None


def select(items):
    """pytest_collection_modifyitems: (dropped, kept). Parametrised by function, an item on an engine that does
    not concern its id (a CAVP known-answer file off the default engine) is dropped here; in a child run so is
    every item not on the child's engine (the rest ran in the parent)."""
    keep, drop = [], []
    for item in items:
        name = _param(item)
        if REPORT:
            on = name == THIS and concerns(THIS, item.nodeid)
        else:
            on = name is None or concerns(name, item.nodeid)
        (keep if on else drop).append(item)
    return drop, keep


def report(rep):
    """pytest_runtest_logreport in a child: each item's outcome, for the parent."""
    if not REPORT or (rep.when != "call" and rep.outcome == "passed"):
        return
    text = rep.longrepr[2] if rep.skipped and isinstance(rep.longrepr, tuple) else str(rep.longrepr or "")
    with open(REPORT, "a") as f:
        f.write(json.dumps({"id": rep.nodeid.split("::", 1)[1], "when": rep.when, "outcome": rep.outcome,
                            "text": text[-6000:]}) + "\n")


_children = {}


def _child(path, name, seed):
    """Run the test file `path` on engine `name` in a child pytest once; {test id: (outcome, text)}."""
    key = (str(path), name)
    if key not in _children:
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl", prefix=f"engine-{name}-") as rep:
            env = dict(os.environ, ACCELAES_TEST_ENGINE=name, ACCELAES_TEST_ENGINE_REPORT=rep.name,
                       ACCELAES_TEST_SEED=str(seed))
            for k in ENGINES[THIS][0]:
                env.pop(k, None)
            env.update(ENGINES[name][0])
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                                   "-o", "addopts=", str(path)], env=env, cwd=REPO, capture_output=True, text=True,
                                  timeout=1500)
            results = {}
            for line in rep.read().splitlines():
                r = json.loads(line)
                if r["outcome"] != "passed" or r["id"] not in results:
                    results[r["id"]] = (r["outcome"], r["text"])
        _children[key] = (results, proc.stdout[-3000:] + proc.stderr[-2000:])
    return _children[key]


def elsewhere(item):
    """The engine of `item` when that is not this process's, else None."""
    name = _param(item)
    return None if name is None or name == THIS else name


def outcome(item, seed):
    """An item on another engine: raises its outcome in that engine's child (skip, failure), or returns."""
    name = elsewhere(item)
    results, tail = _child(item.path, name, seed)
    tid = item.nodeid.split("::", 1)[1]
    if tid not in results:
        pytest.fail(f"ACCELAES_TEST_ENGINE={name}: {tid} did not run in the child:\n{tail}", pytrace=False)
    state, text = results[tid]
    if state == "skipped":
        pytest.skip(f"on {name}: {text}")
    if state != "passed":
        pytest.fail(f"on engine {name} ({ENGINES[name][2]}; ACCELAES_TEST_ENGINE={name}):\n{text}", pytrace=False)


class Engine:
    """What a test on engine `name` learns: its name, its environment, whether its body runs here."""

    def __init__(self, name):
        self.name, self.env, self.what = name, dict(ENGINES[name][0]), ENGINES[name][2]
        self.here = name == THIS

    def __repr__(self):
        return f"Engine({self.name})"


@pytest.fixture(scope="session")
def engine(request):
    """The engine the test runs on (see the module's docstring)."""
    return Engine(request.param[1])
