"""tests/serverlib.py: Debian's PostgreSQL, Redis, stunnel and mosquitto run as real TLS servers on
127.0.0.1, each on free ports in a folder of its own, started with or without accelaes (the
environment decides: conf/accelaes.cnf through OPENSSL_CONF, as tests/system/test_real_programs.py does).
Used by tests/system/test_servers.py (correctness, counting) and bench/scripts/servers.py (time and CPU per byte).

Every client runs on OpenSSL's default provider, so a wrong byte from accelaes in the server shows
up as a failed MAC or different data instead of cancelling out. Each transfer method returns the
payload bytes that crossed TLS, a lower bound of what the server's accelaes must have counted."""

import glob
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

from test_real_programs import OPENSSL, client_env, free_port, stop_tree, wait_for

PG_BIN = (sorted(glob.glob("/usr/lib/postgresql/*/bin")) or ["/usr/lib/postgresql/none/bin"])[-1]
POSTGRES, INITDB, PSQL = (f"{PG_BIN}/{n}" for n in ("postgres", "initdb", "psql"))
REDIS_SERVER, REDIS_CLI = shutil.which("redis-server"), shutil.which("redis-cli")
STUNNEL = shutil.which("stunnel4") or shutil.which("stunnel")
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQ_PUB, MOSQ_SUB = shutil.which("mosquitto_pub"), shutil.which("mosquitto_sub")
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system time of pid and of its children it has reaped (a postmaster's backends)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK


def make_cert(folder, owner=None):
    """A self-signed RSA certificate for localhost and 127.0.0.1 (RSA: TLS 1.2's AES128-SHA needs
    RSA key exchange), readable by owner (the user a server drops to)."""
    folder = Path(folder)
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                    "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   cwd=folder, env=client_env(), check=True, capture_output=True, timeout=60)
    os.chmod(folder / "key.pem", 0o600)
    if owner is not None:
        pw = pwd.getpwnam(owner)
        for name in ("key.pem", "cert.pem"):
            os.chown(folder / name, pw.pw_uid, pw.pw_gid)
    return folder / "cert.pem", folder / "key.pem"


def run_client(argv, what, timeout=120, **kw):
    p = subprocess.run(argv, env=client_env(), capture_output=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{what}: exit {p.returncode}\n{p.stderr.decode(errors='replace')[-3000:]}"
    return p


class Server:
    """A server process started by start(env) and stopped by stop(); log() is its output."""
    name = "server"
    user = None            # the user the server's processes run as (its segment's owner), None: ours

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix=f"accelaes-{self.name}-"))
        os.chmod(self.dir, 0o755)
        self.proc = self.port = self.env = None

    def uid(self):
        return pwd.getpwnam(self.user).pw_uid if self.user and os.geteuid() == 0 else os.geteuid()

    def claim_user(self):
        """Root runs the server as its own user (made if missing); anyone else runs it as themselves."""
        if os.geteuid() == 0:
            ensure_user(self.user)
        else:
            self.user = None

    def as_user(self):
        """subprocess arguments that run a child as self.user (with its groups only), if set."""
        if not self.user or os.geteuid() != 0:
            return {}
        pw = pwd.getpwnam(self.user)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def log(self):
        path = self.dir / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def spawn(self, argv, env, ready, **kw):
        """Starts argv on a free port (argv(port)) until ready(port) holds; retries a taken port."""
        for _ in range(5):
            port = free_port()
            with open(self.dir / "server.log", "ab") as log:
                self.proc = subprocess.Popen(argv(port), env=env, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=log, start_new_session=True, cwd=self.dir, **kw)
            if wait_for(lambda: self.proc.poll() is not None or ready(port), 30) and self.proc.poll() is None:
                self.port, self.env = port, env
                return self
            rc = self.proc.poll()
            stop_tree(self.proc)
            if "in use" not in self.log():
                how = "not ready within 30 s" if rc is None else f"exit status {rc}"
                raise AssertionError(f"{self.name} did not start ({how}):\n{self.log()}")
        raise AssertionError(f"{self.name}: no free port after 5 tries")

    def stop(self):
        rc = stop_tree(self.proc) if self.proc is not None else None
        self.proc = None
        return rc

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------ PostgreSQL

