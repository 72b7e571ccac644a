"""tests/conformance/test_wycheproof.py: Project Wycheproof AES-CBC-PKCS5 (216 cases). Valid cases encrypt to
`ct` and decrypt back exactly; every invalid one must fail at Final with a reason, claiming no
plaintext from Final, exactly where the default provider fails too."""

import json
from pathlib import Path

import pytest

import evp
from conftest import PROVIDER

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

DATA = json.loads((Path(__file__).resolve().parent.parent / "vectors" /
                   "wycheproof_aes_cbc_pkcs5_test.json").read_text())
CASES = [(g["keySize"], t) for g in DATA["testGroups"] for t in g["tests"]]


def test_case_count():
    assert len(CASES) == DATA["numberOfTests"] == 216


@pytest.mark.parametrize("bits,tc", CASES,
                         ids=[f"tc{t['tcId']}-{t['result']}-{'+'.join(t['flags'])}" for _, t in CASES])
def test_wycheproof_cbc_pkcs5(pair, bits, tc):
    ciphers = pair(f"AES-{bits}-CBC")
    key, iv = bytes.fromhex(tc["key"]), bytes.fromhex(tc["iv"])
    msg, ct = bytes.fromhex(tc["msg"]), bytes.fromhex(tc["ct"])
    if tc["result"] == "valid":
        got = evp.crypt(ciphers.test, key, iv, msg, 1)
        assert got == ct, f"encrypt: expected {ct.hex()} got {got.hex()}"
        got = evp.crypt(ciphers.test, key, iv, ct, 0)
        assert got == msg, f"decrypt: expected {msg.hex()} got {got.hex()}"
        return
    # Invalid: decryption must fail at Final, and Final must claim nothing.
    with evp.CipherCtx(ciphers.test, key, iv, 0) as ctx:
        assert ctx.provider == PROVIDER
        head = ctx.update(ct)
        # Update may release whole blocks before the last one (which it must hold back).
        assert len(head) <= max(len(ct) - 16, 0), \
            f"update released {len(head)} bytes of a {len(ct)}-byte ciphertext"
        out = evp.Mem(32)
        ok, outl = ctx.raw_final(out.at())
        errors = evp.drain_errors()
        assert ok == 0, f"Final accepted an invalid ciphertext ({tc['comment']}), outl={outl}"
        assert outl <= 0, f"failed Final still claimed {outl} bytes"
        assert any(e.reason for e in errors), f"no reason string in the error queue: {errors}"
    # The default provider agrees: same bytes released by Update, same failure.
    ok_ref, out_ref, _ = evp.crypt_outcome(ciphers.ref, key, iv, ct, 0)
    assert not ok_ref, "the default provider accepted this case; the vector file is wrong"
    assert head == out_ref, "Update released other bytes than the default provider's"
