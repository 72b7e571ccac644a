"""scripts/ci/compat/pytest_outcomes.py: a pytest plugin (`-p pytest_outcomes`, with scripts/ci/compat on
PYTHONPATH) that writes every test report as one JSON line to $COMPAT_PYTEST_OUTCOMES, so that
scripts/ci/compat/compat.py can compare two runs test by test. pytest-subtests reports each subtest of
pyca's vector tests (`with subtests.test():`, one per vector) separately; they are numbered in
the order they run within their test, which the vector files fix. Collection failures are written
too. pytest's own --junitxml would fold the subtests into their test."""

import json
import os


class _Outcomes:
    def __init__(self, path):
        self.out = open(path, "w", encoding="utf-8")
        self.sub = {}

    def _write(self, rec):
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def pytest_runtest_logreport(self, report):
        rec = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        if type(report).__name__ == "SubTestReport":
            n = self.sub.get(report.nodeid, 0) + 1
            self.sub[report.nodeid] = n
            rec["sub"] = n
            ctx = getattr(report, "context", None)
            msg = getattr(ctx, "msg", None) if ctx is not None else None
            if msg:
                rec["msg"] = str(msg)
        self._write(rec)

    def pytest_collectreport(self, report):
        if report.failed:
            self._write({"nodeid": report.nodeid or "<session>", "when": "collect", "outcome": "failed"})


def pytest_configure(config):
    path = os.environ.get("COMPAT_PYTEST_OUTCOMES")
    if path:
        config.pluginmanager.register(_Outcomes(path), "compat_outcomes")
