"""tests/conformance/test_skey.py: opaque keys (EVP_SKEY, OpenSSL 3.5+) with accelaes configured as a system would have
it (conf/accelaes.cnf): an application imports a raw AES key once and encrypts and decrypts with it from
several contexts and threads; every byte must equal the default provider's and a plain raw-key init's,
accelaes must have served the cipher and the key (and counted the bytes: build/accelaes-stat), and keys
must move between accelaes and the default provider (EVP_SKEY_to_provider) both ways. On a libcrypto
without EVP_SKEY (3.0) the provider must not offer a key management at all."""

import ctypes
import os

import pytest

import evp
from conftest import MODULES, REPO, private_segment, stat_total

pytestmark = pytest.mark.usefixtures("require_provider")

OSSL_OP_SKEYMGMT = 15
SKEY_RELEASE = 0x30500000


def running_version():
    lib = ctypes.CDLL(os.environ.get("ACCELAES_TEST_LIBCRYPTO", "libcrypto.so.3"))
    lib.OpenSSL_version_num.restype = ctypes.c_ulong
    return lib.OpenSSL_version_num()


@pytest.fixture
def conf_env(openssl_env):
    """A process configured by conf/accelaes.cnf, with a segment of this test's own."""
    env = dict(openssl_env, OPENSSL_CONF=str(REPO / "conf" / "accelaes.cnf"), OPENSSL_MODULES=str(MODULES))
    yield from private_segment(env, "skey")


QUERY_SKEYMGMT = f'''
import ctypes
from libcrypto import _lib as L
L.OSSL_PROVIDER_load.restype = ctypes.c_void_p
L.OSSL_PROVIDER_load.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
L.OSSL_PROVIDER_query_operation.restype = ctypes.c_void_p
L.OSSL_PROVIDER_query_operation.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
names = {{}}
for name in ("default", "accelaes"):
    prov = L.OSSL_PROVIDER_load(None, name.encode())
    nc = ctypes.c_int(0)
    algs = L.OSSL_PROVIDER_query_operation(prov, {OSSL_OP_SKEYMGMT}, ctypes.byref(nc))
    first = ctypes.cast(algs, ctypes.POINTER(ctypes.c_char_p))[0] if algs else None
    names[name] = [n for n in (first or b"").decode().split(":") if n]
emit(names)
'''


def test_skeymgmt_offered_only_where_libcrypto_has_skey(conf_env):
    """accelaes answers the key-management query exactly where the running libcrypto has opaque keys,
    decided at run time: on 3.0 nothing (its operation 15 is no key management), on 3.5+ "AES" as the
    default provider names its own."""
    rc, results, stderr = evp.run_isolated(QUERY_SKEYMGMT, env=conf_env)
    assert rc == 0 and results, stderr[-2000:]
    names = results[-1]
    if running_version() < SKEY_RELEASE:
        assert names["accelaes"] == [], f"accelaes offers a key management to a 3.0 libcrypto: {names}"
        return
    assert "AES" in names["default"], f"the default provider's first key management: {names}"
    assert names["accelaes"] == ["AES", "2.16.840.1.101.3.4.1"], names


