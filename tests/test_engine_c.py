"""tests/test_engine_c.py: the inline AES engines through their C tests.

build/tests/test_engine: accel/cpu/aesni.c (with and without VAES) and accel/cpu/evp_engine.c against
OpenSSL's default provider: published vectors, random comparison, CTR carries, chaining, shared keys
across threads, fork while threads hold a key; and no engine call reports failure.

build/tests/test_engine_fail: failures inside the nested-EVP engine (the engine of CPUs without
AES-NI), injected by EVP_CipherUpdate / EVP_CipherInit_ex2 defined in the test binary itself (no hook
in the module): every block function returns 0 with its output wiped and its IV untouched, and every
EVP call through the provider (update, final, EVP_Cipher, TLS records, split pieces failing on a pool
thread) then fails with accelaes's ACC_R_ENGINE_FAILURE, raised once."""

import subprocess

import pytest

from conftest import BUILD


def run(name, env):
    path = BUILD / "tests" / name
    if not path.exists():
        pytest.skip(f"{path} is not built (run `make build-only`)")
    p = subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=300)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines and lines[-1].endswith(" passed, 0 failed") \
        and not lines[-1].startswith("0 "), p.stdout[-3000:] + p.stderr[-2000:]


def test_engines_against_openssl(openssl_env, seed):
    run("test_engine", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)))


def test_nested_evp_engine_failures(openssl_env):
    # the binary sets ACCELAES_FORCE_EVP_ENGINE=1 and its split settings itself
    run("test_engine_fail", openssl_env)
