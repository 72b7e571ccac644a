"""tests/system/test_real_programs.py: unmodified Debian servers (OpenSSH's sshd, nginx) running on accelaes
through conf/accelaes.cnf alone, on 127.0.0.1, every transfer checked byte for byte and counted by
accelaes-stat. Their process models are the point: sshd re-executes itself per connection, forks a
pre-authentication child that drops to an unprivileged user, chroots and locks itself into a seccomp
sandbox before it first touches a session key, and forks again after login; nginx loads OpenSSL in a
root master, forks workers that drop to www-data, and replaces them on `nginx -s reload`.

The clients (ssh, scp, curl) run without accelaes: the counters then measure the servers alone, and
every byte crosses a peer on OpenSSL's default provider, so a wrong accelaes output shows up as a
MAC failure or different bytes instead of cancelling out."""

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# conftest: the build tree's module, accelaes-stat and conf/accelaes.cnf, or with ACCELAES_INSTALLED=1
# the installed package's (MODULESDIR, /usr/bin, /usr/share/accelaes; no OPENSSL_MODULES).
from conftest import CONF, MODULE, STAT_TOOL, stat_total
from libcrypto import other_libcrypto
SSHD, NGINX = "/usr/sbin/sshd", "/usr/sbin/nginx"
SSH, SCP, KEYGEN = shutil.which("ssh"), shutil.which("scp"), shutil.which("ssh-keygen")
CURL, OPENSSL = shutil.which("curl"), shutil.which("openssl")
# sshd's session child ends in cleanup_exit() -> _exit(), which skips the exit-time publish of the
# counters: a thread may leave up to 64 KiB unpublished (scheduler/counters.c).
LAG = 256 << 10

pytestmark = pytest.mark.skipif(not MODULE.exists() or not STAT_TOOL.exists(),
                                reason=f"{MODULE} or {STAT_TOOL} missing: run make (or install the package)")


def server_env(openssl_env, shm):
    return dict(openssl_env, OPENSSL_CONF=str(CONF), ACCELAES_SHM_NAME=shm)


def client_env():
    # No provider in the client, so no sanitizer runtime either (curl deadlocks with libasan).
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("ACCELAES_", "OPENSSL_")) and k != "LD_PRELOAD"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_table():
    """{pid: (ppid, start time)} from /proc."""
    table = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            table[int(d)] = (int(fields[1]), fields[19])
        except (OSError, ValueError, IndexError):
            pass
    return table


def descendants(pid):
    table, out, todo = proc_table(), {}, [pid]
    while todo:
        parent = todo.pop()
        for p, (ppid, start) in table.items():
            if ppid == parent:
                out[p] = start
                todo.append(p)
    return out


def stop_tree(proc, how=None, grace=20):
    """Stops a server and everything it started. `how` asks it to stop (else SIGTERM); what is left
    after `grace` seconds is killed, including children that outlived their parent (checked by start
    time, so a reused pid is never hit)."""
    if proc.poll() is None:
        tree = descendants(proc.pid)
        how() if how else proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        now = proc_table()
        for p, start in tree.items():
            if p in now and now[p][1] == start:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    return proc.returncode


def need(*programs):
    for prog, package in programs:
        if not prog or not os.path.exists(prog):
            pytest.skip(f"{prog or package + ' programs'} not installed (apt-get install {package})")
        if other_libcrypto(prog):
            pytest.skip(other_libcrypto(prog))


