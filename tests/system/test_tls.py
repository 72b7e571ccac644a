"""tests/system/test_tls.py: real TLS clients and servers (openssl s_server/s_client, Python's ssl
module, curl) running on accelaes through conf/accelaes.cnf alone, byte-for-byte checked, with
accelaes-stat showing the record bytes went through the provider; tampered records refused.

Every process gets OPENSSL_CONF=conf/accelaes.cnf, OPENSSL_MODULES=build and one
ACCELAES_SHM_NAME per test module, so the counters read here are this module's alone.
"""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
# conftest: build/ (or ACCELAES_BUILD_DIR); with ACCELAES_INSTALLED=1 the installed package's module,
# accelaes-stat and accelaes.cnf, and no OPENSSL_MODULES.
from conftest import BUILD, CONF, INSTALLED, MODULE, SANITIZER, stat_total  # noqa: E402
from conftest import STAT_TOOL as STAT  # noqa: E402
from libcrypto import other_libcrypto  # noqa: E402
OPENSSL = shutil.which("openssl") or "openssl"
CURL = shutil.which("curl")
SIZE = 8 << 20          # the served file
LAG = 256 << 10         # counters a live process may not have published yet (scheduler/counters.c)

pytestmark = pytest.mark.skipif(
    not MODULE.exists() or not STAT.exists(),
    reason=f"{MODULE} or {STAT} missing: run make (or install the package)")


def base_env(shm):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELAES_")}
    env.update(OPENSSL_CONF=str(CONF), ACCELAES_SHM_NAME=shm)
    if not INSTALLED:
        env["OPENSSL_MODULES"] = str(BUILD)
    return env


class Server:
    """openssl s_server -WWW on 127.0.0.1, a free port, serving the files of one folder."""

    def __init__(self, folder, env, extra=()):
        self.folder, self.env, self.extra = folder, env, list(extra)
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            # SECLEVEL=0 on the server only widens what it accepts (TLS 1.0 for the test that
            # needs it); each client below asks for exactly the suite it tests.
            cmd = [OPENSSL, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", "cert.pem",
                   "-key", "key.pem", "-WWW", "-cipher", "ALL:@SECLEVEL=0", *self.extra]
            self.proc = subprocess.Popen(cmd, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    self.port = port
                    return self
                except OSError:
                    time.sleep(0.05)
            out = self.stop()
            if "Address already in use" not in out:
                raise AssertionError(f"s_server did not start: {out}")
        raise AssertionError("s_server: no free port after 5 tries")

    def stop(self):
        if self.proc is None:
            return ""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.proc = None
        return out.decode(errors="replace")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    shm = f"/accelaes-test-tls-{os.getpid()}"
    # The certificate is made with the system configuration: `openssl req` is not under test.
    plain = {k: v for k, v in os.environ.items() if k not in ("OPENSSL_CONF", "OPENSSL_MODULES")}
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                    "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                   cwd=d, env=plain, check=True, capture_output=True, timeout=60)
    data = os.urandom(SIZE)
    (d / "data.bin").write_bytes(data)
    (d / "small.bin").write_bytes(data[:1000])
    env = base_env(shm)
    server = Server(d, env).start()
    yield {"dir": d, "data": data, "env": env, "server": server, "shm": shm}
    server.stop()
    try:
        os.unlink("/dev/shm" + shm)
    except OSError:
        pass


def s_client(site, args, path="data.bin", port=None, quiet=True, timeout=60, env=None):
    cmd = [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port or site['server'].port}",
           *(["-quiet"] if quiet else ["-ign_eof"]), *args]
    p = subprocess.run(cmd, input=f"GET /{path} HTTP/1.0\r\n\r\n".encode(), env=env or site["env"],
                       capture_output=True, timeout=timeout)
    return p


def fetch(site, args, env=None, port=None):
    """The data file through s_client; returns (body, stderr, bytes accelaes counted meanwhile in
    the site's segment)."""
    before = stat_total(site["env"])
    p = s_client(site, args, port=port, env=env)
    return p.stdout.partition(b"\r\n\r\n")[2], p.stderr.decode(errors="replace"), \
        stat_total(site["env"]) - before


def http_body(raw):
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep and head.startswith(b"HTTP/1.0 200"), raw[:200]
    return body


def negotiated(site, args):
    """One small request with s_client's session report: the suite and whether EtM is on."""
    p = s_client(site, [*args, "-tlsextdebug"], path="small.bin", quiet=False)
    out = p.stdout.decode(errors="replace")
    cipher = next((ln.split("Cipher is", 1)[1].strip() for ln in out.splitlines() if "Cipher is" in ln), None)
    at = p.stdout.find(b"HTTP/1.0 200")
    assert at >= 0, out[-2000:] + p.stderr.decode(errors="replace")[-2000:]
    small_ok = http_body(p.stdout[at:]).startswith(site["data"][:1000])
    return cipher, 'encrypt-then-mac' in out, small_ok


