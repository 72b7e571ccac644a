"""tests/system/test_system_conf.py: accelaes-conf, which adds accelaes to an existing openssl.cnf instead of
replacing it (conf/accelaes.cnf as OPENSSL_CONF drops the file's [req], [ca], [new_oids]...).

Everything runs on copies in temporary directories, never on /etc:
- the section merge the tool relies on, checked on this OpenSSL (the parser and the provider loader)
  rather than taken from the manual;
- Debian's own /etc/ssl/openssl.cnf copied and enabled: default and accelaes active, AES-128-CBC
  counted by accelaes-stat with the default provider's bytes, every section and key of the original
  unchanged (accelaes-conf dump, i.e. libcrypto's parser, before and after), `openssl req` taking
  the same [req] defaults;
- files that already name providers, an algorithm section, a default provider left inactive, or no
  openssl_conf at all: merged into their own sections; what cannot be merged is refused;
- enable twice changes nothing, disable gives the file back byte for byte with mode and owner, also
  without a final newline and through a symlink; status follows;
- hostile inputs (missing, a directory, a FIFO, unreadable, too large, a NUL byte, a syntax error, a
  line that would swallow the .include, an edited marked line, a foreign file at the snippet's name):
  exit 1 with a message, the file untouched, nothing left behind;
- the snippet has no module line, so OPENSSL_MODULES (the build directory here) finds accelaes.so;
  installed, OpenSSL looks in MODULESDIR (`openssl version -m`), where `make install` puts it;
- Node.js reads the change only with --openssl-shared-config (when node is installed)."""

import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BUILD, REPO, SANITIZER, active_provider_names, stat_total

TOOL = BUILD / "accelaes-conf"
SYSTEM = Path("/etc/ssl/openssl.cnf")
OPENSSL = shutil.which("openssl") or "openssl"
KEY, IV = "000102030405060708090a0b0c0d0e0f", "f0e0d0c0b0a090807060504030201000"
NOBODY = 65534

pytestmark = pytest.mark.skipif(not all(p.exists() for p in (TOOL, BUILD / "accelaes.so", BUILD / "accelaes-stat")),
                                reason=f"{TOOL}, accelaes.so or accelaes-stat not built yet: run make")


