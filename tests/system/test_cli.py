"""tests/system/test_cli.py: the provider through the `openssl` command: `enc` round trips that match the
default provider byte for byte, `list -cipher-algorithms` names, aliases and OIDs, and `speed`."""

import random
import re
import subprocess

import pytest

import evp
from conftest import PROVIDER, SEED

pytestmark = pytest.mark.usefixtures("require_provider")

BOTH = ["-provider", PROVIDER, "-provider", "default", "-propquery", f"?provider={PROVIDER}"]
ONLY = ["-provider", PROVIDER]
REF = ["-provider", "default"]


def run(openssl_bin, env, args, data=None, check=True, timeout=120):
    proc = subprocess.run([openssl_bin] + args, input=data, env=env, capture_output=True,
                          timeout=timeout)
    if check:
        assert proc.returncode == 0, \
            f"openssl {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-1500:]}"
    return proc


def enc_args(name, enc, key, iv, extra=()):
    # provider options first: some commands act on options as they parse them
    args = ["enc"] + list(extra) + ["-e" if enc else "-d", f"-{name.lower()}", "-K", key.hex()]
    if iv is not None:
        args += ["-iv", iv.hex()]
    return args


SIZES = [0, 1, 16, 1000, 65536 + 7]


@pytest.mark.parametrize("name", evp.CIPHERS)
def test_enc_roundtrip_interop(openssl_bin, openssl_env, name):
    """Encrypt with the provider, with the default provider; the bytes match; each decrypts
    the other's output. Raw key and IV (-K/-iv), PKCS#7 padding as enc does by default."""
    rng = random.Random(f"{SEED}-cli-{name}")
    key = rng.randbytes(evp.cipher_keylen(name))
    iv = None if evp.cipher_mode(name) == evp.MODE_ECB else rng.randbytes(16)
    for size in SIZES:
        data = rng.randbytes(size)
        where = f"seed={SEED} {name} {size} bytes"
        ct_ref = run(openssl_bin, openssl_env, enc_args(name, 1, key, iv, REF), data).stdout
        for provs in (BOTH, ONLY):
            ct = run(openssl_bin, openssl_env, enc_args(name, 1, key, iv, provs), data).stdout
            assert ct == ct_ref, f"{where} {' '.join(provs)}: ciphertext differs from the default's"
            back = run(openssl_bin, openssl_env, enc_args(name, 0, key, iv, provs), ct_ref).stdout
            assert back == data, f"{where} {' '.join(provs)}: did not decrypt the default's output"
        back = run(openssl_bin, openssl_env, enc_args(name, 0, key, iv, REF), ct).stdout
        assert back == data, f"{where}: the default provider did not decrypt our output"


@pytest.mark.parametrize("name", ["AES-128-CBC", "AES-256-CTR"])
def test_enc_password_nopad_base64(openssl_bin, openssl_env, tmp_path, name):
    """Password-based (PBKDF2 from the default provider, fixed salt so the bytes compare),
    -nopad, -a, and file in/out."""
    data = random.Random(f"{SEED}-pw-{name}").randbytes(4096)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    outs = {}
    for label, provs in (("test", BOTH), ("ref", REF)):
        dst = tmp_path / f"out-{label}.b64"
        run(openssl_bin, openssl_env, ["enc"] + provs + [
            "-e", f"-{name.lower()}", "-pbkdf2", "-iter", "1000", "-pass", "pass:correct horse",
            "-S", "0011223344556677", "-nopad", "-a", "-in", str(src), "-out", str(dst)])
        outs[label] = dst.read_bytes()
    assert outs["test"] == outs["ref"]
    back = run(openssl_bin, openssl_env, ["enc"] + BOTH + [
        "-d", f"-{name.lower()}", "-pbkdf2", "-iter", "1000", "-pass", "pass:correct horse",
        "-S", "0011223344556677", "-nopad", "-a"], outs["ref"]).stdout
    assert back == data


def test_enc_bad_decrypt_fails(openssl_bin, openssl_env):
    """A wrong key fails the padding check: a non-zero exit and 'bad decrypt', as with default."""
    key, iv = bytes(16), bytes(16)
    ct = run(openssl_bin, openssl_env, enc_args("AES-128-CBC", 1, key, iv, REF), b"x" * 100).stdout
    wrong = bytes([1]) + bytes(15)
    for provs in (BOTH, ONLY, REF):
        proc = run(openssl_bin, openssl_env, enc_args("AES-128-CBC", 0, wrong, iv, provs), ct,
                   check=False)
        assert proc.returncode != 0, f"{provs}: a wrong key decrypted without error"
        assert b"bad decrypt" in proc.stderr.lower() or b"error" in proc.stderr.lower()