# The workload, run in a child configured by conf/accelaes.cnf: everything through the default library context,
# as an application written for 3.5 does it.
WORKLOAD = r'''
import ctypes, os, threading
from ctypes import c_void_p, c_char_p, c_int, c_size_t, POINTER, byref
from libcrypto import _lib as L
import libcrypto

def proto(name, res, args):
    f = getattr(L, name); f.restype = res; f.argtypes = args; return f

skey_import = proto("EVP_SKEY_import_raw_key", c_void_p, [c_void_p, c_char_p, c_char_p, c_size_t, c_char_p])
skey_free = proto("EVP_SKEY_free", None, [c_void_p])
skey_prov = proto("EVP_SKEY_get0_provider_name", c_char_p, [c_void_p])
skey_raw = proto("EVP_SKEY_get0_raw_key", c_int, [c_void_p, POINTER(c_void_p), POINTER(c_size_t)])
skey_to = proto("EVP_SKEY_to_provider", c_void_p, [c_void_p, c_void_p, c_void_p, c_char_p])
init_skey = proto("EVP_CipherInit_SKEY", c_int, [c_void_p, c_void_p, c_void_p, c_char_p, c_size_t, c_int, c_void_p])
init_raw = proto("EVP_CipherInit_ex2", c_int, [c_void_p, c_void_p, c_char_p, c_char_p, c_int, c_void_p])
fetch = proto("EVP_CIPHER_fetch", c_void_p, [c_void_p, c_char_p, c_char_p])
cprov = proto("EVP_CIPHER_get0_provider", c_void_p, [c_void_p])
pname = proto("OSSL_PROVIDER_get0_name", c_char_p, [c_void_p])
ctx_new = proto("EVP_CIPHER_CTX_new", c_void_p, [])
ctx_free = proto("EVP_CIPHER_CTX_free", None, [c_void_p])
ctx_copy = proto("EVP_CIPHER_CTX_copy", c_int, [c_void_p, c_void_p])
ctrl = proto("EVP_CIPHER_CTX_ctrl", c_int, [c_void_p, c_int, c_int, c_void_p])
update = proto("EVP_CipherUpdate", c_int, [c_void_p, c_char_p, POINTER(c_int), c_char_p, c_int])
final = proto("EVP_CipherFinal_ex", c_int, [c_void_p, c_char_p, POINTER(c_int)])
GET_TAG, SET_TAG = 0x10, 0x11

CIPHERS = [f"AES-{b}-{m}" for m in ("ECB", "CBC", "CTR") for b in (128, 192, 256)]
CIPHERS += ["AES-128-GCM", "AES-256-GCM", "AES-128-XTS"]
KEYLEN = {n: (32 if n.endswith("XTS") else int(n[4:7]) // 8) for n in CIPHERS}
IVLEN = {n: (0 if n.endswith("ECB") else 12 if n.endswith("GCM") else 16) for n in CIPHERS}
THREADS, CTXS = 4, 3
SIZE = 3 * 65536 + 17

def fail(msg):
    raise AssertionError(msg + " " + repr(libcrypto.drain_errors()))

def run(ctx, data, enc, aead, tag=None, chunks=3):
    """update in chunks (one for XTS), then final; returns (bytes, tag)."""
    out = ctypes.create_string_buffer(len(data) + 32)
    pos, n = 0, c_int(0)
    step = -(-len(data) // chunks)
    if aead and not enc:
        ctrl(ctx, SET_TAG, 16, ctypes.c_char_p(tag))
    for off in range(0, len(data), step):
        piece = data[off:off + step]
        if not update(ctx, ctypes.cast(ctypes.addressof(out) + pos, c_char_p), byref(n), piece, len(piece)):
            fail("update")
        pos += n.value
    if not final(ctx, ctypes.cast(ctypes.addressof(out) + pos, c_char_p), byref(n)):
        fail("final")
    pos += n.value
    t = None
    if aead and enc:
        tb = ctypes.create_string_buffer(16)
        if not ctrl(ctx, GET_TAG, 16, tb):
            fail("get tag")
        t = tb.raw
    return out.raw[:pos], t

def raw_crypt(cipher, key, iv, data, enc, tag=None, aead=False, chunks=3):
    ctx = ctx_new()
    if not init_raw(ctx, cipher, key, iv or None, enc, None):
        fail("raw init")
    r = run(ctx, data, enc, aead, tag, chunks)
    ctx_free(ctx)
    return r

report = {"skey_bytes": 0, "ciphers": {}}
for name in CIPHERS:
    aead, chunks = name.endswith("GCM"), (1 if name.endswith("XTS") else 3)
    key = os.urandom(KEYLEN[name])
    iv = os.urandom(IVLEN[name])
    data = os.urandom(SIZE)
    default = fetch(None, name.encode(), b"provider=default")
    chosen = fetch(None, name.encode(), None)      # what the configuration prefers
    assert pname(cprov(chosen)) == b"accelaes", f"{name} came from {pname(cprov(chosen))}"
    ref, ref_tag = raw_crypt(default, key, iv, data, 1, aead=aead, chunks=chunks)
    acc, acc_tag = raw_crypt(chosen, key, iv, data, 1, aead=aead, chunks=chunks)
    assert (acc, acc_tag) == (ref, ref_tag), f"{name}: accelaes raw-key init differs from the default"

    skey = skey_import(None, b"AES", key, len(key), None)
    if not skey:
        fail(f"{name}: EVP_SKEY_import_raw_key")
    assert skey_prov(skey) == b"accelaes", f"the AES key came from {skey_prov(skey)}"
    p, n = c_void_p(), c_size_t()
    assert skey_raw(skey, byref(p), byref(n)) and ctypes.string_at(p, n.value) == key, "export of the raw bytes"

    errors = []
    def worker(t):
        try:
            ctxs = []
            for i in range(CTXS):
                c = ctx_new()
                if not init_skey(c, chosen, skey, iv or None, len(iv), 1, None):
                    fail(f"{name}: EVP_CipherInit_SKEY in thread {t}")
                if i == CTXS - 1:                 # a copy shares the key with the original, which goes first
                    d = ctx_new()
                    if not ctx_copy(d, c):
                        fail("copy")
                    ctx_free(c)
                    c = d
                ctxs.append(c)
            for c in ctxs:
                out, tag = run(c, data, 1, aead, chunks=chunks)
                if (out, tag) != (ref, ref_tag):
                    errors.append(f"{name}: thread {t}: skey encryption differs from the default's")
                ctx_free(c)
            c = ctx_new()
            if not init_skey(c, chosen, skey, iv or None, len(iv), 0, None):
                fail(f"{name}: EVP_CipherInit_SKEY decrypt")
            back, _ = run(c, ref, 0, aead, ref_tag, chunks)
            ctx_free(c)
            if back != data:
                errors.append(f"{name}: thread {t}: skey decryption did not give the plaintext back")
        except AssertionError as e:
            errors.append(str(e))
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    [th.start() for th in threads]
    [th.join() for th in threads]
    assert not errors, errors

    # the key may go while a context still uses it: the context keeps its schedule
    c = ctx_new()
    if not init_skey(c, chosen, skey, iv or None, len(iv), 1, None):
        fail("init before free")
    skey_free(skey)
    out, tag = run(c, data, 1, aead, chunks=chunks)
    ctx_free(c)
    assert (out, tag) == (ref, ref_tag), f"{name}: a context outliving its EVP_SKEY differs"
    report["skey_bytes"] += SIZE * (THREADS * (CTXS + 1) + 1)

    # between providers, both ways: a default key moved to accelaes, an accelaes key moved to the default
    dkey = skey_import(None, b"AES", key, len(key), b"provider=default")
    moved = skey_to(dkey, None, cprov(chosen), None)
    back = skey_to(moved, None, cprov(default), None) if moved else None
    if not moved or not back:
        fail(f"{name}: EVP_SKEY_to_provider")
    assert skey_prov(moved) == b"accelaes" and skey_prov(back) == b"default", (skey_prov(moved), skey_prov(back))
    for cipher, k in ((chosen, moved), (default, back)):
        c = ctx_new()
        if not init_skey(c, cipher, k, iv or None, len(iv), 1, None):
            fail(f"{name}: init with a key moved to {pname(cprov(cipher))}")
        out, tag = run(c, data, 1, aead, chunks=chunks)
        ctx_free(c)
        assert (out, tag) == (ref, ref_tag), f"{name}: a moved key to {pname(cprov(cipher))} differs"
    report["skey_bytes"] += SIZE
    for k in (dkey, moved, back):
        skey_free(k)
    report["ciphers"][name] = "ok"
emit(report)
'''


