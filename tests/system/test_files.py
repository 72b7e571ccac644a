"""tests/system/test_files.py: build/accelaes-files end to end: round trips for every cipher, stock `openssl enc -d`
reading its output, fresh IVs, and every failure path (key file, unreadable input, full disk, kill -9, OUT_DIR
inside IN_DIR), each checked for a clear message, the exit status, and no truncated file under a final name.

The round trips need build/accelaes.so (skipped with the reason until it exists). The failure-path tests check the
tool's own file handling, so they use the provider under test when it is built and OpenSSL's default otherwise."""

import glob
import json
import os
import pty
import resource
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
from conftest import BUILD, require_lanes  # noqa: E402 (build/, or ACCELAES_BUILD_DIR)
TOOL = BUILD / "accelaes-files"
MODULE = BUILD / "accelaes.so"
STAT = BUILD / "accelaes-stat"
CIPHERS = [f"aes-{bits}-{mode}" for mode in ("cbc", "ctr") for bits in (128, 192, 256)]
TMP_MARK = ".accelaes-tmp."


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.skip(f"{TOOL} is not built (run `make build-only`)")
    return TOOL


@pytest.fixture(scope="module")
def fileprov(provider_name):
    """Provider for the failure-path tests: they exercise file handling, which is the same over any provider."""
    if provider_name == "accelaes" and not MODULE.exists():
        return "default"
    return provider_name


def keyfile(tmp_path, nbytes, text=None):
    key = secrets.token_bytes(nbytes)
    path = tmp_path / f"key{nbytes}.hex"
    path.write_text(text if text is not None else key.hex() + "\n")
    path.chmod(0o600)  # a key file others may read is refused
    return key, path


def make_tree(root, sizes, rng_seed=0):
    """Files of the given sizes under root (some in subdirectories); returns {relative path: content}."""
    files = {}
    for i, size in enumerate(sizes):
        rel = Path(f"f{i:03d}.bin") if i % 3 else Path("sub", f"d{i % 2}", f"f{i:03d}.bin")
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        data = os.urandom(size)
        (root / rel).write_bytes(data)
        files[str(rel)] = data
    return files


def run_tool(tool, mode, cipher, key_path, src, dst, *extra, env=None, **kw):
    args = [str(tool), mode, "--cipher", cipher, "--key-file", str(key_path), str(src), str(dst), *extra]
    if "stderr" not in kw:
        kw["capture_output"] = True
    return subprocess.run(args, env=env, timeout=120, **kw)


