"""tests/ovpnlib.py: OpenVPN 2.6 as tests/system/test_openvpn.py and bench/scripts/servers.py run it: the built-in
crypto self-test (`--test-crypto`), and two peers in two network namespaces joined by a veth pair,
each with a real tun device, moving a payload through the tunnel with plain TCP on top."""

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from serverlib import make_cert
from test_real_programs import OPENSSL, client_env, stop_tree, wait_for

OPENVPN = shutil.which("openvpn") or "/usr/sbin/openvpn"
IP = shutil.which("ip") or "/usr/sbin/ip"
# The data channel: cipher (and HMAC for CBC). --test-crypto takes them with a static key (--secret);
# the tun pair negotiates them over TLS (--data-ciphers), static keys having no GCM data channel.
DATA_CHANNELS = {"gcm": ["--cipher", "AES-256-GCM"], "cbc": ["--cipher", "AES-128-CBC", "--auth", "SHA256"]}


def genkey(folder):
    key = Path(folder) / "static.key"
    if not key.exists():
        p = subprocess.run([OPENVPN, "--genkey", "secret", str(key)], env=client_env(), capture_output=True,
                           timeout=30)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
    return key


def self_test(env, key, mode):
    """openvpn --test-crypto: encrypts and decrypts packets of every length up to its buffer size,
    comparing each; returns (bytes put through the cipher at the least, the process's CPU seconds)."""
    argv = [OPENVPN, "--test-crypto", "--secret", str(key), *DATA_CHANNELS[mode], "--verb", "3"]
    before = os.times()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    after = os.times()
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "crypto self-test mode SUCCEEDED" in out, out[-3000:]
    lengths = [int(n) for n in re.findall(r"packet length=(\d+)", out)]
    assert lengths, out[-3000:]
    # --verb 3 prints each length once; each packet is encrypted once and decrypted once
    return 2 * sum(range(1, max(lengths) + 1)), (after.children_user - before.children_user
                                                  + after.children_system - before.children_system)


