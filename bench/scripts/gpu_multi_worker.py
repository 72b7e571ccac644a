#!/usr/bin/env python3
"""bench/scripts/gpu_multi_worker.py: one process of bench/scripts/gpu_multi.py. It runs R requests of S bytes through EVP with
provider=accelaes (libcrypto through ctypes, the caller's buffers malloc'd as a user's are), between a barrier
and a report that the runner reads from its stdout (lines starting with "GPUMULTI "), and checks its own output:
the first and the last request whole against the default provider, and 16 sampled blocks of every request.

Protocol on stdin/stdout: "GPUMULTI {ready}" after set-up and a warm-up request (the plugin's start), then waits
for "go"; "GPUMULTI {result}" after the requests and the checks, then waits for "exit" (the runner reads GPU
memory while the context is still held). Not meant to be run by hand.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import random
import secrets
import sys
import time

MIB = 1 << 20
TAG = "GPUMULTI "          # anything else on this process's stdout (a plugin's print) is passed over
OPS = {"ctr": ("CTR", 1), "ecb": ("ECB", 1), "cbcdec": ("CBC", 0)}
vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int


class Evp:
    SIGS = {"OSSL_PROVIDER_load": (vp, [vp, cp]), "EVP_CIPHER_fetch": (vp, [vp, cp, cp]),
            "EVP_CIPHER_get0_provider": (vp, [vp]), "OSSL_PROVIDER_get0_name": (cp, [vp]),
            "EVP_CIPHER_CTX_new": (vp, []), "EVP_CIPHER_CTX_free": (None, [vp]),
            "EVP_CipherInit_ex2": (ci, [vp, vp, cp, cp, ci, vp]), "EVP_CIPHER_CTX_set_padding": (ci, [vp, ci]),
            "EVP_CipherUpdate": (ci, [vp, vp, ctypes.POINTER(ci), vp, ci]),
            "EVP_CipherFinal_ex": (ci, [vp, vp, ctypes.POINTER(ci)])}

    def __init__(self, bits):
        self.lib = ctypes.CDLL(ctypes.util.find_library("crypto") or "libcrypto.so.3")
        for name, (res, args) in self.SIGS.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = res, args
        for prov in ("default", "accelaes"):
            if not self.lib.OSSL_PROVIDER_load(None, prov.encode()):
                raise SystemExit(f"gpu_multi worker: the {prov} provider does not load (OPENSSL_MODULES?)")
        self.libc = ctypes.CDLL(None)
        self.libc.malloc.restype, self.libc.malloc.argtypes = vp, [ctypes.c_size_t]
        self.libc.free.argtypes = [vp]
        self.libc.memcmp.restype, self.libc.memcmp.argtypes = ci, [vp, vp, ctypes.c_size_t]
        self.key = secrets.token_bytes(bits // 8)   # this process's memory only; gone with it
        self.ctx = self.lib.EVP_CIPHER_CTX_new()

    def fetch(self, name, prov):
        c = self.lib.EVP_CIPHER_fetch(None, name.encode(), f"provider={prov}".encode())
        got = c and self.lib.OSSL_PROVIDER_get0_name(self.lib.EVP_CIPHER_get0_provider(c)).decode()
        if got != prov:
            raise SystemExit(f"gpu_multi worker: {name} fetched with provider={prov} came from {got}")
        return c

    def cipher(self, c, iv, enc, out, inp, n, ctx=None):
        """One request: init, updates of at most 1 GiB (EVP takes an int), final."""
        L, outl, ctx = self.lib, ci(0), ctx or self.ctx
        ok = L.EVP_CipherInit_ex2(ctx, c, self.key, iv, enc, None) and L.EVP_CIPHER_CTX_set_padding(ctx, 0)
        for at in range(0, n, 1 << 30):
            ok = ok and L.EVP_CipherUpdate(ctx, out + at, ctypes.byref(outl), inp + at, min(n - at, 1 << 30))
        ok = ok and L.EVP_CipherFinal_ex(ctx, out + n, ctypes.byref(outl))
        if not ok:
            raise SystemExit("gpu_multi worker: an EVP call failed")

    def buffer(self, n, pattern=None):
        """malloc'd (pageable) and touched, as a user's buffer is: the input filled, the output zeroed."""
        p = self.libc.malloc(n)
        if not p:
            raise SystemExit(f"gpu_multi worker: malloc({n}) failed")
        if pattern is None:
            ctypes.memset(p, 0, n)
        else:
            for at in range(0, n, len(pattern)):
                ctypes.memmove(p + at, pattern, min(len(pattern), n - at))
        return p

    def expected_block(self, ecb, op, iv, blk, inb):
        """The default provider's output for block blk alone, from the input around it (inb: the previous
        block and this one) and the request's IV: each mode here is parallel over blocks."""
        out, src = ctypes.create_string_buffer(48), ctypes.create_string_buffer(inb[16:], 16)
        if op == "ctr":
            src.raw = ((int.from_bytes(iv, "big") + blk) % (1 << 128)).to_bytes(16, "big")
        ctx = self.lib.EVP_CIPHER_CTX_new()
        try:
            self.cipher(ecb, None, OPS[op][1], ctypes.addressof(out), ctypes.addressof(src), 16, ctx)
        finally:
            self.lib.EVP_CIPHER_CTX_free(ctx)
        mask = inb[16:] if op == "ctr" else bytes(16) if op == "ecb" else iv if blk == 0 else inb[:16]
        return bytes(a ^ b for a, b in zip(out.raw[:16], mask))