def openssl_decrypt(cipher, key, blob):
    """The stock command line, as a user would run it on one output file."""
    iv, body = blob[:16], blob[16:]
    res = subprocess.run(["openssl", "enc", "-d", f"-{cipher}", "-K", key.hex(), "-iv", iv.hex()],
                         input=body, capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


def outputs(dst):
    return {str(p.relative_to(dst)): p for p in dst.rglob("*") if p.is_file()}


# ---- round trips ----

@pytest.mark.parametrize("cipher", CIPHERS)
def test_round_trip_and_openssl_enc(tool, require_provider, openssl_env, tmp_path, cipher):
    bits = int(cipher.split("-")[1])
    key, kpath = keyfile(tmp_path, bits // 8)
    src, enc, dec = tmp_path / "in", tmp_path / "enc", tmp_path / "dec"
    src.mkdir()
    # 0 and 15/16/17 bytes: padding edges; 1 MiB + 5: more than one piece, not block aligned.
    files = make_tree(src, [0, 1, 15, 16, 17, 4096, 65537, (1 << 20) + 5, 3 * (1 << 20) + 16])
    res = run_tool(tool, "encrypt", cipher, kpath, src, enc, "--provider", require_provider, "--threads", "3",
                   env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stderr == b"", "quiet when stderr is not a terminal"
    out = outputs(enc)
    assert set(out) == set(files)
    for rel, data in files.items():
        blob = out[rel].read_bytes()
        pad = 16 - len(data) % 16 if cipher.endswith("cbc") else 0
        assert len(blob) == 16 + len(data) + pad
        assert out[rel].stat().st_mode & 0o777 == 0o600
        assert openssl_decrypt(cipher, key, blob) == data, rel
    res = run_tool(tool, "decrypt", cipher, kpath, enc, dec, "--provider", require_provider, env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert {rel: p.read_bytes() for rel, p in outputs(dec).items()} == files


def test_decrypts_openssl_enc_output(tool, require_provider, openssl_env, tmp_path):
    """The inverse direction: a file that stock `openssl enc` made (IV prepended) decrypts."""
    key, kpath = keyfile(tmp_path, 32)
    enc, dec = tmp_path / "enc", tmp_path / "dec"
    enc.mkdir()
    data, iv = os.urandom(100_003), os.urandom(16)
    res = subprocess.run(["openssl", "enc", "-aes-256-cbc", "-K", key.hex(), "-iv", iv.hex()], input=data,
                         capture_output=True, check=True)
    (enc / "x").write_bytes(iv + res.stdout)
    res = run_tool(tool, "decrypt", "aes-256-cbc", kpath, enc, dec, "--provider", require_provider,
                   env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert (dec / "x").read_bytes() == data


def test_ivs_are_fresh(tool, fileprov, openssl_env, tmp_path):
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    src.mkdir()
    make_tree(src, [64] * 30)
    ivs = []
    for run in ("a", "b"):  # the same files twice: new IVs each time too
        res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / run, "--provider", fileprov,
                       env=openssl_env)
        assert res.returncode == 0, res.stderr.decode()
        ivs += [p.read_bytes()[:16] for p in outputs(tmp_path / run).values()]
    assert len(ivs) == 60 and len(set(ivs)) == 60


def test_links_and_special_files(tool, fileprov, openssl_env, tmp_path):
    """Symlinks below IN_DIR are never followed (to a file, inside or outside IN_DIR, or to a directory): they and
    FIFOs are skipped with a note, and the run succeeds."""
    key, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    files = make_tree(src, [10, 20, 30])
    (tmp_path / "secret").write_bytes(b"not for IN_DIR's writer")
    (src / "link").symlink_to("f001.bin")
    (src / "sub" / "outside").symlink_to(tmp_path / "secret")
    (src / "dirlink").symlink_to("sub")
    os.mkfifo(src / "fifo")
    long_name = "L" * 250  # the temporary name must still fit in NAME_MAX
    (src / long_name).write_bytes(b"long")
    files[long_name] = b"long"
    res = run_tool(tool, "encrypt", "aes-128-ctr", kpath, src, tmp_path / "out", "--provider", fileprov,
                   env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    err = res.stderr.decode()
    for name in ("link", "sub/outside", "dirlink"):
        assert f"{src / name}: skipped (symbolic link, not followed)" in err, err
    assert f"{src / 'fifo'}: skipped (not a regular file)" in err
    out = outputs(tmp_path / "out")
    assert set(out) == set(files)
    for rel, data in files.items():
        assert openssl_decrypt("aes-128-ctr", key, out[rel].read_bytes()) == data


def test_progress_only_on_a_terminal(tool, fileprov, openssl_env, tmp_path):
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    make_tree(src, [1 << 20] * 4)
    master, slave = pty.openpty()
    try:
        res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / "out", "--provider", fileprov,
                       env=openssl_env, stderr=slave, stdout=subprocess.PIPE)
        os.close(slave)
        slave = -1
        text = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child side is closed
                break
            if not chunk:
                break
            text += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert res.returncode == 0
    assert b"4 files" in text and b"MB" in text


# ---- key file errors: exit 2, a message that says what is wrong, nothing written ----

@pytest.mark.parametrize("case,cipher,text,expect", [
    ("missing", "aes-128-cbc", None, "No such file"),
    ("not hex", "aes-128-cbc", "00112233445566778899aabbccddeefg\n", "not hex"),
    ("odd digits", "aes-128-cbc", "00112233445566778899aabbccddeef\n", "odd number"),
    ("empty", "aes-128-cbc", "\n", "empty"),
    ("too short", "aes-128-cbc", "00" * 15, "15 bytes, but aes-128-cbc needs 16"),
    ("128 for 256", "aes-256-ctr", "00" * 16, "16 bytes, but aes-256-ctr needs 32"),
    ("too long", "aes-192-cbc", "00" * 40, "40 bytes, but aes-192-cbc needs 24"),
    ("huge", "aes-192-cbc", "00" * 100, "longer than 64 bytes"),
])
def test_bad_key_file(tool, fileprov, openssl_env, tmp_path, case, cipher, text, expect):
    src = tmp_path / "in"
    make_tree(src, [100])
    kpath = tmp_path / "key"
    if text is not None:
        kpath.write_text(text)
        kpath.chmod(0o600)
    res = run_tool(tool, "encrypt", cipher, kpath, src, tmp_path / "out", "--provider", fileprov, env=openssl_env)
    assert res.returncode == 2
    assert expect in res.stderr.decode() and str(kpath) in res.stderr.decode()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_key_with_whitespace(tool, fileprov, openssl_env, tmp_path):
    key = secrets.token_bytes(24)
    spaced = " ".join(key.hex()[i:i + 8] for i in range(0, 48, 8))
    kpath = tmp_path / "key"
    kpath.write_text("  " + spaced[:20] + "\n\t" + spaced[20:] + "\r\n\n")
    kpath.chmod(0o600)
    src = tmp_path / "in"
    files = make_tree(src, [33])
    res = run_tool(tool, "encrypt", "aes-192-cbc", kpath, src, tmp_path / "out", "--provider", fileprov,
                   env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    blob = (tmp_path / "out" / "sub/d0/f000.bin").read_bytes()
    assert openssl_decrypt("aes-192-cbc", key, blob) == files["sub/d0/f000.bin"]


def test_usage_errors(tool, fileprov, openssl_env, tmp_path):
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    make_tree(src, [10])
    for extra in (["--cipher-typo"], ["--threads", "0"], ["--jobs", "0"], ["--jobs", "65"], ["third-dir"]):
        res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / "o", *extra, env=openssl_env)
        assert res.returncode == 2, extra
    res = run_tool(tool, "encrypt", "aes-128-ecb", kpath, src, tmp_path / "o", env=openssl_env)
    assert res.returncode == 2 and b"unsupported cipher" in res.stderr
    res = subprocess.run([str(tool), "--help"], capture_output=True)
    assert res.returncode == 0 and b"Subdirectories" in res.stdout


def test_provider_that_cannot_load(tool, openssl_env, tmp_path):
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    make_tree(src, [10])
    env = dict(openssl_env, OPENSSL_MODULES=str(tmp_path / "no-modules-here"))
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / "out", env=env)
    assert res.returncode == 2
    assert b"cannot load the accelaes provider" in res.stderr


@pytest.mark.parametrize("where", ["same", "inside", "parent"])
def test_out_dir_in_in_dir_refused(tool, fileprov, openssl_env, tmp_path, where):
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    make_tree(src, [10, 20])
    dst = {"same": src, "inside": src / "sub" / "out", "parent": tmp_path}[where]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=openssl_env)
    assert res.returncode == 2
    assert b"must not be the same or contain each other" in res.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


# ---- per-file failures: named on stderr, the others complete, exit 1 ----

def assert_rest_complete(dst, files, key, cipher, failed):
    out = outputs(dst)
    assert not [n for n in out if TMP_MARK in n], "temporary files left behind"
    for rel in failed:
        assert rel not in out, f"{rel} failed but has a final name"
    for rel, data in files.items():
        if rel not in failed:
            assert openssl_decrypt(cipher, key, out[rel].read_bytes()) == data, rel


def test_dangling_link_and_wrong_key(tool, fileprov, openssl_env, tmp_path):
    key, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    files = make_tree(src, [100, 200, 300])
    (src / "gone").symlink_to(tmp_path / "vanished")
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / "enc", "--provider", fileprov,
                   env=openssl_env)
    assert res.returncode == 0, res.stderr.decode()
    assert f"{src / 'gone'}: skipped (symbolic link, not followed)" in res.stderr.decode()
    assert_rest_complete(tmp_path / "enc", files, key, "aes-128-cbc", set())
    # Decrypt with another key: CBC padding fails (or, 1 time in 256, passes by chance and gives garbage).
    (tmp_path / "enc" / "short").write_bytes(b"0123456789")
    _, other = keyfile(tmp_path, 16)
    res = run_tool(tool, "decrypt", "aes-128-cbc", other, tmp_path / "enc", tmp_path / "dec", "--provider",
                   fileprov, env=openssl_env)
    err = res.stderr.decode()
    assert res.returncode == 1
    assert f"{tmp_path / 'enc' / 'short'}: shorter than the 16-byte IV" in err
    bad = {rel for rel in files if f"{tmp_path / 'enc' / rel}: bad decrypt" in err}
    assert bad, err
    out = outputs(tmp_path / "dec")
    assert not (bad | {"short"}) & set(out), "a failed file has a final name"
    assert not [n for n in out if TMP_MARK in n]


def test_unreadable_file(tool, fileprov, openssl_env, tmp_path):
    """chmod 000 blocks reads only for a user without CAP_DAC_OVERRIDE: as root, run the tool as nobody."""
    base, cmd_prefix = tmp_path, []
    if os.geteuid() == 0:
        if os.environ.get("ACCELAES_SANITIZER"):
            pytest.skip("sanitizer run: an instrumented tool whose uid was dropped cannot write its "
                        "sanitizer report files or run LeakSanitizer (the plain run covers this case)")
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv is missing: cannot drop privileges to make chmod 000 bite")
        # nobody needs to reach the tool and a work directory: use a fresh directory under /tmp.
        base = Path(subprocess.check_output(["mktemp", "-d", "/tmp/accelaes-files-XXXXXX"]).decode().strip())
        os.chmod(base, 0o777)
        cmd_prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        # The checkout may sit under a 0700 directory (a CI clone in mktemp -d): nobody gets its
        # own copies of the tool and the provider module.
        tool_copy, mods = base / "accelaes-files", base / "modules"
        shutil.copy2(TOOL, tool_copy)
        mods.mkdir()
        shutil.copy2(Path(openssl_env["OPENSSL_MODULES"]) / "accelaes.so", mods / "accelaes.so")
        for p in (tool_copy, mods, mods / "accelaes.so"):
            os.chmod(p, 0o755)
        openssl_env = dict(openssl_env, OPENSSL_MODULES=str(mods))
        probe = subprocess.run(cmd_prefix + [str(tool_copy), "--help"], capture_output=True)
        if probe.returncode != 0:
            shutil.rmtree(base)
            pytest.skip(f"the tool cannot run as nobody here: {probe.stderr.decode().strip()}")
    try:
        key, kpath = keyfile(base, 16)
        src = base / "in"
        files = make_tree(src, [100, 200, 300, 400])
        for p in [base, *src.rglob("*")]:
            os.chmod(p, 0o777 if p.is_dir() else 0o644)
        if cmd_prefix:
            os.chown(kpath, 65534, 65534)  # nobody's own key, 0600
        os.chmod(src / "f001.bin", 0)
        res = subprocess.run(cmd_prefix + [str(tool_copy if cmd_prefix else TOOL), "encrypt", "--cipher", "aes-128-cbc", "--key-file",
                                           str(kpath), "--provider", fileprov, str(src), str(base / "out")],
                             capture_output=True, env=openssl_env, timeout=60)
        assert res.returncode == 1, res.stderr.decode()
        assert f"{src / 'f001.bin'}: cannot open: Permission denied" in res.stderr.decode()
        assert_rest_complete(base / "out", files, key, "aes-128-cbc", {"f001.bin"})
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


def test_file_size_limit(tool, fileprov, openssl_env, tmp_path):
    """RLIMIT_FSIZE: a write past it fails (EFBIG, SIGXFSZ ignored) like a full disk does, for that file only."""
    key, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    files = make_tree(src, [1000, 3 << 20, 2000, 300 * 1024, 50_000])
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, tmp_path / "out", "--provider", fileprov,
                   "--threads", "2", env=openssl_env, preexec_fn=limit_file_size)
    err = res.stderr.decode()
    assert res.returncode == 1, err
    big = {rel for rel, data in files.items() if len(data) + 32 > 256 * 1024}
    assert big == {"f001.bin", "sub/d1/f003.bin"}
    for rel in big:
        assert f"{src / rel}: write failed: File too large" in err
    assert_rest_complete(tmp_path / "out", files, key, "aes-128-cbc", big)


