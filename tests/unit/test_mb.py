"""tests/unit/test_mb.py: the multi-buffer engine and async batching, through their C tests:
build/tests/test_mb (accel/cpu/mb.c against OpenSSL: random mixes of ops, key sizes, IVs and
lengths, >= 64 KiB pieces, CTR carries, in place), build/tests/test_async_batch (provider/route/batch.c
driven by ASYNC jobs: random job mixes, what is never taken, ASYNC_block_pause),
build/tests/test_async_wait (the wait fd, edge-triggered epoll, timeouts, fork while queued) and
build/tests/test_async_provider (ASYNC jobs encrypting through build/accelaes.so)."""

import pytest

from conftest import MODULE, run_c_test


@pytest.mark.parametrize("name", ["test_mb", "test_async_batch", "test_async_wait"])
def test_c(name, openssl_env, seed):
    env = dict(openssl_env, TEST_SEED=str(seed))
    run_c_test(name, env)


@pytest.mark.parametrize("force_evp", ["0", "1"])
def test_async_jobs_through_provider(openssl_env, seed, force_evp):
    # With the nested-EVP engine forced, the key schedule is not in the lanes' layout: the
    # batch must decline, and the output must still be right.
    if not MODULE.exists():
        pytest.skip(f"{MODULE} is not built (run `make build-only`)")
    env = dict(openssl_env, TEST_SEED=str(seed), ACCELAES_FORCE_EVP_ENGINE=force_evp)
    run_c_test("test_async_provider", env)
