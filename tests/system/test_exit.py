"""tests/system/test_exit.py: processes exit cleanly with a legacy ENGINE set as default beside accelaes (issue #12).
OPENSSL_cleanup frees the ENGINE lock (engine_cleanup_int) before it tears the configured providers down,
and ENGINE tables are process-wide: the CTR-DRBG in accelaes's private library context took its AES-256-CTR
from the ENGINE, and freeing it at teardown crashed (SIGSEGV) at exit. The engine is
build/accelaes-test-engine.so (tests/fake_engine.c: AES-128-CBC, AES-256-CTR and SHA-256, as OpenSSL's
dasync, which Debian does not ship). Checked: the openssl command with conf/accelaes.cnf, the statically
linked build/tests/test_exit_engine, and a process that unloads the module after it registered its exit
handler. OpenSSL 4.0 has no ENGINE API (nor OPENSSL_atexit): there only the unloading process runs."""
import ctypes
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, MODULE, PROVIDER, REPO, SANITIZER
from libcrypto import LIBCRYPTO

ENGINE = BUILD / "accelaes-test-engine.so"
CONF = REPO / "conf" / "accelaes.cnf"
STATIC = BUILD / "tests" / "test_exit_engine"


def engine_api_missing():
    """Why the running libcrypto cannot load the test engine, or None: OpenSSL 4.0 removed the ENGINE API
    (the Makefile then builds neither the engine nor test_exit_engine), asked of the library itself."""
    lib = ctypes.CDLL(LIBCRYPTO)
    if hasattr(lib, "ENGINE_by_id"):
        return None
    lib.OpenSSL_version.restype, lib.OpenSSL_version.argtypes = ctypes.c_char_p, [ctypes.c_int]
    return f"{lib.OpenSSL_version(0).decode()} has no ENGINE API ({LIBCRYPTO} has no ENGINE_by_id)"


@pytest.fixture
def module_env(openssl_env):
    if PROVIDER != "accelaes":
        pytest.skip("checks accelaes.so's own teardown")
    if not MODULE.exists():
        pytest.skip(f"{MODULE} is not built (run `make build-only`)")
    return dict(openssl_env, OPENSSL_CONF=str(CONF))


@pytest.fixture
def env(module_env):
    missing = engine_api_missing()
    if missing:
        pytest.skip(missing)
    for path in (ENGINE, STATIC):
        if not path.exists():
            pytest.skip(f"{path} is not built (run `make build-only`)")
    return module_env


def run_ok(args, env, data=None):
    p = subprocess.run([str(a) for a in args], env=env, input=data, capture_output=True, timeout=120)
    how = f"killed by {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit status {p.returncode}"
    shown = " ".join(str(a) for a in args)[:200]
    assert p.returncode == 0, f"{shown}: {how}\n{p.stderr.decode(errors='replace')[-3000:]}"
    return p


@pytest.mark.parametrize("engine_rand", ["0", "1"], ids=["ciphers-digest", "with-rand-method"])
def test_openssl_rand_with_engine(openssl_bin, env, engine_rand):
    p = run_ok([openssl_bin, "rand", "-engine", ENGINE, "-hex", "16"],
               dict(env, ACCELAES_TEST_ENGINE_RAND=engine_rand))
    assert re.fullmatch(rb"[0-9a-f]{32}\n", p.stdout), p.stdout
    assert b'Engine "accelaes-test" set.' in p.stderr


# `enc -engine` asks the engine itself for the cipher, so only the engine's (those two) can be named.
# -pbkdf2 draws a salt from the DRBG, so the private library context (and its ENGINE-served
# CTR-DRBG) exists at exit.
@pytest.mark.parametrize("cipher", ["aes-128-cbc", "aes-256-ctr"])
def test_openssl_enc_with_engine(openssl_bin, env, cipher):
    plain = bytes(range(256)) * 40 + b"tail"
    common = [openssl_bin, "enc", "-engine", ENGINE, f"-{cipher}", "-pbkdf2", "-pass", "pass:accelaes"]
    enc = run_ok(common, env, plain)
    assert enc.stdout.startswith(b"Salted__") and len(enc.stdout) >= len(plain)
    dec = run_ok(common + ["-d"], env, enc.stdout)
    assert dec.stdout == plain


