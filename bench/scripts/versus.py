#!/usr/bin/env python3
"""bench/scripts/versus.py: accelaes against OpenSSL's default provider and against any other provider given by path
(AMD's AOCL-Crypto `libopenssl-compat.so`, for one), `openssl speed -elapsed`, the sides alternated in one run.

    python3 bench/scripts/versus.py [--peer NAME=PATH]... [--rounds 3] [--seconds 1] [--multi 2] [--quick]

NAME must be the name the peer's algorithms carry in their `provider=` property, since the module is loaded
under that name (AOCL's is `alcp`: `--peer alcp=/path/to/aocl-crypto/build/libopenssl-compat.so`; its
libalcp.so is found beside it). How to build AOCL for this: bench/README.md.

Each non-default side runs as `-provider P -provider default -propquery ?provider=P`: default is there for the
DRBG (a peer may have none) and the `?` makes P preferred, so a cipher P lacks would silently come from default.
So, before measuring, every (side, cipher) pair is checked with `openssl enc -propquery provider=P` (no `?`):
a pair that fails is reported as n/a, never measured. For accelaes the bytes counted in accelaes-stat during
its runs must cover what speed reports, or the table says so.

Prints a markdown table: MB/s per side (median of the rounds) and the ratios accelaes/default, accelaes/peer,
and for ECB, which peers may lack, ECB against accelaes's own CTR. Writes it to --out (default
build/results/versus.md)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

SIZES = [16, 64, 256, 1024, 8192, 16384]
MIB = 1 << 20
# (label, cipher, decrypt)
TESTS = [("aes-128-ctr", "aes-128-ctr", False), ("aes-256-ctr", "aes-256-ctr", False),
         ("aes-128-cbc -decrypt", "aes-128-cbc", True), ("aes-128-ecb", "aes-128-ecb", False)]
MULTI_TESTS = TESTS[:3]
KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


def module_dir(peers):
    """A private module directory: accelaes.so and each peer as NAME.so, all symbolic links."""
    d = Path(tempfile.mkdtemp(prefix="accelaes-versus-"))
    (d / "accelaes.so").symlink_to(benchlib.BUILD / "accelaes.so")
    for name, path in peers:
        (d / f"{name}.so").symlink_to(Path(path).resolve())
    return d


def side_env(moddir, peers):
    env = dict(os.environ)
    env["OPENSSL_MODULES"] = str(moddir)
    libdirs = [str(Path(p).resolve().parent) for _, p in peers]   # a peer's own libraries (AOCL: libalcp.so)
    if env.get("LD_LIBRARY_PATH"):
        libdirs.append(env["LD_LIBRARY_PATH"])
    if libdirs:
        env["LD_LIBRARY_PATH"] = ":".join(libdirs)
    return env


def provider_args(side):
    if side == "default":
        return ["-provider", "default"]
    return ["-provider", side, "-provider", "default", "-propquery", f"?provider={side}"]


def offers(side, cipher, env):
    """Does `side` itself implement cipher? (openssl enc with a strict property query)"""
    if side == "default":
        return True
    args = [benchlib.OPENSSL, "enc", f"-{cipher}", "-K", KEY[:int(cipher[4:7]) // 4], "-provider", side,
            "-provider", "default", "-propquery", f"provider={side}"]
    if not cipher.endswith("ecb"):
        args += ["-iv", "0" * 32]
    res = subprocess.run(args, input=b"\0" * 64, capture_output=True, env=env)
    return res.returncode == 0 and len(res.stdout) >= 64


def stat_bytes():
    """accelaes's cumulative byte count (all paths) for this user, or None."""
    tool = benchlib.BUILD / "accelaes-stat"
    try:
        p = subprocess.run([str(tool), "--json"], capture_output=True, text=True, timeout=30)
        if p.returncode == 3:    # no segment yet: nothing counted (a count before the first run)
            return 0
        t = json.loads(p.stdout)["totals"]
        return sum(t[k] for k in ("inline_bytes", "split_bytes", "batch_bytes", "gpu_bytes"))
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
        return None


def speed(side, cipher, decrypt, env, seconds, size=None, multi=None):
    """One openssl speed run -> ({size: bytes/s}, command, error)."""
    args = [benchlib.OPENSSL, "speed", "-mr", "-elapsed", "-seconds", str(seconds)] + provider_args(side)
    if size is not None:
        args += ["-bytes", str(size)]
    if multi is not None:
        args += ["-multi", str(multi)]
    args += ["-evp", cipher] + (["-decrypt"] if decrypt else [])
    cmd = " ".join(args[1:])
    before = stat_bytes() if side == "accelaes" else None
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    total, _ = benchlib.parse_speed(res.stdout + res.stderr)
    if res.returncode != 0 or not total:
        return {}, cmd, f"exit {res.returncode}: " + (res.stderr or res.stdout).strip()[-300:]
    if before is not None:
        after = stat_bytes()
        expect = sum(total.values()) * seconds * 0.5      # speed's own figure, halved for its timing slack
        if after is None or after - before < expect:
            return total, cmd, f"accelaes-stat counted {after - before if after else 'nothing'} B, " \
                               f"speed reports ~{int(expect * 2)} B"
    return total, cmd, None


