"""tests/system/test_one_program.py: the one-program configuration (issue #30): `accelaes-conf program` writes a whole
configuration that names the module by its absolute path (build/accelaes.cnf, made by make), so a program run with
OPENSSL_CONF=that file and no OPENSSL_MODULES still finds every other provider in OpenSSL's own module folder.

Debian's python3-cryptography loads the legacy provider when it is imported; under the old recipe
(OPENSSL_MODULES=build, which replaces the module folder for every provider) that load fails. Here it imports,
encrypts with a legacy-only cipher (Blowfish) and with AES, and accelaes counts the AES bytes. The old recipe's
outcome is shown (pytest -s) as the reason, not asserted: whether a release's cryptography needs legacy at import is
its own business; what is asserted of it is asked of the running OpenSSL (can it load legacy from OPENSSL_MODULES=build)."""

import ctypes
import os
import re
import secrets
import shutil
import subprocess

import pytest

from conftest import BUILD, SANITIZER, stat_total
from libcrypto import LIBCRYPTO

CONF = BUILD / "accelaes.cnf"
TOOL = BUILD / "accelaes-conf"
PY = "/usr/bin/python3"    # Debian's python: its python3-cryptography uses the system libcrypto (a wheel has its own)
AES_BYTES = 4 << 20

SCRIPT = r"""
import os, sys, warnings
warnings.simplefilter("ignore")
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.bindings.openssl.binding import Binding
b = Binding()
print("legacy_loaded", getattr(b, "_legacy_provider_loaded", "unknown"))
try:        # cryptography 43 and later: the legacy ciphers live in decrepit (removed from algorithms in 45)
    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
except ImportError:
    Blowfish = algorithms.Blowfish
bf = Cipher(Blowfish(b"k" * 16), modes.CBC(b"i" * 8)).encryptor()
print("blowfish", len(bf.update(b"x" * 64) + bf.finalize()))
n = int(sys.argv[1])
enc = Cipher(algorithms.AES(b"K" * 16), modes.CTR(b"\0" * 16)).encryptor()
out = enc.update(b"\0" * n) + enc.finalize()
print("aes", len(out))
"""


