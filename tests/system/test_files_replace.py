"""tests/system/test_files_replace.py: build/accelaes-files over an OUT_DIR that already holds outputs (issue #15).

An existing output is swapped out with renameat2(RENAME_EXCHANGE) and the old file, then under a hidden temporary
name, is unlinked by a reaper thread. These tests check what the tool promises about that, on the filesystem of the
test's own temporary directory and with the hidden-temporary path (ACCELAES_FILES_NO_TMPFILE) too:

- an existing output is replaced by a new file (a new inode: a hard link to the old one keeps the old bytes) that
  holds the new bytes;
- a directory where an output belongs is still refused (exit 1, the directory and its contents kept), and a
  symbolic link there is still replaced, never followed;
- the replaced output does not linger under a hidden name once the run has succeeded;
- a reader that opens an output's name all through a replacing run always finds a complete output, the old or the
  new one, never no file and never a partial one.
The kill -9 tests (test_files.py, test_files_hostile.py) replace outputs too, on tmpfs and ext4."""

import os
import subprocess
import threading

import pytest

from test_files import (TMP_MARK, fileprov, keyfile, make_tree, openssl_decrypt, outputs,  # noqa: F401
                        run_tool, tool)

PATHS = {"tmpfile": {}, "hidden-temporary": {"ACCELAES_FILES_NO_TMPFILE": "1"}}


def hidden(root):
    return [str(p.relative_to(root)) for p in root.rglob("*") if TMP_MARK in p.name]


@pytest.mark.parametrize("path", PATHS, ids=list(PATHS))
def test_existing_outputs_are_replaced(tool, fileprov, openssl_env, tmp_path, path):
    key, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [0, 15, 16, 5000, 70000, 1 << 20, 3 << 20])
    env = dict(openssl_env, **PATHS[path])
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, "--threads", "2", env=env)
    assert res.returncode == 0, res.stderr.decode()
    old = {rel: (p.read_bytes(), p.stat().st_ino) for rel, p in outputs(dst).items()}
    keep = tmp_path / "kept"  # hard links to two old outputs: they must keep the old bytes
    keep.mkdir()
    os.link(dst / "f001.bin", keep / "f001")
    os.link(dst / "sub/d1/f003.bin", keep / "f003")
    for rel, data in files.items():  # new inputs: the outputs must change to them
        (src / rel).write_bytes(data[::-1] + b"new")
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, "--threads", "2", env=env)
    assert res.returncode == 0, res.stderr.decode()
    out = outputs(dst)
    assert set(out) == set(files)
    for rel, data in files.items():
        blob = out[rel].read_bytes()
        assert blob != old[rel][0] and out[rel].stat().st_ino != old[rel][1], f"{rel} was not replaced"
        assert openssl_decrypt("aes-128-cbc", key, blob) == data[::-1] + b"new", rel
        assert out[rel].stat().st_mode & 0o777 == 0o600
    assert (keep / "f001").read_bytes() == old["f001.bin"][0], "the old output was written in place"
    assert (keep / "f003").read_bytes() == old["sub/d1/f003.bin"][0]
    assert not hidden(dst), "a replaced output lingers under a hidden name"


@pytest.mark.parametrize("path", PATHS, ids=list(PATHS))
def test_directory_at_an_output_name_is_refused(tool, fileprov, openssl_env, tmp_path, path):
    """OUT_DIR/f001.bin a directory (with a file in it), OUT_DIR/f002.bin an empty one: both refused as before
    (exit 1, 'Is a directory'), the directories untouched, the other outputs written and nothing hidden left."""
    key, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [100, 200, 300, 400, 500])
    (dst / "f001.bin").mkdir(parents=True)
    (dst / "f001.bin" / "inside").write_bytes(b"kept")
    (dst / "f002.bin").mkdir()
    env = dict(openssl_env, **PATHS[path])
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=env)
    err = res.stderr.decode()
    assert res.returncode == 1, err
    verb = "link" if path == "tmpfile" else "rename"
    for name in ("f001.bin", "f002.bin"):
        assert f"{src / name}: cannot {verb} into place: Is a directory" in err, err
    assert (dst / "f001.bin").is_dir() and (dst / "f001.bin" / "inside").read_bytes() == b"kept"
    assert (dst / "f002.bin").is_dir() and not any((dst / "f002.bin").iterdir())
    out = outputs(dst)
    for rel, data in files.items():
        if rel not in ("f001.bin", "f002.bin"):
            assert openssl_decrypt("aes-128-cbc", key, out[rel].read_bytes()) == data, rel
    assert not hidden(dst)


