"""tests/conformance/test_error_codes.py: for every error path, the same call against OpenSSL's default provider
and against accelaes must return the same and leave the same errors on the queue: library, reason
code and reason text of each, in order. Applications key on them: pyca/cryptography raises
ValueError (Fernet: InvalidToken) only for ERR_LIB_PROV's "wrong final block length" and an
InternalError for anything else; PHP's openssl_error_string and Node's err.library show them.

The rows (tests/error_rows.py, tests/error_rows_tls.py) are one call each, run against both
providers in one library context, each cipher fetched with provider=<name> and checked to come
from it. Conditions only accelaes has (error_rows_tls.ACCELAES_ONLY, each with its reason: a CTR
num that would index past the keystream block, a partial block to EVP_Cipher, NULL buffers and a
negative length that the default provider crashes on, a TLS version or MAC size no record layer
uses, TLS records on ECB; and TLS settings on CTR, which accelaes ignores) keep accelaes's own
library and reasons, and are checked as such. Where a later release's default answers such a call
as accelaes does (OpenSSL 3.5 refuses the CTR num and, in EVP, the negative length), the row says
how to ask the running default, and is compared with it there.
Engine failures, refused settings and the DRBG delegate are accelaes's alone too; their errors are
checked where they can be caused (test_engine_c.py, test_provider_settings.py, test_drbg_source.py).

`python3 tests/conformance/test_error_codes.py [MODULES_DIR]` prints the whole table, default vs accelaes."""

import os
import subprocess
import sys

import pytest

import errcmp
import error_rows  # noqa: F401  (the rows register themselves in errcmp.ROWS)
import evp
from conftest import MODULES, PROVIDER, REPO
from error_rows_tls import ACCELAES_ONLY
from libcrypto import LIBCRYPTO

CASES = [(rid, name) for rid, (ciphers, _fn) in errcmp.ROWS.items() for name in ciphers]

# The stitched ciphers' rows that differ from the default (none since provider/cipher/cipher_hmac.c
# raises the default's reasons): a row listed here is expected to fail, strictly.
PENDING_CIPHER_HMAC_C = set()


def _marks(rid, name):
    if rid in PENDING_CIPHER_HMAC_C and name in errcmp.STITCHED:
        return [pytest.mark.xfail(strict=True, reason="provider/cipher/cipher_hmac.c still raises accelaes's "
                                  "own reason here (the change is asked of its owner)")]
    return []


PARAMS = [pytest.param(rid, name, id=f"{rid}[{name}]", marks=_marks(rid, name)) for rid, name in CASES]


def _available(lc, name):
    return lc.try_fetch(name, "default") is not None


def outcome(lc, prov, rid, name, table=None):
    """(what the call returned, the errors it left) for one provider."""
    evp.clear_errors()
    fn = (table or errcmp.ROWS)[rid][1]
    try:
        result = fn(errcmp.Env(lc, prov), name)
    except AssertionError as e:   # a setup step failed: an outcome too, and not default's
        result = ("setup failed", (str(e) or "assert").splitlines()[0][:120])
    return result, errcmp.queue()


@pytest.fixture(scope="module")
def both(libctx):
    if PROVIDER == "default":
        pytest.skip("compares accelaes with the default provider")
    return libctx


@pytest.mark.parametrize("rid,name", PARAMS)
def test_same_as_default(both, rid, name):
    if not _available(both, name):
        pytest.skip(f"the default provider has no {name} on this CPU")
    ref = outcome(both, "default", rid, name)
    got = outcome(both, "accelaes", rid, name)
    assert got == ref, (f"{rid} {name}:\n  default : {ref[0]!r} {errcmp.show(ref[1])}\n"
                        f"  accelaes: {got[0]!r} {errcmp.show(got[1])}")


ONLY = [(rid, name) for rid, spec in ACCELAES_ONLY.items() for name in spec[0]]


