"""tests/unit/test_engine_c.py: the inline AES engines through their C tests.

build/tests/test_engine: accel/cpu/aesni.c (with and without VAES) and accel/cpu/evp_engine.c against
OpenSSL's default provider: published vectors, random comparison, CTR carries, chaining, the interface's
other promises; build/tests/test_engine_threads: shared keys across threads, fork while threads hold a
key. In both, no engine call reports failure.

build/tests/test_engine_fail: failures inside the nested-EVP engine (the engine of CPUs without
AES-NI), injected by EVP_CipherUpdate / EVP_CipherInit_ex2 defined in the test binary itself (no hook
in the module): every block function returns 0 with its output wiped and its IV untouched, and every
EVP call through the provider (update, final, EVP_Cipher, TLS records, split pieces failing on a pool
thread) then fails with accelaes's ACC_R_ENGINE_FAILURE, raised once.

build/tests/test_engine_fail_aead: the same fault in the nested-EVP GCM engine (gcm_evp.c) and XTS
(evp_engine.c): the update fails with an error, its output wiped; GCM raises ACC_R_ENGINE_FAILURE once,
its message ends (final fails, no tag handed out); the next message or unit is right.

build/tests/test_vreg_residue: after every block mode and XTS, at lengths on both sides of each engine's
short-unit switch, on every engine this CPU has, no vector register holds a round key of either key
(docs/SECURITY.md: the next xsave would write it to the stack)."""

from conftest import run_c_test


def test_engines_against_openssl(openssl_env, seed):
    run_c_test("test_engine", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)), timeout=300)


def test_engines_shared_key_threads_and_fork(openssl_env, seed):
    run_c_test("test_engine_threads", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)), timeout=300)


def test_nested_evp_engine_failures(openssl_env):
    # the binary sets ACCELAES_FORCE_EVP_ENGINE=1 and its split settings itself
    run_c_test("test_engine_fail", openssl_env, timeout=300)


def test_nested_evp_gcm_xts_engine_failures(openssl_env):
    run_c_test("test_engine_fail_aead", openssl_env, timeout=300)


def test_no_round_key_left_in_vector_registers(openssl_env, seed):
    run_c_test("test_vreg_residue", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)), timeout=300)