SUITES = ["AES128-SHA", "AES256-SHA256", "AES128-SHA256", "ECDHE-RSA-AES256-SHA384"]
# Without encrypt-then-MAC, libssl (TLS 1.0-1.2) replaces AES-CBC + HMAC-SHA1/SHA256 by the
# "stitched" AES-*-CBC-HMAC-SHA* ciphers, which accelaes offers as well. HMAC-SHA384 has no
# stitched cipher, so ECDHE-RSA-AES256-SHA384 -no_etm is the MAC-then-encrypt case that
# provider/cipher/tls.c serves.


def transfer(site, args):
    """The 8 MiB file through s_client; returns the bytes accelaes counted meanwhile."""
    before = stat_total(site["env"])
    p = s_client(site, args)
    body = http_body(p.stdout)
    assert len(body) == SIZE and body == site["data"], p.stderr.decode(errors="replace")[-2000:]
    return stat_total(site["env"]) - before


@pytest.mark.parametrize("etm", [True, False], ids=["etm", "no_etm"])
@pytest.mark.parametrize("suite", SUITES)
def test_s_client_tls12_cbc(site, suite, etm):
    args = ["-tls1_2", "-cipher", suite] + ([] if etm else ["-no_etm"])
    cipher, got_etm, small_ok = negotiated(site, args)
    assert cipher == suite
    assert got_etm == etm
    assert small_ok
    grown = transfer(site, args)
    # With EtM the record goes through tls.c; without it libssl takes the stitched
    # AES-CBC-HMAC-SHA* ciphers, which accelaes offers too (provider/cipher_hmac*.c). Either way
    # the server encrypts 8 MiB and the client decrypts them through accelaes.
    assert grown >= 2 * SIZE - LAG, f"{suite} etm={etm}: accelaes counters grew by {grown} bytes only"


@pytest.mark.parametrize("etm", [True, False], ids=["etm", "no_etm"])
def test_s_client_tls10_cbc(site, etm):
    """TLS 1.0: no explicit IV, the CBC state chains from record to record."""
    args = ["-tls1", "-cipher", "AES128-SHA:@SECLEVEL=0"] + ([] if etm else ["-no_etm"])
    cipher, got_etm, small_ok = negotiated(site, args)
    assert cipher == "AES128-SHA" and got_etm == etm and small_ok
    grown = transfer(site, args)
    if etm:
        assert grown >= 2 * SIZE - LAG, f"accelaes counters grew by {grown} bytes only"


def test_tls13_still_works(site):
    p = s_client(site, ["-tls1_3"])
    assert http_body(p.stdout) == site["data"], p.stderr.decode(errors="replace")[-2000:]
    p = s_client(site, ["-tls1_3"], path="small.bin", quiet=False)
    assert b"TLSv1.3" in p.stdout


PY_CLIENT = r"""
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
ctx.set_ciphers(sys.argv[2])
with ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)) as s:
    info = f"{ssl.OPENSSL_VERSION}|{s.version()}|{s.cipher()[0]}"
    s.sendall(b"GET /data.bin HTTP/1.0\r\n\r\n")
    out = bytearray()
    while True:
        try:
            b = s.recv(1 << 16)
        except ssl.SSLEOFError:
            break        # s_server -WWW may close without close_notify; the length check decides
        if not b:
            break
        out += b
sys.stderr.write(info + "\n")
sys.stdout.buffer.write(out)
"""


