"""Every C test (tests/c/test_*.c -> build/tests/test_*) is run by some pytest file, so `make test`
never silently skips one: this guard fails when a new C test is added without a runner. A name counts
as a whole word only: "test_engine" inside "test_engines.py" once hid a C test that nothing ran."""
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_c_test_has_a_runner():
    runners = {p: p.read_text() for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name}
    orphans = [c.stem for c in sorted((TESTS / "c").glob("test_*.c"))
               if not any(re.search(rf"\b{re.escape(c.stem)}\b", text) for text in runners.values())]
    assert not orphans, f"C tests that no pytest file runs: {orphans}"
