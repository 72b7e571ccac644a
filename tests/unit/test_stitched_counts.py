"""tests/unit/test_stitched_counts.py: a process that uses only the stitched TLS ciphers shows in
accelaes-stat every byte they processed: plain CBC updates, and TLS 1.2 records encrypted and
decrypted one at a time (the fused SHA-NI path's share and the engine's), counted exactly once the
process has exited. (Their multiblock writes: tests/system/test_tls_multiblock.py.)"""

import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, REPO, STAT_TOOL, child_counted

needs_build = pytest.mark.skipif(not (BUILD / "accelaes.so").exists() or not STAT_TOOL.exists(),
                                 reason="build/accelaes.so or build/accelaes-stat not built yet: run make")

# The child prints the bytes it had AES process: plain updates; each record's whole length to
# encrypt; to decrypt, SHA-1's records less the explicit IV block it takes as the IV (as the
# default provider does), SHA-256's whole.
CHILD = r'''
import os, sys
sys.path.insert(0, sys.argv[1])
import evp
lc = evp.LibCtx(("default", "accelaes"), modules_dir=os.environ["OPENSSL_MODULES"])
n, total = int(sys.argv[2]), 0
for name, ms in (("AES-128-CBC-HMAC-SHA1", 20), ("AES-256-CBC-HMAC-SHA256", 32)):
    c = lc.fetch(name, provider="accelaes")
    key = bytes(range(c.key_length))
    for i in range(n):
        with evp.CipherCtx(c, key=key, iv=bytes(16), enc=1) as x:
            x.update(bytes(64))
        total += 64
    rec = (16 + 1000 + ms + 16) // 16 * 16          # explicit IV, payload, MAC, padding
    recs = []
    for enc in (1, 0):
        with evp.CipherCtx(c, key=key, iv=bytes(16), enc=enc) as x:
            ok, _ = x.set_params([("mackey", "octet", b"m" * 20)])
            assert ok == 1
            for i in range(n):
                ln = 16 + 1000 if enc else rec
                aad = i.to_bytes(8, "big") + bytes([23, 3, 3]) + ln.to_bytes(2, "big")
                ok, _ = x.set_params([("tlsaad", "octet", aad)])
                assert ok == 1
                ret, out = x.cipher_oneshot(bytes(rec) if enc else recs[i])
                assert ret > 0, (name, enc, i)
                if enc:
                    recs.append(out)
                total += rec if enc or ms == 32 else rec - 16
print(total)
'''


@needs_build
def test_stitched_only_process_is_counted(openssl_env):
    want, got = child_counted(openssl_env, CHILD, ["50"], "stcount")
    assert got == want, f"accelaes-stat shows {got} bytes, the process had {want} processed"
