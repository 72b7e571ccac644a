#!/usr/bin/env python3
"""bench/scripts/servers.py: time and server CPU per MiB for real servers with and without accelaes
(tests/serverlib.py, tests/ovpnlib.py set them up as tests/system/test_servers.py does): two instances of
each server, one on OpenSSL's default provider and one with conf/accelaes.cnf, used alternately
round by round (which goes first alternates too), so load from elsewhere on the machine falls on
both alike. Each round moves the payload through one instance; wall time is the client's, server
CPU is the server's user+system time (a PostgreSQL postmaster's includes its exited backends).
Clients run on the default provider. Prints a Markdown table (medians, ranges, and the median of
the per-round accelaes/default ratios), raw rounds in --json.

  ACCELAES_BUILD_DIR=build python3 bench/scripts/servers.py [--rounds 6] [--mib 32] [--only redis,openvpn-cbc]"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tests"))
import ovpnlib as ov  # noqa: E402
import serverlib as sl  # noqa: E402
from conftest import CONF, SHM_NAME  # noqa: E402
from test_real_programs import descendants, wait_for  # noqa: E402

MIB = 1 << 20


def envs():
    base = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    return {"default": dict(base, ACCELAES_SHM_NAME=SHM_NAME + "-d"),
            "accelaes": dict(base, ACCELAES_SHM_NAME=SHM_NAME + "-a", OPENSSL_CONF=str(CONF))}


class Case:
    """One program: start(env) -> instance, run(instance, data) -> server pid, cleanup()."""

    def __init__(self, name, start, run, payload=os.urandom):
        self.name, self.start_fn, self.run_fn, self.payload = name, start, run, payload


def pg_run(server, data):
    server.copy_both_ways("TLSv1.3", data, "b")
    # the backend has exited once the postmaster has only its own helpers again (its CPU is then in cutime)
    wait_for(lambda: len(descendants(server.proc.pid)) <= server.helpers, 10)
    return server.proc.pid


def pg_start(env):
    server = sl.Postgres().start(env)
    wait_for(lambda: len(descendants(server.proc.pid)) >= 5, 10)
    time.sleep(1)
    server.helpers = len(descendants(server.proc.pid))
    return server


def plain_start(cls, *args):
    return lambda env: cls().start(env, *args)


def stunnel_run(server, data):
    server.echo_through(data, server.ciphers)
    return server.proc.pid


def stunnel_start(ciphers, etm):
    def start(env):
        server = sl.Stunnel().start(env, "TLSv1.2" if ciphers else "TLSv1.3", ciphers, etm)
        server.ciphers = ciphers
        return server
    return start


def tun_start(mode):
    def start(env):
        pair = ov.TunPair(ov.new_folder("accelaes-bench-vpn-"), mode)
        pair.start(env)
        return pair
    return start


def tun_run(pair, data):
    src, dst = pair.dir / "src.bin", pair.dir / "dst.bin"
    if not src.exists():
        src.write_bytes(data)
    pair.send(src, dst)
    assert dst.stat().st_size == len(data)
    return pair.pid("a")    # the sender: it encrypts every byte


CASES = [
    Case("postgres", pg_start, pg_run, sl.text_payload),
    Case("redis", plain_start(sl.Redis, "TLSv1.3"), lambda s, d: (s.set_get(d), s.proc.pid)[1]),
    Case("stunnel-tls13", stunnel_start(None, True), stunnel_run),
    Case("stunnel-aes128-sha", stunnel_start("AES128-SHA", False), stunnel_run),
    Case("mosquitto", plain_start(sl.Mosquitto, "tlsv1.3"), lambda s, d: (s.pub_sub(d, "tlsv1.3"),
                                                                                s.proc.pid)[1]),
    Case("openvpn-gcm", tun_start("gcm"), tun_run),
    Case("openvpn-cbc", tun_start("cbc"), tun_run),
]


def one(case, inst, data):
    pid = inst.proc.pid if hasattr(inst, "proc") else inst.pid("a")
    cpu0, t0 = sl.cpu_seconds(pid), time.monotonic()
    pid = case.run_fn(inst, data)
    wall = time.monotonic() - t0
    return wall, sl.cpu_seconds(pid) - cpu0


def bench(case, rounds, size):
    data = case.payload(size)
    insts = {}
    try:
        for mode, env in envs().items():
            insts[mode] = case.start_fn(env)
        one(case, insts["default"], data)       # warm-up of both (caches, first connection)
        one(case, insts["accelaes"], data)
        rows = []
        for r in range(rounds):
            order = ["default", "accelaes"] if r % 2 == 0 else ["accelaes", "default"]
            row = {}
            for mode in order:
                row[mode] = one(case, insts[mode], data)
            rows.append(row)
            print(f"  {case.name} round {r}: " + ", ".join(f"{m} {w:.2f} s / cpu {c:.2f} s"
                                                         for m, (w, c) in row.items()), file=sys.stderr)
        return rows
    finally:
        for inst in insts.values():
            inst.cleanup()


def summary(name, rows, size):
    mib = size / MIB
    out = []
    for what, i in (("wall", 0), ("server CPU", 1)):
        med = {m: statistics.median(r[m][i] for r in rows) for m in ("default", "accelaes")}
        ratios = [r["accelaes"][i] / r["default"][i] for r in rows if r["default"][i] > 0]
        rng = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
        out.append(f"| {name} | {what} | {len(rows)} | {1000 * med['default'] / mib:.1f} | "
                   f"{1000 * med['accelaes'] / mib:.1f} | {statistics.median(ratios) if ratios else 0:.2f} | {rng} | "
                   f"{sum(x < 1 for x in ratios)}/{len(ratios)} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--rounds-for", default="", help="NAME=N,... rounds for single cases (openvpn-cbc=12)")
    ap.add_argument("--json", help="raw rounds written here")
    args = ap.parse_args()
    extra = dict(kv.split("=") for kv in args.rounds_for.split(",") if kv)
    only = set(filter(None, args.only.split(",")))
    size = args.mib * MIB
    table = ["| program | measure | rounds | default ms/MiB | accelaes ms/MiB | ratio (median of rounds) | "
             "ratio range | rounds accelaes lower |", "|---|---|---|---|---|---|---|---|"]
    raw = {}
    for case in CASES:
        if only and case.name not in only:
            continue
        rows = bench(case, int(extra.get(case.name, args.rounds)), size)
        raw[case.name] = rows
        table += summary(case.name, rows, size)
    print("\n".join(table))
    if args.json:
        Path(args.json).write_text(json.dumps({"mib": args.mib, "rounds": raw}, indent=1))


if __name__ == "__main__":
    main()
