"""tests/system/test_deb.py: the Debian package of `make deb` (scripts/pkg/mkdeb.sh). Always: its contents and control
fields (dpkg-deb -c / -f), built from this build tree if missing or older than the module. Only with
ACCELAES_TEST_INSTALLED_DEB=1 (CI, `make test-deb`; as root, with the package not installed yet), since
it changes the machine: install it, use it with no OPENSSL_MODULES (openssl list, openssl speed,
accelaes-stat's counts, the man pages, accelaes-conf enable), remove it (prerm disables accelaes-conf's
line: the system openssl.cnf comes back byte for byte), purge, and check that none of its files is left."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, REPO, SANITIZER

NEEDED = ("accelaes.so", "accelaes-stat", "accelaes-files", "accelaes-conf")
INSTALL = os.environ.get("ACCELAES_TEST_INSTALLED_DEB") == "1"

pytestmark = [
    pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not found: not a Debian system"),
    pytest.mark.skipif(bool(SANITIZER), reason=f"the package is built from the plain build, not {SANITIZER}'s"),
]


def modulesdir():
    out = subprocess.run(["openssl", "version", "-m"], capture_output=True, text=True, check=True).stdout
    return re.search(r'"(.*)"', out).group(1)


@pytest.fixture(scope="module")
def deb():
    missing = [n for n in NEEDED if not (BUILD / n).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not built in {BUILD} (run make)")
    debs = sorted(BUILD.glob("accelaes_*.deb"))
    newest_input = max((BUILD / n).stat().st_mtime for n in NEEDED)
    if not debs or debs[-1].stat().st_mtime < newest_input:
        r = subprocess.run(["sh", str(REPO / "scripts" / "pkg" / "mkdeb.sh"), str(BUILD)], cwd=REPO, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        debs = sorted(BUILD.glob("accelaes_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def contents(deb):
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].lstrip(".") for line in out.splitlines()}


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_deb_contents(deb):
    files = contents(deb)
    md = modulesdir()
    expect = {f"{md}/accelaes.so", "/usr/bin/accelaes-stat", "/usr/bin/accelaes-files", "/usr/bin/accelaes-conf",
              "/usr/share/accelaes/accelaes.cnf", "/usr/share/man/man7/accelaes.7.gz",
              "/usr/share/man/man1/accelaes-stat.1.gz", "/usr/share/man/man1/accelaes-files.1.gz",
              "/usr/share/man/man1/accelaes-conf.1.gz", "/usr/share/doc/accelaes/copyright"}
    assert expect <= files, sorted(expect - files)
    if (BUILD / "accelaes-cuda.so").exists():
        assert f"{md}/accelaes-cuda.so" in files
    # Nothing enables accelaes system-wide: no file under /etc, no test programs, no build leftovers.
    assert not [f for f in files if f.startswith("/etc")], files
    assert not [f for f in files if "test" in f.rsplit("/", 1)[-1]], files


def owners(module):
    """{soname: the Debian package that owns the library the module loads}, as dpkg says (libcrypto.so.3 is
    libssl3's on Debian 12, libssl3t64's on Debian 13): the names dpkg-shlibdeps writes into Depends."""
    out = subprocess.run(["ldd", str(module)], capture_output=True, text=True, check=True).stdout
    found = {}
    for soname, path in re.findall(r"^\s*(\S+) => (/\S+)", out, re.M):
        r = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
        if r.returncode == 0:
            found[soname] = r.stdout.split(":", 1)[0]
    return found


def test_deb_control(deb):
    assert field(deb, "Package") == "accelaes"
    assert re.fullmatch(r"\d+\.\d+\.\d+(\+git\d{14}\.[0-9a-f]+)?", field(deb, "Version"))
    assert field(deb, "Architecture") == subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                                                        text=True).stdout.strip()
    assert "@" in field(deb, "Maintainer")
    assert "OpenSSL 3 provider" in field(deb, "Description")
    depends = field(deb, "Depends")
    # What the ELF files link, by the packages that own those libraries here (dpkg -S)
    linked = owners(BUILD / "accelaes.so")
    # libcrypto.so.3 up to 3.6 (libssl3, libssl3t64), libcrypto.so.4 from 4.0 (libssl4)
    crypto = [pkg for so, pkg in linked.items() if re.match(r"libcrypto\.so\.\d", so)]
    assert crypto, linked
    assert re.search(rf"\b{re.escape(crypto[0])} \(>= \d", depends), (crypto, depends)
    assert "libc6" in depends
    for so, pkg in linked.items():
        if so.startswith(("libIPSec_MB", "libnuma")):
            assert re.search(rf"\b{re.escape(pkg)}\b", depends), (so, pkg, depends)
    ctl = subprocess.run(["dpkg-deb", "-I", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "prerm" in ctl


def test_man_pages_render(deb, tmp_path):
    if shutil.which("groff") is None:
        pytest.skip("groff not installed: the man pages' roff is not checked")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    for page in sorted((tmp_path / "usr/share/man").glob("man*/*.gz")):
        roff = subprocess.run(["gzip", "-dc", str(page)], capture_output=True, check=True).stdout
        r = subprocess.run(["groff", "-man", "-ww", "-Tutf8", "-P-cbou"], input=roff, capture_output=True, timeout=60)
        assert r.returncode == 0 and r.stderr == b"", (page, r.stderr)
        assert b"NAME" in r.stdout and b"SEE ALSO" in r.stdout, page


def dpkg_status():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "accelaes"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def plain_env(shm):
    """No OPENSSL_MODULES, no OPENSSL_CONF, none of the suite's settings: what a user's shell has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSSL_", "ACCELAES_"))}
    env["ACCELAES_SHM_NAME"] = shm
    return env


