"""tests/unit/test_style.py: scripts/dev/style-check.sh (make style) judges only the C lines changed against a base,
in a throw-away git repository holding the project's .clang-format: a badly formatted change fails
naming its file, a well formatted one passes, and a bad line nobody touched never fails."""

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
SCRIPT = REPO / "scripts" / "dev" / "style-check.sh"
SH = shutil.which("sh") or "/bin/sh"

GOOD = """\
/* demo.c: a file clang-format leaves as it is. */
#include <stddef.h>

static int sum(const int *v, size_t n)
{
    int s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

int demo(void)
{
    static const int v[] = { 1, 2, 3 };
    return sum(v, sizeof(v) / sizeof(v[0]));
}
"""
LINE = "    int s = 0;\n"
BAD_LINE = "    int   s=0;\n"
WELL_LINE = "    int s = 1;\n"


def _tool(unversioned, pattern):
    found = shutil.which(unversioned)
    if found:
        return found
    for d in os.environ.get("PATH", "").split(os.pathsep):
        hits = sorted(glob.glob(os.path.join(d, pattern)))
        if hits:
            return hits[-1]
    return None


def have_clang_format_diff():
    cfd = (os.environ.get("CLANG_FORMAT_DIFF") or _tool("clang-format-diff", "clang-format-diff-[0-9]*")
           or (glob.glob("/usr/share/clang/clang-format-*/clang-format-diff.py") or [None])[0])
    cf = os.environ.get("CLANG_FORMAT") or _tool("clang-format", "clang-format-[0-9]*")
    return cfd is not None and cf is not None


needs_clang_format = pytest.mark.skipif(not have_clang_format_diff(),
                                        reason="clang-format / clang-format-diff not installed "
                                               "(Debian: apt-get install clang-format)")


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def check(repo, *args, env=None):
    r = subprocess.run([SH, str(SCRIPT), *args], cwd=repo, capture_output=True, text=True, timeout=120,
                       env=env)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture
def repo(tmp_path):
    """A repository with the project's .clang-format and one well formatted file, committed."""
    git(tmp_path, "init", "-q")
    shutil.copy(REPO / ".clang-format", tmp_path / ".clang-format")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "demo.c").write_text(GOOD)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "base")
    return tmp_path


def edit(repo, old, new, name="src/demo.c"):
    p = repo / name
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))


@needs_clang_format
def test_unchanged_tree_passes(repo):
    rc, out = check(repo)
    assert rc == 0, out


@needs_clang_format
def test_badly_formatted_change_fails_naming_the_file(repo):
    edit(repo, LINE, BAD_LINE)
    rc, out = check(repo)
    assert rc == 1, out
    assert "src/demo.c" in out
    assert "+    int s = 0;" in out      # the suggested diff


@needs_clang_format
def test_well_formatted_change_passes(repo):
    edit(repo, LINE, WELL_LINE)
    rc, out = check(repo)
    assert rc == 0, out


@needs_clang_format
def test_staged_change_counts(repo):
    edit(repo, LINE, BAD_LINE)
    git(repo, "add", "src/demo.c")
    rc, out = check(repo)
    assert rc == 1, out


@needs_clang_format
def test_bad_line_not_changed_does_not_fail(repo):
    # A badly formatted line already in the base, far from the change: only the change is judged.
    edit(repo, "    return sum(v, sizeof(v) / sizeof(v[0]));\n", "    return sum(v,sizeof(v)/sizeof(v[0]));\n")
    git(repo, "commit", "-q", "-am", "a bad line")
    edit(repo, LINE, WELL_LINE)
    rc, out = check(repo)
    assert rc == 0, out
    # Against the commit before it, the bad line is a change too.
    rc, out = check(repo, "HEAD~1")
    assert rc == 1, out
    assert "src/demo.c" in out


@needs_clang_format
def test_base_argument_covers_commits_since(repo):
    edit(repo, LINE, BAD_LINE)
    git(repo, "commit", "-q", "-am", "bad change")
    assert check(repo)[0] == 0                 # nothing changed since HEAD
    rc, out = check(repo, "HEAD~1")
    assert rc == 1, out


@needs_clang_format
def test_untracked_file_is_judged(repo):
    (repo / "src" / "new.c").write_text("int  f(void){return 1;}\n")
    rc, out = check(repo)
    assert rc == 1, out
    assert "src/new.c" in out


@needs_clang_format
def test_other_files_are_not_judged(repo):
    (repo / "notes.txt").write_text("int  f(void){return 1;}\n")
    edit(repo, LINE, WELL_LINE)
    git(repo, "add", "notes.txt")
    rc, out = check(repo)
    assert rc == 0, out


def test_bad_base_is_an_error(repo):
    rc, out = check(repo, "no-such-ref")
    assert rc == 2, out
    assert "no-such-ref" in out


def test_missing_clang_format_is_exit_2(repo, tmp_path_factory):
    # A PATH with what the script needs but no clang-format of any version.
    bin_dir = tmp_path_factory.mktemp("bin")
    for tool in ("git", "mktemp", "rm", "ls", "grep", "sort", "uniq", "cat", "awk", "tr", "env", "python3"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k not in ("CLANG_FORMAT", "CLANG_FORMAT_DIFF")}
    env["PATH"] = str(bin_dir)
    edit(repo, LINE, BAD_LINE)
    rc, out = check(repo, env=env)
    assert rc == 2, out
    assert "missing" in out and "clang-format" in out