@pytest.mark.parametrize("args", [[], ["--explicit-cleanup"]], ids=["return-from-main", "explicit-cleanup"])
def test_static_program_with_engine(env, args):
    p = run_ok([STATIC, *args], dict(env, ACCELAES_TEST_ENGINE=str(ENGINE)))
    assert re.search(rb"^\d+ passed, 0 failed$", p.stdout, re.M), p.stdout


# The exit handler lives in accelaes.so; the system libcrypto (linked -z nodelete) does not keep the
# module that registered one mapped, so the provider must: else unloading it leaves a dangling handler.
UNLOAD_SCRIPT = textwrap.dedent("""
    import ctypes, sys
    from ctypes import c_char_p, c_int, c_size_t, c_uint, c_void_p
    lib = ctypes.CDLL(sys.argv[1])
    for name, res, args in [
            ("OSSL_LIB_CTX_new", c_void_p, []), ("OSSL_LIB_CTX_free", None, [c_void_p]),
            ("OSSL_PROVIDER_load", c_void_p, [c_void_p, c_char_p]), ("OSSL_PROVIDER_unload", c_int, [c_void_p]),
            ("EVP_RAND_fetch", c_void_p, [c_void_p, c_char_p, c_char_p]), ("EVP_RAND_free", None, [c_void_p]),
            ("EVP_RAND_CTX_new", c_void_p, [c_void_p, c_void_p]), ("EVP_RAND_CTX_free", None, [c_void_p]),
            ("EVP_RAND_instantiate", c_int, [c_void_p, c_uint, c_int, c_void_p, c_size_t, c_void_p]),
            ("EVP_RAND_generate", c_int, [c_void_p, c_void_p, c_size_t, c_uint, c_int, c_void_p, c_size_t])]:
        getattr(lib, name).restype, getattr(lib, name).argtypes = res, args
    lc = lib.OSSL_LIB_CTX_new()
    prov = lib.OSSL_PROVIDER_load(lc, b"accelaes")
    rand = lib.EVP_RAND_fetch(lc, b"CTR-DRBG", b"provider=accelaes")
    ctx = lib.EVP_RAND_CTX_new(rand, None)
    buf = ctypes.create_string_buffer(32)
    ok = prov and ctx and lib.EVP_RAND_instantiate(ctx, 0, 0, None, 0, None) == 1 \\
        and lib.EVP_RAND_generate(ctx, buf, 32, 0, 0, None, 0) == 1
    lib.EVP_RAND_CTX_free(ctx)
    lib.EVP_RAND_free(rand)
    ok = ok and lib.OSSL_PROVIDER_unload(prov) == 1
    lib.OSSL_LIB_CTX_free(lc)
    print("generated and unloaded" if ok else "FAILED")
    sys.exit(0 if ok else 1)
""")


def test_unloaded_module_exits_cleanly(module_env):
    p = run_ok([sys.executable, "-c", UNLOAD_SCRIPT, LIBCRYPTO], dict(module_env, OPENSSL_CONF="/dev/null"))
    assert p.stdout.strip() == b"generated and unloaded"


def test_static_program_leaks_nothing(env):
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    if SANITIZER:
        pytest.skip(f"valgrind cannot run a {SANITIZER}-instrumented binary: the plain build is checked instead")
    p = subprocess.run([valgrind, "--leak-check=full", "--show-leak-kinds=definite,indirect",
                        "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99", "--num-callers=40",
                        str(STATIC)], env=dict(env, ACCELAES_TEST_ENGINE=str(ENGINE)),
                       capture_output=True, text=True, timeout=300)
    report = p.stderr
    assert re.search(r"^\d+ passed, 0 failed$", p.stdout, re.M), p.stdout[-3000:] + report[-3000:]
    assert "definitely lost: 0 bytes" in report or "no leaks are possible" in report, report[-8000:]
    assert "ERROR SUMMARY: 0 errors" in report and p.returncode == 0, report[-8000:]