def tool(*args, user=None):
    cmd = [str(TOOL), *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert p.returncode >= 0, f"accelaes-conf {args} died of signal {-p.returncode}: {p.stderr}"
    return p


def dump(path):
    """{section: [(key, value), ...]} as libcrypto parses the file (keys in the parser's order)."""
    p = tool("dump", "--system", path)
    assert p.returncode == 0, p.stderr
    out, sect = {}, None
    for line in p.stdout.splitlines():
        if " = " not in line and line.startswith("[") and line.endswith("]"):
            sect = out.setdefault(line[1:-1], [])
        else:
            sect.append(tuple(line.split(" = ", 1)))
    return out


def flat(d):
    return {(s, k): v for s, kv in d.items() for k, v in kv}


def env_for(openssl_env, conf):
    return dict(openssl_env, OPENSSL_CONF=str(conf))


def active_providers(env):
    p = subprocess.run([OPENSSL, "list", "-providers"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return active_provider_names(p.stdout)


def enc_counted(env, tmp_path, data):
    """`openssl enc -aes-128-cbc` of data under env: (ciphertext, bytes accelaes counted)."""
    src = tmp_path / "plain.bin"
    src.write_bytes(data)
    before = stat_total(env)
    p = subprocess.run([OPENSSL, "enc", "-aes-128-cbc", "-K", KEY, "-iv", IV, "-in", str(src)],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout, stat_total(env) - before


def enable(path, *extra):
    p = tool("enable", "--system", path, *extra)
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def debian(tmp_path):
    if not SYSTEM.is_file():
        pytest.skip(f"{SYSTEM} not found (not a Debian-like system)")
    orig, copy = tmp_path / "orig.cnf", tmp_path / "openssl.cnf"
    shutil.copyfile(SYSTEM, orig)
    shutil.copyfile(SYSTEM, copy)
    return orig, copy


def test_merge_semantics_on_this_openssl(tmp_path, openssl_env):
    """A section named twice is one section; a later key replaces the earlier one and moves to the
    end; [default] reopens the keys before the first header; the provider loader sees the merge."""
    inc = tmp_path / "inc.cnf"
    inc.write_text("[default]\nopenssl_conf = init\n[s]\nk = later\n[init]\nproviders = p\n"
                   "[p]\nbase = b\n[b]\nactivate = 1\n")
    main = tmp_path / "main.cnf"
    main.write_text(f"top = 1\n[s]\nk = first\nb = kept\n[init]\n.include {inc}\n")
    d = dump(main)
    assert d["s"] == [("b", "kept"), ("k", "later")]
    assert ("openssl_conf", "init") in d["default"] and ("top", "1") in d["default"]
    assert active_providers(env_for(openssl_env, main)) == {"base"}   # built in: no module to find


def expected_additions(before):
    """The keys of a file's own sections that enable adds, from the sections the file has (see
    test_existing_providers_and_properties_merged and test_default_provider_kept for the rules)."""
    init = before[("default", "openssl_conf")]
    keys = set()
    if (init, "providers") in before:
        prov = before[(init, "providers")]
        keys.add((prov, "accelaes"))
        if (prov, "default") not in before:
            keys.add((prov, "default"))
        elif (before[(prov, "default")], "activate") not in before:
            keys.add((before[(prov, "default")], "activate"))
    else:
        keys.add((init, "providers"))
    if (init, "alg_section") in before:
        keys.add((before[(init, "alg_section")], "default_properties"))
    else:
        keys.add((init, "alg_section"))
    return {(s, k) for s, k in keys if not s.startswith("accelaes_")}


def test_debian_file_enabled(debian, tmp_path, openssl_env):
    orig, copy = debian
    p = enable(copy)
    snippet = tmp_path / "openssl-accelaes.cnf"
    assert str(snippet) in p.stdout and snippet.exists()
    assert copy.read_text().endswith(f".include {snippet} # added by accelaes-conf enable\n")
    assert stat.S_IMODE(snippet.stat().st_mode) == 0o644

    env, env_orig = env_for(openssl_env, copy), env_for(openssl_env, orig)
    assert active_providers(env) == {"default", "accelaes"}
    assert active_providers(env_orig) == {"default"}
    data = os.urandom(1 << 20)
    ct, counted = enc_counted(env, tmp_path, data)
    ref, ref_counted = enc_counted(env_orig, tmp_path, data)
    assert ct == ref and counted >= len(data) and ref_counted == 0

    # Nothing of the original changes; what is added: accelaes in the file's own provider list and its
    # default provider activated (Debian 13's file has them: providers = provider_sect, an inactive
    # default_sect), else a provider list of the tool's own (Debian 12's has none); a default_properties.
    before, after = flat(dump(orig)), flat(dump(copy))
    assert {k: after.get(k) for k in before} == before
    added = {(s, k) for s, k in set(after) - set(before) if not s.startswith("accelaes_")}
    assert added == expected_additions(before), added
    init = before[("default", "openssl_conf")]
    prov, alg = after[(init, "providers")], after[(init, "alg_section")]
    assert after[(prov, "accelaes")] == "accelaes_sect"
    assert after[(after[(prov, "default")], "activate")] == "1"
    assert after[(alg, "default_properties")] == "?provider=accelaes"

    # `openssl req` still takes the file's [req] defaults: subject and v3_ca extensions. The
    # standalone conf/accelaes.cnf, which replaces the file, has none (the reason for the tool).
    def req(env, name, ok=True):
        cert = tmp_path / f"{name}.pem"
        p = subprocess.run([OPENSSL, "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes", "-batch",
                            "-keyout", str(tmp_path / f"{name}.key"), "-out", str(cert)],
                           env=env, capture_output=True, text=True, timeout=120)
        if not ok:
            return p.returncode, p.stderr
        assert p.returncode == 0, p.stderr
        show = subprocess.run([OPENSSL, "x509", "-in", str(cert), "-noout", "-subject", "-ext",
                               "basicConstraints"], env=env_orig, capture_output=True, text=True, timeout=60)
        assert show.returncode == 0, show.stderr
        return show.stdout
    with_include, without = req(env, "with"), req(env_orig, "without")
    assert with_include == without
    # the file's [req] defaults (3.0 prints "O = ...", 3.5 "O=...")
    assert re.search(r"\bO ?= ?Internet Widgits Pty Ltd", with_include) and "CA:TRUE" in with_include, with_include
    rc, err = req(env_for(openssl_env, REPO / "conf" / "accelaes.cnf"), "standalone", ok=False)
    assert rc != 0 and "No objects specified in config file" in err


def test_accelaes_section_matches_standalone_conf(debian):
    """The tool's [accelaes_sect] is conf/accelaes.cnf's (the comment in tools/conf_plan.c)."""
    _, copy = debian
    enable(copy)
    assert dict(dump(copy)["accelaes_sect"]) == dict(dump(REPO / "conf" / "accelaes.cnf")["accelaes_sect"])


FIPS_LIKE = """config_diagnostics = 1
openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
alg_section = algorithm_sect
ssl_conf = ssl_sect
[provider_sect]
default = default_sect
base = base_sect
[default_sect]
activate = 1
[base_sect]
activate = 1
[algorithm_sect]
default_properties = fips=no
fips_mode = no
[ssl_sect]
system_default = sys_sect
[sys_sect]
MinProtocol = TLSv1.2
"""


def test_existing_providers_and_properties_merged(tmp_path, openssl_env):
    f = tmp_path / "openssl.cnf"
    f.write_text(FIPS_LIKE)
    before = flat(dump(f))
    enable(f)
    d = dump(f)
    after = flat(d)
    # its own sections get the keys; its activations stay as they were
    assert [k for k, _ in d["provider_sect"]] == ["default", "base", "accelaes"]
    assert d["default_sect"] == [("activate", "1")] and d["base_sect"] == [("activate", "1")]
    # default_properties combined; fips_mode, which followed it (and is applied after it), still does
    assert d["algorithm_sect"] == [("default_properties", "fips=no,?provider=accelaes"), ("fips_mode", "no")]
    assert not any(s.startswith("accelaes_") and s != "accelaes_sect" for s, _ in after)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == {("algorithm_sect", "default_properties")}
    env = env_for(openssl_env, f)
    assert active_providers(env) == {"default", "base", "accelaes"}
    data = os.urandom(256 << 10)
    _, counted = enc_counted(env, tmp_path, data)
    assert counted >= len(data)


@pytest.mark.parametrize("text, where", [
    # the default provider named but not activated: activated in its own section
    ("openssl_conf = i\n[i]\nproviders = p\n[p]\ndefault = d\n[d]\n# activate = 1\n", ("d", "activate")),
    # no openssl_conf at all: one is made, in [default]
    ("HOME = .\n[req]\ndistinguished_name = dn\n[dn]\n", ("default", "openssl_conf")),
])
def test_default_provider_kept(tmp_path, openssl_env, text, where):
    f = tmp_path / "openssl.cnf"
    f.write_text(text)
    enable(f)
    assert where in flat(dump(f))
    assert active_providers(env_for(openssl_env, f)) == {"default", "accelaes"}


@pytest.mark.parametrize("text, message", [
    ("openssl_conf = i\n[i]\nalg_section = a\n[a]\ndefault_properties = provider=default\n", "Duplicated name"),
    ("openssl_conf = i\n[i]\nproviders = p\n[p]\naccelaes = s\n[s]\nactivate = 1\n", "already configures"),
    ("[accelaes_sect]\nbackend = cpu\n", "already has a section [accelaes_sect]"),
    # a key written again after default_properties, whose parsed value holds a # (from \\#)
    ("openssl_conf = i\n[i]\nalg_section = a\n[a]\ndefault_properties = fips=no\nnote = a\\#b\n", "cannot be copied"),
    ("openssl_conf = my init\n", "cannot be written back safely"),
    ("openssl_conf = i\n[i]\nproviders.2 = p\n", "edit the file by hand"),
])
def test_unmergeable_refused(tmp_path, text, message):
    f = tmp_path / "openssl.cnf"
    f.write_text(text)
    p = tool("enable", "--system", f)
    assert p.returncode == 1 and message in p.stderr, p.stderr
    assert f.read_text() == text and sorted(os.listdir(tmp_path)) == ["openssl.cnf"]


def test_enable_twice_disable_restores(debian, tmp_path):
    orig, copy = debian
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file another group")
    os.chmod(copy, 0o640)
    os.chown(copy, 0, 1)   # group daemon: kept across the rewrite
    enable(copy)
    first, st1 = copy.read_bytes(), copy.stat()
    snippet = (tmp_path / "openssl-accelaes.cnf").read_bytes()
    p = enable(copy)
    assert "already enabled, nothing changed" in p.stdout
    assert copy.read_bytes() == first and copy.stat().st_mtime_ns == st1.st_mtime_ns
    assert (tmp_path / "openssl-accelaes.cnf").read_bytes() == snippet
    assert (stat.S_IMODE(st1.st_mode), st1.st_uid, st1.st_gid) == (0o640, 0, 1)
    assert tool("status", "--system", copy).returncode == 0
    p = tool("disable", "--system", copy)
    assert p.returncode == 0, p.stderr
    assert copy.read_bytes() == orig.read_bytes()
    st = copy.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 0, 1)
    assert sorted(os.listdir(tmp_path)) == ["openssl.cnf", "orig.cnf"]
    assert tool("status", "--system", copy).returncode == 3
    p = tool("disable", "--system", copy)
    assert p.returncode == 0 and "not enabled" in p.stdout


def test_no_final_newline_and_symlink(tmp_path):
    real = tmp_path / "etc" / "openssl.cnf"
    real.parent.mkdir()
    text = b"HOME = .\n[req]\ndefault_bits = 2048"
    real.write_bytes(text)
    link = tmp_path / "openssl.cnf"
    link.symlink_to(real)
    enable(link)
    assert link.is_symlink() and (real.parent / "openssl-accelaes.cnf").exists()
    assert real.read_bytes().startswith(text + b"\n.include ")
    assert tool("disable", "--system", link).returncode == 0
    assert link.is_symlink() and real.read_bytes() == text
    assert sorted(os.listdir(real.parent)) == ["openssl.cnf"]


def test_status_sees_a_stale_snippet(tmp_path):
    f = tmp_path / "openssl.cnf"
    f.write_text("openssl_conf = i\n[i]\n")
    enable(f)
    assert tool("status", "--system", f).returncode == 0
    with open(f, "a") as out:   # the administrator adds an algorithm section after enabling
        out.write("[i]\nalg_section = mine\n[mine]\ndefault_properties = fips=no\n")
    p = tool("status", "--system", f)
    assert p.returncode == 1 and "no longer fits" in p.stdout
    enable(f)   # moves its line to the end again, fitted to the new section
    assert tool("status", "--system", f).returncode == 0
    assert f.read_text().endswith("# added by accelaes-conf enable\n")
    assert flat(dump(f))[("mine", "default_properties")] == "fips=no,?provider=accelaes"
    (tmp_path / "openssl-accelaes.cnf").unlink()
    p = tool("status", "--system", f)
    assert p.returncode == 1 and "broken" in p.stdout


def hostile_cases(d):
    """name -> (path, expected message); each file made under d."""
    cases = {}
    big = d / "huge.cnf"
    big.write_bytes(b"# padding\n" * 200000)
    cases["huge"] = (big, "too large")
    nul = d / "nul.cnf"
    nul.write_bytes(b"a = 1\0\n")
    cases["nul"] = (nul, "NUL byte")
    syn = d / "syntax.cnf"
    syn.write_text("a = 1\n[unclosed\n")
    cases["syntax"] = (syn, "line 2: missing close square bracket")
    swallow = d / "swallow.cnf"
    swallow.write_text("[s]\nk = v \\\n")
    cases["swallow"] = (swallow, "does not take effect as planned")
    edited = d / "edited.cnf"
    edited.write_text(".include /elsewhere/x.cnf # added by accelaes-conf enable\n")
    cases["edited mark"] = (edited, "edit it by hand")
    fifo = d / "fifo.cnf"
    os.mkfifo(fifo)
    cases["fifo"] = (fifo, "a FIFO")
    cases["directory"] = (d / "dir", "a directory")
    (d / "dir").mkdir()
    cases["missing"] = (d / "missing.cnf", "No such file")
    foreign = d / "foreign.cnf"
    foreign.write_text("a = 1\n")
    (d / "foreign-accelaes.cnf").write_text("mine = 1\n")
    cases["foreign snippet"] = (foreign, "not written by accelaes-conf")
    return cases


ALL = {"enable", "snippet", "status", "disable", "dump"}
# The commands each file must fail; the others succeed on it. A file that cannot be read fails all.
# disable and status look only for accelaes-conf's line, so a file that does not parse can still be
# disabled; a line swallowed by a continuation is found only when enable checks its result.
FAILS = {"huge": ALL, "nul": ALL, "fifo": ALL, "directory": ALL, "missing": ALL,
         "syntax": {"enable", "snippet", "dump"}, "swallow": {"enable"}, "edited mark": ALL - {"dump"},
         "foreign snippet": {"enable", "status", "disable"}}


@pytest.mark.parametrize("case", sorted(FAILS))
def test_hostile_input_refused(tmp_path, case):
    path, message = hostile_cases(tmp_path)[case]
    snapshot = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path) if (tmp_path / n).is_file()}
    for cmd in sorted(FAILS[case]):
        p = tool(cmd, "--system", path)
        assert p.returncode == 1, f"{cmd}: {p.returncode} {p.stdout} {p.stderr}"
        assert p.stderr.startswith("accelaes-conf: ") and p.stdout == "", f"{cmd}: {p.stdout} {p.stderr}"
        if cmd == "enable":
            assert message in p.stderr, p.stderr
    for cmd in sorted(ALL - FAILS[case]):
        assert tool(cmd, "--system", path).returncode in (0, 3), cmd
    after = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path) if (tmp_path / n).is_file()}
    assert after == snapshot   # untouched, and no temporary file left behind


