"""tests/system/test_process_models.py: accelaes in the process models real programs use (issue #12).
build/tests/test_seccomp_child: a forked child in an OpenSSH-like seccomp sandbox (kill on any
call outside a short list) runs every cipher from 16 B to 1 MiB, async CBC-encrypt, a failing
call and exit, and its bytes reach the shared counters; once with files refused (EACCES, as
OpenSSH does) and once with files readable (the provider then sees the filter itself); and the
loading process itself under a filter that refuses with EPERM (threads, eventfd: work goes inline).
build/tests/test_fork_locks: every registered mutex held by another thread across fork, and
children raising provider errors while other threads raise them too.
build/tests/test_async_free: a context freed (or re-initialised) while its request waits in a
paused async job's batch; under scripts/ci/sanitize.sh asan this runs against the ASan build."""

import pytest

from conftest import MODULE, require_lanes, run_c_test


@pytest.fixture
def module_env(openssl_env):
    if not MODULE.exists():
        pytest.skip(f"{MODULE} is not built (run `make build-only`)")
    return openssl_env


@pytest.mark.parametrize("mode", ["files-refused", "files-readable", "errno-self"])
def test_sandboxed_child(module_env, mode):
    # errno-self: no fork; the loading process itself refuses (EPERM) what it does not list, so
    # the split path's threads and the batch's eventfd are refused and the work runs inline,
    # right, and without a word on stderr.
    run_c_test("test_seccomp_child", module_env, args=[mode] if mode != "files-refused" else [],
               quiet=True)


def test_fork_with_every_lock_held(openssl_env):
    run_c_test("test_fork_locks", openssl_env)


@pytest.mark.parametrize("cipher", ["AES-128-CBC", "AES-128-CBC-HMAC-SHA1"])
def test_free_while_waiting_in_a_paused_job(module_env, cipher):
    require_lanes()   # the job pauses in the multi-buffer batch
    run_c_test("test_async_free", module_env, args=[cipher])