def system_ssl_python():
    """A Python whose _ssl links the system libssl (OPENSSL_CONF and providers apply to it only
    then): this interpreter, else Debian's /usr/bin/python3. None if neither does."""
    sysver = subprocess.run([OPENSSL, "version"], capture_output=True, text=True).stdout.split()[1]
    for py in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.path.exists(py):
            continue
        probe = subprocess.run([py, "-c", "import ssl; print(ssl.OPENSSL_VERSION)"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.startswith(f"OpenSSL {sysver}"):
            return py
    return None


def test_python_ssl_client(site):
    py = system_ssl_python()
    if py is None:
        pytest.skip("no Python here links the system OpenSSL, so the provider cannot apply to it")
    before = stat_total(site["env"])
    p = subprocess.run([py, "-c", PY_CLIENT, str(site["server"].port), "AES128-SHA"],
                       env=site["env"], capture_output=True, timeout=120)
    info = p.stderr.decode(errors="replace")
    assert p.returncode == 0, info
    assert info.strip().endswith("|TLSv1.2|AES128-SHA"), info
    assert http_body(p.stdout) == site["data"]
    grown = stat_total(site["env"]) - before
    assert grown >= 2 * SIZE - LAG, f"accelaes counters grew by {grown} bytes only"


@pytest.mark.skipif(CURL is None, reason="curl is not installed (apt-get install curl)")
@pytest.mark.skipif(SANITIZER == "asan", reason="curl deadlocks in its own setlocale() call with libasan preloaded "
                    "(outside this project), and without it cannot load the sanitized provider")
def test_curl_client(site, tmp_path):
    if other_libcrypto(CURL):
        pytest.skip(other_libcrypto(CURL))
    out = tmp_path / "got.bin"
    before = stat_total(site["env"])
    p = subprocess.run([CURL, "-sS", "-v", "-k", "--tls-max", "1.2", "--ciphers", "AES128-SHA",
                        "-o", str(out), f"https://127.0.0.1:{site['server'].port}/data.bin"],
                       env=site["env"], capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err[-2000:]
    assert "AES128-SHA" in err and "TLSv1.2" in err, err[-2000:]
    assert out.read_bytes() == site["data"]
    grown = stat_total(site["env"]) - before
    assert grown >= 2 * SIZE - LAG, f"accelaes counters grew by {grown} bytes only"


class FlipProxy(threading.Thread):
    """Forwards one TCP connection; flips one bit in the Nth application-data record that the
    server sends, at `back` bytes before the record's end."""

    def __init__(self, upstream_port, nth=3, back=17):
        super().__init__(daemon=True)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.upstream_port, self.nth, self.back = upstream_port, nth, back
        self.flipped = False

    def counts(self, rec):
        """Whether a record is one of those counted to the nth: application data."""
        return rec[0] == 23

    def run(self):
        self.lsock.settimeout(30)
        try:
            client, _ = self.lsock.accept()
        except OSError:
            return
        server = socket.create_connection(("127.0.0.1", self.upstream_port))

        def up():
            try:
                while (b := client.recv(65536)):
                    server.sendall(b)
            except OSError:
                pass
            try:
                server.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        buf, seen = b"", 0
        try:
            while (b := server.recv(65536)):
                buf += b
                while len(buf) >= 5 and len(buf) >= 5 + int.from_bytes(buf[3:5], "big"):
                    n = 5 + int.from_bytes(buf[3:5], "big")
                    rec = bytearray(buf[:n])
                    buf = buf[n:]
                    if self.counts(rec):
                        seen += 1
                        if seen == self.nth and n - 5 > self.back:
                            rec[n - self.back] ^= 0x01
                            self.flipped = True
                    client.sendall(rec)
        except OSError:
            pass
        for s in (client, server):
            s.close()
        self.lsock.close()


@pytest.mark.parametrize("suite,etm,back", [
    ("AES128-SHA", True, 17), ("AES128-SHA", True, 5000),
    ("ECDHE-RSA-AES256-SHA384", False, 17), ("ECDHE-RSA-AES256-SHA384", False, 5000)],
    ids=["etm-pad", "etm-mid", "mte-pad", "mte-mid"])
def test_tampered_record_is_refused(site, suite, etm, back):
    """One flipped bit in a server record: the client must fail with bad_record_mac, never
    deliver the data. back=17 flips the padding-length byte (through the previous block), 5000
    a payload byte. With encrypt-then-MAC libssl rejects the record before decrypting; with
    MAC-then-encrypt (SHA384) provider/cipher/tls.c decrypts it, checks the padding in constant time
    and hands libssl a MAC that cannot match (a random one when the padding is bad)."""
    proxy = FlipProxy(site["server"].port, nth=3, back=back)
    proxy.start()
    args = ["-tls1_2", "-cipher", suite] + ([] if etm else ["-no_etm"])
    before = stat_total(site["env"])
    p = s_client(site, args, port=proxy.port)
    proxy.join(timeout=30)
    assert proxy.flipped, "the proxy found no third application-data record to damage"
    err = p.stderr.decode(errors="replace")
    body = p.stdout.partition(b"\r\n\r\n")[2]
    assert len(body) < SIZE and body == site["data"][:len(body)], "damaged data was delivered"
    assert "bad record mac" in err.lower(), err[-2000:]
    assert stat_total(site["env"]) - before > 0, "the records did not go through accelaes"


# ---------------------------------------------------------------- provider/cipher/tls.c on its own

def c_test(name):
    path = BUILD / "tests" / name
    if not path.exists():
        pytest.skip(f"{path} not built yet: run make")
    return path


def test_tls_records_match_default_provider():
    """Every version (SSL 3.0 to TLS 1.2, DTLS), MAC size and key size; streams of records and
    crafted records with long, short and damaged padding: same output, length and MAC as
    OpenSSL's default provider (tests/c/test_tls_record.c)."""
    p = subprocess.run([str(c_test("test_tls_record"))], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and " 0 failed" in p.stdout, p.stdout + p.stderr[-3000:]


def test_tls_unpadding_is_constant_time():
    """tests/c/test_tls_ct.c checks the unpadding against a plain reference; under valgrind the
    decrypted bytes are marked undefined, so any branch or address that depends on the padding
    length or MAC position is reported (the ctgrind method) and fails the run."""
    binary = c_test("test_tls_ct")
    p = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and " 0 failed" in p.stdout, p.stdout + p.stderr[-3000:]
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind): constant time not checked")
    if SANITIZER:
        pytest.skip(f"valgrind cannot run a {SANITIZER}-instrumented binary: constant time is checked by the plain build")
    p = subprocess.run([valgrind, "-q", "--error-exitcode=99", str(binary)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "under valgrind" in p.stdout, p.stdout + p.stderr[-5000:]