@pytest.mark.skipif(not INSTALL, reason="installs a package on this machine: only with ACCELAES_TEST_INSTALLED_DEB=1 "
                                        "(make test-deb, CI)")
def test_install_use_remove(deb, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("installing a package needs root")
    if "installed" in dpkg_status():
        pytest.skip("accelaes is installed on this machine already: not touching it")
    system_conf = Path(subprocess.run(["openssl", "version", "-d"], capture_output=True, text=True)
                       .stdout.split('"')[1]) / "openssl.cnf"
    before = system_conf.read_bytes() if system_conf.exists() else None
    shm = f"/accelaes-test-deb-{os.getpid()}"
    env = plain_env(shm)
    r = subprocess.run(["dpkg", "-i", str(deb)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = []
    try:
        listed = subprocess.run(["dpkg", "-L", "accelaes"], capture_output=True, text=True,
                                check=True).stdout.split()
        assert f"{modulesdir()}/accelaes.so" in listed
        r = subprocess.run(["openssl", "list", "-provider", "accelaes", "-providers"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "accelaes" in r.stdout and "status: active" in r.stdout, r.stdout + r.stderr
        r = subprocess.run(["openssl", "speed", "-provider", "accelaes", "-evp", "aes-128-ctr", "-seconds", "1",
                            "-bytes", "16384"], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["accelaes-stat", "--json"], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        totals = json.loads(r.stdout)["totals"]
        assert int(totals["inline_bytes"]) + int(totals["split_bytes"]) >= 16384, totals
        r = subprocess.run(["man", "-w", "accelaes", "accelaes-stat", "accelaes-files"], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        # The installed snippet for one program, and accelaes-conf for the whole system; removing the
        # package must take that line back out (prerm), or every program would name a missing module.
        data = os.urandom(1000)
        r = subprocess.run(["openssl", "enc", "-aes-128-cbc", "-K", "00" * 16, "-iv", "00" * 16],
                           input=data, env=dict(env, OPENSSL_CONF="/usr/share/accelaes/accelaes.cnf"),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        if before is not None:
            r = subprocess.run(["accelaes-conf", "enable"], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            assert subprocess.run(["accelaes-conf", "status"], env=env, capture_output=True).returncode == 0
    finally:
        r = subprocess.run(["dpkg", "--purge", "accelaes"], capture_output=True, text=True, timeout=300)
        for f in Path("/dev/shm").glob(shm.lstrip("/") + "*"):
            f.unlink()
    assert r.returncode == 0, r.stdout + r.stderr
    assert dpkg_status() == ""
    # Every file it shipped is gone, and so are its own directories; shared ones (/usr/bin...) stay.
    left = [p for p in listed if os.path.isfile(p) or os.path.islink(p)]
    assert left == [], left
    for d in ("/usr/share/accelaes", "/usr/share/doc/accelaes"):
        assert not os.path.exists(d), d
    if before is not None:
        assert system_conf.read_bytes() == before, "prerm did not give the system openssl.cnf back"
