"""tests/system/test_tls_ccm.py: AES-CCM (issue 28's AEAD layer) under real TLS on conf/accelaes.cnf alone,
between openssl s_server and openssl s_client on 127.0.0.1, every command bounded in time:

- TLS 1.3 TLS_AES_128_CCM_SHA256 and TLS_AES_128_CCM_8_SHA256 (libssl drives the AEAD per record: nonce,
  tag length, length, AAD, data, tag), TLS 1.2 ECDHE-ECDSA-AES128-CCM (an ECDSA certificate), AES256-CCM
  and AES128-CCM8 (RSA key exchange; the TLS1_AAD / TLS1_IV_FIXED record mode through EVP_Cipher), with
  both ends on accelaes: the body byte-identical and accelaes-stat showing both ends' records went through
  the provider;
- interop both ways with a peer on OpenSSL's default provider alone, so the wire format is the standard one;
- one flipped bit in a full server record refused with bad_record_mac, nothing damaged delivered.

Where accelaes does not serve CCM, conf/accelaes.cnf's "?provider=accelaes" falls back to the default and
the transfers still work: the counters are what fail then. Helpers come from tests/system/test_tls.py and
tests/system/test_tls_gcm.py."""

import os
import shutil
import subprocess

import pytest

import test_tls as tls
from test_tls_gcm import BigRecordFlipProxy, default_only_env

SIZE = 2 << 20
# (protocol flag, cipher option, suite as s_client reports it)
SUITES = [
    ("-tls1_3", "-ciphersuites", "TLS_AES_128_CCM_SHA256"),
    ("-tls1_3", "-ciphersuites", "TLS_AES_128_CCM_8_SHA256"),
    ("-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-CCM"),
    ("-tls1_2", "-cipher", "AES256-CCM"),
    ("-tls1_2", "-cipher", "AES128-CCM8"),
]
IDS = [s[2] for s in SUITES]
TLS13 = "TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256:TLS_AES_128_GCM_SHA256"

pytestmark = pytest.mark.skipif(
    not tls.MODULE.exists() or not tls.STAT.exists() or shutil.which("openssl") is None,
    reason=f"openssl, {tls.MODULE} or {tls.STAT} missing: install openssl, run make (or install the package)")


def args_of(proto, opt, suite):
    # CCM_8's 64-bit tag is below security level 1 in OpenSSL 3: both ends widen to level 0 for it alone
    extra = ["-cipher", "ALL:@SECLEVEL=0"] if proto == "-tls1_3" else []
    last = f"{suite}:@SECLEVEL=0" if opt == "-cipher" else suite
    return [proto, opt, last, *extra]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls-ccm")
    shm = f"/accelaes-test-tls-ccm-{os.getpid()}"
    env = tls.base_env(shm)
    plain = default_only_env()
    p = subprocess.run([tls.OPENSSL, "list", "-providers"], env=plain, capture_output=True, text=True, timeout=30)
    assert "accelaes" not in p.stdout, "the default-only peer loads accelaes too:\n" + p.stdout
    for key, cert, alg in (("key.pem", "cert.pem", "rsa:2048"), ("eckey.pem", "eccert.pem", "ec")):
        opts = ["-newkey", alg] if alg != "ec" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        subprocess.run([tls.OPENSSL, "req", "-x509", *opts, "-nodes", "-keyout", key, "-out", cert,
                        "-subj", "/CN=localhost", "-days", "2"], cwd=d, env=plain, check=True, capture_output=True,
                       timeout=60)
    data = os.urandom(SIZE)
    (d / "data.bin").write_bytes(data)
    (d / "small.bin").write_bytes(data[:1000])
    extra = ["-dcert", "eccert.pem", "-dkey", "eckey.pem", "-ciphersuites", TLS13]
    server = tls.Server(d, env, extra).start()
    plain_server = tls.Server(d, plain, extra).start()
    yield {"dir": d, "data": data, "env": env, "server": server, "plain_server": plain_server, "plain": plain}
    server.stop()
    plain_server.stop()
    try:
        os.unlink("/dev/shm" + shm)
    except OSError:
        pass


def negotiated(site, args):
    """One small request with s_client's session report: the suite it names."""
    p = tls.s_client(site, args, path="small.bin", quiet=False)
    out = p.stdout.decode(errors="replace")
    assert b"HTTP/1.0 200" in p.stdout, out[-2000:] + p.stderr.decode(errors="replace")[-2000:]
    return next((ln.split("Cipher is", 1)[1].strip() for ln in out.splitlines() if "Cipher is" in ln), None)


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_ccm_suite_goes_through_accelaes(site, proto, opt, suite):
    args = args_of(proto, opt, suite)
    assert negotiated(site, args) == suite
    body, err, grown = tls.fetch(site, args)
    assert body == site["data"], err[-2000:]
    # the server encrypts SIZE bytes and the client decrypts them, both through accelaes
    assert grown >= 2 * SIZE - tls.LAG, f"{suite}: accelaes counters grew by {grown} bytes only"


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_interop_default_client_accelaes_server(site, proto, opt, suite):
    body, err, grown = tls.fetch(site, args_of(proto, opt, suite), env=site["plain"])
    assert body == site["data"], err[-2000:]
    assert grown >= SIZE - tls.LAG, f"the server's records did not go through accelaes ({grown} bytes)"


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_interop_accelaes_client_default_server(site, proto, opt, suite):
    body, err, grown = tls.fetch(site, args_of(proto, opt, suite), port=site["plain_server"].port)
    assert body == site["data"], err[-2000:]
    assert grown >= SIZE - tls.LAG, f"the client's records did not go through accelaes ({grown} bytes)"


@pytest.mark.parametrize("back", [5, 5000], ids=["tag", "payload"])
@pytest.mark.parametrize("proto,opt,suite", [SUITES[0], SUITES[2]], ids=[IDS[0], IDS[2]])
def test_tampered_record_is_refused(site, proto, opt, suite, back):
    """One flipped bit in the third full record of the body (back=5: in the CCM tag; 5000: a payload byte):
    the client's accelaes CCM must refuse it (bad_record_mac) and deliver none of the damaged data."""
    proxy = BigRecordFlipProxy(site["server"].port, nth=3, back=back)
    proxy.start()
    body, err, grown = tls.fetch(site, args_of(proto, opt, suite), port=proxy.port)
    proxy.join(timeout=30)
    assert proxy.flipped, "the proxy found no third full record to damage"
    assert len(body) < SIZE and body == site["data"][:len(body)], "damaged data was delivered"
    assert "bad record mac" in err.lower(), err[-2000:]
    # at least the two full records the client opened before the damaged one (the server sealed more)
    assert grown >= 2 * 16000, f"the records did not go through accelaes ({grown} bytes counted)"
