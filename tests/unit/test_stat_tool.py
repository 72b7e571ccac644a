"""tests/unit/test_stat_tool.py: accelaes-stat on hostile segment names and as an operator's tool.

- A FIFO at the segment's name: the tool refuses it at once (nonzero exit, a message), it never
  blocks in open (issue #14 item 2: a `timeout 10` run was still alive after 25 minutes).
- --watch stops within 100 ms of SIGTERM or SIGINT, whether it is sleeping between refreshes,
  refreshing a FIFO, or blocked writing to a reader that has stopped reading.
- --user NAME and --all-users (issue #14 item 8): as root, every user's /accelaes.<uid> with its
  user, counts from real workloads run under other uids; a segment whose owner is not the uid in
  its name is refused; FIFOs, symlinks and other names are skipped; nothing is written to them.
  Not root: --all-users shows the caller's own table and says "permission denied" for the
  others (exit 1); --user OTHER exits 1 with a permission message.
- No silent zeros (issue #30): a table that cannot be read (absent, another owner, wrong mode,
  size or version, damaged, may not be opened) is a non-zero exit with the reason on stderr, and
  --json gives it an "error" and null totals, units and processes, never zeros. Root reads another
  user's table at a name of its own (ACCELAES_SHM_NAME) with --user, and is told so without it.

Segments for other uids are created by build/tests/test_sched_mp run under those uids with
setpriv(1) and ACCELAES_SHM_NAME unset, so they are the real names /accelaes.<uid>; every one is
removed afterwards. Timings are printed (pytest -s) and asserted with slack for a loaded box.
"""

import fcntl
import hashlib
import json
import os
import pwd
import secrets
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD

STAT = BUILD / "accelaes-stat"
WORKER = BUILD / "tests" / "test_sched_mp"
SHM = "/dev/shm"
NOBODY = 65534
SLACK_S = 0.5        # the requirement is 100 ms; the rest is for a loaded 2-core machine


def need(*paths):
    for path in paths:
        if not path.exists():
            pytest.skip(f"{path} is not built (run `make build-only`)")


def need_root():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to create segments under other uids")


@pytest.fixture
def seg():
    """(name, env) for a fresh ACCELAES_SHM_NAME; files under that name are removed afterwards."""
    name = f"/accelaes-test-stat-{os.getpid()}-{secrets.token_hex(4)}"
    env = dict(os.environ, ACCELAES_SHM_NAME=name)
    yield name, env
    for entry in os.listdir(SHM):
        if ("/" + entry).startswith(name):
            os.unlink(os.path.join(SHM, entry))


def unnamed_env():
    """The environment without the session's ACCELAES_SHM_NAME: the tool reads /accelaes.<uid>."""
    return {k: v for k, v in os.environ.items() if k != "ACCELAES_SHM_NAME"}


def run_stat(*args, env=None, user=None, timeout=10):
    """Run accelaes-stat; a hang is a failure that says so, not a pytest timeout."""
    need(STAT)
    env = unnamed_env() if env is None else env
    cmd = [str(STAT), *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"accelaes-stat {' '.join(args)} was still running after {timeout} s")
    return proc, time.monotonic() - start