def parse_provided(text, provider):
    """The Provided: section of `openssl list -cipher-algorithms` -> set of frozensets of names
    (OIDs and aliases included), for the entries of one provider."""
    entries = set()
    section = text.split("Provided:", 1)[-1]
    for line in section.splitlines():
        m = re.match(r"\s*(\{(.*)\}|(\S+))\s+@\s+(\S+)\s*$", line)
        if not m or m.group(4) != provider:
            continue
        names = m.group(2) if m.group(2) is not None else m.group(3)
        entries.add(frozenset(n.strip().upper() for n in names.split(",")))
    return entries


def test_list_cipher_algorithms(openssl_bin, openssl_env):
    ours = parse_provided(run(openssl_bin, openssl_env,
                              ["list"] + ONLY + ["-cipher-algorithms"]).stdout.decode(), PROVIDER)
    ref = parse_provided(run(openssl_bin, openssl_env,
                             ["list"] + REF + ["-cipher-algorithms"]).stdout.decode(), "default")
    nine = {frozenset(e) for e in ref if e & set(evp.CIPHERS)}
    assert len(nine) == 9
    assert {e for e in ours if e & set(evp.CIPHERS)} == nine, \
        f"names differ: ours {sorted(map(sorted, ours))} default {sorted(map(sorted, nine))}"
    if PROVIDER != "default":
        # Besides the nine, only the stitched TLS ciphers (for CBC suites without
        # encrypt-then-MAC), AES-GCM and AES-XTS, spelt exactly as the default provider spells them.
        stitched = {frozenset(e) for e in ref if any(n.startswith("AES-") and "-CBC-HMAC-SHA" in n for n in e)}
        assert len(stitched) == 4, stitched
        new = {frozenset(e) for e in ref if e & {"AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS",
                                                 "AES-256-XTS", "AES-128-CCM", "AES-192-CCM", "AES-256-CCM"}}
        assert len(new) == 8, new
        # where libcrypto has EVP_SKEY (3.5+), every other AES cipher of the default too, as a delegate to it
        # (provider/cipher/cipher_delegate.c: an application's AES key is accelaes's and must fit every AES mode)
        delegated = set()
        if evp.C.OpenSSL_version_num() >= 0x30500000:
            delegated = {e for e in ref if any(n.startswith("AES") for n in e)} - nine - stitched - new
            assert any("AES-128-OCB" in e for e in delegated), delegated
        want = nine | stitched | new | delegated
        assert ours == want, f"unexpected or missing entries: {ours ^ want}"


def test_list_providers(openssl_bin, openssl_env):
    out = run(openssl_bin, openssl_env, ["list"] + ONLY + ["-providers"]).stdout.decode()
    assert re.search(rf"^\s+{PROVIDER}\s*$", out, re.M), out
    assert "status: active" in out


def _speed_line(out, name):
    return [l for l in out.splitlines() if l.lower().startswith(name.lower())]


def test_speed_evp_only_provider(openssl_bin, openssl_env):
    """`openssl speed -provider accelaes -evp aes-128-ctr` exactly as written (it needs the
    provider's DRBG delegate, as no default provider is loaded)."""
    proc = run(openssl_bin, openssl_env, ["speed"] + ONLY + ["-evp", "aes-128-ctr", "-seconds", "1",
                                                             "-bytes", "16"], timeout=120)
    out = proc.stdout.decode()
    assert _speed_line(out, "aes-128-ctr"), f"no result line in:\n{out}\n{proc.stderr.decode()}"


def test_speed_named_cipher(openssl_bin, openssl_env):
    proc = run(openssl_bin, openssl_env, ["speed", "-provider", PROVIDER, "-provider", "default",
                                          "-seconds", "1", "-bytes", "1024", "aes-128-cbc"],
               timeout=120)
    out = proc.stdout.decode()
    assert _speed_line(out, "aes-128-cbc"), f"no result line in:\n{out}\n{proc.stderr.decode()}"