def test_skey_shared_across_contexts_and_threads(conf_env):
    if running_version() < SKEY_RELEASE:
        pytest.skip(f"the running libcrypto ({running_version():#x}) has no EVP_SKEY: opaque keys came in 3.5")
    before = stat_total(conf_env)
    rc, results, stderr = evp.run_isolated(WORKLOAD, env=conf_env, timeout=300)
    assert rc == 0 and results, f"rc={rc}: {stderr[-3000:]}"
    report = results[-1]
    assert len(report["ciphers"]) == 12, report
    done = stat_total(conf_env) - before
    # accelaes did at least the opaque-key work (its raw-key references come on top)
    assert done >= report["skey_bytes"], f"accelaes-stat counted {done} bytes, the skey work was {report['skey_bytes']}"


# The ctypes set-up the child scripts below share.
SKEY_CALLS = r'''
import ctypes
from ctypes import c_void_p, c_char_p, c_int, c_size_t
from libcrypto import _lib as L
import libcrypto
def proto(name, res, args):
    f = getattr(L, name); f.restype = res; f.argtypes = args; return f
skey_import = proto("EVP_SKEY_import_raw_key", c_void_p, [c_void_p, c_char_p, c_char_p, c_size_t, c_char_p])
init_skey = proto("EVP_CipherInit_SKEY", c_int, [c_void_p, c_void_p, c_void_p, c_char_p, c_size_t, c_int, c_void_p])
fetch = proto("EVP_CIPHER_fetch", c_void_p, [c_void_p, c_char_p, c_char_p])
ctx_new = proto("EVP_CIPHER_CTX_new", c_void_p, [])
'''

