#!/usr/bin/env python3
"""scripts/ci/compat/compat.py: the helpers of scripts/ci/compat/run.sh (`make test-compat`).

  pick-version INSTALLED AVAILABLE...   the source version to fetch: INSTALLED if it is in
                                        AVAILABLE, else the nearest one (printed with a note)
  patch-evp-test SRC DST                copy OpenSSL's test/evp_test.c with one report line per
                                        stanza added (see EVP_PATCHES); nothing else changes
  stat-total STAT_TOOL                  bytes accelaes did on every path, all processes, for the
                                        segment $ACCELAES_SHM_NAME names (as tests/conftest.py sums)
  results evp|ssl|pytest RAW OUT [CNF]  one run's outcomes as "case<TAB>status<TAB>label" lines,
                                        status pass, fail or skip
  compare SUITE DEF.tsv DEF_RC ACC.tsv ACC_RC DIFF [NORMAL_RCS [DEF_LOG ACC_LOG]]
                                        the one-line verdict and the differing cases; exit 0 SAME,
                                        1 DIFFERENT, 2 could not run. A run whose exit status is
                                        not in NORMAL_RCS (default 0,1) makes the suite DIFFERENT

Only the standard library: it runs under whichever python3 is first on PATH.
"""

import json
import os
import re
import subprocess
import sys

# ---- pick-version -------------------------------------------------------------------------------


def _upstream(version):
    """'3.0.19-1~deb12u2' -> (3, 0, 19); epoch and Debian revision dropped, non-digits split off."""
    v = version.split(":", 1)[-1].rsplit("-", 1)[0]
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _distance(a, b):
    """Component-wise distance, compared from the left: 3.0.20 is nearer 3.0.19 than 3.0.17 is,
    and any 3.0.x nearer than 3.1.y."""
    n = max(len(a), len(b))
    return tuple(abs(x - y) for x, y in zip(a + (0,) * (n - len(a)), b + (0,) * (n - len(b))))


def cmd_pick_version(installed, *available):
    if not available:
        print("compat: no source version available", file=sys.stderr)
        return 1
    if installed in available:
        print(installed)
        return 0
    inst = _upstream(installed)
    # Nearest upstream version (3.0.20 is nearer to 3.0.19 than 3.0.17); on a tie the older one,
    # whose tests cannot exercise fixes the installed library lacks.
    best = min(available, key=lambda v: (_distance(_upstream(v), inst), _upstream(v) > inst,
                                         _upstream(v)))
    print(best)
    return 0


# ---- patch-evp-test -----------------------------------------------------------------------------

# evp_test reports only failing stanzas (by "file:line"); these edits make it write one line per
# stanza ("file:line<TAB>method<TAB>first key=value<TAB>PASS|FAIL|SKIP|ABORT") to the file named
# by $COMPAT_STANZA_LOG, so two runs can be compared stanza by stanza. The verdicts are evp_test's
# own: PASS/FAIL from t->s.errors around run_test(), SKIP where evp_test skips, ABORT where it
# stops reading the file (it then runs no further stanza). Each anchor must occur exactly once.
EVP_PATCHES = [
    (
        "static int run_file_tests(int i)\n{",
        """/* Added by accelaes scripts/ci/compat/compat.py: one outcome line per stanza. */
static void compat_stanza(EVP_TEST *t, const char *status)
{
    static FILE *out;
    const char *path = getenv("COMPAT_STANZA_LOG");
    const char *file;

    if (path == NULL)
        return;
    if (out == NULL && (out = fopen(path, "a")) == NULL)
        return;
    file = strrchr(t->s.test_file, '/');
    file = file != NULL ? file + 1 : t->s.test_file;
    fprintf(out, "%s:%d\\t%s\\t%s=%s\\t%s\\n", file, t->s.start,
            t->meth != NULL ? t->meth->name : "-",
            t->s.numpairs > 0 ? t->s.pairs[0].key : "-",
            t->s.numpairs > 0 ? t->s.pairs[0].value : "-", status);
    fflush(out);
}

static int run_file_tests(int i)
{""",
    ),
    (
        """    while (!BIO_eof(t->s.fp)) {
        c = parse(t);
        if (t->skip) {
            t->s.numskip++;
            continue;
        }
        if (c == 0 || !run_test(t)) {
            t->s.errors++;
            break;
        }
    }""",
        """    while (!BIO_eof(t->s.fp)) {
        int compat_errors = t->s.errors;

        c = parse(t);
        if (t->skip) {
            compat_stanza(t, "SKIP");
            t->s.numskip++;
            continue;
        }
        if (c == 0 || !run_test(t)) {
            compat_stanza(t, "ABORT");
            t->s.errors++;
            break;
        }
        if (t->meth != NULL)
            compat_stanza(t, t->s.errors > compat_errors ? "FAIL" : "PASS");
    }""",
    ),
]


