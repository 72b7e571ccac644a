"""tests/conformance/test_engines_here.py: the engines and paths of tests/engines.py, one line each: those this machine
lacks skip here, saying why (the `engine` fixture leaves them out of every other test), and each one it has loads
the provider with its settings and encrypts like the default provider in a child."""

import pytest

import engines

CHECK = r'''
lc = evp.LibCtx(("default", "accelaes"), modules_dir=MODDIR)
outs = [evp.crypt(lc.fetch(name, prov), bytes(range(32))[:int(name[4:7]) // 8], bytes(16 if "GCM" not in name else 12),
                  bytes(range(256)) * 64, 1) for name in ("AES-128-CTR", "AES-256-CBC", "AES-128-GCM")
        for prov in ("accelaes", "default")]
emit([outs[i] == outs[i + 1] for i in range(0, len(outs), 2)])
'''


@pytest.mark.parametrize("name", list(engines.ENGINES))
def test_engine_here(require_provider, openssl_env, name):
    why = engines.why_missing(name)
    if why is not None:
        pytest.skip(f"engine {name} ({engines.ENGINES[name][2]}) is not tested here: {why}")
    import evp
    from conftest import MODULES
    env = {k: v for k, v in openssl_env.items()
           if not any(k in spec for spec, _, _ in engines.ENGINES.values())}
    env.update(engines.ENGINES[name][0])
    rc, results, stderr = evp.run_isolated(f"MODDIR={str(MODULES)!r}\n" + CHECK, env=env)
    assert rc == 0 and results == [[True, True, True]], f"engine {name}: rc={rc} {results}\n{stderr[-2000:]}"
