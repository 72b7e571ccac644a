"""tests/system/test_conf.py: conf/accelaes.cnf as programs use it (OPENSSL_CONF, no -provider flags):
both providers active, accelaes preferred for AES-ECB/CBC/CTR (also through the legacy
EVP_aes_*() calls), `openssl enc` and `openssl cms` interoperating with the default provider byte
for byte, the module found through OPENSSL_MODULES or MODULESDIR, and a broken configuration
(bad or unknown setting, missing module) reported without a crash."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
from conftest import BUILD, active_provider_names, stat_total  # noqa: E402 (build/, or ACCELAES_BUILD_DIR)
CONF = ROOT / "conf" / "accelaes.cnf"
MODULE = BUILD / "accelaes.so"
STAT = BUILD / "accelaes-stat"
LEGACY = BUILD / "tests" / "test_legacy_fetch"
OPENSSL = shutil.which("openssl") or "openssl"
LAG = 256 << 10   # counters a live process may not have published (scheduler/counters.c); ours exit

needs_module = pytest.mark.skipif(not MODULE.exists(), reason="build/accelaes.so not built yet: run make")
needs_stat = pytest.mark.skipif(not STAT.exists(), reason="build/accelaes-stat not built yet: run make")


@pytest.fixture(scope="module")
def shm():
    name = f"/accelaes-test-conf-{os.getpid()}"
    yield name
    try:
        os.unlink("/dev/shm" + name)
    except OSError:
        pass


def env_for(shm, conf=CONF, modules=BUILD):
    """The environment of a program run under the configuration (ACCELAES_* settings cleared,
    so only the file speaks)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELAES_")}
    env.pop("OPENSSL_MODULES", None)
    if conf is not None:
        env["OPENSSL_CONF"] = str(conf)
    else:
        env.pop("OPENSSL_CONF", None)
    if modules is not None:
        env["OPENSSL_MODULES"] = str(modules)
    env["ACCELAES_SHM_NAME"] = shm
    return env