MISUSE = SKEY_CALLS + r'''
out = {}
for prov in ("default", "accelaes"):
    q = f"provider={prov}".encode()
    libcrypto.drain_errors()
    bad = skey_import(None, b"AES", b"x" * 20, 20, q)
    errs = [e.reason for e in libcrypto.drain_errors()]
    key16 = skey_import(None, b"AES", b"k" * 16, 16, q)
    c = ctx_new()
    ok = init_skey(c, fetch(None, b"AES-256-CBC", q), key16, b"i" * 16, 16, 1, None)
    out[prov] = {"bad_import": bool(bad), "import_errors": errs, "wrong_length_init": ok,
                 "init_errors": [e.reason for e in libcrypto.drain_errors()]}
emit(out)
'''


def test_skey_refusals_as_default(conf_env):
    """A 20-byte AES key is refused at import, a 16-byte key by AES-256-CBC's init: as the default does."""
    if running_version() < SKEY_RELEASE:
        pytest.skip(f"the running libcrypto ({running_version():#x}) has no EVP_SKEY: opaque keys came in 3.5")
    rc, results, stderr = evp.run_isolated(MISUSE, env=conf_env)
    assert rc == 0 and results, stderr[-2000:]
    got = results[-1]
    assert got["accelaes"] == got["default"], got
    assert not got["default"]["bad_import"] and not got["default"]["wrong_length_init"], got


def test_skey_schedule_made_once_and_shared(openssl_env):
    """build/tests/test_skey_share: the contexts given one key read its one schedule (skey init, dupctx,
    decryption), hold a reference each, let it go on a raw key or free, outlive the EVP_SKEY; any OpenSSL 3."""
    from conftest import run_c_test
    run_c_test("test_skey_share", openssl_env)


INIT_ANY = SKEY_CALLS + r'''
key = skey_import(None, b"AES", b"k" * 16, 16, None)
out = {}
for name in NAMES:
    c = fetch(None, name.encode(), None)
    # CCM's IV is 15 - L bytes (7 by default), not the cipher's reported 12
    ok = bool(c) and init_skey(ctx_new(), c, key, b"i" * 16, 12 if "GCM" in name or "OCB" in name else 7
                               if "CCM" in name else 8 if "WRAP" in name else 0 if "ECB" in name else 16, 1, None)
    out[name] = [bool(ok), [e.reason for e in libcrypto.drain_errors()]]
emit(out)
'''
SERVED = ["AES-128-ECB", "AES-128-CBC", "AES-128-CTR", "AES-128-GCM", "AES-128-CCM", "AES-128-CBC-HMAC-SHA1",
          "AES-128-CBC-HMAC-SHA256"]
# AES modes accelaes does not serve: the key, imported as the application asks (no property query), comes from
# accelaes's key management (conf/accelaes.cnf prefers accelaes), and 3.5's EVP_CipherInit_SKEY refuses a key from
# another provider than the cipher's: accelaes offers these as delegates to the default (provider/cipher/cipher_delegate.c).
UNSERVED = ["AES-128-OCB", "AES-128-CFB", "AES-128-OFB", "AES-128-WRAP"]


@pytest.mark.parametrize("names", [pytest.param(SERVED, id="served"), pytest.param(UNSERVED, id="unserved")])
def test_skey_init_as_without_accelaes(conf_env, tmp_path, names):
    """An application's EVP_CipherInit_SKEY, all defaults: the same outcome with and without accelaes configured."""
    if running_version() < SKEY_RELEASE:
        pytest.skip(f"the running libcrypto ({running_version():#x}) has no EVP_SKEY: opaque keys came in 3.5")
    plain = tmp_path / "plain.cnf"
    plain.write_text("# no providers section: the default provider alone\n")
    code = f"NAMES = {names!r}\n" + INIT_ANY
    got = {}
    for label, env in (("accelaes", conf_env), ("default", dict(conf_env, OPENSSL_CONF=str(plain)))):
        rc, results, stderr = evp.run_isolated(code, env=env)
        assert rc == 0 and results, stderr[-2000:]
        got[label] = results[-1]
    assert all(ok for ok, _ in got["default"].values()), got["default"]
    assert got["accelaes"] == got["default"], got


