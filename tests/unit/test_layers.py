"""tests/unit/test_layers.py: the source tree's layers, checked from its #include lines.

Every C file under provider/, accel/, scheduler/ and tools/ belongs to a layer by its folder; a file
may include its own layer's headers and those of the layers below it, never one above (docs and
provider/README.md give the map). Errors are a leaf (provider/base/err.*: no accelaes header at all),
and the provider holds no hardware code (CPU feature probes, intrinsics, target attributes): that
lives under accel/.
The checks run on the real tree and, to prove they can fail, on copies with a violation planted.
"""

import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("provider", "accel", "scheduler", "tools")
SUFFIXES = (".c", ".h", ".cu", ".cuh")

# Top first: a layer may include itself and anything after it in this list.
LAYERS = [
    ("tools", "tools/"),                  # the shipped programs
    ("entry", "provider/entry/"),         # OpenSSL entry: init, query, teardown, the DRBG delegate
    ("cipher", "provider/cipher/"),       # EVP semantics of each cipher
    ("route", "provider/route/"),         # the contexts requests carry, and where they run
    ("accel", "accel/"),                  # engines: CPU kernels, lanes, GPU plugins
    ("scheduler", "scheduler/"),          # worker pool, units, shared counters
    ("base", "provider/base/"),           # errors, names, settings, release differences
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# A leaf: includes no accelaes header but its own.
LEAVES = ("provider/base/err.h", "provider/base/err.c")
HARDWARE = re.compile(r"#\s*include\s*<(cpuid|immintrin|x86intrin|[a-z]*mmintrin|arm_neon)\.h>"
                      r"|__get_cpuid|__cpuid|__builtin_ia32_|__attribute__\s*\(\(\s*target\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(rel):
    for name, prefix in LAYERS:
        if rel.startswith(prefix):
            return name
    return None


def sources(root):
    for top in ROOTS:
        base = root / top
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.suffix in SUFFIXES and p.is_file() and "compat/" not in p.relative_to(root).as_posix():
                    yield p.relative_to(root).as_posix()


def violations(root):
    """Every upward include, unplaced file, impure leaf and hardware line under root, as text."""
    found = []
    for rel in sources(root):
        text = (root / rel).read_text(errors="replace")
        mine = layer_of(rel)
        if mine is None:
            found.append(f"{rel}: in no layer folder ({', '.join(p for _, p in LAYERS)})")
            continue
        for inc in INCLUDE.findall(text):
            if not inc.startswith(tuple(r + "/" for r in ROOTS)):
                continue   # a sibling by bare name (accel/cuda's own) or a test header: not a layer edge
            theirs = layer_of(inc)
            if theirs is None:
                found.append(f"{rel}: includes {inc}, in no layer folder")
            elif RANK[theirs] < RANK[mine]:
                found.append(f"{rel} ({mine}): includes {inc} ({theirs}), a layer above")
            elif rel in LEAVES and inc not in LEAVES:
                found.append(f"{rel} (the error leaf): includes {inc}")
        # provider/ only: the scheduler's spin-wait pause hint is no kernel
        if rel.startswith("provider/") and HARDWARE.search(text):
            line = HARDWARE.search(text).group(0)
            found.append(f"{rel}: hardware code outside accel/ ({line})")
    return found


def split_done():
    return (REPO / "provider" / "base").is_dir()


def test_tree_has_no_upward_include():
    if not split_done():
        pytest.skip("provider/ is not split into layer folders yet (the move script has not run)")
    assert violations(REPO) == []


def test_error_leaf_exists():
    if not split_done():
        pytest.skip("provider/ is not split into layer folders yet (the move script has not run)")
    for rel in LEAVES:
        assert (REPO / rel).is_file(), rel


def copy_tree(dst):
    for top in ROOTS:
        if (REPO / top).is_dir():
            shutil.copytree(REPO / top, dst / top, ignore=shutil.ignore_patterns("compat"))


def plant(path, line):
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    path.write_text(line + "\n" + old)


@pytest.mark.parametrize("victim,line,expect", [
    # a route file reaching up into a cipher's header
    ("provider/route/policy.c", '#include "provider/cipher/cipher_gcm.h"', "a layer above"),
    # the engines reaching into the provider
    ("accel/cpu/aesni.c", '#include "provider/route/prov.h"', "a layer above"),
    # the error leaf including anything of accelaes's, even a lower layer
    ("provider/base/err.c", '#include "provider/base/names.h"', "the error leaf"),
    # a file left in provider/ itself
    ("provider/stray.c", '#include "provider/base/err.h"', "in no layer folder"),
    # CPU feature probing in the cipher layer
    ("provider/cipher/cipher_aes.c", "#include <cpuid.h>", "hardware code outside accel/"),
])
def test_planted_violation_is_found(tmp_path, victim, line, expect):
    if not split_done():
        pytest.skip("provider/ is not split into layer folders yet (the move script has not run)")
    copy_tree(tmp_path)
    before = violations(tmp_path)
    plant(tmp_path / victim, line)
    after = violations(tmp_path)
    new = [v for v in after if v not in before]
    assert len(new) == 1 and victim in new[0] and expect in new[0], new


def test_synthetic_tree(tmp_path):
    """The checker on a tree of its own, so that it is proven before and after the move."""
    files = {
        "provider/base/err.h": "#include <openssl/err.h>\n",
        "provider/base/names.h": '#include "provider/base/err.h"\n',
        "scheduler/sched.h": '#include "provider/base/err.h"\n',
        "accel/engine.h": '#include "scheduler/sched.h"\n',
        "provider/route/policy.h": '#include "accel/engine.h"\n#include "provider/base/names.h"\n',
        "provider/cipher/cipher_ctx.c": '#include "provider/route/policy.h"\n',
        "provider/entry/prov.c": '#include "provider/cipher/cipher_ctx.c"\n',
        "tools/stat.c": '#include "provider/entry/prov.c"\n',
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert violations(tmp_path) == []
    plant(tmp_path / "scheduler/sched.h", '#include "accel/engine.h"')
    assert violations(tmp_path) == ["scheduler/sched.h (scheduler): includes accel/engine.h (accel), a layer above"]