@pytest.mark.parametrize("rid,name", ONLY, ids=[f"{r}[{n}]" for r, n in ONLY])
def test_accelaes_only_condition(both, rid, name):
    """accelaes refuses with its own library and reason (or, where the entry has no reason,
    succeeds without an error); the default provider (where it can be run without crashing)
    answers otherwise: if it ever answers the same, the row belongs to the compared table."""
    _ciphers, _fn, reason, run_default, why = ACCELAES_ONLY[rid][:5]
    own_here = ACCELAES_ONLY[rid][5] if len(ACCELAES_ONLY[rid]) > 5 else None
    if own_here is not None and not own_here(both, name):
        # this release's default answers as accelaes does (and safely): compared, as the table's
        ref = outcome(both, "default", rid, name, ACCELAES_ONLY)
        got = outcome(both, "accelaes", rid, name, ACCELAES_ONLY)
        assert got == ref, (f"{rid} {name} (compared on this release):\n  default : {ref[0]!r} "
                            f"{errcmp.show(ref[1])}\n  accelaes: {got[0]!r} {errcmp.show(got[1])}")
        return
    result, errors = outcome(both, "accelaes", rid, name, ACCELAES_ONLY)
    ok = result[0] if isinstance(result, tuple) else result
    if reason is None:
        assert ok not in (0, -1) and not errors, f"{rid} {name}: {result!r} {errcmp.show(errors)}"
    else:
        assert ok in (0, -1), f"{rid} {name}: accelaes accepted ({result!r})"
        assert errors and errors[-1][2] == "accelaes" and errors[-1][3] == reason, \
            f"{rid} {name}: {errcmp.show(errors)}, expected accelaes's '{reason}'"
    if run_default:
        ref, ref_errors = outcome(both, "default", rid, name, ACCELAES_ONLY)
        assert not ref_errors and ref != result, \
            f"{rid} {name}: default now gives {ref!r} {errcmp.show(ref_errors)}: move the row to the " \
            f"compared table ({why})"


# ---------------------------------------------------------------- pyca/cryptography

PYCA_SNIPPET = r'''
import base64, ctypes, hashlib, hmac, json, os
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.bindings.openssl.binding import Binding

from cryptography.hazmat.backends.openssl import backend
out = {"openssl": backend.openssl_version_text()}
crypto = ctypes.CDLL(os.environ["ACCELAES_TEST_LIBCRYPTO"])
for f, r, a in (("EVP_CIPHER_CTX_get0_cipher", ctypes.c_void_p, [ctypes.c_void_p]),
                ("EVP_CIPHER_get0_provider", ctypes.c_void_p, [ctypes.c_void_p]),
                ("OSSL_PROVIDER_get0_name", ctypes.c_char_p, [ctypes.c_void_p])):
    getattr(crypto, f).restype, getattr(crypto, f).argtypes = r, a

def provider_of(cipher_ctx):
    """The provider behind a pyca cipher context: the EVP_CIPHER_CTX pyca made, asked directly."""
    raw = cipher_ctx._ctx._ctx
    ptr = int(Binding.ffi.cast("uintptr_t", raw))
    return crypto.OSSL_PROVIDER_get0_name(crypto.EVP_CIPHER_get0_provider(
        crypto.EVP_CIPHER_CTX_get0_cipher(ptr))).decode()

def outcome(fn):
    try:
        fn()
        return "ok"
    except Exception as e:
        return type(e).__name__

key = bytes(range(32))
f = Fernet(base64.urlsafe_b64encode(key))
def token(plain_blocks):
    iv = bytes(16)
    enc = Cipher(algorithms.AES(key[16:]), modes.CBC(iv)).encryptor()
    body = b"\x80" + bytes(8) + iv + enc.update(plain_blocks) + enc.finalize()
    return base64.urlsafe_b64encode(body + hmac.new(key[:16], body, hashlib.sha256).digest())
# bad PKCS#7 padding (pyca strips it itself, with OpenSSL's padding off)
out["fernet_bad_padding"] = outcome(lambda: f.decrypt(token(b"A" * 15 + b"\x00")))
# a ciphertext that is not whole blocks, under a valid HMAC: EVP_DecryptFinal_ex fails
body = base64.urlsafe_b64decode(token(b"A" * 16))[:-32][:-3]
bad_len = base64.urlsafe_b64encode(body + hmac.new(key[:16], body, hashlib.sha256).digest())
out["fernet_partial_block"] = outcome(lambda: f.decrypt(bad_len))
d = Cipher(algorithms.AES(bytes(16)), modes.CBC(bytes(16))).decryptor()
d.update(b"x" * 20)
out["cbc_finalize_partial"] = outcome(d.finalize)
out["cbc_provider"] = provider_of(d)
e = Cipher(algorithms.AES(bytes(16)), modes.ECB()).encryptor()
e.update(b"x" * 7)
out["ecb_finalize_partial"] = outcome(e.finalize)
out["ecb_provider"] = provider_of(e)
print(json.dumps(out))
'''

SYSTEM_PYTHON = "/usr/bin/python3"


