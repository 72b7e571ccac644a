#!/usr/bin/env python3
"""bench/scripts/nginx_tls13.py: nginx serving a file over TLS 1.3 (TLS_AES_128_GCM_SHA256 or another suite) with its
stock OpenSSL configuration and with conf/accelaes.cnf, downloads by curl (on the default provider) alternated
between the two servers, on 127.0.0.1. Prints MB/s per download, the medians and the ratio, and checks every
body. Both servers and the client share this machine's cores: the download rate is of whole downloads (curl's
own decryption on the default provider included), so the server's CPU time per byte (its workers' schedstat)
is printed too: that is what the server's cipher changes.

Run: python3 bench/scripts/nginx_tls13.py [--rounds 5] [--mib 64] [--suite TLS_AES_128_GCM_SHA256] [--client-accelaes]
     (needs nginx, curl)"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BUILD = Path(os.environ.get("ACCELAES_BUILD_DIR", REPO / "build")).resolve()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(d, name, env):
    port = free_port()
    (d / f"{name}.conf").write_text(f"""daemon off; master_process on; worker_processes 1;
pid {d}/{name}.pid; error_log {d}/{name}.err info; {' '.join(f'env {k};' for k in env if k.startswith(('OPENSSL_', 'ACCELAES_')))}
events {{ worker_connections 64; }}
http {{ access_log off; client_body_temp_path {d}/tb-{name}; proxy_temp_path {d}/tp-{name};
  fastcgi_temp_path {d}/tf-{name}; uwsgi_temp_path {d}/tu-{name}; scgi_temp_path {d}/ts-{name};
  server {{ listen 127.0.0.1:{port} ssl; root {d}/www; ssl_protocols TLSv1.3;
    ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; }} }}
""")
    proc = subprocess.Popen(["nginx", "-c", f"{d}/{name}.conf", "-p", f"{d}/", "-e", f"{d}/{name}.err"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"nginx ({name}) did not start: {(d / f'{name}.err').read_text(errors='replace')[-2000:]}")


def server_cpu_ns(master):
    """CPU time (ns) of the nginx master's workers so far, every thread (/proc/<pid>/task/*/schedstat)."""
    total = 0
    for w in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split():
        for t in Path(f"/proc/{w}/task").iterdir():
            total += int((t / "schedstat").read_text().split()[0])
    return total


def download(port, suite, out, client_env):
    t0 = time.monotonic()
    p = subprocess.run(["curl", "-sS", "-k", "--fail", "--tlsv1.3", "--tls13-ciphers", suite, "-o", str(out),
                        "-w", "%{size_download}", f"https://127.0.0.1:{port}/f.bin"], env=client_env,
                       capture_output=True, text=True, timeout=300)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"curl failed: {p.stderr[-2000:]}")
    return int(p.stdout) / dt / 1e6


def accelaes_bytes(env):
    """Bytes accelaes did in the accelaes server's private segment (all paths): proof that it served."""
    p = subprocess.run([str(BUILD / "accelaes-stat"), "--json"], env=env, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise SystemExit(f"accelaes-stat failed: {p.stderr[-500:]}")
    totals = json.loads(p.stdout)["totals"]
    return sum(int(totals.get(k, 0)) for k in ("inline_bytes", "split_bytes", "batch_bytes", "gpu_bytes"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--suite", default="TLS_AES_128_GCM_SHA256")
    ap.add_argument("--client-accelaes", action="store_true",
                    help="curl on accelaes too (its own segment), for both servers: less client cost in the download")
    a = ap.parse_args()
    for tool in ("nginx", "curl", "openssl"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    d = Path(tempfile.mkdtemp(prefix="accelaes-nginx-bench-"))
    (d / "www").mkdir()
    body = os.urandom(a.mib << 20)
    (d / "www" / "f.bin").write_bytes(body)
    for path, mode in ((d, 0o755), (d / "www", 0o755), (d / "www" / "f.bin", 0o644)):
        os.chmod(path, mode)   # the workers run as nobody when nginx starts as root
    client = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSSL_", "ACCELAES_"))}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-subj", "/CN=localhost", "-days", "1"], env=client,
                   check=True, capture_output=True, timeout=60)
    accel = dict(client, OPENSSL_CONF=str(REPO / "conf" / "accelaes.cnf"), OPENSSL_MODULES=str(BUILD),
                 ACCELAES_SHM_NAME=f"/accelaes-nginx-bench-{os.getpid()}")
    servers = {"stock": start(d, "stock", client), "accelaes": start(d, "accelaes", accel)}
    if a.client_accelaes:
        client = dict(accel, ACCELAES_SHM_NAME=f"/accelaes-nginx-bench-client-{os.getpid()}")
    got = {k: [] for k in servers}
    cpu = {k: [] for k in servers}
    try:
        for r in range(a.rounds):
            for side in (("stock", "accelaes") if r % 2 == 0 else ("accelaes", "stock")):
                out = d / f"got-{side}"
                c0 = server_cpu_ns(servers[side][0])
                got[side].append(download(servers[side][1], a.suite, out, client))
                cpu[side].append((server_cpu_ns(servers[side][0]) - c0) / (a.mib << 20))
                if out.read_bytes() != body:
                    raise SystemExit(f"{side}: the downloaded body differs")
                out.unlink()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    done = accelaes_bytes(accel)
    Path("/dev/shm" + accel["ACCELAES_SHM_NAME"]).unlink(missing_ok=True)
    if a.client_accelaes:
        Path("/dev/shm" + client["ACCELAES_SHM_NAME"]).unlink(missing_ok=True)
    if done < a.rounds * (a.mib << 20):
        raise SystemExit(f"accelaes-stat: the accelaes server did {done} bytes, less than it sent")
    print(f"accelaes-stat: the accelaes server's segment counts {done / 1e6:.0f} MB through accelaes")
    for side, v in got.items():
        print(f"{side:9s} MB/s: {', '.join(f'{x:.0f}' for x in v)}; median {statistics.median(v):.0f};"
              f" server CPU ns/B: {', '.join(f'{x:.3f}' for x in cpu[side])}; median {statistics.median(cpu[side]):.3f}")
    print(f"accelaes / stock (medians): download MB/s {statistics.median(got['accelaes']) / statistics.median(got['stock']):.2f},"
          f" server CPU per byte {statistics.median(cpu['accelaes']) / statistics.median(cpu['stock']):.2f}"
          f"  ({a.suite}, {a.mib} MiB, {a.rounds} alternated rounds, curl on"
          f" {'accelaes' if a.client_accelaes else 'the default provider'})")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
