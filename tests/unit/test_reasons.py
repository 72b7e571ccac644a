"""tests/unit/test_reasons.py: every reason code of accelaes's own (the ACC_R_* enum) has a text in the
reason table and is raised somewhere in the module's sources; a code defined but never raised is dead
weight that users would look up in vain. Read from the sources (provider/, accel/, scheduler/, at any
depth), so it runs without a build; the checker is first shown to catch a dead code."""

import re
from pathlib import Path

REPO = next(p for p in Path(__file__).resolve().parents if (p / "Makefile").exists())
SOURCE_DIRS = ("provider", "accel", "scheduler")

ENUM = re.compile(r"enum\s*\{([^}]*\bACC_R_[A-Z_]+[^}]*)\}", re.S)
CODE = re.compile(r"\bACC_R_[A-Z0-9_]+\b")
ROW = re.compile(r"\{\s*(ACC_R_[A-Z0-9_]+)\s*,\s*\"([^\"]+)\"\s*\}")


def sources():
    """{path: text} of the module's C sources and headers."""
    out = {}
    for d in SOURCE_DIRS:
        for p in sorted((REPO / d).rglob("*")):
            if p.suffix in (".c", ".h", ".cu") and p.is_file():
                out[p.relative_to(REPO).as_posix()] = p.read_text(errors="replace")
    return out


def audit(files):
    """(defined codes, {code: text} of the reason table, codes used outside the enum and the table)."""
    defined, texts, used = [], {}, set()
    for text in files.values():
        for m in ENUM.finditer(text):
            defined += CODE.findall(m.group(1))
        rest = ENUM.sub("", text)
        for code, msg in ROW.findall(rest):
            texts[code] = msg
        used |= set(CODE.findall(ROW.sub("", rest)))
    return defined, texts, used


def test_checker_finds_a_dead_code():
    files = {"a.h": "enum {\n    ACC_R_LIVE = 1,\n    ACC_R_DEAD = 2\n};\n",
             "b.c": '{ ACC_R_LIVE, "live" },\n{ ACC_R_DEAD, "dead" },\nacc_raise(ACC_R_LIVE, "x");\n'}
    defined, texts, used = audit(files)
    assert defined == ["ACC_R_LIVE", "ACC_R_DEAD"] and set(texts) == set(defined)
    assert [c for c in defined if c not in used] == ["ACC_R_DEAD"]


def test_every_reason_has_a_text_and_is_raised():
    defined, texts, used = audit(sources())
    assert len(defined) >= 5, f"the ACC_R_ enum was not found under {SOURCE_DIRS}: {defined}"
    assert len(defined) == len(set(defined)), f"a reason defined twice: {defined}"
    assert set(texts) == set(defined), \
        f"reason codes without a text: {sorted(set(defined) - set(texts))}; texts without a code: " \
        f"{sorted(set(texts) - set(defined))}"
    dead = [c for c in defined if c not in used]
    assert not dead, f"reason codes defined but never raised (remove them, keeping the others' numbers): {dead}"