class Postgres(Server):
    """initdb (once) as the postgres user; `postgres` itself with ssl=on; psql's \\copy both ways."""
    name, user = "postgres", "postgres"

    def __init__(self):
        super().__init__()
        self.claim_user()
        make_cert(self.dir, self.user)
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)    # the data folder and the socket are made in it
        data = self.dir / "data"
        run_client([INITDB, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
                   "initdb", cwd=self.dir, **self.as_user())

    def start(self, env):
        d = self.dir
        # TLS 1.2's suites are ssl_ciphers; TLS 1.3's are OpenSSL's default (TLS_AES_256_GCM_SHA384 first)
        argv = lambda port: [POSTGRES, "-D", str(d / "data"), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                             "-c", f"unix_socket_directories={d}", "-c", "ssl=on",
                             "-c", f"ssl_cert_file={d}/cert.pem", "-c", f"ssl_key_file={d}/key.pem",
                             "-c", "ssl_ciphers=AES128-SHA", "-c", "fsync=off", "-c", "shared_buffers=16MB"]
        return self.spawn(argv, self.module_env(env), listening, **self.as_user())

    def module_env(self, env):
        """The postgres user must read the module and its configuration: a checkout under a folder only
        root may enter (a CI clone in mktemp -d's 0700 folder) would leave PostgreSQL on the default
        provider alone. Copies of both in the server's own folder, named by env instead."""
        if not self.user or os.geteuid() != 0 or "OPENSSL_CONF" not in env or "OPENSSL_MODULES" not in env:
            return env
        mods = self.dir / "modules"
        mods.mkdir(mode=0o755, exist_ok=True)
        module = Path(env["OPENSSL_MODULES"]) / "accelaes.so"
        shutil.copyfile(module, mods / "accelaes.so")
        shutil.copyfile(env["OPENSSL_CONF"], self.dir / "accelaes.cnf")
        os.chmod(mods / "accelaes.so", 0o755)
        os.chmod(self.dir / "accelaes.cnf", 0o644)
        return dict(env, OPENSSL_MODULES=str(mods), OPENSSL_CONF=str(self.dir / "accelaes.cnf"))

    def stop(self):
        # SIGINT: PostgreSQL's "fast" shutdown, every backend exits (exit() publishes the counters)
        return stop_tree(self.proc, how=lambda: self.proc.send_signal(2)) if self.proc else None

    def psql(self, maxproto, *commands):
        conn = (f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres sslmode=require "
                f"ssl_max_protocol_version={maxproto} connect_timeout=10")
        argv = [PSQL, conn, "-X", "-At", "-v", "ON_ERROR_STOP=1"]
        for c in commands:
            argv += ["-c", c]
        return run_client(argv, f"psql {commands}").stdout.decode()

    def copy_both_ways(self, maxproto, data, tag):
        """data (lines of text) \\copy'd into a table and back out; returns (protocol cipher, bytes)."""
        src, out = self.dir / f"in-{tag}.txt", self.dir / f"out-{tag}.txt"
        src.write_bytes(data)
        table = f"t_{tag}"
        got = self.psql(maxproto, f"CREATE TABLE {table} (id bigserial, line text)",
                        f"\\copy {table}(line) from '{src}'",
                        f"\\copy (SELECT line FROM {table} ORDER BY id) to '{out}'",
                        "SELECT version || ' ' || cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                        f"DROP TABLE {table}")
        assert out.read_bytes() == data, f"psql \\copy over {maxproto}: the rows read back differ"
        src.unlink()
        out.unlink()
        ssl_row = [ln for ln in got.splitlines() if ln.startswith("TLSv")]
        return (ssl_row or [got[-500:]])[0], 2 * len(data)


def ensure_user(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True, timeout=30)


def text_payload(size):
    """size bytes of lines of base64 (valid COPY text: no tab, backslash or NUL)."""
    import base64
    raw = base64.b64encode(os.urandom(size * 3 // 4 + 3))[:size]
    lines = [raw[i:i + 76] for i in range(0, len(raw), 76)]
    return b"\n".join(lines)[:size - 1] + b"\n"


# ----------------------------------------------------------------------------------------- Redis

REDIS_TLS12 = "ECDHE-RSA-AES128-GCM-SHA256"


class Redis(Server):
    name = "redis"

    def __init__(self):
        super().__init__()
        self.cert, self.key = make_cert(self.dir)

    def start(self, env, proto):
        d = self.dir
        argv = lambda port: [REDIS_SERVER, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                             "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
                             "--tls-ca-cert-file", str(self.cert), "--tls-auth-clients", "no",
                             "--tls-protocols", proto, "--tls-ciphers", REDIS_TLS12, "--save", "",
                             "--appendonly", "no", "--dir", str(d), "--daemonize", "no"]
        return self.spawn(argv, env, lambda port: "Ready to accept connections" in self.log())

    def cli(self, *args, stdin=None):
        argv = [REDIS_CLI, "--tls", "--cacert", str(self.cert), "-h", "127.0.0.1", "-p", str(self.port), *args]
        p = run_client(argv, f"redis-cli {args[:2]}", input=stdin)
        assert not p.stdout.startswith(b"ERR") and b"Error" not in p.stderr, p.stdout[:200] + p.stderr
        return p.stdout

    def set_get(self, data):
        assert self.cli("-x", "SET", "payload", stdin=data).strip() == b"OK"
        got = self.cli("GET", "payload")
        assert got[:-1] == data, "redis-cli GET: the value read back differs"    # redis-cli adds "\n"
        return 2 * len(data)


# --------------------------------------------------------------------------------------- stunnel

class Stunnel(Server):
    """stunnel's server side in front of an echo service; the client is Python's ssl (default provider)."""
    name = "stunnel"

    def __init__(self):
        super().__init__()
        self.cert, self.key = make_cert(self.dir)
        self.echo = socket.socket()
        self.echo.bind(("127.0.0.1", 0))
        self.echo.listen(8)
        threading.Thread(target=self.serve_echo, daemon=True).start()

    def serve_echo(self):
        while True:
            try:
                conn, _ = self.echo.accept()
            except OSError:
                return
            threading.Thread(target=echo_back, args=(conn,), daemon=True).start()

    def start(self, env, proto, ciphers=None, etm=True):
        def argv(port):
            lines = ["foreground = yes", f"pid = {self.dir}/stunnel.pid", "debug = 5", "[echo]",
                     f"accept = 127.0.0.1:{port}", f"connect = 127.0.0.1:{self.echo.getsockname()[1]}",
                     f"cert = {self.cert}", f"key = {self.key}", f"sslVersionMin = {proto}",
                     f"sslVersionMax = {proto}"]
            lines += [f"ciphers = {ciphers}"] if ciphers else []
            lines += [] if etm else ["options = NO_ENCRYPT_THEN_MAC"]
            (self.dir / "stunnel.conf").write_text("\n".join(lines) + "\n")
            return [STUNNEL, str(self.dir / "stunnel.conf")]
        return self.spawn(argv, env, lambda port: "Configuration successful" in self.log() and listening(port))

    def cleanup(self):
        self.echo.close()
        super().cleanup()

    def echo_through(self, data, ciphers=None):
        """data sent through stunnel and echoed back; returns (TLS version, cipher, bytes)."""
        ctx = ssl.create_default_context(cafile=str(self.cert))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if ciphers:
            ctx.set_ciphers(ciphers)    # Python's default list leaves out SHA-1 suites (AES128-SHA)
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as s:
            # lock step, one thread: an SSL object must not be read and written from two at once
            got = bytearray()
            for i in range(0, len(data), ECHO_STEP):
                s.sendall(data[i:i + ECHO_STEP])
                while len(got) < min(i + ECHO_STEP, len(data)):
                    chunk = s.recv(1 << 17)
                    if not chunk:
                        break
                    got += chunk
            version, cipher = s.version(), s.cipher()[0]
        assert bytes(got) == data, f"stunnel echo: {len(got)} bytes back of {len(data)}, or different bytes"
        return version, cipher, 2 * len(data)


ECHO_STEP = 128 << 10


def echo_back(conn):
    with conn:
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            try:
                conn.sendall(chunk)
            except OSError:    # the client gave up: its test reports it
                return


# ------------------------------------------------------------------------------------- mosquitto

class Mosquitto(Server):
    """mosquitto (drops to the mosquitto user when root starts it), mosquitto_pub of a retained
    message and mosquitto_sub reading it back."""
    name, user = "mosquitto", "mosquitto"

    def __init__(self):
        super().__init__()
        self.claim_user()
        self.cert, self.key = make_cert(self.dir, self.user)

    def start(self, env, version, ciphers=None):
        def argv(port):
            lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", f"certfile {self.cert}",
                     f"keyfile {self.key}", f"tls_version {version}", "persistence false",
                     "log_dest stderr", "log_type all", "message_size_limit 0"]
            lines += [f"ciphers {ciphers}"] if ciphers else []
            (self.dir / "mosquitto.conf").write_text("\n".join(lines) + "\n")
            return [MOSQUITTO, "-c", str(self.dir / "mosquitto.conf")]
        return self.spawn(argv, env, lambda port: f"Opening ipv4 listen socket on port {port}" in self.log()
                          and listening(port))

    def pub_sub(self, data, version):
        common = ["-h", "127.0.0.1", "-p", str(self.port), "--cafile", str(self.cert),
                  "--tls-version", version, "-t", "accelaes/payload", "-q", "1"]
        src = self.dir / "payload.bin"
        src.write_bytes(data)
        run_client([MOSQ_PUB, *common, "-r", "-f", str(src)], "mosquitto_pub")
        got = run_client([MOSQ_SUB, *common, "-C", "1", "-N", "-W", "60"], "mosquitto_sub").stdout
        src.unlink()
        assert got == data, f"mosquitto_sub: {len(got)} bytes of {len(data)}, or different bytes"
        return 2 * len(data)