def cmd_patch_evp_test(src, dst):
    text = open(src, encoding="utf-8").read()
    for old, new in EVP_PATCHES:
        n = text.count(old)
        if n != 1:
            print(f"compat: {src}: expected the patch anchor exactly once, found it {n} times:\n{old}",
                  file=sys.stderr)
            return 1
        text = text.replace(old, new)
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


# ---- stat-total ---------------------------------------------------------------------------------


def cmd_stat_total(stat_tool):
    p = subprocess.run([stat_tool, "--json"], capture_output=True, timeout=30)
    if p.returncode == 3:    # no segment yet: nothing counted for this user (a count before the first run)
        print(0)
        return 0
    if p.returncode != 0:
        print(f"compat: {stat_tool} --json: exit {p.returncode}: {p.stderr.decode(errors='replace')}",
              file=sys.stderr)
        return 1
    doc = json.loads(p.stdout)
    totals = doc.get("totals") or {}
    print(sum(int(totals.get(k, 0)) for k in ("inline_bytes", "split_bytes", "batch_bytes", "gpu_bytes")))
    return 0


# ---- results ------------------------------------------------------------------------------------


def _evp_results(raw):
    out = []
    for line in open(raw, encoding="utf-8", errors="replace"):
        f = line.rstrip("\n").split("\t")
        if len(f) != 4:
            continue
        case, meth, first, status = f
        status = {"PASS": "pass", "SKIP": "skip"}.get(status, "fail")  # FAIL, ABORT
        out.append((case, status, f"{meth} {first}" + (" (evp_test stopped here)" if f[3] == "ABORT" else "")))
    return out