def wait_for(cond, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


# ------------------------------------------------------------------------------------------ sshd

# aes*-gcm@openssh.com: OpenSSH's EVP_aes_*_gcm() with a fixed IV and EVP_CTRL_GCM_IV_GEN per packet
# (AES-GCM, issue #18), in the sandboxed pre-auth child as well; its MAC is the GCM tag.
SSH_CIPHERS = ["aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-cbc", "aes128-gcm@openssh.com",
               "aes256-gcm@openssh.com"]


def ssh_mac(cipher):
    return "<implicit>" if "gcm@" in cipher else "hmac-sha2-256"
SSH_SIZE = (3 << 20) + 123


class Sshd:
    def __init__(self, folder, env):
        self.dir, self.env = folder, env
        self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.log = folder / "sshd.log"
        self.proc = self.port = None
        for name in ("host_ed25519", "user_ed25519"):
            subprocess.run([KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)],
                           env=client_env(), check=True, capture_output=True, timeout=30)
        (folder / "authorized_keys").write_bytes((folder / "user_ed25519.pub").read_bytes())

    def config(self, port):
        # UsePAM no: Debian's PAM session stack (pam_loginuid) fails in containers. The privilege
        # separation sandbox is sshd's default and stays on. DEBUG1 shows how far a failed login got.
        d = self.dir
        path = d / "sshd_config"
        path.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\n"
                        f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
                        "StrictModes no\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                        "Ciphers +aes128-cbc\nSubsystem sftp internal-sftp\nLogLevel DEBUG1\n")
        return path

    def start(self):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # the pre-auth child's chroot
        for _ in range(5):
            port = free_port()
            cfg = self.config(port)
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], env=self.env,
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             start_new_session=True)
            if wait_for(lambda: self.proc.poll() is not None
                        or f"listening on 127.0.0.1 port {port}." in self.text(), 20):
                if self.proc.poll() is None:
                    self.port = port
                    return self
            stop_tree(self.proc)
            if "Address already in use" not in self.text():
                raise AssertionError(f"sshd did not start:\n{self.text()}")
        raise AssertionError("sshd: no free port after 5 tries")

    def text(self, offset=0):
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def options(self, cipher):
        return ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
                "-i", str(self.dir / "user_ed25519"), "-c", cipher, "-o", "MACs=hmac-sha2-256", "-v"]

    def ssh(self, cipher, command):
        return [SSH, *self.options(cipher), "-p", str(self.port), f"{self.user}@127.0.0.1", command]

    def scp(self, cipher, *args):
        return [SCP, *self.options(cipher), "-P", str(self.port), *args]

    def session(self, cipher, argv, nbytes, what, stdin=None):
        """One client connection: it must log in, finish, and leave >= nbytes counted by accelaes."""
        offset, before = self.log.stat().st_size, stat_total(self.env)
        try:
            p = subprocess.run(argv, input=stdin, env=client_env(), capture_output=True, timeout=60)
            rc, err = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            p, rc, err = None, "timeout (60 s)", (e.stderr or b"").decode(errors="replace")
        # Every process of the connection gone: its log is complete, its counters published (but LAG).
        wait_for(lambda: not descendants(self.proc.pid), 10)
        log = self.text(offset)
        hint = ""
        if "SSH2_MSG_NEWKEYS sent" in log and "Accepted publickey" not in log:
            hint = ("\nThe pre-auth child vanished right after key exchange, as it first used the new keys "
                    "(SSH2_MSG_EXT_INFO), without a message of its own: from the monitor, that is how a "
                    "child killed by its seccomp sandbox (SIGSYS) looks.")
        if self.proc.poll() is not None:
            hint += f"\nThe sshd listener itself exited ({self.proc.returncode})."
        report = f"{what} over {cipher}: ssh exit {rc}{hint}\n--- sshd stderr ---\n{log}\n" \
                 f"--- client stderr (tail) ---\n{err[-3000:]}"
        assert rc == 0 and f"Accepted publickey for {self.user}" in log, report
        assert f"Disconnected from user {self.user}" in log, report
        assert not re.search(r"killed|Killing privsep child", log, re.I), report
        for way in ("client->server", "server->client"):
            assert f"kex: {way} cipher: {cipher} MAC: {ssh_mac(cipher)}" in log, report
        wait_for(lambda: stat_total(self.env) - before >= nbytes - LAG, 5)
        grown = stat_total(self.env) - before
        assert grown >= nbytes - LAG, f"{what} over {cipher}: accelaes counted {grown} of {nbytes} bytes"
        return p


@pytest.fixture(scope="module")
def sshd(tmp_path_factory, openssl_env, shm_name):
    client = "openssh-client"
    need((SSHD, "openssh-server"), (SSH, client), (SCP, client), (KEYGEN, client))
    if os.geteuid() != 0:
        pytest.skip("sshd's privilege separation (the process model under test) needs root")
    server = Sshd(tmp_path_factory.mktemp("sshd"), server_env(openssl_env, shm_name + "-sshd"))
    try:
        yield server.start()
    finally:
        if server.proc is not None:
            stop_tree(server.proc)


