"""Every C test (tests/c/test_*.c -> build/tests/test_*) is run by some pytest file, so `make test`
never silently skips one: this guard fails when a new C test is added without a runner. A name counts
as a whole word only: "test_engine" inside "test_engines.py" once hid a C test that nothing ran. A
mention of the source file ("test_engine.c") is not a runner either."""
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def names_a_binary(name, text):
    """text names build/tests/NAME: the exact word, not a longer name it starts or ends, nor NAME.c/.h."""
    return re.search(rf"\b{re.escape(name)}\b(?!\.[ch]\b)", text) is not None


def orphans(c_tests, runner_texts):
    """The C test names no runner text names."""
    return [name for name in c_tests if not any(names_a_binary(name, text) for text in runner_texts)]


def test_every_c_test_has_a_runner():
    c_tests = [c.stem for c in sorted((TESTS / "c").glob("test_*.c"))]
    assert len(c_tests) >= 20, f"only {c_tests} found under {TESTS / 'c'}: is the glob still right?"
    # the runners live in the tiers (tests/unit, tests/conformance, tests/system) and beside them in tests/
    runners = [p.read_text() for p in TESTS.rglob("*.py") if p.name != Path(__file__).name]
    assert any(p.parent != TESTS for p in TESTS.rglob("test_*.py")), f"no pytest file under {TESTS}'s tiers"
    missing = orphans(c_tests, runners)
    assert not missing, f"C tests that no pytest file runs: {missing}"


def test_guard_fails_for_a_near_miss_name():
    """The guard itself: near misses of test_engine must leave it an orphan, the exact name must not."""
    near_misses = ['run_c_test("test_engines")', 'run_c_test("test_engine_fail")', 'run_c_test("my_test_engine")',
                   '"""drives tests/c/test_engine.c"""', 'run_c_test("test_enginex")']
    for text in near_misses:
        assert orphans(["test_engine"], [text]) == ["test_engine"], f"{text!r} passed for test_engine"
    assert orphans(["test_engine"], near_misses) == ["test_engine"]
    for text in ('run_c_test("test_engine", env)', 'BUILD / "tests" / "test_engine"', "@pytest.mark.parametrize"
                 "('name', ['test_engine', 'test_engine_fail'])"):
        assert orphans(["test_engine"], [text]) == [], f"{text!r} did not count as running test_engine"


def test_every_pytest_file_is_in_a_tier():
    """make check and make test run the tiers (tests/unit, tests/conformance, tests/system): a test file left at
    tests/ itself would run nowhere but a bare `pytest tests/`."""
    stray = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not stray, f"pytest files outside the tiers (move each to tests/unit, conformance or system): {stray}"
    assert {p.parent.name for p in TESTS.glob("*/test_*.py")} == {"unit", "conformance", "system"}
