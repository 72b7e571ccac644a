"""tests/system/test_key_residue.py: no key material is left in a process after its contexts are freed, on every
engine and path this machine has. build/tests/test_key_residue (tests/c/test_key_residue.c) runs ECB, CBC,
CTR, GCM and XTS (16 B, 1 KiB and 320 KiB, both directions), the stitched CBC-HMAC ciphers (plain CBC and a
TLS record) and CBC encryption in ASYNC jobs (the multi-buffer lanes), frees everything, wipes its own key
copies and waits; this test then reads the child's whole writable memory (/proc/PID/mem: every thread's
stack, the pool workers' included, every heap and anonymous mapping) for each key, each round key of its
AES schedule beyond round 0 (encryption and the decryption schedule's InvMixColumns forms) and each HMAC key.
The keys come from a seeded splitmix64, so the child never prints one. OpenSSL's default provider is the
control (nothing found); a child that keeps one context alive is the proof that the scan finds a schedule."""

import os
import re
import subprocess
import threading

import pytest

from conftest import BUILD, MODULE, PROVIDER, SANITIZER, SEED, lanes_missing

# Under a sanitizer the child's writable memory includes the sanitizer's shadow (terabytes reserved, CI's
# asan pass did not get past this file): the plain pass of make test is the check.
pytestmark = pytest.mark.skipif(bool(SANITIZER), reason=f"a whole-memory scan of a {SANITIZER} process reads "
                                "its shadow memory too (terabytes reserved); the plain suite runs this file")

DRIVER = BUILD / "tests" / "test_key_residue"
FAKE_GPU = BUILD / "accelaes-fakegpu.so"
NEVER_SPLIT = {"ACCELAES_SPLIT_MIN": "1g", "ACCELAES_BACKEND": "cpu", "ACCELAES_SHM": "off"}
SPLIT = {"ACCELAES_SPLIT_MIN": "4096", "ACCELAES_WORKERS": "2", "ACCELAES_BACKEND": "cpu", "ACCELAES_SHM": "off"}
# engine x path; the lanes (ASYNC CBC jobs) run in every child, the GPU glue through the fake plugin.
VARIANTS = {
    "vaes-inline": NEVER_SPLIT,
    "vaes-split": SPLIT,
    # the ymm tier; on a core without AVX-512 it is the default above, so the same run again
    "ymm-inline": dict(NEVER_SPLIT, ACCELAES_VAES="ymm"),
    "xmm-inline": dict(NEVER_SPLIT, ACCELAES_NO_VAES="1"),
    "xmm-split": dict(SPLIT, ACCELAES_NO_VAES="1"),
    # accelaes's GCM engine on xmm (AES-NI and PCLMULQDQ), which no core here picks by itself yet
    "gcm-xmm-inline": dict(NEVER_SPLIT, ACCELAES_GCM_ENGINE="vaesx"),
    "evp-inline": dict(NEVER_SPLIT, ACCELAES_FORCE_EVP_ENGINE="1"),
    "evp-split": dict(SPLIT, ACCELAES_FORCE_EVP_ENGINE="1"),
    "gpu-glue": {"ACCELAES_BACKEND": "cuda", "ACCELAES_GPU_MIN": "16", "ACCELAES_GPU_PLUGIN": str(FAKE_GPU),
                 "ACCELAES_SHM": "off"},
}

# ---- AES key schedule, written out so the test does not trust any implementation it checks ----


def _xt(a):
    return ((a << 1) ^ 0x1B) & 0xFF if a & 0x80 else a << 1


def _mul(a, b):
    r = 0
    while b:
        if b & 1:
            r ^= a
        a, b = _xt(a), b >> 1
    return r


def _sbox():
    inv = [0] * 256
    for a in range(1, 256):
        inv[a] = next(b for b in range(1, 256) if _mul(a, b) == 1)
    box = []
    for a in range(256):
        x, s = inv[a], inv[a]
        for _ in range(4):
            x = ((x << 1) | (x >> 7)) & 0xFF
            s ^= x
        box.append(s ^ 0x63)
    return box


SBOX = _sbox()


