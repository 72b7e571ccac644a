"""tests/conformance/test_pipeline.py: OpenSSL 3.5's cipher pipeline API (EVP_CipherPipelineEncryptInit/DecryptInit/Update/
Final, "pipeline-tag") on accelaes's AES-GCM (provider/cipher/cipher_gcm_pipe.c). Each pipe's ciphertext and tag must
equal the default provider's single-message EVP results, for N = 1..32 pipes of random sizes and AAD; decryption
must give the plaintext back and fail where one pipe's tag is wrong; misuse must fail with an error queued, never
crash. The pipeline functions are offered exactly where the running libcrypto has the API (3.5+), decided at run
time: on 3.0 the dispatch tables must not carry them and the EVP tests skip (no pipeline API there)."""

import ctypes
import os

import pytest

import evp
from conftest import MODULES, private_segment

pytestmark = pytest.mark.usefixtures("require_provider")

PIPELINE_RELEASE = 0x30500000
OSSL_OP_CIPHER = 2
PIPELINE_FUNCS = {15, 16, 17, 18}   # OSSL_FUNC_CIPHER_PIPELINE_{ENCRYPT_INIT,DECRYPT_INIT,UPDATE,FINAL}


def running_version():
    lib = ctypes.CDLL(os.environ.get("ACCELAES_TEST_LIBCRYPTO", "libcrypto.so.3"))
    lib.OpenSSL_version_num.restype = ctypes.c_ulong
    return lib.OpenSSL_version_num()


def need_pipeline_api():
    if running_version() < PIPELINE_RELEASE:
        pytest.skip(f"libcrypto {running_version():#x} has no cipher pipeline API (EVP_CipherPipeline*, 3.5+)")


@pytest.fixture
def env(openssl_env):
    yield from private_segment(dict(openssl_env, OPENSSL_MODULES=str(MODULES)), "pipeline")