@pytest.mark.parametrize("path", PATHS, ids=list(PATHS))
def test_symlink_at_an_output_name_is_replaced_not_followed(tool, fileprov, openssl_env, tmp_path, path):
    """A link to a file and a link to a directory where outputs belong: each replaced by the output; what they
    named is untouched."""
    key, kpath = keyfile(tmp_path, 16)
    src, dst, victim = tmp_path / "in", tmp_path / "out", tmp_path / "victim"
    files = make_tree(src, [100, 200, 300])
    victim.mkdir()
    (victim / "file").write_bytes(b"victim")
    dst.mkdir()
    (dst / "f001.bin").symlink_to(victim / "file")
    (dst / "f002.bin").symlink_to(victim)
    env = dict(openssl_env, **PATHS[path])
    res = run_tool(tool, "encrypt", "aes-128-cbc", kpath, src, dst, "--provider", fileprov, env=env)
    assert res.returncode == 0, res.stderr.decode()
    assert sorted(os.listdir(victim)) == ["file"] and (victim / "file").read_bytes() == b"victim"
    for name in ("f001.bin", "f002.bin"):
        assert not (dst / name).is_symlink()
        assert openssl_decrypt("aes-128-cbc", key, (dst / name).read_bytes()) == files[name]
    assert not hidden(dst)


def test_readers_always_find_a_complete_output(tool, fileprov, openssl_env, tmp_path):
    """Outputs replaced over and over while a reader opens their names: every open finds a file, of exactly the
    length of a complete output (old or new), and it decrypts."""
    key, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [1000 + 977 * i for i in range(40)])
    args = [str(tool), "encrypt", "--cipher", "aes-128-cbc", "--key-file", str(kpath), "--provider", fileprov,
            "--threads", "2", str(src), str(dst)]
    subprocess.run(args, env=openssl_env, check=True, capture_output=True, timeout=60)
    stop, seen, bad = threading.Event(), [0], []

    def reader():
        names = sorted(files)
        while not stop.is_set():
            for rel in names:
                try:
                    with open(dst / rel, "rb") as f:
                        blob = f.read()
                except OSError as e:
                    bad.append(f"{rel}: {e}")
                    continue
                seen[0] += 1
                want = 16 + len(files[rel]) + 16 - len(files[rel]) % 16
                if len(blob) != want:
                    bad.append(f"{rel}: {len(blob)} bytes, a complete output has {want}")
                elif seen[0] % 97 == 0 and openssl_decrypt("aes-128-cbc", key, blob) != files[rel]:
                    bad.append(f"{rel}: does not decrypt to its input")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(15):
            subprocess.run(args, env=openssl_env, check=True, capture_output=True, timeout=60)
    finally:
        stop.set()
        t.join()
    assert not bad, bad[:5]
    assert seen[0] > 0
    assert not hidden(dst)


def test_no_replaced_output_lingers(tool, fileprov, openssl_env, tmp_path):
    """Many outputs replaced at once, so that unlinks of replaced outputs are still queued when the last file is
    done: the run waits for them. The old outputs are on disk first (fsync), so that unlinking them frees blocks
    (and waits for their discard where the filesystem discards). Three rounds, nothing hidden after any of them."""
    _, kpath = keyfile(tmp_path, 16)
    src, dst = tmp_path / "in", tmp_path / "out"
    files = make_tree(src, [(1 << 20) - 7 * i for i in range(64)])
    args = [str(tool), "encrypt", "--cipher", "aes-128-ctr", "--key-file", str(kpath), "--provider", fileprov,
            "--threads", "2", str(src), str(dst)]
    for _ in range(3):
        for p in outputs(dst).values() if dst.exists() else ():
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        subprocess.run(args, env=openssl_env, check=True, capture_output=True, timeout=60)
        assert not hidden(dst), "a replaced output lingers under a hidden name"
        assert set(outputs(dst)) == set(files)
