"""tests/system/test_tls_multiblock.py: the stitched ciphers' TLS1_1_MULTIBLOCK write (libssl encrypts 4 or
8 records per call for an SSL_write of 4 fragments or more when encrypt-then-MAC is off), accelaes
against OpenSSL's default provider: the EVP-level comparison (tests/c/test_tls_multiblock.c); and
real programs under conf/accelaes.cnf, byte for byte against the default provider, with the records
counted on accelaes's multi-buffer (batch) path: s_server to s_client (s_server writes 16 KiB at
most, so its fragment is cut to 4 KiB to make those writes multiblock ones), and Debian's python3
ssl module writing 64 KiB to 1 MiB at a time to s_client."""

import json
import os
import subprocess

import pytest

import test_tls as tls
from conftest import lanes_missing, run_c_test

SIZES = [64 << 10, 256 << 10, 1 << 20]
# (s_client arguments, stitched cipher the suite uses)
SUITES = [(["-tls1_2", "-cipher", "AES128-SHA"], "AES-128-CBC-HMAC-SHA1"),
          (["-tls1_2", "-cipher", "AES256-SHA256"], "AES-256-CBC-HMAC-SHA256"),
          (["-tls1_1", "-cipher", "AES256-SHA:@SECLEVEL=0"], "AES-256-CBC-HMAC-SHA1")]


def test_multiblock_matches_default_provider(openssl_env):
    run_c_test("test_tls_multiblock", openssl_env)


def batch_bytes(env):
    p = subprocess.run([str(tls.STAT), "--json"], env=env, capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return int(json.loads(p.stdout)["totals"]["batch_bytes"])


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    d = tmp_path_factory.mktemp("multiblock")
    shm = f"/accelaes-test-mb-{os.getpid()}"
    env = tls.base_env(shm)
    plain = {k: v for k, v in os.environ.items()
             if k not in ("OPENSSL_CONF", "OPENSSL_MODULES") and not k.startswith("ACCELAES_")}
    subprocess.run([tls.OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                    "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                   cwd=d, env=plain, check=True, capture_output=True, timeout=60)
    data = {n: os.urandom(n) for n in SIZES}
    for n, b in data.items():
        (d / f"f{n}.bin").write_bytes(b)
    # s_server -WWW hands libssl writes of 16 KiB: 4 fragments of 4 KiB (libssl takes 3.5)
    extra = ["-max_send_frag", "4096"]
    acc = tls.Server(d, env, extra).start()
    ref = tls.Server(d, plain, extra).start()
    yield {"data": data, "env": env, "plain": plain, "acc": acc, "ref": ref}
    acc.stop()
    ref.stop()
    try:
        os.unlink("/dev/shm" + shm)
    except OSError:
        pass


def fetch(server, env, args, name):
    cmd = [tls.OPENSSL, "s_client", "-connect", f"127.0.0.1:{server.port}", "-quiet", "-no_etm", *args]
    p = subprocess.run(cmd, input=f"GET /{name} HTTP/1.0\r\n\r\n".encode(), env=env,
                       capture_output=True, timeout=60)
    return tls.http_body(p.stdout), p.stderr.decode(errors="replace")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", SUITES, ids=[s[1] + s[0][0] for s in SUITES])
def test_s_server_multiblock_writes(sites, suite, size):
    args, _ = suite
    name = f"f{size}.bin"
    before = batch_bytes(sites["env"])
    got, err = fetch(sites["acc"], sites["plain"], args, name)       # accelaes writes, default reads
    grown = batch_bytes(sites["env"]) - before
    assert got == sites["data"][size], err[-2000:]
    # each 16 KiB write sends 4 records of 3584 bytes through the multiblock path, counted on
    # the batch path (the rest of each write goes one record at a time); without the lanes the
    # multiblock records are sealed one by one (the bytes are still checked)
    no_lanes = lanes_missing()
    assert no_lanes or grown >= (size // 16384) * 4 * 3584 * 0.9, f"batch counters grew by {grown} bytes only"
    ref, err = fetch(sites["ref"], sites["plain"], args, name)        # default writes and reads
    assert ref == got, err[-2000:]
    both, err = fetch(sites["acc"], sites["env"], args, name)         # accelaes at both ends
    assert both == got, err[-2000:]
    if no_lanes:
        pytest.skip(f"the bytes checked, the multiblock writes in the lanes not: {no_lanes}")


# A TLS server in Debian's python3 (the system libssl): sendall() hands libssl the whole chunk.
PY_SERVER = r'''
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_ciphers(sys.argv[3])
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
data = open(sys.argv[4], "rb").read()
chunk = int(sys.argv[5])
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
srv.settimeout(30)
conn, _ = srv.accept()
with ctx.wrap_socket(conn, server_side=True) as s:
    for at in range(0, len(data), chunk):
        s.sendall(data[at:at + chunk])
'''


@pytest.mark.parametrize("chunk", SIZES)
@pytest.mark.parametrize("suite", ["AES128-SHA", "AES256-SHA256"])
def test_python_server_large_writes(sites, suite, chunk, tmp_path):
    py = tls.system_ssl_python()
    if py is None:
        pytest.skip("no python3 whose ssl module links the system libssl (the configuration would not apply)")
    size = 2 << 20
    data = os.urandom(size)
    (tmp_path / "d.bin").write_bytes(data)
    d = sites["acc"].folder
    before = batch_bytes(sites["env"])
    srv = subprocess.Popen([py, "-c", PY_SERVER, str(d / "cert.pem"), str(d / "key.pem"), suite,
                            str(tmp_path / "d.bin"), str(chunk)], env=sites["env"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        p = subprocess.run([tls.OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-quiet", "-no_etm",
                            "-tls1_2", "-cipher", suite], stdin=subprocess.DEVNULL, env=sites["plain"],
                           capture_output=True, timeout=60)
        srv.wait(timeout=30)
    finally:
        srv.kill()
    assert p.stdout == data, srv.stderr.read()[-2000:] + p.stderr.decode(errors="replace")[-2000:]
    grown = batch_bytes(sites["env"]) - before
    no_lanes = lanes_missing()
    if no_lanes:
        pytest.skip(f"the bytes checked, the multiblock writes in the lanes not: {no_lanes}")
    assert grown >= size * 0.9, f"batch counters grew by {grown} bytes only"
