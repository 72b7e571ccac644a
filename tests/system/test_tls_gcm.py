"""tests/system/test_tls_gcm.py: AES-GCM (provider/cipher_gcm*.c, issue #18) under real TLS on
conf/accelaes.cnf alone.

- TLS 1.3 TLS_AES_128_GCM_SHA256 / TLS_AES_256_GCM_SHA384 (libssl drives the AEAD per record:
  IV, AAD, update, final, tag) and TLS 1.2 ECDHE-RSA-AES{128,256}-GCM-SHA{256,384} (the
  TLS1_AAD / TLS1_IV_FIXED record mode through EVP_Cipher), through openssl s_server / s_client
  with both ends on accelaes: the body byte-identical and accelaes-stat showing both ends' records
  went through the provider (GCM bytes are counted as inline bytes);
- interop both ways with a peer on OpenSSL's default provider alone;
- one flipped bit in a server record (the tag, or a payload byte) refused with bad_record_mac;
- nginx (master as root, workers as www-data) serving files over TLS 1.3 and TLS 1.2 GCM to curl
  on the default provider, byte for byte, counted by accelaes-stat.

Server, client and proxy helpers come from tests/system/test_tls.py; nginx's from tests/system/test_real_programs.py.
"""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import test_real_programs as real
import test_tls as tls

SIZE = 3 << 20
# (protocol flag, cipher option, suite): what s_client asks for and what it must report.
SUITES = [
    ("-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"),
    ("-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"),
    ("-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"),
]
IDS = [s[2] for s in SUITES]

pytestmark = pytest.mark.skipif(
    not tls.MODULE.exists() or not tls.STAT.exists() or shutil.which("openssl") is None,
    reason=f"openssl, {tls.MODULE} or {tls.STAT} missing: install openssl, run make (or install the package)")
# and on every GCM engine this machine has (tests/engines.py)
pytestmark = [pytestmark, pytest.mark.usefixtures("engine")]
ENGINES_ONLY = r"^gcm-"


def args_of(proto, opt, suite):
    return [proto, opt, suite]


