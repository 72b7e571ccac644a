"""tests/system/test_openvpn.py: OpenVPN 2.6 (Debian's, unmodified) with and without conf/accelaes.cnf:
its crypto self-test (`--test-crypto`: every packet length encrypted, decrypted and compared) with
AES-256-GCM and with AES-128-CBC + HMAC-SHA256, and two peers in two network namespaces moving a
payload through real tun devices (skipped, saying why, where the machine gives no tun device or
namespaces). With accelaes, accelaes-stat must count at least the bytes put through the cipher;
without it, nothing. tests/ovpnlib.py has the set-up."""

import os
import secrets

import pytest

from conftest import CONF, MODULE, SANITIZER, STAT_TOOL, stat_total
from test_real_programs import need
import ovpnlib as ov

pytestmark = pytest.mark.skipif(not MODULE.exists() or not STAT_TOOL.exists(),
                                reason=f"{MODULE} or {STAT_TOOL} missing: run make (or install the package)")


@pytest.fixture(params=["default", "accelaes"])
def vpn_env(request, openssl_env, shm_name):
    need((ov.OPENVPN, "openvpn"))
    env = {k: v for k, v in openssl_env.items() if k != "OPENSSL_CONF"}
    env["ACCELAES_SHM_NAME"] = f"{shm_name}-vpn-{secrets.token_hex(4)}"
    if request.param == "accelaes":
        env["OPENSSL_CONF"] = str(CONF)
    return env


def check_counted(env, moved, what):
    got = stat_total(env)
    if "OPENSSL_CONF" in env:
        assert got >= moved, f"{what}: accelaes counted {got} of the {moved} bytes"
    else:
        assert got == 0, f"{what} without accelaes: {got} bytes counted, the reference run was not one"


@pytest.mark.parametrize("mode", sorted(ov.DATA_CHANNELS))
def test_openvpn_test_crypto(vpn_env, mode, tmp_path):
    moved, _ = ov.self_test(vpn_env, ov.genkey(tmp_path), mode)
    check_counted(vpn_env, moved, f"openvpn --test-crypto ({mode})")


@pytest.fixture(scope="module")
def tun_ok():
    why = ov.tun_unavailable()
    if why:
        pytest.skip(f"two OpenVPN peers need tun devices in network namespaces: {why}")


TUN_SIZE = ((2 if SANITIZER else 8) << 20) + 4099   # under a sanitizer the point is memory use, not volume


@pytest.mark.parametrize("mode", sorted(ov.DATA_CHANNELS))
def test_openvpn_tun_pair(tun_ok, vpn_env, mode, tmp_path):
    pair = ov.TunPair(tmp_path, mode)
    try:
        pair.start(vpn_env)
        src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
        src.write_bytes(os.urandom(TUN_SIZE))
        pair.send(src, dst)
        assert dst.read_bytes() == src.read_bytes(), "the payload received through the tunnel differs"
        logs = pair.logs()
        cipher = ov.DATA_CHANNELS[mode][1]
        assert logs.count(f"Data Channel: cipher '{cipher}'") == 2, logs
        pair.stop()
    finally:
        pair.cleanup()
    # a encrypts every byte and b decrypts it (plus TCP/IP headers and acknowledgements)
    check_counted(vpn_env, 2 * TUN_SIZE, f"openvpn tun pair ({mode})")
