"""tests/system/test_files_hostile.py: build/accelaes-files where someone else can write OUT_DIR, or kills the run, or left
the key file open to others (issue #14 items 3 and 4):

- a symbolic link planted where an output directory belongs (OUT_DIR/sub -> elsewhere) is never followed: the run
  fails for that subtree and nothing is written outside OUT_DIR;
- kill -9 at random moments, encrypting and decrypting large files over outputs of an earlier run (on tmpfs and on
  the temporary directory's disk filesystem): no file under OUT_DIR, under any name (hidden included), ever holds a
  partial output, and every output name holds a complete output all along (the old one or the new one);
- temporaries that killed runs left (possible only where the filesystem has no O_TMPFILE, forced here with
  ACCELAES_FILES_NO_TMPFILE) are removed by the next run, and a live run's are left alone;
- a key file that group or others may access is refused, unless --allow-unsafe-key-perms;
- with a descriptor limit too low to hold every directory open, files reopen their directories and still work;
- a FIFO, a device node or a link to one planted at an output's name is replaced without being opened (issue #30)."""

import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SEED  # noqa: E402
from test_files import (TMP_MARK, fileprov, keyfile, make_tree, openssl_decrypt, outputs,  # noqa: F401
                        run_tool, tool)

TMP_NAME = re.compile(r"^\.(.+)" + re.escape(TMP_MARK) + r"(\d+)\.(\d+)$")