# The child's set-up: both providers in the default library context, the pipeline calls through ctypes.
SETUP = r'''
import ctypes, os, random
from ctypes import c_void_p, c_char_p, c_int, c_size_t, POINTER, byref
from libcrypto import _lib as L, OSSL_PARAM, P_OCTET_PTR, P_UNMODIFIED
import libcrypto

def proto(name, res, args):
    f = getattr(L, name); f.restype = res; f.argtypes = args; return f

load = proto("OSSL_PROVIDER_load", c_void_p, [c_void_p, c_char_p])
fetch = proto("EVP_CIPHER_fetch", c_void_p, [c_void_p, c_char_p, c_char_p])
ctx_new = proto("EVP_CIPHER_CTX_new", c_void_p, [])
ctx_free = proto("EVP_CIPHER_CTX_free", None, [c_void_p])
ctrl = proto("EVP_CIPHER_CTX_ctrl", c_int, [c_void_p, c_int, c_int, c_void_p])
init = proto("EVP_CipherInit_ex2", c_int, [c_void_p, c_void_p, c_char_p, c_char_p, c_int, c_void_p])
upd = proto("EVP_CipherUpdate", c_int, [c_void_p, c_char_p, POINTER(c_int), c_char_p, c_int])
fin = proto("EVP_CipherFinal_ex", c_int, [c_void_p, c_char_p, POINTER(c_int)])
set_params = proto("EVP_CIPHER_CTX_set_params", c_int, [c_void_p, c_void_p])
get_params = proto("EVP_CIPHER_CTX_get_params", c_int, [c_void_p, c_void_p])
can_pipe = proto("EVP_CIPHER_can_pipeline", c_int, [c_void_p, c_int])
PINIT = [proto("EVP_CipherPipelineDecryptInit", c_int, [c_void_p, c_void_p, c_char_p, c_size_t, c_size_t, c_void_p, c_size_t]),
         proto("EVP_CipherPipelineEncryptInit", c_int, [c_void_p, c_void_p, c_char_p, c_size_t, c_size_t, c_void_p, c_size_t])]
pupd = proto("EVP_CipherPipelineUpdate", c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p])
pfin = proto("EVP_CipherPipelineFinal", c_int, [c_void_p, c_void_p, c_void_p, c_void_p])
GET_TAG, SET_TAG = 0x10, 0x11
assert load(None, b"default") and load(None, b"accelaes")
ACC = {b: fetch(None, f"AES-{b}-GCM".encode(), b"provider=accelaes") for b in (128, 192, 256)}
DEF = {b: fetch(None, f"AES-{b}-GCM".encode(), b"provider=default") for b in (128, 192, 256)}

def errs():
    return [f"{e.lib}:{e.reason}:{e.data}" for e in libcrypto.drain_errors()]

def ptrs(bufs):
    """An array of pointers to the buffers (kept alive with it)."""
    arr = (c_void_p * len(bufs))(*[ctypes.cast(b, c_void_p) if b is not None else None for b in bufs])
    arr.keep = bufs
    return arr

def sizes(vals):
    return (c_size_t * len(vals))(*vals)

def reference(bits, key, iv, aad, pt, enc, tag=None):
    """The default provider's single message: (output, tag or ok)."""
    c = ctx_new(); n = c_int(0)
    assert init(c, DEF[bits], key, iv, enc, None)
    if not enc:
        ctrl(c, SET_TAG, len(tag), tag)
    if aad:
        assert upd(c, None, byref(n), aad, len(aad))
    out = ctypes.create_string_buffer(len(pt) + 16)
    if pt:
        assert upd(c, out, byref(n), pt, len(pt))
    ok = fin(c, ctypes.cast(ctypes.addressof(out) + len(pt), c_char_p), byref(n))
    t = ctypes.create_string_buffer(16)
    if enc:
        assert ok and ctrl(c, GET_TAG, 16, t)
    ctx_free(c)
    return out.raw[:len(pt)], (t.raw if enc else bool(ok))

def tag_param(bufs, taglen):
    """"pipeline-tag": an octet pointer to an array of one tag buffer per pipe."""
    arr = ptrs(bufs)
    holder = c_void_p(ctypes.addressof(arr))
    p = (OSSL_PARAM * 2)()
    p[0].key, p[0].data_type, p[0].data = b"pipeline-tag", P_OCTET_PTR, ctypes.addressof(holder)
    p[0].data_size, p[0].return_size = taglen, P_UNMODIFIED
    p.keep = (arr, holder)
    return p
'''