@pytest.fixture
def shared_dir():
    """A directory nobody may enter but not write (pytest's own tmp_path is root-only)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to run the tool as another user")
    d = Path(tempfile.mkdtemp(prefix="accelaes-conf-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_unreadable_and_unwritable(shared_dir):
    secret = shared_dir / "secret.cnf"
    secret.write_text("a = 1\n")
    os.chmod(secret, 0o600)
    for cmd in ("enable", "status", "dump"):
        p = tool(cmd, "--system", secret, user=NOBODY)
        assert p.returncode == 1 and "Permission denied" in p.stderr, p.stderr
    open_file = shared_dir / "open.cnf"
    open_file.write_text("a = 1\n")
    os.chmod(open_file, 0o666)
    p = tool("enable", "--system", open_file, user=NOBODY)
    assert p.returncode == 1 and "cannot create a file beside it: Permission denied" in p.stderr, p.stderr
    assert open_file.read_text() == "a = 1\n" and secret.read_text() == "a = 1\n"
    assert sorted(os.listdir(shared_dir)) == ["open.cnf", "secret.cnf"]


def test_module_location(debian, tmp_path, openssl_env):
    """No module line: OPENSSL_MODULES (else MODULESDIR) finds accelaes.so; --module pins a path."""
    _, copy = debian
    enable(copy)
    env = env_for(openssl_env, copy)
    assert "module" not in dict(dump(copy)["accelaes_sect"])
    assert active_providers(dict(env, OPENSSL_MODULES=str(tmp_path / "nowhere"))) == {"default"}
    module = (BUILD / "accelaes.so").resolve()
    enable(copy, "--module", module)   # rewrites the snippet, the file keeps its one line
    assert dict(dump(copy)["accelaes_sect"])["module"] == str(module)
    assert copy.read_text().count("# added by accelaes-conf enable") == 1
    assert active_providers(dict(env, OPENSSL_MODULES=str(tmp_path / "nowhere"))) == {"default", "accelaes"}
    assert tool("status", "--system", copy).returncode == 0


def test_make_install_lines():
    """make install writes the one-program file under PREFIX with accelaes-conf program and enables nothing
    (tests/system/test_install.py runs make install and uninstall with DESTDIR)."""
    p = subprocess.run(["make", "-n", "--no-print-directory", f"BUILD={BUILD}", "PREFIX=/opt/x", "install",
                        "uninstall"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "INSTALL_TOOLS" not in p.stdout and "accelaes-conf accelaes-stat accelaes-files" in p.stdout
    assert re.search(r"accelaes-conf program --module \S*accelaes\.so\S* > \S*/opt/x/share/accelaes/accelaes\.cnf",
                     p.stdout), p.stdout
    assert not re.search(r"^\S*accelaes-conf enable", p.stdout, re.M)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(bool(SANITIZER), reason="node is not run with a sanitizer runtime preloaded")
def test_node_reads_it_only_with_shared_config(debian, tmp_path, openssl_env):
    _, copy = debian
    enable(copy)
    env = env_for(openssl_env, copy)
    js = ("const c = require('crypto'); const e = c.createCipheriv('aes-128-cbc', Buffer.alloc(16), "
          "Buffer.alloc(16)); e.update(Buffer.alloc(1 << 20)); e.final();")
    counted = {}
    for flag in ([], ["--openssl-shared-config"]):
        before = stat_total(env)
        p = subprocess.run(["node", *flag, "-e", js], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        counted[bool(flag)] = stat_total(env) - before
    assert counted[False] == 0 and counted[True] >= 1 << 20