def tun_unavailable():
    """Why two namespaced peers with tun devices cannot run here, or None."""
    if os.geteuid() != 0:
        return "network namespaces and tun devices need root"
    if not os.path.exists(IP):
        return "the ip command (iproute2) is not installed"
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as e:
        return f"/dev/net/tun cannot be opened ({e.strerror}): the machine gives no tun devices"
    name = f"accelaes-probe-{secrets.token_hex(3)}"
    p = subprocess.run([IP, "netns", "add", name], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return f"`ip netns add` fails here: {p.stderr.strip()}"
    subprocess.run([IP, "netns", "del", name], capture_output=True, timeout=30)
    return None


class TunPair:
    """Peers a (10.77.0.1) and b (10.77.0.2) in namespaces of their own, UDP between them over a
    veth pair, tunnel addresses 10.78.0.1 and 10.78.0.2."""

    def __init__(self, folder, mode):
        self.dir, self.mode = Path(folder), mode
        tag = secrets.token_hex(3)
        self.ns = {"a": f"acc{tag}a", "b": f"acc{tag}b"}
        self.procs = {}
        self.fp = {}
        for side in "ab":
            (self.dir / side).mkdir()
            cert, _ = make_cert(self.dir / side)
            p = subprocess.run([OPENSSL, "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
                               env=client_env(), capture_output=True, text=True, timeout=30, check=True)
            self.fp[side] = p.stdout.strip().split("=", 1)[1]
        for ns in self.ns.values():
            self.ip("netns", "add", ns)
        a, b = self.ns["a"], self.ns["b"]
        self.veth = {"a": f"v{tag}a", "b": f"v{tag}b"}
        self.ip("link", "add", self.veth["a"], "netns", a, "type", "veth", "peer", "name", self.veth["b"], "netns", b)
        for side, ns in self.ns.items():
            addr = "10.77.0.1/24" if side == "a" else "10.77.0.2/24"
            self.ip("-n", ns, "addr", "add", addr, "dev", self.veth[side])
            self.ip("-n", ns, "link", "set", self.veth[side], "up")
            self.ip("-n", ns, "link", "set", "lo", "up")

    def ip(self, *args):
        p = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"ip {' '.join(args)}: {p.stderr}"

    def start(self, env):
        for side in ("a", "b"):
            me, peer = ("1", "2") if side == "a" else ("2", "1")
            argv = [IP, "netns", "exec", self.ns[side], OPENVPN, "--dev", "tunacc", "--dev-type", "tun",
                    "--ifconfig", f"10.78.0.{me}", f"10.78.0.{peer}", "--local", f"10.77.0.{me}",
                    "--remote", f"10.77.0.{peer}", "--port", "1194", "--proto", "udp",
                    *self.tls_args(side), "--ping", "1", "--verb", "3"]
            with open(self.dir / f"{side}.log", "wb") as log:
                self.procs[side] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                                    stderr=log, start_new_session=True)
        ready = wait_for(lambda: all(self.up(s) or self.procs[s].poll() is not None for s in "ab"), 30)
        assert ready and all(self.up(s) for s in "ab"), self.logs()
        return self

    def tls_args(self, side):
        """p2p TLS, each peer pinned to the other's self-signed certificate; one data cipher offered."""
        other = "b" if side == "a" else "a"
        cipher = DATA_CHANNELS[self.mode][1]
        role = ["--tls-server", "--dh", "none"] if side == "a" else ["--tls-client"]
        return [*role, "--cert", str(self.dir / side / "cert.pem"), "--key", str(self.dir / side / "key.pem"),
                "--peer-fingerprint", self.fp[other], "--data-ciphers", cipher, *DATA_CHANNELS[self.mode][2:]]

    def up(self, side):
        text = self.log(side)
        return "Initialization Sequence Completed" in text and "Peer Connection Initiated" in text

    def log(self, side):
        path = self.dir / f"{side}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self):
        return "".join(f"--- openvpn {s} ---\n{self.log(s)[-2500:]}\n" for s in "ab")

    def pid(self, side):
        """The openvpn process (ip netns exec execs it: same pid)."""
        return self.procs[side].pid

    def send(self, src, dst):
        """src's bytes from peer a to peer b over TCP through the tunnel, written to dst on b."""
        recv = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                "s.bind(('10.78.0.2',5001));s.listen(1);print('ready',flush=True);c,_=s.accept()\n"
                "f=open(sys.argv[1],'wb')\nwhile True:\n b=c.recv(1<<16)\n if not b: break\n f.write(b)\n")
        send = ("import socket,sys\ns=socket.create_connection(('10.78.0.2',5001),timeout=60)\n"
                "f=open(sys.argv[1],'rb')\nwhile True:\n b=f.read(1<<20)\n if not b: break\n s.sendall(b)\n"
                "s.shutdown(socket.SHUT_WR);s.recv(1);s.close()\n")
        env = client_env()
        rx = subprocess.Popen([IP, "netns", "exec", self.ns["b"], sys.executable, "-c", recv, str(dst)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert rx.stdout.readline().strip() == b"ready", rx.stderr.read().decode(errors="replace")
            tx = subprocess.run([IP, "netns", "exec", self.ns["a"], sys.executable, "-c", send, str(src)], env=env,
                                capture_output=True, timeout=120)
            assert tx.returncode == 0, tx.stderr.decode(errors="replace") + self.logs()
            assert rx.wait(60) == 0, rx.stderr.read().decode(errors="replace")
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.wait()

    def stop(self):
        for side, proc in self.procs.items():
            stop_tree(proc)
        self.procs = {}

    def cleanup(self):
        self.stop()
        for ns in self.ns.values():
            subprocess.run([IP, "netns", "del", ns], capture_output=True, timeout=30)


def new_folder(prefix):
    return Path(tempfile.mkdtemp(prefix=prefix))
