"""tests/system/test_install.py: `make install DESTDIR=tmp` installs what the package does (scripts/pkg/mkdeb.sh): the module
into MODULESDIR, accelaes-conf, accelaes-stat and accelaes-files into PREFIX/bin, the man pages, and
PREFIX/share/accelaes/accelaes.cnf naming the installed module by its absolute path (no DESTDIR in it);
`make uninstall DESTDIR=tmp` removes every file again. Nothing is built: the build tree must be made already."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, REPO

TOOLS = ("accelaes-conf", "accelaes-stat", "accelaes-files")


def modulesdir():
    p = subprocess.run(["openssl", "version", "-m"], capture_output=True, text=True)
    m = re.search(r'"(.*)"', p.stdout)
    if p.returncode != 0 or not m:
        pytest.skip("`openssl version -m` gives no MODULESDIR")
    return m.group(1)


def make(tmp_path, target):
    # -o all: install only what is built (the suite runs on a made tree); BUILD as the suite's
    cmd = ["make", "--no-print-directory", "-o", "all", f"BUILD={BUILD}", target, f"DESTDIR={tmp_path}",
           "PREFIX=/usr/local"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_make_install_with_destdir(tmp_path):
    if shutil.which("make") is None or shutil.which("openssl") is None:
        pytest.skip("needs make and the openssl command")
    for name in ("accelaes.so",) + TOOLS:
        if not (BUILD / name).exists():
            pytest.skip(f"{BUILD / name} is not built (run make)")
    md = modulesdir()
    p = make(tmp_path, "install")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    root = str(tmp_path)
    module = f"{root}{md}/accelaes.so"
    assert os.path.isfile(module) and os.access(module, os.X_OK)
    for t in TOOLS:
        path = f"{root}/usr/local/bin/{t}"
        assert os.path.isfile(path) and os.stat(path).st_mode & 0o777 == 0o755, path
        assert subprocess.run([path, "--help"], capture_output=True, timeout=30).returncode == 0, path
        assert os.path.isfile(f"{root}/usr/local/share/man/man1/{t}.1"), t
    assert os.path.isfile(f"{root}/usr/local/share/man/man7/accelaes.7")
    cnf = f"{root}/usr/local/share/accelaes/accelaes.cnf"
    text = open(cnf).read()
    assert os.stat(cnf).st_mode & 0o777 == 0o644
    assert f"\nmodule = {md}/accelaes.so\n" in text, text      # the installed path, not the staging one
    assert root not in text
    p = make(tmp_path, "uninstall")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    left = [os.path.join(d, f) for d, _, files in os.walk(tmp_path) for f in files]
    assert left == [], left
