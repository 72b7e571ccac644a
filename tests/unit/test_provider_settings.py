"""Provider plumbing: gettable provider parameters, the settings of docs/DESIGN.md from openssl.cnf and
from ACCELAES_* environment variables (a bad value or unknown key refuses the load and names the
setting, never a crash), and the nested-EVP engine that CPUs without AES-NI use."""
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
KEY = "000102030405060708090a0b0c0d0e0f"
IV = "0f0e0d0c0b0a09080706050403020100"
DATA = bytes(range(256)) * 37


def run_enc(env, extra_env=None, cipher="aes-128-cbc", providers=("accelaes", "default")):
    e = dict(env)
    e.update(extra_env or {})
    args = ["openssl", "enc", f"-{cipher}", "-K", KEY, "-iv", IV]
    for p in providers:
        args += ["-provider", p]
    if "accelaes" in providers:
        args += ["-propquery", "provider=accelaes"]
    return subprocess.run(args, input=DATA, capture_output=True, env=e, timeout=60)


def reference(cipher="aes-128-cbc"):
    return subprocess.run(["openssl", "enc", f"-{cipher}", "-K", KEY, "-iv", IV], input=DATA,
                          capture_output=True, check=True, timeout=60).stdout


def test_provider_params(require_provider, openssl_env):
    r = subprocess.run(["openssl", "list", "-providers", "-verbose", "-provider", "accelaes"],
                       capture_output=True, text=True, env=openssl_env, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "accelaes" in out
    assert "accelaes AES offload provider" in out          # OSSL_PROV_PARAM_NAME
    assert "version: 0.1.0" in out                          # OSSL_PROV_PARAM_VERSION
    assert "status: active" in out                          # OSSL_PROV_PARAM_STATUS
    assert "build info: accelaes 0.1.0, engine" in out       # OSSL_PROV_PARAM_BUILDINFO


@pytest.mark.parametrize("name,value", [
    ("BACKEND", "gpu"), ("BACKEND", ""), ("WORKERS", "-1"), ("WORKERS", "many"), ("WORKERS", "5000"),
    ("SPLIT_MIN", "0"), ("SPLIT_MIN", "12q"), ("SPLIT_MIN", "99999999999999999999"),
    # 2^54 + 1 KiB: shifted by 10 before the range check it wrapped to 1 KiB and was accepted
    ("SPLIT_MIN", "18014398509481985k"), ("GPU_MIN", "17592186044417m"), ("SPLIT_MIN", "1025g"),
    ("GPU_MIN", "-5"), ("SHM", "maybe"),
])
def test_bad_env_setting_refuses_load(require_provider, openssl_env, name, value):
    r = run_enc(openssl_env, {f"ACCELAES_{name}": value})
    assert r.returncode != 0 and r.returncode > 0, "must fail cleanly, not crash or succeed"
    err = r.stderr.decode()
    assert f"setting '{name.lower()}'" in err, err
    assert f"ACCELAES_{name}" in err, err
    assert r.stdout == b""


@pytest.mark.parametrize("extra", [
    {"ACCELAES_BACKEND": "cpu"}, {"ACCELAES_BACKEND": "AUTO"}, {"ACCELAES_WORKERS": "1"},
    {"ACCELAES_WORKERS": "auto"}, {"ACCELAES_SPLIT_MIN": "64k"}, {"ACCELAES_SPLIT_MIN": "16"},
    {"ACCELAES_SPLIT_MIN": "1024g"},
    {"ACCELAES_GPU_MIN": "auto"}, {"ACCELAES_GPU_MIN": "1m"}, {"ACCELAES_SHM": "off"},
    {"ACCELAES_SHM": "on"},
])
def test_good_env_settings_work(require_provider, openssl_env, extra):
    r = run_enc(openssl_env, extra)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == reference()


def write_conf(tmp_path, body):
    conf = tmp_path / "accelaes-test.cnf"
    conf.write_text(
        "openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\n"
        "[provider_sect]\ndefault = default_sect\naccelaes = accelaes_sect\n"
        "[default_sect]\nactivate = 1\n[accelaes_sect]\nactivate = 1\n" + body)
    return conf


def conf_env(openssl_env, conf):
    e = dict(openssl_env)
    e["OPENSSL_CONF"] = str(conf)
    for k in list(e):
        if k.startswith("ACCELAES_") and k != "ACCELAES_SHM_NAME":
            del e[k]
    return e


def test_conf_settings_accepted(require_provider, openssl_env, tmp_path):
    conf = write_conf(tmp_path, "backend = cpu\nworkers = 2\nsplit_min = 128k\ngpu_min = auto\nshm = auto\n")
    e = conf_env(openssl_env, conf)
    r = subprocess.run(["openssl", "enc", "-aes-128-cbc", "-K", KEY, "-iv", IV, "-propquery", "provider=accelaes"],
                       input=DATA, capture_output=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == reference()
    r = subprocess.run(["openssl", "list", "-providers"], capture_output=True, text=True, env=e, timeout=60)
    assert "accelaes" in r.stdout


@pytest.mark.parametrize("body,named", [
    ("backend = quantum\n", "setting 'backend'"),
    ("split_min = lots\n", "setting 'split_min'"),
    ("shm = sometimes\n", "setting 'shm'"),
    ("wrokers = 4\n", "unknown setting 'wrokers'"),
])
def test_conf_bad_setting_refuses_load(require_provider, openssl_env, tmp_path, body, named):
    e = conf_env(openssl_env, write_conf(tmp_path, body))
    r = subprocess.run(["openssl", "enc", "-aes-128-cbc", "-K", KEY, "-iv", IV, "-provider", "accelaes",
                        "-provider", "default", "-propquery", "provider=accelaes"],
                       input=DATA, capture_output=True, env=e, timeout=60)
    assert r.returncode > 0, "a bad setting must refuse the load, not crash or encrypt"
    assert named in r.stderr.decode(), r.stderr.decode()
    assert r.stdout == b""


def test_env_overrides_conf(require_provider, openssl_env, tmp_path):
    """The environment wins over openssl.cnf: a bad value in the environment fails even with a good conf."""
    e = conf_env(openssl_env, write_conf(tmp_path, "backend = cpu\n"))
    e["ACCELAES_BACKEND"] = "nope"
    r = subprocess.run(["openssl", "list", "-providers", "-provider", "accelaes"], capture_output=True,
                       text=True, env=e, timeout=60)
    assert "setting 'backend'" in r.stderr


def test_nested_evp_engine_is_chosen(require_provider, openssl_env):
    """CPUs without AES-NI use nested EVP calls into a private library context: ACCELAES_FORCE_EVP_ENGINE=1 picks
    it (the conformance tests run on it through the `engine` fixture, tests/engines.py: engine "evp")."""
    e = dict(openssl_env)
    e["ACCELAES_FORCE_EVP_ENGINE"] = "1"
    r = subprocess.run(["openssl", "list", "-providers", "-verbose", "-provider", "accelaes"],
                       capture_output=True, text=True, env=e, timeout=60)
    assert "engine evp" in r.stdout, r.stdout


@pytest.mark.parametrize("body", ["backend = quantum\n", "workers = many\n"])
def test_conf_bad_value_names_the_file(require_provider, openssl_env, tmp_path, body):
    """The message names the configuration file the value came from (OPENSSL_CONF here), not a generic
    "openssl.cnf": the value reaches the provider both through the core and through its own scan."""
    conf = write_conf(tmp_path, body)
    e = conf_env(openssl_env, conf)
    r = subprocess.run(["openssl", "enc", "-aes-128-cbc", "-K", KEY, "-iv", IV, "-provider", "accelaes",
                        "-provider", "default", "-propquery", "provider=accelaes"],
                       input=DATA, capture_output=True, env=e, timeout=60)
    err = r.stderr.decode()
    assert r.returncode > 0
    assert f"(from {conf})" in err, err
    assert "(from openssl.cnf)" not in err, err


def test_unknown_env_variable_warns_once(require_provider, openssl_env):
    """A misspelt ACCELAES_* variable draws one line on stderr naming it and the known ones; the load
    goes on (the environment reaches every program, so a stray name is not a reason to refuse)."""
    r = run_enc(openssl_env, {"ACCELAES_WORKER": "2", "ACCELAES_SPLITMIN": "1m"})
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert r.stdout == reference()
    lines = [l for l in err.splitlines() if "unknown environment variable" in l]
    assert len(lines) == 1, err
    assert "ACCELAES_WORKER " in lines[0] or "ACCELAES_SPLITMIN " in lines[0], lines[0]
    for known in ("ACCELAES_WORKERS", "ACCELAES_BACKEND", "ACCELAES_SPLIT_MIN", "ACCELAES_GPU_MIN", "ACCELAES_SHM",
                  "ACCELAES_SHM_NAME"):
        assert known in lines[0], lines[0]


def test_every_variable_the_gpu_plugin_reads_is_known(require_provider, openssl_env):
    """Each ACCELAES_* name the CUDA plugin's sources read (accel/cuda/*.cu) is one the provider knows: a
    user tuning the plugin (ACCELAES_CUDA_DMA=register) must not be told the name means nothing."""
    names = set()
    for src in sorted((REPO / "accel/cuda").glob("*.cu")):
        names |= set(re.findall(r'"(ACCELAES_[A-Z0-9_]+)"', src.read_text()))
    assert "ACCELAES_CUDA_DMA" in names and len(names) >= 10, names
    r = run_enc(openssl_env, {n: "" for n in names})
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "unknown environment variable" not in err, err


def test_known_env_variables_do_not_warn(require_provider, openssl_env):
    """The provider's own variables, and the ones the project's tools and tests read, say nothing."""
    extra = {"ACCELAES_WORKERS": "1", "ACCELAES_SHM": "auto", "ACCELAES_NO_VAES": "", "ACCELAES_CUDA_SLOTS": "4",
             "ACCELAES_GPU_VERBOSE": "", "ACCELAES_TEST_SEED": "1", "ACCELAES_BUILD_DIR": "build",
             "ACCELAES_SANITIZER": "", "ACCELAES_INSTALLED": "0"}
    r = run_enc(openssl_env, extra)
    assert r.returncode == 0, r.stderr.decode()
    assert b"unknown environment variable" not in r.stderr, r.stderr.decode()