def say(kind, **fields):
    sys.stdout.write(TAG + json.dumps(dict(fields, kind=kind)) + "\n")
    sys.stdout.flush()


def requests(a, evp, acc, enc, ivs, rng, pattern, inp, first):
    """The timed requests. Request 0 writes into `first`, kept for the whole check; with fresh buffers every
    later request takes newly malloc'd ones, the previous pair freed first (the same addresses come back
    over other pages: where a stale registration would show); the last pair is kept too."""
    size, out, lat, samples = a.size, None, [], []
    for i in range(a.requests):
        if i > 0 and a.buffers == "fresh":
            if i > 1:
                evp.libc.free(inp)
                evp.libc.free(out)
            # other contents too: a stale registration of the input would otherwise read the same bytes
            inp, out = evp.buffer(size, pattern[i % 7 * 16:] + pattern[:i % 7 * 16]), evp.buffer(size + 16)
        elif i == 1:
            out = evp.buffer(size + 16)
        dst = first if i == 0 else out
        t0 = time.monotonic()
        evp.cipher(acc, ivs[i], enc, dst, inp, size)
        lat.append(time.monotonic() - t0)
        blocks = {0, size // 16 - 1} | {rng.randrange(size // 16) for _ in range(14)}
        samples += [(i, b, ctypes.string_at(inp + 16 * b - 16, 32) if b else bytes(16) + ctypes.string_at(inp, 16),
                     ctypes.string_at(dst + 16 * b, 16)) for b in sorted(blocks)]
    return lat, samples, (inp, out if out else first)


def worker(a):
    mode, enc = OPS[a.op]
    evp = Evp(a.bits)
    name = f"AES-{a.bits}-{mode}"
    acc, ref = evp.fetch(name, "accelaes"), evp.fetch(name, "default")
    ecb = evp.fetch(f"AES-{a.bits}-ECB", "default")
    rng, size = random.Random(os.getpid()), a.size
    ivs = [None if a.op == "ecb" else rng.randbytes(16) for _ in range(a.requests)]
    pattern = ctypes.create_string_buffer(secrets.token_bytes(MIB), MIB)
    # Warm-up on buffers of its own: the plugin starts (CUDA context, pools) at the process's first GPU request.
    wlen = min(size, max(a.gpu_min, MIB)) // 16 * 16
    w_in, w_out = evp.buffer(wlen, pattern), evp.buffer(wlen + 16)
    t0 = time.monotonic()
    evp.cipher(acc, ivs[0], enc, w_out, w_in, wlen)
    warm_ms = (time.monotonic() - t0) * 1e3
    inp, first = evp.buffer(size, pattern), evp.buffer(size + 16)
    say("ready", pid=os.getpid(), warm_ms=warm_ms)
    if sys.stdin.readline().strip() != "go":
        return 1
    t_start, cpu0 = time.monotonic(), time.process_time()   # the process's CPU clock: all its threads
    lat, samples, last = requests(a, evp, acc, enc, ivs, rng, pattern, inp, first)
    t_end, cpu = time.monotonic(), time.process_time() - cpu0
    bad_spots = sum(evp.expected_block(ecb, a.op, ivs[i], b, inb) != got for i, b, inb, got in samples)
    full, refbuf = [], evp.buffer(size + 16)
    for i, (src, dst) in ((0, (inp, first)), (a.requests - 1, last)):
        evp.cipher(ref, ivs[i], enc, refbuf, src, size)
        full.append(evp.libc.memcmp(refbuf, dst, size) == 0)
    say("result", pid=os.getpid(), bytes=a.requests * size, warm_bytes=wlen, t_start=t_start, t_end=t_end,
        cpu_s=cpu, lat_s=lat, spots=len(samples), bad_spots=bad_spots, first_ok=full[0], last_ok=full[1],
        warm_ms=warm_ms, buffers=a.buffers)
    sys.stdin.readline()   # "exit"
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", choices=sorted(OPS), required=True)
    ap.add_argument("--bits", type=int, choices=(128, 192, 256), default=128)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--buffers", choices=("reuse", "fresh"), default="reuse")
    ap.add_argument("--gpu-min", type=int, default=MIB)
    a = ap.parse_args()
    if a.size <= 0 or a.size % 16 or a.requests < 1:
        ap.error("--size must be a positive multiple of 16 and --requests at least 1")
    return worker(a)


if __name__ == "__main__":
    sys.exit(main())
