"""tests/system/test_valgrind.py: valgrind memcheck over a whole life of the provider: build/tests/test_alloc_fail --plain
loads accelaes.so (OPENSSL_MODULES) in fresh library contexts, runs every cipher both ways with a context copy
(GCM with AAD and its tag, XTS one unit at a time),
the stitched TLS ciphers, RAND_bytes through the DRBG delegate (its private library context), unloads the
provider and calls OPENSSL_cleanup. Requests are split over the worker pool (split_min lowered), so the
scheduler's threads and segment are alive too. Nothing may be definitely or indirectly lost and memcheck may
report no error. With the AES-NI engine, with the nested-EVP engine (whose private library context is kept for
the life of the process: still reachable, by design), and with the GPU glue driving the fake plugin."""
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, MODULE, PROVIDER, SANITIZER

BINARY = BUILD / "tests" / "test_alloc_fail"
FAKE = BUILD / "accelaes-fakegpu.so"


# The nested-EVP GCM engine (accel/cpu/gcm_evp.c) draws "conditional jump or move depends on
# uninitialised value(s)" inside the default provider's GCM final (decryption: its tag compare;
# encryption: the tag it hands back), with the bytes and tags right (found when GCM joined this run):
# "evp" runs without GCM so the other ciphers stay checked, "evp-gcm" records it. What is known
# (valgrind 3.19, OpenSSL 3.0.19, 2026-11-24): the default's GCM alone is clean (0 errors) in a plain
# program, EVP_aes_128_gcm() or fetched, in gcm_evp.c's exact call order (key with no IV, AEAD_IVLEN,
# IV, AAD, data in two pieces, final, tag get; decryption with the tag set before final), on one
# context or two, with EVP_CIPHER_CTX_copy mid-stream, in accelaes's own private library context
# (acc_evp_engine_libctx) and with accelaes loaded in the same process; driving gcm_evp.c's engine
# functions directly (no provider, no cipher_gcm.c) reproduces it (1 error, decryption's final), with
# every input it passes defined (VALGRIND_CHECK_MEM_IS_DEFINED on key, IV, AAD, data, tag) and its
# ciphertext and encryption tag defined; --track-origins names no origin, and
# --expensive-definedness-checks=yes keeps it. It depends on how gcm_evp.c is compiled: built -O0 it
# is gone; -O2 with evp_finish alone at O0 it is gone; -O2 with one fprintf added in evp_finish's
# decryption path it is gone; zeroing its `none` / `outl` or building the tag OSSL_PARAM field by
# field keeps it. No input accelaes passes is undefined, and a change of code layout with the same
# calls makes it vanish: this points at memcheck or libcrypto's asm rather than at accelaes, but it is
# not proved, so the xfail stays with this record. It is not there on every release (OpenSSL 3.5.9 with
# valgrind 3.24: clean), so a run (evp-gcm; any, in a build without ipsec-mb, whose GCM is always the
# nested default) is an xfail only where its report shows exactly it: every
# error an uninitialised value met in the nested default GCM's final (below gcm_evp.c's evp_finish) or in
# test_alloc_fail.c's compare of the tag that final handed back, nothing lost. Anything else fails.
ENGINES = ["aesni", "evp", "evp-gcm", "fakegpu"]
KNOWN_GCM_FINAL = "memcheck: uninitialised values in the nested default GCM's final on this release " \
    "(not with the default alone nor with gcm_evp.c at -O0; every input defined; cause open)"


def only_the_gcm_final_record(report):
    """True when memcheck's errors are all the recorded one (above) and there is at least one."""
    contexts = [c for c in re.split(r"^==\d+== ?$", report, flags=re.M) if re.search(r"^==\d+==    at ", c, re.M)]
    errors = [c for c in contexts if not re.search(r"are (definitely|indirectly|possibly) lost|still reachable", c)]
    return bool(errors) and all(
        re.search(r"^==\d+== (Conditional jump or move depends on|Use of) uninitialised value", c, re.M)
        and ("evp_finish (gcm_evp.c:" in c or "same (test_alloc_fail.c:" in c) for c in errors)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_leak_over_a_provider_life(openssl_env, engine):
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    if SANITIZER:
        pytest.skip(f"valgrind cannot run a {SANITIZER}-instrumented binary: the plain build is checked instead")
    if PROVIDER != "accelaes":
        pytest.skip("checks accelaes.so itself")
    if not BINARY.exists() or not MODULE.exists():
        pytest.skip(f"{BINARY} or {MODULE} is not built (run `make build-only`)")
    env = dict(openssl_env, ACCELAES_FORCE_EVP_ENGINE="1" if engine.startswith("evp") else "0",
               ACCELAES_SPLIT_MIN="16384")
    if engine == "fakegpu":
        if not FAKE.exists():
            pytest.skip(f"{FAKE} is not built (run `make build-only`)")
        env.update(ACCELAES_BACKEND="cuda", ACCELAES_GPU_MIN="16", ACCELAES_GPU_PLUGIN=str(FAKE))
    p = subprocess.run([valgrind, "--leak-check=full", "--show-leak-kinds=definite,indirect",
                        "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99", "--num-callers=40",
                        str(BINARY), "--plain", *(["--no-gcm"] if engine == "evp" else [])], env=env, capture_output=True, text=True, timeout=300)
    report = p.stderr
    lost = {kind: int(n.replace(",", "")) for kind, n in
            re.findall(r"(definitely|indirectly) lost: ([\d,]+) bytes", report)}
    assert re.search(r"^\d+ passed, 0 failed$", p.stdout, re.M), p.stdout[-3000:] + report[-3000:]
    assert lost.get("definitely") == 0 and lost.get("indirectly") == 0, report[-8000:]
    # any engine's GCM runs on the nested default where the build has no ipsec-mb GCM engine
    if "ERROR SUMMARY: 0 errors" not in report and only_the_gcm_final_record(report):
        pytest.xfail(KNOWN_GCM_FINAL)
    assert "ERROR SUMMARY: 0 errors" in report and p.returncode == 0, report[-8000:]