def round_keys(key):
    """The 16-byte round keys 0..Nr of an AES key (FIPS-197 5.2)."""
    nk = len(key) // 4
    nr = nk + 6
    w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (nr + 1)):
        t = list(w[i - 1])
        if i % nk == 0:
            t = [SBOX[b] for b in t[1:] + t[:1]]
            t[0] ^= rcon
            rcon = _xt(rcon)
        elif nk > 6 and i % nk == 4:
            t = [SBOX[b] for b in t]
        w.append([a ^ b for a, b in zip(w[i - nk], t)])
    return [bytes(sum(w[4 * r:4 * r + 4], [])) for r in range(nr + 1)]


def inv_mix_columns(block):
    out = bytearray()
    for c in range(4):
        a = block[4 * c:4 * c + 4]
        for r in range(4):
            out.append(_mul(a[r], 14) ^ _mul(a[(r + 1) % 4], 11) ^ _mul(a[(r + 2) % 4], 13) ^ _mul(a[(r + 3) % 4], 9))
    return bytes(out)


def test_schedule_matches_fips197():
    """The schedule above against FIPS-197 Appendix A.1 and A.3 (the last round keys)."""
    rk = round_keys(bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c"))
    assert rk[10].hex() == "d014f9a8c9ee2589e13f0cc8b6630ca6"
    rk = round_keys(bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
    assert rk[14].hex() == "fe4890d1e6188d0b046df344706c631e"
    assert inv_mix_columns(bytes.fromhex("8e4da1bc9fdc589d01010101c6c6c6c6")).hex() == "db135345f20a225c01010101c6c6c6c6"

# ---- the keys the child uses, and what to look for ----


def slot_bytes(seed, slot):
    """The child's splitmix64 stream: slot N is outputs 8N..8N+7, little-endian."""
    out, state = bytearray(), (seed + 8 * slot * 0x9E3779B97F4A7C15) & (2**64 - 1)
    for _ in range(8):
        state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        out += (z ^ (z >> 31)).to_bytes(8, "little")
    return bytes(out)


def patterns(name, raw):
    """(what, bytes) for a slot used by cipher `name`: the key(s), every round key beyond 0 in both schedules,
    the HMAC key of a stitched cipher."""
    bits = int(re.match(r"AES-(\d+)", name).group(1))
    kl = bits // 8
    keys = [("key", raw[:kl])]
    if name.endswith("XTS"):
        keys = [("data key", raw[:kl]), ("tweak key", raw[kl:2 * kl])]
    found = []
    for what, k in keys:
        found.append((f"{what}", k))
        rk = round_keys(k)
        for r in range(1, len(rk)):
            found.append((f"{what} round key {r}", rk[r]))
            if r < len(rk) - 1:
                found.append((f"{what} decryption round key {r}", inv_mix_columns(rk[r])))
    if "HMAC" in name:
        found.append(("HMAC key", raw[32:32 + (32 if name.endswith("SHA256") else 20)]))
    return found


def index(slots, seed):
    """8-byte word -> [(slot, name, what, pattern, offset in pattern)]. Any occurrence of a pattern of 16 or more
    bytes holds a whole 8-aligned word of it, one of pattern[j:j+8] for j in 0..7, so one set lookup per
    aligned word of memory finds every candidate, wherever it is aligned."""
    idx = {}
    for slot, name in slots:
        for what, pat in patterns(name, slot_bytes(seed, slot)):
            for j in range(8):
                word = int.from_bytes(pat[j:j + 8], "little")
                idx.setdefault(word, []).append((slot, name, what, pat, j))
    return idx

# ---- reading the child ----


def thread_stacks(pid):
    """tid -> stack pointer, for threads blocked in a system call (all of them, while the child waits)."""
    sps = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = open(f"/proc/{pid}/task/{tid}/syscall").read().split()
            sps[int(tid)] = int(fields[-2], 16)
        except (OSError, ValueError, IndexError):
            pass
    return sps


def scan(pid, idx):
    """Every candidate of idx in the child's writable memory, verified in full: [(where, slot, name, what)]."""
    hits, scanned = [], 0
    sps = thread_stacks(pid)
    with open(f"/proc/{pid}/maps") as f:
        regions = [line.split(maxsplit=5) for line in f]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for r in regions:
            lo, hi = (int(x, 16) for x in r[0].split("-"))
            label = r[5].strip() if len(r) > 5 else "anonymous"
            if "w" not in r[1] or label in ("[vvar]", "[vsyscall]"):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            scanned += len(data)
            tids = [t for t, sp in sps.items() if lo <= sp < hi]
            where = f"{label} {lo:#x}-{hi:#x}" + (f" (stack of thread {tids})" if tids else "")
            words = memoryview(data)[:len(data) & ~7].cast("Q")
            for word in idx.keys() & set(words):
                for slot, name, what, pat, j in idx[word]:
                    pos = data.find(pat[j:j + 8])
                    while pos >= 0:
                        if data[pos - j:pos - j + len(pat)] == pat:
                            hits.append((f"{where} +{pos - j:#x}", slot, name, what))
                        pos = data.find(pat[j:j + 8], pos + 1)
    return hits, scanned


def run_child(provider, env_extra, seed, keep=False):
    if not DRIVER.exists():
        pytest.skip(f"{DRIVER} is not built (run `make build-only`)")
    env = dict(os.environ, **env_extra)
    args = [str(DRIVER), provider, str(seed)] + (["327680", "keep"] if keep else [])
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    slots = []
    watchdog = threading.Timer(120, p.kill)     # a child that hangs before "ready" ends the wait
    watchdog.start()
    try:
        for line in p.stdout:
            if line.startswith("slot "):
                _, n, name = line.split()
                slots.append((int(n), name))
            elif line.startswith("ready"):
                break
        assert p.poll() is None, f"the child ended early: {p.stderr.read()[-3000:]}"
        try:
            hits, scanned = scan(p.pid, index(slots, seed))
        except PermissionError as e:
            pytest.skip(f"cannot read the child's memory here: {e}")
        out, err = p.communicate("", timeout=60)
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and re.search(r"\d+ passed, 0 failed", out), out[-2000:] + err[-3000:]
    return slots, hits, scanned


def describe(hits, limit=30):
    """A count per mapping and cipher, then the first copies found."""
    counts = {}
    for where, slot, name, what in hits:
        key = (where.split(" +")[0], f"slot {slot} {name}")
        counts[key] = counts.get(key, 0) + 1
    lines = [f"{n} copies in {region}: {cipher}" for (region, cipher), n in sorted(counts.items())]
    lines += [f"  {where}: slot {slot} {name} {what}" for where, slot, name, what in hits[:limit]]
    return "\n".join(lines) + (f"\n  ... and {len(hits) - limit} more" if len(hits) > limit else "")


def test_default_provider_leaves_nothing():
    """The control: OpenSSL's default provider, same calls, nothing found. Where the running release's
    default itself leaves round keys (sid's OpenSSL 4.0.3: AES-256-GCM's on the stack), that is said
    as an expected failure of OpenSSL's, not accelaes's; accelaes's variants are held to none."""
    slots, hits, scanned = run_child("default", {}, SEED)
    assert len(slots) > 40 and scanned > 1 << 18, (len(slots), scanned)
    if hits:
        pytest.xfail(f"this OpenSSL's default provider leaves key material itself ({len(hits)}):\n{describe(hits)}")


def test_scan_finds_a_live_schedule():
    """The scan can fail: a child that keeps one AES-256-XTS context alive shows its keys and round keys."""
    slots, hits, _ = run_child("default", {}, SEED + 1, keep=True)
    kept = slots[-1][0]
    whats = {what for _, slot, _, what in hits if slot == kept}
    assert {"data key round key 7", "tweak key round key 13"} <= whats, f"kept schedule not found: {sorted(whats)}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_key_material_left(variant):
    if PROVIDER != "accelaes":
        pytest.skip("the engines and paths are accelaes's")
    if not MODULE.exists():
        pytest.skip(f"{MODULE} is not built (run `make build-only`)")
    env = dict(VARIANTS[variant], OPENSSL_MODULES=str(MODULE.parent))
    if variant.endswith("split") and (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU unit: nothing to split over")
    if variant.startswith("gpu") and not FAKE_GPU.exists():
        pytest.skip(f"{FAKE_GPU} is not built (run `make build-only`)")
    slots, hits, scanned = run_child("accelaes", env, SEED)
    assert scanned > 1 << 18
    lanes = lanes_missing()
    assert not hits, (f"{variant}: key material left after every context was freed ({len(hits)} copies"
                      f"{'; lanes: ' + lanes if lanes else ''}):\n{describe(hits)}")