def default_only_env():
    """A peer on OpenSSL's default provider alone: no accelaes configuration, module or segment."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("ACCELAES_", "OPENSSL_")) and k != "LD_PRELOAD"}


def offers_gcm(env):
    p = subprocess.run([tls.OPENSSL, "list", "-cipher-algorithms", "-provider", "accelaes"],
                       env=env, capture_output=True, text=True, timeout=30)
    return "aes-128-gcm" in p.stdout.lower() and "@ accelaes" in p.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls-gcm")
    shm = f"/accelaes-test-tls-gcm-{os.getpid()}"
    env = tls.base_env(shm)
    if not offers_gcm(env):
        pytest.skip(f"{tls.MODULE} does not offer AES-128-GCM")
    plain = default_only_env()
    p = subprocess.run([tls.OPENSSL, "list", "-providers"], env=plain, capture_output=True, text=True,
                       timeout=30)
    assert "accelaes" not in p.stdout, "the default-only peer loads accelaes too:\n" + p.stdout
    subprocess.run([tls.OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                    "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                   cwd=d, env=plain, check=True, capture_output=True, timeout=60)
    data = os.urandom(SIZE)
    (d / "data.bin").write_bytes(data)
    (d / "small.bin").write_bytes(data[:1000])
    server = tls.Server(d, env).start()
    plain_server = tls.Server(d, plain).start()
    yield {"dir": d, "data": data, "env": env, "server": server, "plain_server": plain_server,
           "shm": shm, "plain": plain}
    server.stop()
    plain_server.stop()
    try:
        os.unlink("/dev/shm" + shm)
    except OSError:
        pass


fetch = tls.fetch  # the data file through s_client: (body, stderr, accelaes bytes meanwhile)


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_gcm_suite_goes_through_accelaes(site, proto, opt, suite):
    args = args_of(proto, opt, suite)
    cipher, _, small_ok = tls.negotiated(site, args)
    assert cipher == suite and small_ok
    body, err, grown = fetch(site, args)
    assert body == site["data"], err[-2000:]
    # the server encrypts SIZE bytes and the client decrypts them, both through accelaes
    assert grown >= 2 * SIZE - tls.LAG, f"{suite}: accelaes counters grew by {grown} bytes only"


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_interop_default_client_accelaes_server(site, proto, opt, suite):
    """A client on the default provider alone against the server on accelaes: the wire format is
    the standard one, not merely self-consistent."""
    body, err, grown = fetch(site, args_of(proto, opt, suite), env=site["plain"])
    assert body == site["data"], err[-2000:]
    assert grown >= SIZE - tls.LAG, f"the server's records did not go through accelaes ({grown} bytes)"


@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_interop_accelaes_client_default_server(site, proto, opt, suite):
    """The other way round: the server on the default provider alone, the client on accelaes."""
    body, err, grown = fetch(site, args_of(proto, opt, suite), port=site["plain_server"].port)
    assert body == site["data"], err[-2000:]
    assert grown >= SIZE - tls.LAG, f"the client's records did not go through accelaes ({grown} bytes)"


class BigRecordFlipProxy(tls.FlipProxy):
    """test_tls.FlipProxy, counting only application-data records of at least 16000 bytes: in
    TLS 1.3 the encrypted handshake messages and session tickets are application-data records
    too, so the Nth such record is a full record of the HTTP body in both versions."""

    def counts(self, rec):
        return rec[0] == 23 and len(rec) - 5 >= 16000


@pytest.mark.parametrize("back", [5, 5000], ids=["tag", "payload"])
@pytest.mark.parametrize("proto,opt,suite", SUITES, ids=IDS)
def test_tampered_record_is_refused(site, proto, opt, suite, back):
    """One flipped bit in the third full record of the body the server sends (back=5: in the
    GCM tag; 5000: a payload byte): the client's accelaes GCM must refuse the record
    (bad_record_mac) and never deliver the damaged data."""
    proxy = BigRecordFlipProxy(site["server"].port, nth=3, back=back)
    proxy.start()
    body, err, grown = fetch(site, args_of(proto, opt, suite), port=proxy.port)
    proxy.join(timeout=30)
    assert proxy.flipped, "the proxy found no third full record to damage"
    assert len(body) < SIZE and body == site["data"][:len(body)], "damaged data was delivered"
    assert "bad record mac" in err.lower(), err[-2000:]
    assert grown > 0, "the records did not go through accelaes"


# ----------------------------------------------------------------------------------------- nginx

TLS13 = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"
TLS12 = "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"


class GcmNginx(real.Nginx):
    """test_real_programs' nginx (root master, www-data workers), serving TLS 1.2 and 1.3 GCM only."""

    def config(self, port):
        path = super().config(port)
        text = path.read_text()
        old = f"ssl_protocols TLSv1.2; ssl_ciphers {':'.join(real.NGINX_SUITES)};"
        assert old in text, "test_real_programs.Nginx.config changed: update GcmNginx"
        path.write_text(text.replace(old, f"ssl_protocols TLSv1.2 TLSv1.3; ssl_ciphers {TLS12}; "
                                          f"ssl_conf_command Ciphersuites {TLS13};"))
        return path

    def fetch(self, name, version, suite):
        out = self.dir / f"got-{os.urandom(4).hex()}"
        pick = ["--tlsv1.3", "--tls13-ciphers", suite] if version == "1.3" else \
            ["--tlsv1.2", "--tls-max", "1.2", "--ciphers", suite]
        argv = [real.CURL, "-sS", "-v", "--fail", "-k", *pick, "--max-time", "60", "-o", str(out),
                f"https://127.0.0.1:{self.port}/{name}"]
        p = subprocess.run(argv, env=real.client_env(), capture_output=True, timeout=90)
        err = p.stderr.decode(errors="replace")
        report = f"{name} over {suite}: curl exit {p.returncode}\n{err[-2000:]}\n" \
                 f"--- nginx error.log (tail) ---\n{self.error_log()[-3000:]}"
        assert p.returncode == 0, report
        assert f"SSL connection using TLSv{version} / {suite}" in err, report
        got = out.read_bytes()
        out.unlink()
        assert got == self.files[name], f"{name} over {suite}: the body differs"
        return len(got)


@pytest.fixture
def gcm_nginx(openssl_env, shm_name):
    real.need((real.NGINX, "nginx"), (real.CURL, "curl"), (real.OPENSSL, "openssl"))
    folder = Path(tempfile.mkdtemp(prefix="accelaes-nginx-gcm-"))
    os.chmod(folder, 0o755)   # the workers (www-data) read the files
    server = GcmNginx(folder, real.server_env(openssl_env, shm_name + "-nginx-gcm"))
    if not offers_gcm(server.env):
        pytest.skip(f"{real.MODULE} does not offer AES-128-GCM")
    try:
        yield server.start()
    finally:
        if server.proc is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        try:
            os.unlink("/dev/shm" + server.env["ACCELAES_SHM_NAME"])
        except OSError:
            pass


@pytest.mark.parametrize("version,suite", [("1.3", "TLS_AES_128_GCM_SHA256"), ("1.3", "TLS_AES_256_GCM_SHA384"),
                                           ("1.2", "ECDHE-RSA-AES256-GCM-SHA384")])
def test_nginx_serves_gcm(gcm_nginx, version, suite):
    uid = pwd.getpwnam(real.WORKER_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    before = real.counted(gcm_nginx.env, uid)
    served = sum(gcm_nginx.fetch(name, version, suite) for name in sorted(gcm_nginx.files))
    assert gcm_nginx.stop() == 0, gcm_nginx.error_log()[-3000:]
    gcm_nginx.proc = None
    grown = real.counted(gcm_nginx.env, uid) - before
    # Every worker has exited (exit() publishes the counters), so nothing may be missing.
    assert grown >= served, f"accelaes counted {grown} of the {served} bytes nginx served over {suite}"