def worker(env, *args, user=None):
    need(WORKER)
    cmd = [str(WORKER), "worker", *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"worker {args} as {user}: {proc.stdout} {proc.stderr}"


def test_fifo_at_segment_name_is_refused(seg):
    name, env = seg
    os.mkfifo(SHM + name, 0o600)
    for args in ([], ["--json"]):
        proc, took = run_stat(*args, env=env)
        print(f"accelaes-stat {args} on a FIFO: exit {proc.returncode} after {took * 1000:.0f} ms")
        assert took < 2.0
        assert proc.returncode == 1, proc
        assert "not a regular file" in proc.stderr and name in proc.stderr, proc.stderr
    doc = json.loads(run_stat("--json", env=env)[0].stdout)
    assert doc["exists"] is True and doc["shared"] is False and "FIFO" in doc["error"]


def pipe_of_one_page():
    """A pipe that holds a single page: one refresh of a big table fills it."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    return r, w


def wait_blocked_in_write(pid, timeout=5.0):
    """Wait until pid sleeps in a write to the full pipe (x86_64 and arm64 numbers)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                if f.read().split(" ", 1)[0] in ("1", "64"):
                    return
        except OSError:
            pass
        time.sleep(0.01)
    time.sleep(0.5)   # no /proc/PID/syscall here: give it time to fill the pipe


def stop_time(cmd, env, sig, stdout, settle):
    """Seconds from sending sig to the exit of a --watch run, and its exit status."""
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.DEVNULL)
    try:
        settle(proc)
        pidfd = os.pidfd_open(proc.pid)      # readable at the exit: no polling delay in the figure
        try:
            start = time.monotonic()
            proc.send_signal(sig)
            if not select.select([pidfd], [], [], 5)[0]:
                return float("inf"), None
            took = time.monotonic() - start
        finally:
            os.close(pidfd)
        return took, proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_watch_stops_within_100ms(seg, sig):
    """Three states of a --watch run; each must end within 100 ms of the signal (+ slack)."""
    name, env = seg
    need(STAT)
    worker(env, "gpu", 64)    # 64 GPU slots: one --json refresh is ~20 KB, more than the pipe holds
    fifo = dict(env, ACCELAES_SHM_NAME=name + ".fifo")
    os.mkfifo(SHM + fifo["ACCELAES_SHM_NAME"], 0o600)
    results = {}

    def sleeping(proc):          # between refreshes: the first line is out, it sleeps for 1 s
        if select.select([proc.stdout], [], [], 5)[0]:     # (a run blocked in open prints nothing)
            proc.stdout.readline()
        time.sleep(0.3)
    results["sleeping"] = stop_time([str(STAT), "--json", "--watch"], env, sig, subprocess.PIPE, sleeping)
    results["fifo segment"] = stop_time([str(STAT), "--json", "--watch"], fifo, sig, subprocess.PIPE, sleeping)
    r, w = pipe_of_one_page()
    try:
        results["reader stopped"] = stop_time([str(STAT), "--json", "--watch"], env, sig, w,
                                              lambda proc: wait_blocked_in_write(proc.pid))
    finally:
        os.close(r)
        os.close(w)
    print(", ".join(f"{k}: {v[0] * 1000:.1f} ms (exit {v[1]})" for k, v in results.items()))
    for state, (took, rc) in results.items():
        assert took < SLACK_S, f"{sig.name} while {state}: stopped after {took:.3f} s"
        assert rc == 0, f"{sig.name} while {state}: exit {rc}"


def test_bad_user_arguments():
    proc, _ = run_stat("--user", "no-such-user-" + secrets.token_hex(3))
    assert proc.returncode == 2 and "no such user" in proc.stderr, proc
    proc, _ = run_stat("--user")
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc, _ = run_stat("--user", "0", "--all-users")
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc, _ = run_stat("--help")
    assert proc.returncode == 0 and "--all-users" in proc.stdout and "--user" in proc.stdout


def free_uid(taken):
    """A uid with no passwd entry and no segment: shown by number only."""
    while True:
        uid = 3_000_000_000 + secrets.randbelow(1_000_000)
        if uid not in taken and not os.path.lexists(f"{SHM}/accelaes.{uid}"):
            try:
                pwd.getpwuid(uid)
            except KeyError:
                return uid


@pytest.fixture
def users():
    """Real segments of nobody and of a passwd-less uid, made by workloads under those uids,
    plus the files --all-users must skip or refuse: a FIFO and a symlink named accelaes.<their
    owner's uid>, and near-miss names. Yields (nobody, other, mismatch, (fifo, link)) uids."""
    need_root()
    need(STAT, WORKER)
    if os.path.lexists(f"{SHM}/accelaes.{NOBODY}"):
        pytest.skip(f"{SHM}/accelaes.{NOBODY} already exists: not touching a real user's table")
    other = free_uid({NOBODY})
    mismatch = free_uid({NOBODY, other})
    fifo_uid = free_uid({NOBODY, other, mismatch})
    link_uid = free_uid({NOBODY, other, mismatch, fifo_uid})
    made = [f"accelaes.{u}" for u in (NOBODY, other, mismatch, fifo_uid, link_uid)]
    made += ["accelaes.0012", "accelaes.12x"]
    env = {k: v for k, v in os.environ.items() if k != "ACCELAES_SHM_NAME"}
    try:
        worker(env, "count", 0, 1_000_000, 0, 0, user=NOBODY)
        worker(env, "count", 0, 0, 2_000_000, 0, user=other)
        # A valid table of `other` under mismatch's name: the owner is not the uid in the name.
        os.link(f"{SHM}/accelaes.{other}", f"{SHM}/accelaes.{mismatch}")
        os.mkfifo(f"{SHM}/accelaes.{fifo_uid}", 0o600)
        os.chown(f"{SHM}/accelaes.{fifo_uid}", fifo_uid, fifo_uid)
        os.symlink(f"{SHM}/accelaes.{other}", f"{SHM}/accelaes.{link_uid}")
        os.lchown(f"{SHM}/accelaes.{link_uid}", link_uid, link_uid)
        for junk in ("accelaes.0012", "accelaes.12x"):     # not exactly accelaes.<uid>
            shutil.copyfile(f"{SHM}/accelaes.{other}", f"{SHM}/{junk}")
        yield NOBODY, other, mismatch, (fifo_uid, link_uid)
    finally:
        for entry in made:
            try:
                os.unlink(f"{SHM}/{entry}")
            except FileNotFoundError:
                pass


