"""tests/conformance/test_reinit.py: re-initialisation semantics of EVP_CipherInit_ex2 on a live context (NULL
key keeps the key, NULL IV keeps the IV, CBC restores the original IV, partial data is dropped),
each scenario replayed on the default provider and compared step by step; for the nine ciphers and
for GCM (its tag after final compared too) and XTS (each update one data unit)."""

import pytest

import evp

# every engine and path this machine has (tests/engines.py)
pytestmark = pytest.mark.usefixtures("engine")

K1, K2 = bytes(range(64)), bytes(range(150, 214))     # XTS takes 64 bytes, with distinct halves
IV1, IV2 = bytes(range(16)), bytes(range(16, 32))
DATA = bytes(range(7, 7 + 45))


def replay(cipher, steps):
    """Run steps on a fresh context; return the trace of what every step gave."""
    ctx = evp.CipherCtx()
    trace = []
    for step in steps:
        op = step[0]
        try:
            if op == "init":
                _, with_cipher, key, iv, enc = step
                ctx.init(cipher if with_cipher else None, key, iv, enc)
                ctx.set_padding(0)
                trace.append(("init", "ok"))
            elif op == "update":
                trace.append(("update", ctx.update(step[1]).hex()))
            elif op == "final":
                trace.append(("final", ctx.final().hex()))
                if "GCM" in cipher.name.upper():     # the tag (an encryption's) is compared too
                    ok, params = ctx.get_params([("tag", "octet", 16)])
                    trace.append(("tag", ok, params.value(0) if ok else None))
            else:
                raise ValueError(op)
        except evp.OsslError as e:
            trace.append((op, "error", bool(e.has_reason())))
        state = []
        if "ECB" not in cipher.name.upper():
            ok, params = ctx.get_params([("updated-iv", "octet", 16)])
            state.append((ok, generated_or(cipher, steps, params.value(0)) if ok else params.value(0)))
        state.append(ctx.num)
        evp.drain_errors()
        trace.append(("state", state))
    ctx.free()
    return trace


def keylen(name):
    return evp.cipher_keylen(name) * (2 if name.endswith("XTS") else 1)


def scenarios(name):
    kl = keylen(name)
    k1, k2 = K1[:kl], K2[:kl]
    return {
        # a new IV with the key kept
        "null-key-keeps-key": [("init", 1, k1, IV1, 1), ("update", DATA[:32]),
                               ("init", 0, None, IV2, -1), ("update", DATA[:32]), ("final",)],
        # a new key with the IV kept (for CBC: the original IV, as the default provider does)
        "null-iv-keeps-iv": [("init", 1, k1, IV1, 1), ("update", DATA[:32]),
                             ("init", 0, k2, None, -1), ("update", DATA[:32]), ("final",)],
        # nothing new: CBC restarts from the original IV; CTR goes on from its counter
        "null-both": [("init", 1, k1, IV1, 1), ("update", DATA[:40]),
                      ("init", 0, None, None, -1), ("update", DATA[:40]), ("final",)],
        # partial block in flight when re-initialised: it is dropped
        "partial-dropped": [("init", 1, k1, IV1, 1), ("update", DATA[:21]),
                            ("init", 0, None, None, -1), ("update", DATA[:32]), ("final",)],
        # IV first, key later (the order some applications use)
        "iv-then-key": [("init", 1, None, IV1, 1), ("init", 0, k1, None, -1),
                        ("update", DATA[:32]), ("final",)],
        "key-then-iv": [("init", 1, k1, None, 1), ("init", 0, None, IV1, -1),
                        ("update", DATA[:32]), ("final",)],
        # re-init with the cipher again (a fresh provider context under EVP)
        "full-reinit": [("init", 1, k1, IV1, 1), ("update", DATA[:19]),
                        ("init", 1, k2, IV2, 1), ("update", DATA[:32]), ("final",)],
        # same direction, decrypt, with NULL IV restoring CBC's original IV
        "decrypt-null-iv": [("init", 1, k1, IV1, 0), ("update", DATA[:32]),
                            ("init", 0, None, None, -1), ("update", DATA[:32]), ("final",)],
        # a key schedule made for decryption when the direction is given with the key
        "switch-direction-with-key": [("init", 1, k1, IV1, 1), ("update", DATA[:32]),
                                      ("init", 0, k1, IV1, 0), ("update", DATA[:32]), ("final",)],
    }


SCENARIOS = list(scenarios("AES-128-CBC"))
# GCM and XTS through the same scenarios (every update of DATA is >= 16 bytes: an XTS unit each)
def generated_or(cipher, steps, iv):
    """A GCM IV no step gave is a random one the cipher made (OpenSSL 4.0's GCM makes it when asked
    for an encryption's IV before one is set): compared by its length, the bytes are its own."""
    given = [step[3] for step in steps if step[0] == "init" and step[3] is not None]
    if "GCM" in cipher.name.upper() and iv is not None and not any(g.startswith(iv) for g in given):
        return ("generated", len(iv))
    return iv


NEW = ["AES-128-GCM", "AES-192-GCM", "AES-256-GCM", "AES-128-XTS", "AES-256-XTS"]


@pytest.mark.parametrize("name,scenario", [pytest.param(n, s, id=f"{s}-{n}")
                                           for n in evp.CIPHERS + NEW for s in SCENARIOS])
def test_reinit(pair, name, scenario):
    steps = scenarios(name)[scenario]
    got = replay(pair(name).test, steps)
    ref = replay(pair(name).ref, steps)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g == r, f"{name} {scenario}: step {i // 2} {steps[i // 2]}: {g} vs default {r}"
    assert len(got) == len(ref)


@pytest.mark.parametrize("name", [n for n in evp.CIPHERS if "CBC" in n])
def test_cbc_null_iv_reinit_restores_original(pair, name):
    """Stated outright for CBC: re-init with a NULL IV encrypts as from the original IV."""
    key = K1[:evp.cipher_keylen(name)]
    ctx = evp.CipherCtx(pair(name).test, key, IV1, 1, padding=False)
    first = ctx.update(DATA[:32])
    ctx.init(None, None, None, -1)
    assert ctx.update(DATA[:32]) == first
    assert ctx.original_iv() == IV1
