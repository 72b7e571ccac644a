"""tests/unit/test_policy.py: the routing policy and the request helpers (build/tests/test_policy): the
thresholds of each path for each op made from the settings, the paths named around each threshold,
the IV at block k for every op, and the GPU ABI's operation numbers mapped both ways."""

from conftest import run_c_test


def test_policy_and_request_helpers(openssl_env):
    run_c_test("test_policy", openssl_env, timeout=60)
