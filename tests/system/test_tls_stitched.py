"""tests/system/test_tls_stitched.py: the stitched TLS ciphers AES-{128,256}-CBC-HMAC-SHA{1,256}
(provider/cipher_hmac*.c), which libssl fetches for TLS 1.0-1.2 CBC suites without
encrypt-then-MAC.

- tests/c/test_hmac_differential.c against OpenSSL's default provider, and
  tests/c/test_hmac_stitched.c (the record code itself, and under valgrind its constant time);
- real s_server / s_client transfers with -no_etm on conf/accelaes.cnf: the body byte-identical,
  accelaes-stat showing both ends' records went through accelaes, interop with a client on the
  default provider alone, and a tampered record refused with bad_record_mac.

Server, client and proxy helpers come from tests/system/test_tls.py.
"""

import os
import shutil
import subprocess

import pytest

import test_tls as tls

# conftest.py sets OPENSSL_MODULES; with ACCELAES_INSTALLED=1 there is none (the package's module in MODULESDIR)
MODULES = None if tls.INSTALLED else os.environ.get("OPENSSL_MODULES", str(tls.BUILD))
SIZE = 3 << 20
STITCHED_SUITES = ["AES128-SHA", "AES256-SHA", "AES128-SHA256", "AES256-SHA256"]


def c_test(name):
    path = tls.BUILD / "tests" / name
    if not path.exists():
        pytest.skip(f"{path} not built yet: run make")
    return path


@pytest.mark.parametrize("engine", ["aesni", "evp"])
def test_stitched_ciphers_match_default_provider(engine):
    """All four ciphers, TLS 1.0/1.1/1.2: records encrypted by both providers byte for byte and
    opened by an independent AES-CBC + HMAC oracle; round trips; crafted records (long padding,
    damaged padding, MAC, payload or ciphertext, short records) opened by both, judged against
    the oracle; IVs, lengths, flags and refusals as the default's; the three encrypt paths
    (fused SHA-NI, interleaved, whole record). engine=evp: accelaes on its nested-EVP engine,
    where records take the whole-record path."""
    env = dict(os.environ)
    if engine == "evp":
        env["ACCELAES_FORCE_EVP_ENGINE"] = "1"
    for name in ("test_hmac_stitched", "test_hmac_differential"):
        p = subprocess.run([str(c_test(name))], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0 and " 0 failed" in p.stdout, name + ": " + p.stdout + p.stderr[-3000:]
        assert "SKIP" not in p.stdout and " passed, 0 failed" in p.stdout, p.stdout


def test_stitched_record_check_is_constant_time():
    """Under valgrind the decrypted bytes are undefined: a branch or an address that depends on
    the padding length or the MAC's place is reported and fails the run (ctgrind)."""
    binary = c_test("test_hmac_stitched")
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind): constant time not checked")
    if tls.SANITIZER:
        pytest.skip(f"valgrind cannot run a {tls.SANITIZER}-instrumented binary: constant time is checked by the plain build")
    p = subprocess.run([valgrind, "-q", "--error-exitcode=99", str(binary)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "under valgrind" in p.stdout and " 0 failed" in p.stdout, \
        p.stdout + p.stderr[-5000:]


# ---------------------------------------------------------------- real TLS through conf/accelaes.cnf

def module_offers_stitched(env):
    p = subprocess.run([tls.OPENSSL, "list", "-cipher-algorithms", "-provider", "accelaes"],
                       env=env, capture_output=True, text=True, timeout=30)
    return "AES-128-CBC-HMAC-SHA1 @ accelaes" in p.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not tls.MODULE.exists() or not tls.STAT.exists():
        pytest.skip(f"{tls.MODULE} or {tls.STAT} missing: run make (or install the package)")
    d = tmp_path_factory.mktemp("stitched")
    shm = f"/accelaes-test-stitched-{os.getpid()}"
    env = tls.base_env(shm)
    if MODULES is not None:
        env["OPENSSL_MODULES"] = MODULES
    if not module_offers_stitched(env):
        pytest.skip(f"{tls.MODULE} does not offer AES-128-CBC-HMAC-SHA1: prov.c's cipher query "
                    "must return the stitched rows of provider/cipher/ciphers.c too")
    plain = {k: v for k, v in os.environ.items() if k not in ("OPENSSL_CONF", "OPENSSL_MODULES")}
    subprocess.run([tls.OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                    "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                   cwd=d, env=plain, check=True, capture_output=True, timeout=60)
    data = os.urandom(SIZE)
    (d / "data.bin").write_bytes(data)
    (d / "small.bin").write_bytes(data[:1000])
    server = tls.Server(d, env).start()
    yield {"dir": d, "data": data, "env": env, "server": server, "shm": shm, "plain": plain}
    server.stop()
    try:
        os.unlink("/dev/shm" + shm)
    except OSError:
        pass


fetch = tls.fetch  # the data file through s_client: (body, stderr, accelaes bytes meanwhile)


@pytest.mark.parametrize("suite", STITCHED_SUITES)
def test_no_etm_tls12_goes_through_accelaes(site, suite):
    args = ["-tls1_2", "-no_etm", "-cipher", suite]
    cipher, got_etm, small_ok = tls.negotiated(site, args)
    assert cipher == suite and not got_etm and small_ok
    body, err, grown = fetch(site, args)
    assert body == site["data"], err[-2000:]
    # the server encrypts SIZE bytes and the client decrypts them, both through accelaes
    assert grown >= 2 * SIZE - tls.LAG, f"accelaes counters grew by {grown} bytes only"


@pytest.mark.parametrize("proto", ["-tls1", "-tls1_1"])
def test_no_etm_tls10_tls11(site, proto):
    """TLS 1.0 chains the CBC IV across records; TLS 1.1 sends an explicit IV per record."""
    args = [proto, "-no_etm", "-cipher", "AES128-SHA:@SECLEVEL=0"]
    body, err, grown = fetch(site, args)
    assert body == site["data"], err[-2000:]
    assert grown >= 2 * SIZE - tls.LAG, f"accelaes counters grew by {grown} bytes only"


@pytest.mark.parametrize("suite", ["AES128-SHA", "AES256-SHA256"])
def test_interop_with_default_provider_client(site, suite):
    """A client on the default provider alone (its own stitched ciphers) against the server on
    accelaes: the wire format is the standard one, not merely self-consistent."""
    env = dict(site["plain"])
    env.pop("ACCELAES_SHM_NAME", None)
    body, err, grown = fetch(site, ["-tls1_2", "-no_etm", "-cipher", suite], env=env)
    assert body == site["data"], err[-2000:]
    assert grown >= SIZE - tls.LAG, f"the server's records did not go through accelaes ({grown} bytes)"


@pytest.mark.parametrize("suite,back", [("AES128-SHA", 17), ("AES256-SHA256", 5000)], ids=["pad", "mid"])
def test_tampered_record_is_refused(site, suite, back):
    """One flipped bit in a server record (back=17: the padding-length byte, through the block
    before; 5000: a payload byte): the client's accelaes stitched cipher must refuse the record
    (bad_record_mac) and never deliver the damaged data."""
    proxy = tls.FlipProxy(site["server"].port, nth=3, back=back)
    proxy.start()
    body, err, grown = fetch(site, ["-tls1_2", "-no_etm", "-cipher", suite], port=proxy.port)
    proxy.join(timeout=30)
    assert proxy.flipped, "the proxy found no third application-data record to damage"
    assert len(body) < SIZE and body == site["data"][:len(body)], "damaged data was delivered"
    assert "bad record mac" in err.lower(), err[-2000:]
    assert grown > 0, "the records did not go through accelaes"