def default_env():
    """OpenSSL as installed: the system configuration, the default provider alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELAES_")}
    env.pop("OPENSSL_CONF", None)
    env.pop("OPENSSL_MODULES", None)
    return env


def run(args, env, **kw):
    return subprocess.run([OPENSSL, *args], env=env, capture_output=True, timeout=120, **kw)


def active_providers(env):
    p = run(["list", "-providers"], env, text=True)
    assert p.returncode >= 0, f"openssl list crashed (signal {-p.returncode})"
    return active_provider_names(p.stdout), p


def conf_variant(tmp_path, edit):
    """A copy of conf/accelaes.cnf with its [accelaes_sect] changed by edit(lines) -> lines."""
    lines = CONF.read_text().splitlines()
    start = lines.index("[accelaes_sect]") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    body = edit(lines[start:end])
    path = tmp_path / "variant.cnf"
    path.write_text("\n".join(lines[:start] + body + lines[end:]) + "\n")
    return path


def set_key(key, value):
    def edit(body):
        out = [ln for ln in body if not re.match(rf"^{re.escape(key)}\s*=", ln)]
        return out + [f"{key} = {value}"]
    return edit


# ---------------------------------------------------------------- the configuration as shipped

@needs_module
def test_both_providers_active(shm):
    names, p = active_providers(env_for(shm))
    assert {"default", "accelaes"} <= names, p.stdout + p.stderr


@needs_module
def test_aes_offered_by_accelaes(shm):
    """Under the configuration accelaes offers all nine AES-ECB/CBC/CTR ciphers, AES-GCM and
    AES-XTS (which one a program gets is shown by test_legacy_evp_calls_get_accelaes)."""
    p = run(["list", "-cipher-algorithms", "-verbose"], env_for(shm), text=True)
    assert p.returncode == 0, p.stderr
    for mode in ("ECB", "CBC", "CTR"):
        for bits in (128, 192, 256):
            assert re.search(rf"AES-{bits}-{mode}\b.*@ accelaes", p.stdout), f"AES-{bits}-{mode} not offered"
    for name in ("AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS"):
        assert re.search(rf"{name}\b.*@ accelaes", p.stdout, re.I), f"{name} not offered"


@needs_module
def test_legacy_evp_calls_get_accelaes(shm):
    if not LEGACY.exists():
        pytest.skip(f"{LEGACY} not built yet: run make")
    p = subprocess.run([str(LEGACY)], env=env_for(shm), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    # the nine ECB/CBC/CTR ciphers, GCM (ciphertext and tag) and XTS from accelaes; what accelaes
    # does not serve (AES-OCB) works, from the default provider, or on 3.5+ from accelaes's delegate
    # to it (the program checks which by the running libcrypto)
    assert p.stdout.count(" accelaes vector-ok") == 14, p.stdout
    for name in ("AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS"):
        assert f"{name} accelaes vector-ok" in p.stdout, p.stdout
    assert re.search(r"^AES-128-OCB (default|accelaes) init-ok$", p.stdout, re.M), p.stdout


@needs_module
def test_legacy_program_without_conf_is_default(shm):
    """The same program without OPENSSL_CONF gets the default provider: the test above can fail."""
    if not LEGACY.exists():
        pytest.skip(f"{LEGACY} not built yet: run make")
    env = env_for(shm, conf=CONF)
    env["OPENSSL_CONF"] = "/dev/null"
    p = subprocess.run([str(LEGACY)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "AES-128-CBC default vector-ok" in p.stdout, p.stdout + p.stderr


# ---------------------------------------------------------------- openssl enc and cms

KEYS = {128: "000102030405060708090a0b0c0d0e0f",
        192: "000102030405060708090a0b0c0d0e0f1011121314151617",
        256: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}
IV = "f0e1d2c3b4a5968778695a4b3c2d1e0f"


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    d = tmp_path_factory.mktemp("conf")
    f = d / "plain.bin"
    f.write_bytes(os.urandom((3 << 20) + 5))    # odd length: padding (CBC) and a partial block (CTR)
    return f


@needs_module
@needs_stat
@pytest.mark.parametrize("bufsize", [None, "1048576"], ids=["enc-8k-updates", "enc-1m-updates"])
@pytest.mark.parametrize("cipher", ["aes-128-cbc", "aes-256-cbc", "aes-128-ctr", "aes-192-ctr"])
def test_openssl_enc_interoperates(shm, payload, tmp_path, cipher, bufsize):
    bits = int(cipher.split("-")[1])
    common = ["enc", f"-{cipher}", "-K", KEYS[bits], "-iv", IV] + (["-bufsize", bufsize] if bufsize else [])
    acc, ref = env_for(shm), default_env()
    ct_acc, ct_ref, back = tmp_path / "acc.enc", tmp_path / "ref.enc", tmp_path / "back.bin"
    size = payload.stat().st_size

    before = stat_total(acc)
    p = run(common + ["-e", "-in", str(payload), "-out", str(ct_acc)], acc)
    assert p.returncode == 0, p.stderr
    p = run(common + ["-e", "-in", str(payload), "-out", str(ct_ref)], ref)
    assert p.returncode == 0, p.stderr
    assert ct_acc.read_bytes() == ct_ref.read_bytes(), "accelaes and the default provider differ"
    assert stat_total(acc) - before >= size, "openssl enc did not encrypt through accelaes"

    # accelaes decrypts what the default provider encrypted, and the other way round
    before = stat_total(acc)
    p = run(common + ["-d", "-in", str(ct_ref), "-out", str(back)], acc)
    assert p.returncode == 0, p.stderr
    assert back.read_bytes() == payload.read_bytes()
    assert stat_total(acc) - before >= size - 16, "openssl enc -d did not decrypt through accelaes"
    p = run(common + ["-d", "-in", str(ct_acc), "-out", str(back)], ref)
    assert p.returncode == 0 and back.read_bytes() == payload.read_bytes()


@pytest.fixture(scope="module")
def recipient(tmp_path_factory):
    d = tmp_path_factory.mktemp("cms")
    p = run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
             "-out", str(d / "cert.pem"), "-subj", "/CN=accelaes cms test", "-days", "2"], default_env())
    assert p.returncode == 0, p.stderr
    return d / "cert.pem", d / "key.pem"


def cms_encrypt(env, cipher, src, dst, cert):
    return run(["cms", "-encrypt", "-binary", f"-{cipher}", "-in", str(src), "-out", str(dst),
                "-outform", "DER", str(cert)], env)


def cms_decrypt(env, src, dst, cert, key):
    return run(["cms", "-decrypt", "-binary", "-in", str(src), "-inform", "DER", "-out", str(dst),
                "-recip", str(cert), "-inkey", str(key)], env)


@needs_module
@needs_stat
@pytest.mark.parametrize("cipher", ["aes-128-cbc", "aes-256-cbc"])
def test_openssl_cms_interoperates(shm, payload, recipient, tmp_path, cipher):
    cert, key = recipient
    acc, ref = env_for(shm), default_env()
    size = payload.stat().st_size
    for enc_env, dec_env, who in ((acc, ref, "accelaes -> default"), (ref, acc, "default -> accelaes")):
        msg, out = tmp_path / "msg.der", tmp_path / "out.bin"
        before = stat_total(acc)
        p = cms_encrypt(enc_env, cipher, payload, msg, cert)
        assert p.returncode == 0, f"{who}: {p.stderr}"
        p = cms_decrypt(dec_env, msg, out, cert, key)
        assert p.returncode == 0, f"{who}: {p.stderr}"
        assert out.read_bytes() == payload.read_bytes(), who
        assert stat_total(acc) - before >= size - 16, f"{who}: accelaes did not do the bulk work"
        # a CMS message carries a fresh random key and IV: the two sides cannot be compared byte
        # for byte, so each direction is checked by the other provider decrypting it


@needs_module
def test_openssl_cms_ctr_is_not_a_cms_cipher(shm, payload, recipient, tmp_path):
    """CMS has no AlgorithmIdentifier for AES-CTR: OpenSSL refuses it with or without accelaes,
    cleanly (no crash, no output)."""
    cert, _ = recipient
    for env in (env_for(shm), default_env()):
        out = tmp_path / "ctr.der"
        p = cms_encrypt(env, "aes-128-ctr", payload, out, cert)
        assert p.returncode > 0, "cms -aes-128-ctr unexpectedly worked (or crashed)"
        assert not out.exists() or out.stat().st_size == 0


# ---------------------------------------------------------------- where the module is found

@needs_module
def test_module_found_through_openssl_modules(shm, tmp_path):
    d = tmp_path / "modules"
    d.mkdir()
    shutil.copy(MODULE, d / "accelaes.so")
    names, p = active_providers(env_for(shm, modules=d))
    assert "accelaes" in names, p.stdout + p.stderr


def modulesdir():
    out = subprocess.run([OPENSSL, "version", "-m"], capture_output=True, text=True).stdout
    m = re.search(r'"(.*)"', out)
    return Path(m.group(1)) if m else None


@needs_module
def test_module_found_in_modulesdir_when_installed(shm):
    installed = modulesdir() / "accelaes.so" if modulesdir() else None
    if installed is None or not installed.exists():
        pytest.skip(f"accelaes is not installed in {modulesdir()} (make install)")
    if installed.read_bytes() != MODULE.read_bytes():
        pytest.skip(f"{installed} is not the module just built (run make install again)")
    names, p = active_providers(env_for(shm, modules=None))
    assert "accelaes" in names, p.stdout + p.stderr


# ---------------------------------------------------------------- a broken configuration

@needs_module
@pytest.mark.parametrize("key,value,named", [
    ("backend", "tpu", "setting 'backend'"),
    ("workers", "-3", "setting 'workers'"),
    ("split_min", "10x", "setting 'split_min'"),
    ("gpu_min", "lots", "setting 'gpu_min'"),
    ("shm", "maybe", "setting 'shm'"),
    ("split_minimum", "64k", "unknown setting 'split_minimum'"),
])
def test_bad_setting_refuses_accelaes_not_the_program(shm, tmp_path, key, value, named):
    """In transparent use a bad accelaes section stops accelaes, with a message naming the
    setting; OpenSSL 3.0 treats a provider that fails to activate as non-fatal, so the program
    itself carries on with the default provider."""
    env = env_for(shm, conf=conf_variant(tmp_path, set_key(key, value)))
    names, p = active_providers(env)
    assert "accelaes" not in names and "default" in names, p.stdout
    assert named in p.stderr, p.stderr
    enc = run(["enc", "-aes-128-cbc", "-K", KEYS[128], "-iv", IV], env, input=b"x" * 100)
    assert enc.returncode == 0 and len(enc.stdout) == 112, enc.stderr
    assert named in enc.stderr.decode()


@needs_module
def test_good_settings_in_the_file_are_accepted(shm, tmp_path):
    conf = conf_variant(tmp_path, lambda body: [ln for ln in body if "=" not in ln or ln.startswith("activate")]
                        + ["backend = cpu", "workers = 1", "split_min = 64k", "gpu_min = 1m", "shm = off"])
    names, p = active_providers(env_for(shm, conf=conf))
    assert "accelaes" in names, p.stdout + p.stderr
    assert p.stderr == ""


@needs_module
def test_missing_module_in_conf_is_not_a_crash(shm, tmp_path):
    """module = a path that does not exist: the provider is not activated, the program runs."""
    conf = conf_variant(tmp_path, lambda body: ["module = /nonexistent/accelaes.so"] + body)
    env = env_for(shm, conf=conf)
    names, p = active_providers(env)
    assert p.returncode == 0 and "accelaes" not in names and "default" in names, p.stdout + p.stderr
    enc = run(["enc", "-aes-128-cbc", "-K", KEYS[128], "-iv", IV], env, input=b"x" * 100)
    assert enc.returncode == 0 and len(enc.stdout) == 112


@needs_module
def test_missing_module_asked_for_gives_openssls_error(shm, tmp_path):
    """Asked for by name with no module to be found, OpenSSL says so as usual and exits 1."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = env_for(shm, conf=CONF, modules=empty)
    p = run(["list", "-providers", "-provider", "accelaes"], env, text=True)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "accelaes" in p.stderr and ("load" in p.stderr.lower() or "not found" in p.stderr.lower()), p.stderr