@pytest.mark.machine_wide   # a mount in the machine's mount table
def test_full_disk(tool, fileprov, openssl_env, tmp_path):
    """A real ENOSPC on a small tmpfs, where this runner may mount one."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({res.stderr.decode().strip()}); "
                    "test_file_size_limit covers the write-error path")
    try:
        key, kpath = keyfile(tmp_path, 16)
        src = tmp_path / "in"
        files = make_tree(src, [1000, 2 << 20, 2000])
        res = run_tool(tool, "encrypt", "aes-128-ctr", kpath, src, mnt / "out", "--provider", fileprov,
                       "--threads", "1", env=openssl_env)
        assert res.returncode == 1
        assert f"{src / 'f001.bin'}: write failed: No space left on device" in res.stderr.decode()
        assert_rest_complete(mnt / "out", files, key, "aes-128-ctr", {"f001.bin"})
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("mode", [["--no-async"], ["--jobs", "2"]], ids=["one-file-at-a-time", "async-jobs"])
def test_kill_9_leaves_no_truncated_file(tool, fileprov, openssl_env, tmp_path, mode):
    key, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [24 << 20] * 8)
    args = [str(tool), "encrypt", "--cipher", "aes-128-cbc", "--key-file", str(kpath), "--provider", fileprov,
            "--threads", "1", *mode, str(src), str(dst)]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, env=openssl_env)
    # Kill once two outputs have their final names: more files are in progress under temporary names then
    # (one, or two with --jobs 2).
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if dst.exists() and sum(1 for p in dst.rglob("*") if p.is_file() and TMP_MARK not in p.name) >= 2:
            break
        time.sleep(0.001)
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
    if proc.returncode != -signal.SIGKILL:
        pytest.skip("the run finished before it could be killed mid-file (machine too fast for this size)")
    out = outputs(dst)
    final = {n: p for n, p in out.items() if TMP_MARK not in n}
    assert 2 <= len(final) < len(files), "killed after two files, with others in progress"
    for rel, p in final.items():
        assert openssl_decrypt("aes-128-cbc", key, p.read_bytes()) == files[rel], f"{rel} is incomplete"


# ---- the multi-buffer lanes ----

def stat_totals(env):
    res = subprocess.run([str(STAT), "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["totals"]


def test_cbc_encrypt_fills_the_lanes(tool, require_provider, openssl_env, tmp_path):
    """Many files encrypted with AES-CBC: with ASYNC jobs (the default) the provider ran the bytes in its
    multi-buffer batch, as build/accelaes-stat --json shows for a segment of this test's own; with --no-async it ran
    none there. Both outputs decrypt to the inputs."""
    if require_provider != "accelaes":
        pytest.skip("the multi-buffer batch is accelaes's (provider/route/batch.c)")
    if not STAT.exists():
        pytest.skip(f"{STAT} is not built (run `make build-only`)")
    require_lanes()
    _, kpath = keyfile(tmp_path, 16)
    src = tmp_path / "in"
    files = make_tree(src, [(20 << 10) + 37 * i for i in range(48)])  # 20 KiB .. 22 KiB: one piece each
    files.update({f"big{i}": os.urandom((300 << 10) + i) for i in range(4)})  # several pieces, ragged ends
    for name in (f"big{i}" for i in range(4)):
        (src / name).write_bytes(files[name])
    totals = {}
    for mode, extra in (("async", []), ("no-async", ["--no-async"])):
        env = dict(openssl_env, ACCELAES_SHM_NAME=f"/accelaes-test-files-{os.getpid()}-{secrets.token_hex(4)}")
        enc, dec = tmp_path / f"enc-{mode}", tmp_path / f"dec-{mode}"
        try:
            res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, enc, "--threads", "2", *extra, env=env)
            assert res.returncode == 0, res.stderr.decode()
            totals[mode] = stat_totals(env)
        finally:
            for path in glob.glob("/dev/shm" + env["ACCELAES_SHM_NAME"] + "*"):
                os.unlink(path)
        res = run_tool(tool, "decrypt", "aes-128-cbc", kpath, enc, dec, "--provider", "default", env=openssl_env)
        assert res.returncode == 0, res.stderr.decode()
        assert {rel: p.read_bytes() for rel, p in outputs(dec).items()} == files, mode
    assert totals["async"]["batch_bytes"] > 0, totals["async"]
    assert totals["no-async"]["batch_bytes"] == 0 and totals["no-async"]["inline_bytes"] > 0, totals["no-async"]