def _pyca(env):
    p = subprocess.run([SYSTEM_PYTHON, "-c", PYCA_SNIPPET], env=dict(env, ACCELAES_TEST_LIBCRYPTO=LIBCRYPTO),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_pyca_cryptography(require_provider, openssl_env, tmp_path):
    """Debian's python3-cryptography (built on the system libcrypto, unlike the wheels, which carry
    their own OpenSSL and never see a provider) gives the same exceptions with accelaes serving AES
    through conf/accelaes.cnf as without it: Fernet's InvalidToken, ValueError at finalize."""
    if PROVIDER == "default":
        pytest.skip("compares accelaes with the default provider")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import cryptography.hazmat.bindings._openssl as b; "
                            "print(b.__file__)"], capture_output=True, text=True)
    if not os.path.exists(SYSTEM_PYTHON) or probe.returncode != 0:
        has = subprocess.run([SYSTEM_PYTHON, "-c", "import cryptography; print(cryptography.__version__)"],
                             capture_output=True, text=True) if os.path.exists(SYSTEM_PYTHON) else None
        if has is not None and has.returncode == 0:
            pytest.skip(f"Debian's python3-cryptography {has.stdout.strip()} has no cffi OpenSSL binding (its "
                        "cipher contexts are in Rust since 42): the provider behind one cannot be asked")
        pytest.skip("Debian's python3-cryptography cannot be imported (apt-get install python3-cryptography)")
    ldd = subprocess.run(["ldd", probe.stdout.strip()], capture_output=True, text=True).stdout
    if LIBCRYPTO not in ldd:
        pytest.skip(f"{probe.stdout.strip()} does not use {LIBCRYPTO}, the libcrypto accelaes.so links")
    # pyca loads the legacy provider: the modules directory must have it next to accelaes.so,
    # as the system's does once accelaes is installed there.
    mods = tmp_path / "modules"
    mods.mkdir()
    (mods / "accelaes.so").symlink_to(MODULES / "accelaes.so")
    sysmods = subprocess.run(["openssl", "version", "-m"], capture_output=True, text=True).stdout
    sysmods = sysmods.split('"')[1] if '"' in sysmods else "/usr/lib/x86_64-linux-gnu/ossl-modules"
    (mods / "legacy.so").symlink_to(os.path.join(sysmods, "legacy.so"))
    env = {k: v for k, v in openssl_env.items() if k not in ("OPENSSL_CONF", "OPENSSL_MODULES")}
    plain = _pyca(env)
    env.update(OPENSSL_CONF=str(REPO / "conf" / "accelaes.cnf"), OPENSSL_MODULES=str(mods))
    acc = _pyca(env)
    system = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout
    assert plain["openssl"] == acc["openssl"] and f"Library: {plain['openssl']}" in system, \
        f"pyca runs on {plain['openssl']}, not the system libcrypto ({system.strip()})"
    assert plain["cbc_provider"] == plain["ecb_provider"] == "default"
    assert acc["cbc_provider"] == acc["ecb_provider"] == "accelaes", acc
    want = {"fernet_bad_padding": "InvalidToken", "fernet_partial_block": "InvalidToken",
            "cbc_finalize_partial": "ValueError", "ecb_finalize_partial": "ValueError"}
    for key, exc in want.items():
        assert plain[key] == exc, f"without accelaes: {key} gave {plain[key]}"
        assert acc[key] == exc, f"with accelaes: {key} gave {acc[key]} (default: {exc})"


# ---------------------------------------------------------------- the table, for people

def main(modules):
    lc = evp.LibCtx(["default", "accelaes"], modules_dir=modules)
    print(f"| row | cipher | default | accelaes | same |\n| --- | --- | --- | --- | --- |")
    for rid, name in CASES:
        if not _available(lc, name):
            continue
        ref, got = outcome(lc, "default", rid, name), outcome(lc, "accelaes", rid, name)
        print(f"| {rid} | {name} | {ref[0]!r} {errcmp.show(ref[1])} | {got[0]!r} {errcmp.show(got[1])} "
              f"| {'yes' if ref == got else '**NO**'} |")
    print("\n| accelaes's own condition | cipher | default | accelaes | why |\n| --- | --- | --- | --- | --- |")
    for rid, name in ONLY:
        run_default, why = ACCELAES_ONLY[rid][3:5]
        ref = outcome(lc, "default", rid, name, ACCELAES_ONLY) if run_default else None
        got = outcome(lc, "accelaes", rid, name, ACCELAES_ONLY)
        print(f"| {rid} | {name} | {f'{ref[0]!r} {errcmp.show(ref[1])}' if ref else 'crashes'} "
              f"| {got[0]!r} {errcmp.show(got[1])} | {why} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(MODULES))