def clean_env(shm, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELAES_", "OPENSSL_", "CRYPTOGRAPHY_"))}
    env["ACCELAES_SHM_NAME"] = shm
    env.update(extra)
    return env


@pytest.fixture
def shm():
    name = f"/accelaes-test-oneprog-{os.getpid()}-{secrets.token_hex(4)}"
    yield name
    if os.path.exists("/dev/shm" + name):
        os.unlink("/dev/shm" + name)


def need_cryptography():
    if SANITIZER:
        pytest.skip(f"Debian's python cannot load the {SANITIZER}-instrumented module without its runtime")
    if not os.path.exists(PY):
        pytest.skip(f"{PY} (Debian's python3) is not installed")
    if subprocess.run([PY, "-c", "import cryptography"], capture_output=True, env=clean_env("/x")).returncode != 0:
        pytest.skip("Debian's python3-cryptography is not installed (make test-deps installs it)")


def test_conf_names_the_module_by_absolute_path():
    """build/accelaes.cnf (accelaes-conf program, run by make) names this build's module by its absolute path."""
    if not CONF.exists():
        pytest.skip(f"{CONF} is not built (run make)")
    text = CONF.read_text()
    m = re.search(r"^\[accelaes_sect\]\n(?:[^\[].*\n)*?module = (.*)$", text, re.M)
    assert m, text
    assert m.group(1) == str((BUILD / "accelaes.so").resolve())
    assert "OPENSSL_MODULES" not in re.sub(r"^#.*$", "", text, flags=re.M)
    # --module writes what it is given; a relative path is refused (it would depend on the program's directory)
    p = subprocess.run([str(TOOL), "program", "--module", "/opt/x/accelaes.so"], capture_output=True, text=True)
    assert p.returncode == 0 and "\nmodule = /opt/x/accelaes.so\n" in p.stdout, p
    p = subprocess.run([str(TOOL), "program", "--module", "build/accelaes.so"], capture_output=True, text=True)
    assert p.returncode == 2 and "absolute" in p.stderr, p


def openssl_loads_legacy(env):
    """Whether the running OpenSSL loads the legacy provider in env (asked, never assumed)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    p = subprocess.run([openssl, "list", "-providers", "-provider", "legacy"], env=env, capture_output=True,
                       text=True, timeout=60)
    return p.returncode == 0 and re.search(r"^\s+legacy\s*$", p.stdout, re.M) is not None


def test_cryptography_with_legacy_under_the_one_program_conf(shm):
    need_cryptography()
    if not CONF.exists():
        pytest.skip(f"{CONF} is not built (run make)")
    if not openssl_loads_legacy(clean_env(shm)):
        pytest.skip("this OpenSSL has no legacy provider to load (no legacy.so in its module folder)")
    # The old recipe, shown as the reason for the new one (not asserted: it depends on the release's cryptography)
    old = clean_env(shm, OPENSSL_CONF=str(BUILD.parent / "conf" / "accelaes.cnf"), OPENSSL_MODULES=str(BUILD))
    p = subprocess.run([PY, "-c", SCRIPT, "16"], env=old, capture_output=True, text=True, timeout=120)
    tail = (p.stderr.strip().splitlines() or [""])[-1]
    print(f"old recipe (OPENSSL_MODULES={BUILD}): exit {p.returncode}: {tail or p.stdout.strip()}")
    assert openssl_loads_legacy(old) is False, "OPENSSL_MODULES=build found a legacy provider: the reason is gone"
    # The one-program configuration: legacy and accelaes both load, and accelaes does the AES work
    env = clean_env(shm, OPENSSL_CONF=str(CONF))
    assert openssl_loads_legacy(env), "legacy does not load under build/accelaes.cnf"
    before = stat_total(env)
    p = subprocess.run([PY, "-c", SCRIPT, str(AES_BYTES)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"python3-cryptography under {CONF}: {p.stderr[-2000:]}"
    assert "blowfish 64" in p.stdout and f"aes {AES_BYTES}" in p.stdout, p.stdout
    assert "legacy_loaded False" not in p.stdout, p.stdout
    counted = stat_total(env) - before
    print(f"one-program conf: {p.stdout.split()} ; accelaes counted {counted} bytes")
    assert counted >= AES_BYTES, f"accelaes counted {counted} bytes of the {AES_BYTES} AES bytes"


def registered_ciphers(provider="accelaes"):
    """The cipher names a provider registers, as the running OpenSSL lists them (one canonical AES-... name each)."""
    openssl = shutil.which("openssl")
    if openssl is None or not (BUILD / "accelaes.so").exists():
        pytest.skip("needs the openssl command and build/accelaes.so")
    env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    env["OPENSSL_MODULES"] = str(BUILD)
    p = subprocess.run([openssl, "list", "-cipher-algorithms", "-provider", provider], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    names = set()
    for line in p.stdout.splitlines():
        if not line.rstrip().endswith("@ " + provider):
            continue
        aliases = re.findall(r"[A-Za-z0-9.-]+", line.split("@")[0])
        name = next((a.upper() for a in aliases if re.match(r"(?i)^aes-\d+-", a)), None)
        if name is not None:
            names.add(name)
    return names


def default_ciphers():
    return registered_ciphers("default")


def test_docs_list_what_the_configuration_routes(repo_root):
    """docs/transparent-offload.md's list of what the configuration takes from accelaes is exactly the ciphers the
    provider registers (the configuration prefers accelaes for all of them: ?provider=accelaes)."""
    text = (repo_root / "docs" / "transparent-offload.md").read_text()
    m = re.search(r"<!-- routed.*?-->(.*?)<!-- /routed -->", text, re.S)
    assert m, "docs/transparent-offload.md has no <!-- routed --> list"
    documented = set(re.findall(r"`(AES-[0-9A-Z-]+)`", m.group(1)))
    registered = registered_ciphers()
    delegates = registered - documented
    assert not documented - registered, f"documented, not registered: {sorted(documented - registered)}"
    # Where the running libcrypto has opaque keys (EVP_SKEY_import), accelaes also registers the default's
    # other AES ciphers as delegates (provider/cipher/cipher_delegate.c; the docs' "delegates" row says so): each
    # must then be a cipher the default provider itself offers. Elsewhere there are none.
    if hasattr(ctypes.CDLL(LIBCRYPTO), "EVP_SKEY_import"):
        assert "delegates" in m.group(1), "the routed list does not say what the delegates are"
        stray = delegates - default_ciphers()
        assert not stray, f"registered, neither documented nor a default cipher: {sorted(stray)}"
    else:
        assert not delegates, f"registered, not documented: {sorted(delegates)}"