ROUNDTRIP = SETUP + r'''
rng = random.Random(int.from_bytes(os.urandom(8), "little"))
report = {"cases": 0, "mismatch": [], "bad_tag": []}
for n in list(range(1, 33)) + [32, 7, 1]:
    bits = (128, 192, 256)[n % 3]
    key = os.urandom(bits // 8)
    ivs = [os.urandom(12) for _ in range(n)]
    pts = [os.urandom(rng.choice((0, 1, 15, 16, 17, rng.randrange(1, 4097)))) for _ in range(n)]
    aads = [os.urandom(rng.choice((0, 0, 13, rng.randrange(1, 80)))) for _ in range(n)]
    c = ctx_new()
    if not PINIT[1](c, ACC[bits], key, len(key), n, ptrs(ivs), 12):
        report["mismatch"].append((n, "einit", errs())); continue
    outl = sizes([0] * n)
    if any(aads):
        assert pupd(c, None, outl, None, ptrs(aads), sizes([len(a) for a in aads])), errs()
    outs = [ctypes.create_string_buffer(len(p) + 1) for p in pts]
    # the data in two updates per pipe, split at random points
    cuts = [rng.randrange(0, len(p) + 1) for p in pts]
    for lo, hi in ((lambda i: 0, lambda i: cuts[i]), (lambda i: cuts[i], lambda i: len(pts[i]))):
        ins = [ctypes.create_string_buffer(pts[i][lo(i):hi(i)], max(1, hi(i) - lo(i))) for i in range(n)]
        o = [ctypes.addressof(outs[i]) + lo(i) for i in range(n)]
        ls = [hi(i) - lo(i) for i in range(n)]
        assert pupd(c, (c_void_p * n)(*o), outl, sizes(ls), ptrs(ins), sizes(ls)), errs()
        assert list(outl) == ls, (list(outl), ls)
    assert pfin(c, ptrs(outs), outl, sizes([1] * n)), errs()
    tags = [ctypes.create_string_buffer(16) for _ in range(n)]
    p = tag_param(tags, 16)
    assert get_params(c, p), errs()
    ctx_free(c)
    cts = [outs[i].raw[:len(pts[i])] for i in range(n)]
    for i in range(n):
        ct, tag = reference(bits, key, ivs[i], aads[i], pts[i], 1)
        if ct != cts[i] or tag != tags[i].raw:
            report["mismatch"].append((n, i, len(pts[i]), len(aads[i])))
    # decryption of all pipes at once, one tag wrong where n > 1
    wrong = rng.randrange(n) if n > 1 else None
    dtags = [ctypes.create_string_buffer(t.raw, 16) for t in tags]
    if wrong is not None:
        dtags[wrong][0] = bytes([dtags[wrong].raw[0] ^ 1])
    d = ctx_new()
    assert PINIT[0](d, ACC[bits], key, len(key), n, ptrs(ivs), 12), errs()
    p = tag_param(dtags, 16)
    assert set_params(d, p), errs()
    if any(aads):
        assert pupd(d, None, outl, None, ptrs(aads), sizes([len(a) for a in aads])), errs()
    pouts = [ctypes.create_string_buffer(len(x) + 1) for x in cts]
    cins = [ctypes.create_string_buffer(x, len(x) + 1) for x in cts]
    assert pupd(d, ptrs(pouts), outl, sizes([len(x) + 1 for x in cts]), ptrs(cins), sizes([len(x) for x in cts])), errs()
    ok = pfin(d, ptrs(pouts), outl, sizes([1] * n))
    ctx_free(d)
    if [pouts[i].raw[:len(pts[i])] for i in range(n)] != pts:
        report["mismatch"].append((n, "plaintext"))
    if bool(ok) != (wrong is None):
        report["bad_tag"].append((n, wrong, ok))
    # the default provider agrees that the wrong tag is wrong
    if wrong is not None and reference(bits, key, ivs[wrong], aads[wrong], cts[wrong], 0, dtags[wrong].raw)[1]:
        report["bad_tag"].append((n, wrong, "default accepts"))
    report["cases"] += n
emit(report)
'''


def test_dispatch_offers_pipeline_only_where_libcrypto_has_it(env):
    """The GCM dispatch tables carry the four pipeline functions on 3.5+, none on 3.0 (decided at run time);
    no other cipher carries them."""
    code = f'''
import ctypes
from libcrypto import _lib as L
L.OSSL_PROVIDER_load.restype = ctypes.c_void_p
L.OSSL_PROVIDER_load.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
L.OSSL_PROVIDER_query_operation.restype = ctypes.c_void_p
L.OSSL_PROVIDER_query_operation.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
class ALG(ctypes.Structure):
    _fields_ = [("names", ctypes.c_char_p), ("props", ctypes.c_char_p), ("impl", ctypes.c_void_p), ("desc", ctypes.c_char_p)]
class DISP(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("fn", ctypes.c_void_p)]
prov = L.OSSL_PROVIDER_load(None, b"accelaes")
nc = ctypes.c_int(0)
algs = ctypes.cast(L.OSSL_PROVIDER_query_operation(prov, {OSSL_OP_CIPHER}, ctypes.byref(nc)), ctypes.POINTER(ALG))
out = {{}}
i = 0
while algs[i].names:
    d = ctypes.cast(algs[i].impl, ctypes.POINTER(DISP))
    ids, j = [], 0
    while d[j].id:
        ids.append(d[j].id); j += 1
    out[algs[i].names.decode().split(":")[0]] = ids
    i += 1
emit(out)
'''
    rc, results, stderr = evp.run_isolated(code, env=env)
    assert rc == 0 and results, stderr[-2000:]
    tables = results[-1]
    with_pipe = {name for name, ids in tables.items() if PIPELINE_FUNCS & set(ids)}
    gcm = {name for name in tables if name.endswith("GCM")}
    assert len(gcm) == 3, tables.keys()
    if running_version() < PIPELINE_RELEASE:
        assert with_pipe == set(), f"pipeline functions offered to a libcrypto without the API: {with_pipe}"
    else:
        assert with_pipe == gcm and all(PIPELINE_FUNCS <= set(tables[n]) for n in gcm), with_pipe