# Every AES cipher the running default provider has, asked of it (never a list written here): with a key imported
# as the application does, each is initialised, encrypts 32 bytes and finishes, with its own key and IV lengths.
EVERY_NAME = SKEY_CALLS + r'''
from ctypes import POINTER, byref, c_ulong
L.OSSL_PROVIDER_load.restype = c_void_p
L.OSSL_PROVIDER_load.argtypes = [c_void_p, c_char_p]
L.OSSL_PROVIDER_query_operation.restype = c_void_p
L.OSSL_PROVIDER_query_operation.argtypes = [c_void_p, c_int, POINTER(c_int)]
klen = proto("EVP_CIPHER_get_key_length", c_int, [c_void_p])
ivlen = proto("EVP_CIPHER_CTX_get_iv_length", c_int, [c_void_p])
pname = proto("OSSL_PROVIDER_get0_name", c_char_p, [c_void_p])
cprov = proto("EVP_CIPHER_get0_provider", c_void_p, [c_void_p])
update = proto("EVP_CipherUpdate", c_int, [c_void_p, c_void_p, POINTER(c_int), c_char_p, c_int])
final = proto("EVP_CipherFinal_ex", c_int, [c_void_p, c_void_p, POINTER(c_int)])
init_raw = proto("EVP_CipherInit_ex2", c_int, [c_void_p, c_void_p, c_char_p, c_char_p, c_int, c_void_p])
nc = c_int(0)
algs = L.OSSL_PROVIDER_query_operation(L.OSSL_PROVIDER_load(None, b"default"), 2, byref(nc))
entries = ctypes.cast(algs, POINTER(c_char_p * 4))
names, i = [], 0
while entries[i][0] is not None:
    first = entries[i][0].decode().split(":")[0]
    if first.upper().startswith("AES"):
        names.append(first)
    i += 1
out = {}
for name in names:
    c = fetch(None, name.encode(), None)
    k, ctx = klen(c), ctx_new()
    key = skey_import(None, b"AES", bytes(range(k)), k, None)
    # the IV length the context itself asks for once it has its cipher (CCM: 7, not the cipher's 12)
    v = ivlen(ctx) if init_raw(ctx, c, None, None, 1, None) else 0
    errs = [e.reason for e in libcrypto.drain_errors()]
    buf, n, res = ctypes.create_string_buffer(128), c_int(0), []
    if key and init_skey(ctx, None, key, bytes(range(v)), v, 1, None):
        res.append(update(ctx, buf, byref(n), bytes(32), 32) and buf.raw[:n.value].hex())
        res.append(res[-1] and final(ctx, ctypes.cast(ctypes.addressof(buf) + n.value, c_void_p), byref(n)))
    out[name] = {"key": bool(key), "provider": pname(cprov(c)).decode(), "klen": k, "run": res,
                 "errors": errs + [e.reason for e in libcrypto.drain_errors()]}
emit(out)
'''


def test_skey_every_default_aes_name(conf_env, tmp_path):
    """Every AES cipher name the running default provider lists, with an AES key imported the way an application
    does it (EVP_SKEY_import_raw_key, no property query), gives with accelaes configured what it gives without:
    the same bytes, the same refusals (a 64-byte XTS or SIV key is no AES key for either), the same errors; and
    with accelaes configured every one of them is accelaes's (served or delegated), so the key fits."""
    if running_version() < SKEY_RELEASE:
        pytest.skip(f"the running libcrypto ({running_version():#x}) has no EVP_SKEY: opaque keys came in 3.5")
    plain = tmp_path / "plain.cnf"
    plain.write_text("# no providers section: the default provider alone\n")
    got = {}
    for label, env in (("accelaes", conf_env), ("default", dict(conf_env, OPENSSL_CONF=str(plain)))):
        rc, results, stderr = evp.run_isolated(EVERY_NAME, env=env, timeout=180)
        assert rc == 0 and results, stderr[-2000:]
        got[label] = results[-1]
    assert got["default"].keys() == got["accelaes"].keys() and len(got["default"]) >= 30, got["default"].keys()
    for name, ref in got["default"].items():
        ours = dict(got["accelaes"][name])
        assert ours.pop("provider") == "accelaes", f"{name} did not come from accelaes"
        assert ours == {k: v for k, v in ref.items() if k != "provider"}, (name, ours, ref)
        if ref["klen"] in (16, 24, 32):   # an AES key length: the default itself works, so the test can fail
            assert ref["run"] and all(ref["run"]), (name, ref)