def collect(sides, env, args):
    """results[(label, multi)][side][size] -> list of bytes/s over the rounds."""
    results, errors, cmds = {}, [], set()
    plan = [(t, None) for t in TESTS] + [(t, args.multi) for t in MULTI_TESTS if args.multi]
    avail = {(s, t[1]): offers(s, t[1], env) for s in sides for t in TESTS}
    for r, order in benchlib.alternate(args.rounds, sides):
        print(f"versus.py: round {r + 1} of {args.rounds}: {' '.join(order)}", file=sys.stderr)
        for (label, cipher, dec), multi in plan:
            for sizes in ([None, MIB] if not args.quick else [None]):
                for side in order:
                    if not avail[(side, cipher)]:
                        continue
                    total, cmd, err = speed(side, cipher, dec, env, args.seconds, size=sizes, multi=multi)
                    cmds.add(cmd)
                    if err:
                        errors.append(f"{side} {label}: {err}")
                    cell = results.setdefault((label, multi), {}).setdefault(side, {})
                    for sz, v in total.items():
                        cell.setdefault(sz, []).append(v)
    return results, avail, errors, sorted(cmds)


def fmt_ratio(a, b, floor):
    if a is None or b is None or b == 0:
        return "n/a"
    r = a / b
    return f"**{r:.2f}**" if r < floor else f"{r:.2f}"


def table(results, avail, sides, peers, multi):
    sizes = SIZES + [MIB]
    med = {k: {s: {sz: benchlib.median(v) for sz, v in d.items()} for s, d in sv.items()}
           for k, sv in results.items()}
    lines = []
    head = "| test | side | " + " | ".join(f"{sz // 1024} KiB" if sz >= 1024 else f"{sz} B" for sz in sizes) + " |"
    rule = "| --- | --- |" + " ---: |" * len(sizes)
    for (label, cipher, _), m in [(t, None) for t in TESTS] + [(t, multi) for t in MULTI_TESTS if multi]:
        name = label + (f" -multi {m}" if m else "")
        lines += ["", f"### {name}", "", head, rule]
        cell = med.get((label, m), {})
        for s in sides:
            if not avail[(s, cipher)]:
                lines.append(f"| {name} | {s} MB/s | " + " | ".join("n/a" for _ in sizes) + " |")
                continue
            vals = [cell.get(s, {}).get(sz) for sz in sizes]
            lines.append(f"| {name} | {s} MB/s | "
                         + " | ".join(f"{v / 1e6:.0f}" if v else "-" for v in vals) + " |")
        acc = cell.get("accelaes", {})
        lines.append(f"| {name} | accelaes / default | "
                     + " | ".join(fmt_ratio(acc.get(sz), cell.get("default", {}).get(sz), 1.0) for sz in sizes) + " |")
        for p, _ in peers:
            if avail[(p, cipher)]:
                floors = [1.05 if 256 <= sz <= 16384 else 1.0 for sz in sizes]
                lines.append(f"| {name} | accelaes / {p} | "
                             + " | ".join(fmt_ratio(acc.get(sz), cell.get(p, {}).get(sz), f)
                                          for sz, f in zip(sizes, floors)) + " |")
        if cipher.endswith("ecb") and not m:
            ctr = med.get(("aes-128-ctr", None), {}).get("accelaes", {})
            lines.append(f"| {name} | accelaes ECB / accelaes CTR | "
                         + " | ".join(fmt_ratio(acc.get(sz), ctr.get(sz), 1.0) for sz in sizes) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=PATH",
                    help="another provider module by path, e.g. aocl=/path/to/libopenssl-compat.so")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=1)
    ap.add_argument("--multi", type=int, default=2, help="also run -multi N for the CTR and CBC tests (0: no)")
    ap.add_argument("--quick", action="store_true", help="one round, no 1 MiB column")
    ap.add_argument("--out", default=str(benchlib.BUILD / "results" / "versus.md"))
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.multi = 1, 0
    peers = []
    for spec in args.peer:
        name, _, path = spec.partition("=")
        if not name.isidentifier() or name in ("default", "accelaes") or not Path(path).is_file():
            ap.error(f"--peer {spec}: want NAME=PATH with a new NAME and an existing module file")
        peers.append((name, path))
    if not (benchlib.BUILD / "accelaes.so").is_file():
        sys.exit("versus.py: build/accelaes.so is missing (run make)")
    moddir = module_dir(peers)
    env = side_env(moddir, peers)
    sides = ["default", "accelaes"] + [n for n, _ in peers]
    start = time.time()
    results, avail, errors, cmds = collect(sides, env, args)
    m = benchlib.machine()
    out = [f"# accelaes against default{''.join(', ' + n for n, _ in peers)}: openssl speed -elapsed, "
           f"{args.rounds} alternated round(s), medians", "",
           benchlib.machine_line(m), "",
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - start:.0f} s. "
           f"Command: `python3 bench/scripts/versus.py {' '.join(sys.argv[1:])}`. Ratios in bold miss the issue's floor "
           "(1.00 against default and for ECB against CTR; 1.05 against a peer at 256 B-16 KiB, 1.00 elsewhere)."]
    out += table(results, avail, sides, peers, args.multi)
    out += ["", "openssl speed commands (`OPENSSL_MODULES` = a directory of links to build/accelaes.so and each "
            "peer):", ""] + [f"- `openssl {c}`" for c in cmds]
    if errors:
        out += ["", "Errors:", ""] + [f"- {e}" for e in errors]
    text = "\n".join(out) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    for p in moddir.iterdir():
        p.unlink()
    moddir.rmdir()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