def test_can_pipeline_only_where_it_works(env):
    need_pipeline_api()
    code = SETUP + r'''
cbc = fetch(None, b"AES-128-CBC", b"provider=accelaes")
emit({"acc": [can_pipe(ACC[b], e) for b in (128, 192, 256) for e in (0, 1)],
      "default": [can_pipe(DEF[b], e) for b in (128, 192, 256) for e in (0, 1)],
      "cbc": [can_pipe(cbc, e) for e in (0, 1)]})
'''
    rc, results, stderr = evp.run_isolated(code, env=env)
    assert rc == 0 and results, stderr[-2000:]
    r = results[-1]
    assert r["acc"] == [1] * 6 and r["cbc"] == [0, 0], r
    assert r["default"] == [0] * 6, f"the default provider now pipelines GCM: compare with it ({r})"


def test_pipes_equal_default_single_messages(env):
    """N = 1..32 pipes, random sizes (0 to 4 KiB) and AAD, the data in two updates: every pipe's ciphertext and
    tag equal the default provider's one-message EVP result; decryption gives the plaintext back, and fails
    (final returns 0) exactly where one pipe's tag was changed."""
    need_pipeline_api()
    rc, results, stderr = evp.run_isolated(ROUNDTRIP, env=env, timeout=300)
    assert rc == 0 and results, stderr[-3000:]
    r = results[-1]
    assert r["mismatch"] == [] and r["bad_tag"] == [], r
    assert r["cases"] >= sum(range(1, 33)), r