def test_sshd_config_enables_cbc(sshd):
    """aes128-cbc is off by default in OpenSSH 9; `Ciphers +aes128-cbc` must put it back."""
    p = subprocess.run([SSHD, "-T", "-f", str(sshd.dir / "sshd_config")], env=client_env(),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    # OpenSSH 9 prints the keyword in lower case, 10 as the configuration spells it ("Ciphers")
    line = next(ln for ln in p.stdout.splitlines() if ln.lower().startswith("ciphers "))
    assert "aes128-cbc" in line.split()[1].split(","), line


@pytest.mark.parametrize("cipher", SSH_CIPHERS)
def test_sshd_copies_both_ways(sshd, cipher, tmp_path):
    data = os.urandom(SSH_SIZE)
    up, copied = sshd.dir / f"up-{cipher}.bin", sshd.dir / f"scp-{cipher}.bin"
    sshd.session(cipher, sshd.ssh(cipher, f"cat > {shlex.quote(str(up))}"), SSH_SIZE, "ssh upload",
                 stdin=data)
    assert up.read_bytes() == data, "ssh upload: the file on the server differs"
    p = sshd.session(cipher, sshd.ssh(cipher, f"cat {shlex.quote(str(up))}"), SSH_SIZE, "ssh download")
    assert p.stdout == data, "ssh download: the bytes received differ"
    src, back = tmp_path / "src.bin", tmp_path / "back.bin"
    src.write_bytes(data[::-1])
    remote = f"{sshd.user}@127.0.0.1:{copied}"
    sshd.session(cipher, sshd.scp(cipher, "-O", str(src), remote), SSH_SIZE, "scp -O upload")
    assert copied.read_bytes() == data[::-1], "scp -O upload: the file on the server differs"
    sshd.session(cipher, sshd.scp(cipher, remote, str(back)), SSH_SIZE, "scp (sftp) download")
    assert back.read_bytes() == data[::-1], "scp (sftp) download: the file received differs"


# ----------------------------------------------------------------------------------------- nginx

NGINX_SUITES = ["ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384", "AES128-SHA", "AES256-SHA256"]
NGINX_FILES = {"a.bin": (1 << 20) + 1, "b.bin": (3 << 20) + 17, "c.bin": (5 << 20) + 333, "d.bin": 8 << 20}
WORKER_USER = "www-data"   # as Debian's own nginx.conf


class Nginx:
    def __init__(self, folder, env):
        self.dir, self.env = folder, env
        self.proc = self.port = None
        self.files = {}
        (folder / "www").mkdir()
        for name, size in NGINX_FILES.items():
            self.files[name] = os.urandom(size)
            (folder / "www" / name).write_bytes(self.files[name])
            os.chmod(folder / "www" / name, 0o644)
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                        "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                       cwd=folder, env=client_env(), check=True, capture_output=True, timeout=60)

    def config(self, port):
        d = self.dir
        # nginx gives its workers only the variables `env` names. accelaes reads ACCELAES_* after the
        # fork, in the worker (the segment name when it first attaches); OPENSSL_CONF/OPENSSL_MODULES
        # are read by the master before forking, and passed on all the same.
        envs = " ".join(f"env {k};" for k in sorted(self.env) if k.startswith(("ACCELAES_", "OPENSSL_")))
        user = f"user {WORKER_USER};" if os.geteuid() == 0 else ""
        path = d / "nginx.conf"
        path.write_text(f"""daemon off; master_process on; worker_processes 2; {user}
pid {d}/nginx.pid; error_log {d}/error.log info; {envs}
events {{ worker_connections 128; }}
http {{
  access_log {d}/access.log; client_body_temp_path {d}/tmp-body; proxy_temp_path {d}/tmp-proxy;
  fastcgi_temp_path {d}/tmp-fcgi; uwsgi_temp_path {d}/tmp-uwsgi; scgi_temp_path {d}/tmp-scgi;
  server {{
    listen 127.0.0.1:{port} ssl; root {d}/www;
    ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;
    ssl_protocols TLSv1.2; ssl_ciphers {':'.join(NGINX_SUITES)};
  }}
}}
""")
        return path

    def command(self, *extra):
        d = self.dir
        return [NGINX, "-c", f"{d}/nginx.conf", "-p", f"{d}/", "-e", f"{d}/error.log", *extra]

    def start(self):
        for _ in range(5):
            port = free_port()
            self.config(port)
            with open(self.dir / "stderr", "wb") as err:
                self.proc = subprocess.Popen(self.command(), env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

            def listening():
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return True
                except OSError:
                    return False
            if wait_for(lambda: self.proc.poll() is not None or listening(), 20) and self.proc.poll() is None:
                self.port = port
                return self
            stop_tree(self.proc)
            out = (self.dir / "stderr").read_text(errors="replace") + self.error_log()
            if "Address already in use" not in out:
                raise AssertionError(f"nginx did not start:\n{out}")
        raise AssertionError("nginx: no free port after 5 tries")

    def signal(self, name):
        return subprocess.run(self.command("-s", name), env=self.env, capture_output=True, text=True,
                              timeout=30)

    def stop(self):
        return stop_tree(self.proc, how=lambda: self.signal("quit"))

    def error_log(self):
        path = self.dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def workers(self):
        return set(descendants(self.proc.pid))

    def download(self, i, rate=None):
        name = sorted(self.files)[i % len(self.files)]
        suite = NGINX_SUITES[(i + i // len(self.files)) % len(NGINX_SUITES)]
        out = self.dir / f"got-{i}-{os.urandom(4).hex()}"
        argv = [CURL, "-sS", "-v", "--fail", "-k", "--tlsv1.2", "--tls-max", "1.2", "--ciphers", suite,
                "--max-time", "60", *(["--limit-rate", rate] if rate else []), "-o", str(out),
                f"https://127.0.0.1:{self.port}/{name}"]
        proc = subprocess.Popen(argv, env=client_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return proc, name, suite, out

    def check(self, downloads):
        """Waits for every download; returns the bytes served."""
        served = 0
        for proc, name, suite, out in downloads:
            try:
                _, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            err = err.decode(errors="replace")
            report = f"{name} over {suite}: curl exit {proc.returncode}\n{err[-2000:]}\n" \
                     f"--- nginx error.log (tail) ---\n{self.error_log()[-3000:]}"
            assert proc.returncode == 0, report
            assert f"SSL connection using TLSv1.2 / {suite}" in err, report
            assert out.read_bytes() == self.files[name], f"{name} over {suite}: the body differs"
            out.unlink()
            served += len(self.files[name])
        return served


def counted(env, uid):
    """Bytes accelaes counted in the segment env names. The master (root) makes it when it loads the
    provider, and the workers count into the table they inherited; a segment that another user made
    (a worker that attached on its own, PostgreSQL) is that user's, which root reads with --user."""
    try:
        owner = os.stat("/dev/shm" + env["ACCELAES_SHM_NAME"]).st_uid
    except FileNotFoundError:
        return 0
    if owner == os.geteuid():
        return stat_total(env)
    assert owner == uid, f"segment owned by uid {owner}, neither ours nor the workers' ({uid})"
    # root reads another user's segment by name with --user (so the tool need not be reachable by that
    # user: a checkout in a private folder); otherwise as that user
    kw = {} if os.geteuid() == 0 else {"user": uid, "group": pwd.getpwuid(uid).pw_gid, "extra_groups": []}
    argv = [str(STAT_TOOL), "--json"] + (["--user", str(uid)] if os.geteuid() == 0 else [])
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, **kw)
    assert p.returncode == 0, p.stderr
    totals = json.loads(p.stdout)["totals"]
    return sum(int(totals.get(k + "_bytes", 0)) for k in ("inline", "split", "batch", "gpu"))


@pytest.fixture
def nginx(openssl_env, shm_name):
    need((NGINX, "nginx"), (CURL, "curl"), (OPENSSL, "openssl"))
    # Under /tmp itself: pytest's tmp folders are private to root, and the workers are www-data. A
    # segment name of its own: one the session's root processes created (0600) is closed to them.
    folder = Path(tempfile.mkdtemp(prefix="accelaes-nginx-"))
    os.chmod(folder, 0o755)
    server = Nginx(folder, server_env(openssl_env, shm_name + "-nginx"))
    try:
        yield server.start()
    finally:
        if server.proc is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_nginx_serves_through_reload(nginx):
    uid = pwd.getpwnam(WORKER_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    before = counted(nginx.env, uid)
    first = [nginx.download(i, rate="4M") for i in range(8)]   # slow enough to span the reload
    time.sleep(0.6)
    in_flight = sum(proc.poll() is None for proc, *_ in first)
    old_workers = nginx.workers()
    p = nginx.signal("reload")
    assert p.returncode == 0, p.stderr
    during = [nginx.download(8 + i) for i in range(8)]
    served = nginx.check(first) + nginx.check(during)
    assert in_flight >= 2, f"only {in_flight} downloads were running at the reload: it tested nothing"
    replaced = wait_for(lambda: len(nginx.workers()) == 2 and not nginx.workers() & old_workers, 20)
    assert replaced, f"the reload left workers {old_workers} -> {nginx.workers()}\n{nginx.error_log()[-3000:]}"
    served += nginx.check([nginx.download(16 + i) for i in range(8)])
    assert nginx.stop() == 0, nginx.error_log()[-3000:]
    log = nginx.error_log()
    bad = [ln for ln in log.splitlines() if re.search(r"\[(alert|emerg)\]|exited on signal", ln)]
    assert not bad, "\n".join(bad)
    grown = counted(nginx.env, uid) - before
    # Every process has exited (exit() publishes the counters), so nothing may be missing.
    assert grown >= served, f"accelaes counted {grown} of the {served} bytes nginx served"
