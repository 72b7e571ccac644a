"""tests/test_fuzz_corpus.py: the committed corpus of the differential fuzzer (fuzz/corpus/) as a
regression test that needs no clang: `sh fuzz/run.sh replay-build` compiles fuzz/fuzz_diff.c and the
provider sources with the system C compiler (ASan and UBSan where they link) and a plain main()
(fuzz/replay_main.c), which runs every input once. A difference between accelaes and OpenSSL's
default provider in any call's success, lengths or bytes, or a sanitizer report, aborts it.
A second run plants a difference (FUZZ_DIFF_SELFTEST=1) to show that the comparisons can fail."""

import os
import shutil
import subprocess

import pytest

from conftest import REPO

CORPUS = REPO / "fuzz" / "corpus"
REPLAY = REPO / "build" / "fuzz" / "fuzz_replay"


@pytest.fixture(scope="module")
def replay_bin():
    cc = os.environ.get("REPLAY_CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) to build the corpus replay")
    if not os.path.exists("/usr/include/openssl/evp.h"):
        pytest.skip("OpenSSL headers (libssl-dev) are not installed")
    r = subprocess.run(["sh", "fuzz/run.sh", "replay-build"], cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"building the replay failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    return REPLAY


def corpus_files():
    return sorted(p for p in CORPUS.iterdir() if p.is_file())


def test_corpus_is_committed_and_small():
    files = corpus_files()
    assert 20 <= len(files) <= 200, f"{len(files)} corpus files"
    assert sum(p.stat().st_size for p in files) < 1 << 20


def test_corpus_replays_without_divergence(replay_bin):
    files = corpus_files()
    r = subprocess.run([str(replay_bin), str(CORPUS)], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stderr[-6000:]}"
    assert f"replay: {len(files)} inputs, no divergence" in r.stdout, r.stdout


def test_replay_detects_a_planted_difference(replay_bin):
    """Every seed that streams data must abort once accelaes's output is corrupted after the call."""
    seeds = [p for p in corpus_files() if p.name.endswith("-stream")]
    assert seeds, "no *-stream seeds in the corpus"
    env = dict(os.environ, FUZZ_DIFF_SELFTEST="1")
    for seed in seeds:
        r = subprocess.run([str(replay_bin), str(seed)], cwd=REPO, capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode != 0, f"{seed.name}: a corrupted output went unnoticed"
        assert "DIVERGENCE" in r.stderr and "output bytes differ" in r.stderr, r.stderr[-2000:]