MISUSE = SETUP + r'''
key, n = os.urandom(16), 4
ivs = ptrs([os.urandom(12) for _ in range(n)])
data = [ctypes.create_string_buffer(64) for _ in range(n)]
outs = [ctypes.create_string_buffer(64) for _ in range(n)]
L64, OUTL = sizes([64] * n), sizes([0] * n)
tags = [ctypes.create_string_buffer(17) for _ in range(n)]
res = {}

def case(name, fn):
    libcrypto.clear_errors()
    c = ctx_new()
    try:
        ok = fn(c)
    finally:
        ctx_free(c)
    res[name] = [bool(ok), errs()]

def einit(c, cnt=n, ivp=ivs, ivlen=12, enc=1, cipher=None):
    return PINIT[enc](c, cipher or ACC[128], key, 16, cnt, ivp, ivlen)

def data_upd(c):
    return pupd(c, ptrs(outs), OUTL, L64, ptrs(data), L64)

def full_enc(c):
    return einit(c) and data_upd(c) and pfin(c, ptrs(outs), OUTL, L64)

case("too_many_pipes", lambda c: PINIT[1](c, ACC[128], key, 16, 33, ptrs([b"x" * 12] * 33), 12))
case("zero_pipes", lambda c: einit(c, cnt=0))
case("iv_length_mismatch", lambda c: einit(c, ivlen=16))
case("null_iv_entry", lambda c: einit(c, ivp=ptrs([b"x" * 12, None, b"y" * 12, b"z" * 12])))
case("key_length_mismatch", lambda c: PINIT[1](c, ACC[128], key, 32, n, ivs, 12))
case("update_without_iv", lambda c: einit(c, ivp=None) and data_upd(c))
case("update_after_final", lambda c: full_enc(c) and data_upd(c))
case("final_twice", lambda c: full_enc(c) and pfin(c, ptrs(outs), OUTL, L64))
case("aad_after_data", lambda c: einit(c) and data_upd(c) and pupd(c, None, OUTL, None, ptrs(data), L64))
case("output_too_small", lambda c: einit(c) and pupd(c, ptrs(outs), OUTL, sizes([64, 64, 63, 64]), ptrs(data), L64))
case("decrypt_final_without_tag", lambda c: einit(c, enc=0) and data_upd(c) and pfin(c, ptrs(outs), OUTL, L64))
case("tag_get_before_final", lambda c: einit(c) and data_upd(c) and get_params(c, tag_param(tags, 16)))
case("tag_get_on_decrypt", lambda c: einit(c, enc=0) and get_params(c, tag_param(tags, 16)))
case("tag_set_on_encrypt", lambda c: einit(c) and set_params(c, tag_param(tags, 16)))
case("tag_length_17", lambda c: full_enc(c) and get_params(c, tag_param(tags, 17)))
case("tag_length_0", lambda c: einit(c, enc=0) and set_params(c, tag_param(tags, 0)))
case("tag_buffer_missing", lambda c: full_enc(c) and get_params(c, tag_param(tags[:3] + [None], 16)))
case("update_null_lengths", lambda c: einit(c) and pupd(c, ptrs(outs), OUTL, L64, ptrs(data), None))
case("default_provider", lambda c: einit(c, cipher=DEF[128]))
# a context copied mid-batch (EVP_CIPHER_CTX_copy: the pipes' states copied) goes on as the original
ctx_copy = proto("EVP_CIPHER_CTX_copy", c_int, [c_void_p, c_void_p])
def copied(c):
    d = ctx_new()
    t2 = [ctypes.create_string_buffer(16) for _ in range(n)]
    ok = (einit(c) and pupd(c, None, OUTL, None, ptrs(data[:n]), sizes([5] * n)) and ctx_copy(d, c)
          and data_upd(c) and pfin(c, ptrs(outs), OUTL, L64) and get_params(c, tag_param(tags, 16))
          and pupd(d, ptrs(outs), OUTL, L64, ptrs(data), L64) and pfin(d, ptrs(outs), OUTL, L64)
          and get_params(d, tag_param(t2, 16)))
    ctx_free(d)
    return ok and [t.raw[:16] for t in tags] == [t.raw for t in t2]
case("copy_ok", copied)
# a correct run on the same kind of context, so that the cases above fail for their own reason
case("control_ok", lambda c: full_enc(c) and get_params(c, tag_param(tags, 16)))
emit(res)
'''


def test_misuse_fails_with_an_error(env):
    """Each misuse fails (0) with an error queued (a reason a person can read), in a child that must not crash;
    the default provider's GCM answers "pipeline not supported"; a correct run beside them succeeds."""
    need_pipeline_api()
    rc, results, stderr = evp.run_isolated(MISUSE, env=env)
    assert rc == 0 and results, f"rc {rc}: {stderr[-3000:]}"
    res = results[-1]
    assert res.pop("control_ok") == [True, []]
    assert res.pop("copy_ok") == [True, []], "a copied pipeline context does not go on as the original"
    assert len(res) == 19, sorted(res)
    silent = {k: v for k, v in res.items() if v[0] or not v[1]}
    assert silent == {}, f"misuse that succeeded or raised nothing: {silent}"
    assert any("pipeline not supported" in e for e in res["default_provider"][1]), res["default_provider"]
    assert any("too many pipes" in e for e in res["too_many_pipes"][1]), res["too_many_pipes"]
    for name in ("zero_pipes", "update_after_final", "final_twice", "decrypt_final_without_tag", "aad_after_data"):
        assert any("pipeline" in e for e in res[name][1]), (name, res[name])