def _ssl_results(raw, cnf):
    """ssl_test's TAP: "    ok N - iteration N" per test of the .cnf; N-1 indexes test-<i> = NAME."""
    names = {}
    for line in open(cnf, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*test-(\d+)\s*=\s*(\S+)", line)
        if m:
            names[int(m.group(1))] = m.group(2)
    base = os.path.basename(cnf)
    out = []
    for line in open(raw, encoding="utf-8", errors="replace"):
        m = re.match(r"\s+(not ok|ok) (\d+) - iteration \d+", line)
        if m:
            i = int(m.group(2)) - 1
            skip = "# skip" in line.lower()
            status = "skip" if skip else ("pass" if m.group(1) == "ok" else "fail")
            out.append((f"{base}:{names.get(i, i)}", status, ""))
    return out


def _pytest_results(raw):
    """The JSON lines of scripts/ci/compat/pytest_outcomes.py: a test fails if any phase failed, is
    skipped if a phase was skipped, passes otherwise; each subtest is a case of its own."""
    cases, order = {}, []
    if os.path.exists(raw):
        for line in open(raw, encoding="utf-8", errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            key = r["nodeid"] + (f" [subtest {r['sub']}{': ' + r['msg'] if r.get('msg') else ''}]"
                                 if r.get("sub") else "")
            if r["when"] == "collect":
                key = f"collect {r['nodeid']}"
            if key not in cases:
                cases[key] = "pass"
                order.append(key)
            if r["outcome"] == "failed":
                cases[key] = "fail"
            elif r["outcome"] == "skipped" and cases[key] != "fail":
                cases[key] = "skip"
    return [(k, cases[k], "") for k in order]


def cmd_results(kind, raw, out, cnf=None):
    if kind == "evp":
        rows = _evp_results(raw) if os.path.exists(raw) else []
    elif kind == "ssl":
        rows = _ssl_results(raw, cnf)
    elif kind == "pytest":
        rows = _pytest_results(raw)
    else:
        print(f"compat: unknown result kind {kind}", file=sys.stderr)
        return 2
    with open(out, "a", encoding="utf-8") as f:
        for case, status, label in rows:
            f.write(f"{case}\t{status}\t{label}\n")
    return 0


# ---- compare ------------------------------------------------------------------------------------


def _load(path):
    rows = {}
    order = []
    if os.path.exists(path):
        for line in open(path, encoding="utf-8", errors="replace"):
            f = line.rstrip("\n").split("\t")
            if len(f) < 2:
                continue
            if f[0] in rows:  # a case name seen twice (should not happen): keep both, numbered
                n = 2
                while f"{f[0]} #{n}" in rows:
                    n += 1
                f[0] = f"{f[0]} #{n}"
            rows[f[0]] = (f[1], f[2] if len(f) > 2 else "")
            order.append(f[0])
    return rows, order


def _rc_note(rc):
    rc = int(rc)
    if rc in (124, 137):
        return "timed out"
    if rc > 128:
        return f"killed by signal {rc - 128}"
    return f"exit {rc}"


def _log_hint(log):
    """The last line of a log that names an error, for a run that ended abnormally."""
    try:
        lines = open(log, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if re.search(r"error|Error|ERROR|Segmentation|Aborted|Killed", line):
            line = line.strip()  # long lines: the start and the end, where OpenSSL's reasons are
            return line if len(line) <= 400 else line[:120] + " ... " + line[-280:]
    return lines[-1].strip()[:400] if lines else ""


def cmd_compare(suite, def_tsv, def_rc, acc_tsv, acc_rc, diff_path, normal_rcs="0,1",
                def_log="", acc_log=""):
    d, d_order = _load(def_tsv)
    a, a_order = _load(acc_tsv)
    normal = {int(x) for x in normal_rcs.split(",")}

    def counts(rows):
        c = {"pass": 0, "fail": 0, "skip": 0}
        for status, _ in rows.values():
            c[status] = c.get(status, 0) + 1
        return c

    cd, ca = counts(d), counts(a)
    head = (f"compat: {suite}: default {cd['pass']} pass {cd['fail']} fail / "
            f"accelaes {ca['pass']} pass {ca['fail']} fail")
    notes = []
    for name, rc, log in (("default", def_rc, def_log), ("accelaes", acc_rc, acc_log)):
        if int(rc) not in normal:
            hint = _log_hint(log) if log else ""
            notes.append(f"{name} run: {_rc_note(rc)}" + (f" ({log}: {hint})" if hint else ""))
    if not d:
        print(f"{head}: could not run (the default run gave no results; "
              f"{'; '.join(notes) or 'exit ' + str(def_rc)})")
        return 2
    diffs = []
    for case in d_order + [c for c in a_order if c not in d]:
        sd = d.get(case, ("not run", ""))
        sa = a.get(case, ("not run", ""))
        if sd[0] != sa[0]:
            label = max(sd[1], sa[1], key=len)
            diffs.append(f"{case}{' (' + label + ')' if label else ''}: default {sd[0]}, accelaes {sa[0]}")
    abnormal_acc = int(acc_rc) not in normal
    abnormal_def = int(def_rc) not in normal
    verdict = "SAME" if not diffs and not abnormal_acc and not abnormal_def else "DIFFERENT"
    print(f"{head}: {verdict}")
    if cd["skip"] or ca["skip"]:
        print(f"  skipped: default {cd['skip']} / accelaes {ca['skip']}")
    nd, na = sum(1 for c in a if c not in d), sum(1 for c in d if c not in a)
    if nd or na:
        print(f"  not run (absent from one run's results): default {nd} / accelaes {na}")
    for n in notes:
        print(f"  {n}")
    with open(diff_path, "w", encoding="utf-8") as f:
        for line in diffs:
            f.write(line + "\n")
    if diffs:
        shown = diffs[:40]
        print(f"  {len(diffs)} differing case(s)" +
              (f", the first {len(shown)} (all in {diff_path}):" if len(diffs) > len(shown) else ":"))
        for line in shown:
            print(f"    {line}")
    return 0 if verdict == "SAME" else 1


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    fn = {"pick-version": cmd_pick_version, "patch-evp-test": cmd_patch_evp_test,
          "stat-total": cmd_stat_total, "results": cmd_results, "compare": cmd_compare}.get(cmd)
    if fn is None:
        print(__doc__, file=sys.stderr)
        return 2
    return fn(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