def tree_listing(root):
    """Every entry under root, hidden ones and links included, with what it is and its bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p.relative_to(root))] = ("file", p.read_bytes())
            else:
                out[str(p.relative_to(root))] = ("dir", None)
    return out


# ---- OUT_DIR written by someone else ----

def test_symlink_in_out_dir_is_not_followed(tool, fileprov, openssl_env, tmp_path):
    """OUT_DIR/sub -> a 0700 directory elsewhere, OUT_DIR/sub2 a plain file, OUT_DIR/top.bin -> a file elsewhere,
    all planted before the run: nothing outside OUT_DIR changes, the subtrees fail with a clear message and
    exit 1, the rest completes, and the planted final-name link is replaced, not written through."""
    key, kpath = keyfile(tmp_path, 16)
    src, dst, victim = tmp_path / "in", tmp_path / "out", tmp_path / "victim"
    files = {"top.bin": os.urandom(1000), "sub/a.bin": os.urandom(2000), "sub/deeper/b.bin": os.urandom(300),
             "sub2/c.bin": os.urandom(10)}
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    victim.mkdir(mode=0o700)
    (victim / "a.bin").write_bytes(b"root's own file")
    (victim / "top-victim").write_bytes(b"another")
    dst.mkdir()
    (dst / "sub").symlink_to(victim)
    (dst / "sub2").write_bytes(b"a file where a directory belongs")
    (dst / "top.bin").symlink_to(victim / "top-victim")
    before = tree_listing(victim)
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=openssl_env)
    err = res.stderr.decode()
    assert tree_listing(victim) == before, "something was written outside OUT_DIR"
    assert res.returncode == 1, err
    assert f"{dst / 'sub'}: is a symbolic link: not followed" in err
    assert f"{dst / 'sub2'}: exists and is not a directory" in err
    assert (dst / "sub").is_symlink() and (dst / "sub2").read_bytes() == b"a file where a directory belongs"
    assert not (dst / "top.bin").is_symlink()
    assert openssl_decrypt("aes-128-cbc", key, (dst / "top.bin").read_bytes()) == files["top.bin"]
    assert not [n for n in os.listdir(dst) if TMP_MARK in n]


class OpenWatch:
    """inotify IN_OPEN on some paths: which of them anything opened (a FIFO's or a device's open acts at once)."""
    IN_OPEN = 0x20

    def __init__(self, paths):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.names = {}
        for path in paths:
            wd = self.libc.inotify_add_watch(self.fd, str(path).encode(), self.IN_OPEN)
            assert wd >= 0, f"inotify_add_watch {path}: {os.strerror(ctypes.get_errno())}"
            self.names[wd] = str(path)

    def opened(self):
        got = set()
        try:
            buf = os.read(self.fd, 65536)
        except BlockingIOError:
            return got
        off = 0
        while off + 16 <= len(buf):
            wd, mask, _cookie, length = struct.unpack_from("iIII", buf, off)
            if mask & self.IN_OPEN:
                got.add(self.names.get(wd, f"wd {wd}"))
            off += 16 + length
        return got

    def close(self):
        os.close(self.fd)


def test_output_name_holding_a_fifo_or_device_is_not_opened(tool, fileprov, openssl_env, tmp_path):
    """A FIFO, a character device node (a copy of /dev/zero's numbers, made with mknod: root only) and a symbolic
    link to such a node, each planted at an output's name before the run: the run replaces each with the output
    and never opens what was there (inotify IN_OPEN on each planted inode and on the link's target stays silent);
    the old drop_old_cache opened the FIFO and the device to drop their page cache."""
    key, kpath = keyfile(tmp_path, 16)
    src, dst, elsewhere = tmp_path / "in", tmp_path / "out", tmp_path / "elsewhere"
    for d in (src, dst, elsewhere):
        d.mkdir()
    planted = {"fifo.bin": dst / "fifo.bin"}
    os.mkfifo(planted["fifo.bin"], 0o600)
    if os.geteuid() == 0:
        zero = os.stat("/dev/zero").st_rdev
        os.mknod(dst / "dev.bin", 0o600 | stat.S_IFCHR, zero)
        os.mknod(elsewhere / "zero", 0o600 | stat.S_IFCHR, zero)
        (dst / "link.bin").symlink_to(elsewhere / "zero")
        planted.update({"dev.bin": dst / "dev.bin", "link.bin": elsewhere / "zero"})
    else:
        print("not root: no device nodes (mknod needs CAP_MKNOD); the FIFO alone is planted")
    files = {name: os.urandom(3000 + i) for i, name in enumerate(planted)}
    for name, data in files.items():
        (src / name).write_bytes(data)
    watch = OpenWatch(planted.values())
    try:
        res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=openssl_env)
        opened = watch.opened()
    finally:
        watch.close()
    assert opened == set(), f"opened what was planted at an output's name: {sorted(opened)}"
    assert res.returncode == 0, res.stderr.decode()
    for name, data in files.items():
        out = dst / name
        assert out.is_file() and not out.is_symlink(), name
        assert openssl_decrypt("aes-128-cbc", key, out.read_bytes()) == data, name
    if os.geteuid() == 0:
        assert stat.S_ISCHR(os.stat(elsewhere / "zero").st_mode), "the link's target was touched"
    assert not [n for n in os.listdir(dst) if TMP_MARK in n]


# ---- kill -9 at any moment ----

@pytest.fixture(params=["tmpfs", "disk"])
def bigdir(request):
    """Large files on tmpfs (the runs are then bound by the cipher, and kills land all through them) and on the
    disk filesystem of the temporary directory (ext4 on the development machine), where replacing an existing output
    takes other paths through the kernel (auto_da_alloc, discards)."""
    where = tempfile.gettempdir() if request.param == "disk" or not os.path.isdir("/dev/shm") else "/dev/shm"
    base = Path(tempfile.mkdtemp(dir=where, prefix="accelaes-kill-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def source_of(rel):
    """The input a file under OUT_DIR stands for: its own name, or the one inside a temporary's name."""
    head, name = os.path.split(rel)
    m = TMP_NAME.match(name)
    return os.path.join(head, m.group(1)) if m else rel


def check_outputs(dst, files, mode, seen, check):
    """Every regular file under dst, any name: a complete output of its input. Encrypted outputs must have exactly
    the length of a complete one; each new one (by inode) is hard-linked into `check`, decrypted there at the end.
    Decrypted outputs are compared with the input right away."""
    for dirpath, _, names in os.walk(dst):
        for name in names:
            p = Path(dirpath, name)
            rel = str(p.relative_to(dst))
            src_rel = source_of(rel)
            assert src_rel in files, f"unexpected file {rel}"
            st = p.stat()
            if (st.st_ino, st.st_mtime_ns) in seen:
                continue
            seen.add((st.st_ino, st.st_mtime_ns))
            data = files[src_rel]
            if mode == "encrypt":
                assert st.st_size == 16 + len(data) + 16 - len(data) % 16, f"{rel}: partial output"
                os.link(p, check / f"{src_rel.replace('/', '_')}.{len(seen)}")
            else:
                assert st.st_size == len(data) and p.read_bytes() == data, f"{rel}: partial output"


@pytest.mark.parametrize("mode", ["encrypt", "decrypt"])
def test_kill_9_at_random_moments_leaves_no_partial_file(tool, fileprov, openssl_env, bigdir, mode):
    rng = random.Random(SEED)
    key, kpath = keyfile(bigdir, 16)
    src, enc, dst, check = bigdir / "in", bigdir / "enc", bigdir / "out", bigdir / "check"
    check.mkdir()
    files = make_tree(src, [64 << 20] * 3 + [5000, 70000, 1 << 20])
    if mode == "decrypt":  # the inputs: one complete encryption
        res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, enc, "--provider", fileprov, env=openssl_env)
        assert res.returncode == 0, res.stderr.decode()
        src = enc
    args = [str(tool), mode, "--cipher", "aes-128-cbc", "--key-file", str(kpath), "--provider", fileprov,
            "--threads", "2", str(src), str(dst)]
    subprocess.run(args, env=openssl_env, check=True, capture_output=True, timeout=120)  # also: outputs to replace
    t0 = time.monotonic()   # a run that replaces outputs, as the killed ones do, is the one to time
    subprocess.run(args, env=openssl_env, check=True, capture_output=True, timeout=120)
    full = time.monotonic() - t0
    seen, killed = set(), 0
    check_outputs(dst, files, mode, seen, check)
    for _ in range(12):
        proc = subprocess.Popen(args, env=openssl_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0, 0.7 * full))   # most kills land inside the run, from start-up to the end
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        killed += proc.returncode == -signal.SIGKILL
        check_outputs(dst, files, mode, seen, check)
        assert {rel for rel in outputs(dst) if TMP_MARK not in rel} == set(files), "an output name went missing"
    if killed < 6:
        pytest.skip(f"only {killed} of 12 runs were still going when killed (a full run took {full:.2f} s)")
    res = subprocess.run(args, env=openssl_env, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert not [p for p in dst.rglob("*") if TMP_MARK in p.name], "a later run leaves no temporary behind"
    assert {rel for rel in outputs(dst)} == set(files)
    check_outputs(dst, files, mode, seen, check)
    if mode == "encrypt":  # every output ever seen, decrypted by OpenSSL's own provider
        res = run_tool(tool, "decrypt", "aes-128-cbc", kpath, check, bigdir / "checked", "--provider", "default",
                       env=openssl_env)
        assert res.returncode == 0, res.stderr.decode()
        for p in (bigdir / "checked").iterdir():
            assert p.read_bytes() == files[p.name.rsplit(".", 1)[0].replace("_", "/")], p.name


# ---- temporaries left by killed runs ----

def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_removed(tool, fileprov, openssl_env, tmp_path):
    """Temporaries of a dead process are removed by the next run over that directory; a live process's (another run
    writing there now) and names that merely look alike are kept."""
    _, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    make_tree(src, [100, 200, 300])
    (dst / "sub" / "d0").mkdir(parents=True)
    dead, live = dead_pid(), os.getpid()
    stale = [dst / f".f001.bin{TMP_MARK}{dead}.7", dst / "sub" / "d0" / f".f000.bin{TMP_MARK}{dead}.0",
             dst / f".gone.bin{TMP_MARK}{dead}.3"]
    kept = [dst / f".f002.bin{TMP_MARK}{live}.1", dst / f"x{TMP_MARK}{dead}.1", dst / f".y{TMP_MARK}{dead}.1.z"]
    for p in stale + kept:
        p.write_bytes(b"partial")
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert not [p for p in stale if p.exists()]
    assert all(p.exists() for p in kept)


def test_without_tmpfile_a_killed_run_is_cleaned_up(tool, fileprov, openssl_env, bigdir):
    """Where the filesystem has no O_TMPFILE, outputs go through hidden temporaries: a kill can leave one behind
    (partial), and the next run removes it and completes every output."""
    key, kpath = keyfile(bigdir, 16)
    src, dst = bigdir / "in", bigdir / "out"
    files = make_tree(src, [64 << 20] * 2 + [1000])
    env = dict(openssl_env, ACCELAES_FILES_NO_TMPFILE="1")
    args = [str(tool), "encrypt", "--cipher", "aes-128-ctr", "--key-file", str(kpath), "--provider", fileprov,
            "--threads", "1", str(src), str(dst)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        if dst.exists() and any(TMP_MARK in n for n in os.listdir(dst)):
            break
        time.sleep(0.0005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    if proc.returncode != -signal.SIGKILL or not any(TMP_MARK in n for n in os.listdir(dst)):
        pytest.skip("the run was not caught with a temporary in place")
    res = subprocess.run(args, env=env, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert not [n for n in os.listdir(dst) if TMP_MARK in n], "the killed run's temporary is still there"
    out = outputs(dst)
    assert set(out) == set(files)
    for rel, data in files.items():
        assert openssl_decrypt("aes-128-ctr", key, out[rel].read_bytes()) == data, rel


# ---- the key file ----

@pytest.mark.parametrize("perm", [0o644, 0o640, 0o604, 0o620, 0o602, 0o610], ids=lambda p: f"{p:04o}")
def test_key_file_open_to_others_is_refused(tool, fileprov, openssl_env, tmp_path, perm):
    key, kpath = keyfile(tmp_path, 16)
    kpath.chmod(perm)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [100])
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=openssl_env)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert f"UNPROTECTED KEY FILE: permissions {perm:04o} for '{kpath}' are too open" in err
    assert "--allow-unsafe-key-perms" in err
    assert not dst.exists() or not any(dst.iterdir())
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov,
                   "--allow-unsafe-key-perms", env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert openssl_decrypt("aes-128-cbc", key, (dst / "sub/d0/f000.bin").read_bytes()) == files["sub/d0/f000.bin"]


def test_private_key_file_is_taken(tool, fileprov, openssl_env, tmp_path):
    """0600 and 0400 are fine, and so is a symbolic link to such a key (the check is on the file it names)."""
    key, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    make_tree(src, [100])
    (tmp_path / "link").symlink_to(kpath)
    for perm, path in ((0o600, kpath), (0o400, kpath), (0o400, tmp_path / "link")):
        kpath.chmod(perm)
        res = run_tool(tool, "encrypt", "aes-128-cbc", path, src, tmp_path / f"out{perm:o}", "--provider",
                       fileprov, env=openssl_env)
        assert res.returncode == 0, res.stderr.decode()
    res = subprocess.run([str(tool), "--help"], capture_output=True)
    assert res.returncode == 0 and b"--allow-unsafe-key-perms" in res.stdout


# ---- many directories, few descriptors ----

def low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


def test_more_directories_than_descriptors(tool, fileprov, openssl_env, tmp_path):
    """100 directories under a limit of 128 descriptors: the walk cannot hold them all, so files reopen theirs (name
    by name, without following links); both directions still complete."""
    key, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    files = {}
    for i in range(100):
        rel = f"d{i % 10}/e{i}/f.bin"
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        files[rel] = os.urandom(100 + i)
        (src / rel).write_bytes(files[rel])
    for mode, a, b in (("encrypt", src, tmp_path / "enc"), ("decrypt", tmp_path / "enc", tmp_path / "dec")):
        res = run_tool(tool, mode, "aes-128-cbc", kpath, a, b, "--provider", fileprov, "--threads", "2",
                       env=openssl_env, preexec_fn=low_fd_limit)
        assert res.returncode == 0, res.stderr.decode()
    assert {rel: p.read_bytes() for rel, p in outputs(tmp_path / "dec").items()} == files
