"""tests/system/test_servers.py: servers operators run, unmodified from Debian, as real TLS servers on
127.0.0.1 (tests/serverlib.py): PostgreSQL (psql \\copy over TLS 1.3 GCM and TLS 1.2 AES128-SHA),
Redis (redis-cli SET/GET over TLS 1.3 and 1.2), stunnel (TLS 1.3, TLS 1.2 CBC with and without
encrypt-then-MAC, TLS 1.2 GCM) and mosquitto (publish/subscribe over TLS 1.3 and 1.2).

Each runs once on OpenSSL's default provider and once with conf/accelaes.cnf (OPENSSL_CONF), with a
segment name of its own: with accelaes, accelaes-stat must count at least the payload bytes that
crossed TLS (so the provider was loaded and did the work); without it, nothing may be counted (the
run really was the reference). The clients stay on the default provider; every payload comes back
identical. OpenVPN is tests/system/test_openvpn.py."""

import os
import secrets

import pytest

from conftest import CONF, MODULE, SANITIZER, STAT_TOOL
from test_real_programs import counted, need
import serverlib as sl

pytestmark = pytest.mark.skipif(not MODULE.exists() or not STAT_TOOL.exists(),
                                reason=f"{MODULE} or {STAT_TOOL} missing: run make (or install the package)")
# Under a sanitizer (make test's second pass) the point is accelaes's memory use, not volume: a quarter
MIB = (1 << 20) // (4 if SANITIZER else 1)


@pytest.fixture(params=["default", "accelaes"])
def server_env(request, openssl_env, shm_name):
    """The server's environment: with or without conf/accelaes.cnf, and a fresh segment name."""
    env = {k: v for k, v in openssl_env.items() if k != "OPENSSL_CONF"}
    env["ACCELAES_SHM_NAME"] = f"{shm_name}-srv-{secrets.token_hex(4)}"
    if request.param == "accelaes":
        env["OPENSSL_CONF"] = str(CONF)
    return env


def check_counted(server, env, moved, what):
    """After the server stopped (every process exited, so every counter is published)."""
    got = counted(env, server.uid())
    if "OPENSSL_CONF" in env:
        assert got >= moved, f"{what}: accelaes counted {got} of the {moved} bytes the server moved\n{server.log()}"
    else:
        assert got == 0, f"{what} without accelaes: {got} bytes counted, the reference run was not one"


def stopped_cleanly(server):
    rc = server.stop()
    assert rc == 0, f"{server.name} exited {rc}\n{server.log()}"


@pytest.fixture
def postgres():
    need((sl.POSTGRES, "postgresql"), (sl.INITDB, "postgresql"), (sl.PSQL, "postgresql-client"),
         (sl.OPENSSL, "openssl"))
    if SANITIZER == "asan":
        pytest.skip("postgres hangs at start-up with libasan preloaded, in glibc's bindtextdomain() "
                    "(_nl_state_lock), before it loads OpenSSL: the plain suite runs it")
    server = sl.Postgres()
    try:
        yield server
    finally:
        server.cleanup()


def test_postgres_copy(postgres, server_env):
    postgres.start(server_env)
    data = sl.text_payload(3 * MIB + 4321)
    moved = 0
    for maxproto, want in (("TLSv1.3", "TLSv1.3 TLS_AES_256_GCM_SHA384"), ("TLSv1.2", "TLSv1.2 AES128-SHA")):
        used, n = postgres.copy_both_ways(maxproto, data, maxproto[-1])
        assert used == want, f"psql over {maxproto}: pg_stat_ssl says {used!r}"
        moved += n
    stopped_cleanly(postgres)
    check_counted(postgres, server_env, moved, "PostgreSQL \\copy")


@pytest.fixture
def redis():
    need((sl.REDIS_SERVER, "redis-server"), (sl.REDIS_CLI, "redis-tools"), (sl.OPENSSL, "openssl"))
    server = sl.Redis()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.mark.parametrize("proto", ["TLSv1.3", "TLSv1.2"])
def test_redis_set_get(redis, server_env, proto):
    # the server offers one protocol (and for 1.2 one suite, serverlib.REDIS_TLS12): a connection is one of those
    redis.start(server_env, proto)
    data = os.urandom(3 * MIB + 77)
    moved = redis.set_get(data)
    stopped_cleanly(redis)
    check_counted(redis, server_env, moved, f"redis-cli over {proto}")


STUNNEL_CASES = {  # id: (protocol, TLS 1.2 suites, encrypt-then-MAC)
    "tls13": ("TLSv1.3", None, True),
    "tls12-cbc-etm": ("TLSv1.2", "ECDHE-RSA-AES128-SHA256", True),
    "tls12-cbc-no-etm": ("TLSv1.2", "AES128-SHA", False),    # MAC-then-encrypt: the stitched cipher
    "tls12-gcm": ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384", True),
}


@pytest.fixture
def stunnel():
    need((sl.STUNNEL, "stunnel4"), (sl.OPENSSL, "openssl"))
    server = sl.Stunnel()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.mark.parametrize("case", sorted(STUNNEL_CASES))
def test_stunnel_echo(stunnel, server_env, case):
    proto, ciphers, etm = STUNNEL_CASES[case]
    stunnel.start(server_env, proto, ciphers, etm)
    data = os.urandom(4 * MIB + 999)
    version, cipher, moved = stunnel.echo_through(data, ciphers)
    assert version == proto, f"{case}: negotiated {version}"
    if ciphers:
        assert cipher == ciphers, f"{case}: negotiated {cipher}"
    else:
        assert cipher.startswith("TLS_AES_"), f"{case}: negotiated {cipher}"
    stopped_cleanly(stunnel)
    check_counted(stunnel, server_env, moved, f"stunnel {case}")


@pytest.fixture
def mosquitto():
    need((sl.MOSQUITTO, "mosquitto"), (sl.MOSQ_PUB, "mosquitto-clients"), (sl.MOSQ_SUB, "mosquitto-clients"),
         (sl.OPENSSL, "openssl"))
    server = sl.Mosquitto()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.mark.parametrize("version,ciphers", [("tlsv1.3", None), ("tlsv1.2", "ECDHE-RSA-AES256-SHA384")])
def test_mosquitto_pub_sub(mosquitto, server_env, version, ciphers):
    mosquitto.start(server_env, version, ciphers)
    data = os.urandom(2 * MIB + 5)
    moved = mosquitto.pub_sub(data, version)
    stopped_cleanly(mosquitto)
    check_counted(mosquitto, server_env, moved, f"mosquitto over {version}")
