"""tests/conformance/test_drbg_source.py: with accelaes in the configuration, the DRBGs and every RAND fetch
come from the provider that would serve them without accelaes (default), whatever
default_properties prefers; accelaes's delegate serves only a library context where no other
provider offers a RAND (`openssl speed -provider accelaes` alone), and steps aside as soon as one
is loaded there."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD
from libcrypto import LIBCRYPTO

ROOT = Path(__file__).resolve().parent.parent.parent
CONF = ROOT / "conf" / "accelaes.cnf"

needs_module = pytest.mark.skipif(not (BUILD / "accelaes.so").exists(),
                                  reason="build/accelaes.so not built yet: run make")

# Run in a child: OPENSSL_CONF is read once, at libcrypto's initialisation.
PROBE = r'''
import ctypes, sys
from ctypes import c_void_p, c_char_p, c_int, c_size_t
L = ctypes.CDLL(sys.argv[2])
def f(name, res, args):
    fn = getattr(L, name); fn.restype = res; fn.argtypes = args; return fn
rand_fetch = f("EVP_RAND_fetch", c_void_p, [c_void_p, c_char_p, c_char_p])
rand_prov = f("EVP_RAND_get0_provider", c_void_p, [c_void_p])
rand_free = f("EVP_RAND_free", None, [c_void_p])
ctx_rand = f("EVP_RAND_CTX_get0_rand", c_void_p, [c_void_p])
prov_name = f("OSSL_PROVIDER_get0_name", c_char_p, [c_void_p])
prov_load = f("OSSL_PROVIDER_load", c_void_p, [c_void_p, c_char_p])
libctx_new = f("OSSL_LIB_CTX_new", c_void_p, [])
rand_bytes = f("RAND_bytes_ex", c_int, [c_void_p, c_void_p, c_size_t, ctypes.c_uint])
getters = {g: f("RAND_get0_" + g, c_void_p, [c_void_p]) for g in ("primary", "public", "private")}

def fetched(lc, name, propq=None):
    r = rand_fetch(lc, name, propq)
    if not r:
        return "none"
    n = prov_name(rand_prov(r)).decode()
    rand_free(r)
    return n

buf = ctypes.create_string_buffer(64)
if sys.argv[1] == "config":
    assert rand_bytes(None, buf, 64, 0) == 1
    for g, get in getters.items():
        print(g, prov_name(rand_prov(ctx_rand(get(None)))).decode())
    print("fetch", fetched(None, b"CTR-DRBG"))
    print("fetch-accelaes", fetched(None, b"CTR-DRBG", b"provider=accelaes"))
else:
    lc = libctx_new()
    assert prov_load(lc, b"accelaes")
    print("alone", fetched(lc, b"CTR-DRBG"))
    assert rand_bytes(lc, buf, 64, 0) == 1 and buf.raw != bytes(64)
    print("alone-primary", prov_name(rand_prov(ctx_rand(getters["primary"](lc)))).decode())
    assert prov_load(lc, b"default")
    print("then-default", fetched(lc, b"CTR-DRBG"))
'''


def probe(mode, env):
    out = subprocess.run([sys.executable, "-c", PROBE, mode, LIBCRYPTO], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.split("\n") if line)


@needs_module
def test_config_leaves_drbgs_to_default(openssl_env):
    env = dict(openssl_env, OPENSSL_CONF=str(CONF), OPENSSL_MODULES=str(BUILD))
    got = probe("config", env)
    for g in ("primary", "public", "private", "fetch"):
        assert got[g] == "default", (g, got)
    # asked for by name, accelaes still has none to give while default offers one
    assert got["fetch-accelaes"] == "none", got


@needs_module
def test_delegate_serves_only_when_alone(openssl_env):
    env = dict(openssl_env, OPENSSL_MODULES=str(BUILD))
    env.pop("OPENSSL_CONF", None)
    got = probe("alone", env)
    assert got == {"alone": "accelaes", "alone-primary": "accelaes", "then-default": "default"}, got