def digest(uid):
    with open(f"{SHM}/accelaes.{uid}", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.fstat(f.fileno()).st_mtime_ns


@pytest.mark.machine_wide   # real /accelaes.<uid> segments, nobody's among them
def test_all_users_as_root(users):
    nobody, other, mismatch, (fifo, link) = users
    before = {u: digest(u) for u in (nobody, other)}
    proc, took = run_stat("--all-users", "--json")
    # mismatch's table is listed but not read: an error exit, said on stderr
    assert proc.returncode == 1 and f"accelaes.{mismatch}: owned by another user" in proc.stderr, proc
    doc = json.loads(proc.stdout)
    print(f"--all-users --json: {sorted(doc)} in {took * 1000:.0f} ms")
    mine = {str(u) for u in (nobody, other, mismatch)}
    assert mine <= set(doc)
    assert not {str(fifo), str(link), "12", "0012"} & set(doc), sorted(doc)   # skipped, not refused
    n, o, m = doc[str(nobody)], doc[str(other)], doc[str(mismatch)]
    assert n["shared"] is True and n["uid"] == nobody and n["user"] == "nobody"
    assert n["segment"] == f"/accelaes.{nobody}" and n["totals"]["split_bytes"] == 1_000_000
    assert o["shared"] is True and o["uid"] == other and o["user"] is None
    assert o["totals"]["batch_bytes"] == 2_000_000 and o["totals"]["split_bytes"] == 0
    assert m["shared"] is False and m["units"] is None and m["totals"] is None, m
    assert "owned by another user" in m["error"], m
    text, _ = run_stat("--all-users")
    assert text.returncode == 1
    assert f"== nobody (uid {nobody}): /accelaes.{nobody} ==" in text.stdout, text.stdout
    assert f"== uid {other}: /accelaes.{other} ==" in text.stdout
    assert f"/accelaes.{mismatch} is unusable: owned by another user" in text.stdout
    assert {u: digest(u) for u in (nobody, other)} == before, "a reader changed a segment"


@pytest.mark.machine_wide   # real /accelaes.<uid> segments, nobody's among them
def test_user_as_root(users):
    nobody, other, mismatch, _ = users
    for who in ("nobody", str(nobody)):
        proc, _ = run_stat("--user", who, "--json", env=unnamed_env())
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["uid"] == nobody and doc["segment"] == f"/accelaes.{nobody}" and doc["shared"] is True
        assert doc["totals"]["split_bytes"] == 1_000_000 and doc["totals"]["batch_bytes"] == 0
    text, _ = run_stat("--user", "nobody")
    assert text.returncode == 0 and f"/accelaes.{nobody} of nobody (uid {nobody})" in text.stdout
    assert f"accelaes.{other}" not in text.stdout
    proc, _ = run_stat("--user", str(mismatch), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and "owned by another user" in proc.stderr, proc
    assert doc["shared"] is False and "owned by another user" in doc["error"] and doc["totals"] is None


@pytest.mark.machine_wide   # real /accelaes.<uid> segments, nobody's among them
def test_not_root_sees_only_its_own(users):
    nobody, other, _, _ = users
    proc, _ = run_stat("--all-users", "--json", user=other)
    assert proc.returncode == 1 and "permission denied" in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc[str(other)]["shared"] is True and doc[str(other)]["totals"]["batch_bytes"] == 2_000_000
    assert doc[str(nobody)]["shared"] is False and "permission denied" in doc[str(nobody)]["error"]
    assert doc[str(nobody)]["units"] is None and doc[str(nobody)]["totals"] is None
    proc, _ = run_stat("--user", "nobody", user=other)
    assert proc.returncode == 1 and "permission denied" in proc.stderr, proc
    proc, _ = run_stat("--user", str(other), "--json", user=other)
    assert proc.returncode == 0 and json.loads(proc.stdout)["shared"] is True


# ---- no silent zeros (issue #30) ----

def good_segment(env):
    """The bytes of a valid table, made by a real attach under env's name."""
    worker(env, "info")
    with open(SHM + env["ACCELAES_SHM_NAME"], "rb") as f:
        return f.read()


def plant(name, data, mode=0o600):
    path = SHM + name
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.fchmod(fd, mode)
    os.close(fd)


def wrong_version(data):
    """The table with its version field (after the 8-byte magic) one higher: another release's layout."""
    version = int.from_bytes(data[8:12], "little")
    return data[:8] + (version + 1).to_bytes(4, "little") + data[12:]


UNREADABLE = {   # case: (how to make the bytes from a good table, mode, exit status, words of the reason)
    "missing": (None, None, 3, "no segment"),
    "wrong mode": (lambda d: d, 0o640, 1, "mode is 0640"),
    "short": (lambda d: d[:4096], 0o600, 1, "wrong size"),
    "empty": (lambda d: b"", 0o600, 1, "wrong size"),
    "wrong version": (wrong_version, 0o600, 1, "unsupported version"),
    "zeros": (lambda d: bytes(len(d)), 0o600, 1, "bad magic"),
    "another owner": (lambda d: d, 0o600, 1, "owned by another user"),
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_unreadable_table_is_an_error_never_zeros(seg, case):
    """Each way a table can fail to be read: a non-zero exit (3 for no segment, else 1), the reason on stderr,
    and in --json an "error" with null totals, units and processes, so a script summing totals cannot read 0."""
    name, env = seg
    make, mode, rc, reason = UNREADABLE[case]
    bad = dict(env, ACCELAES_SHM_NAME=name + ".bad")
    good = good_segment(env)
    if make is not None:
        plant(bad["ACCELAES_SHM_NAME"], make(good), mode)
    if case == "another owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to give the table to another uid (chown)")
        os.chown(SHM + bad["ACCELAES_SHM_NAME"], NOBODY, NOBODY)
    proc, _ = run_stat("--json", env=bad)
    assert proc.returncode == rc, (case, proc)
    assert reason in proc.stderr and bad["ACCELAES_SHM_NAME"] in proc.stderr, (case, proc.stderr)
    doc = json.loads(proc.stdout)
    assert doc["shared"] is False and reason in doc["error"], doc
    assert doc["totals"] is None and doc["units"] is None and doc["processes"] is None, doc
    text, _ = run_stat(env=bad)
    assert text.returncode == rc and reason in text.stderr and text.stdout == "", (case, text)
    proc, _ = run_stat("--json", env=env)   # the good table beside it: read, exit 0, counts present
    assert proc.returncode == 0 and json.loads(proc.stdout)["totals"]["inline_bytes"] == 0, proc


def test_not_root_may_not_open_another_users_table(seg):
    """Root's own 0600 table read by nobody: permission denied is an error exit, not zeros."""
    need_root()
    name, env = seg
    good_segment(env)
    proc, _ = run_stat("--json", "--user", "0", env=env, user=NOBODY)
    assert proc.returncode == 1 and "permission denied" in proc.stderr, proc
    assert json.loads(proc.stdout)["totals"] is None


@pytest.fixture
def throwaway_user():
    """A system user made for the test (useradd) and removed after it; (name, uid)."""
    need_root()
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("needs useradd and userdel to make a throwaway user")
    name = "acst" + secrets.token_hex(4)
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"useradd {name} failed: {made.stderr.strip()}")
    try:
        yield name, pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


def test_root_reads_another_users_named_segment(seg, throwaway_user):
    """A server running as another user (PostgreSQL as postgres) with a segment name of its own: root names it
    with ACCELAES_SHM_NAME and the user with --user, and reads its counts. The name alone (owner: the caller)
    is an error exit that says how; --user alone reads /accelaes.<uid>, which that user never made (exit 3)."""
    name, env = seg
    user, uid = throwaway_user
    worker(env, "count", 0, 3_000_000, 0, 0, user=uid)
    assert os.stat(SHM + name).st_uid == uid
    proc, _ = run_stat("--json", env=env)
    assert proc.returncode == 1, proc
    assert "owned by another user" in proc.stderr and f"--user {uid}" in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["totals"] is None
    for who in (user, str(uid)):
        proc, _ = run_stat("--json", "--user", who, env=env)
        assert proc.returncode == 0, proc
        doc = json.loads(proc.stdout)
        assert doc["segment"] == name and doc["uid"] == uid and doc["user"] == user, doc
        assert doc["totals"]["split_bytes"] == 3_000_000, doc["totals"]
    text, _ = run_stat("--user", user, env=env)
    assert text.returncode == 0 and f"segment {name} of {user} (uid {uid})" in text.stdout, text
    proc, _ = run_stat("--json", "--user", user, env=unnamed_env())
    assert proc.returncode == 3 and json.loads(proc.stdout)["segment"] == f"/accelaes.{uid}", proc
