"""tests/unit/test_bench_outputs.py: what `make speed` and `make bench` write, without measuring anything: their
results go under build/results (the checkout stays clean; `make bench-publish` copies them to bench/results on
purpose), and the speed plot tells the providers apart by colour with one readable legend."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "bench" / "scripts"))

# A stand-in for the openssl command: answers `list`, `version` and `speed -mr` at once with fixed figures.
FAKE_OPENSSL = r"""#!/bin/sh
case $1 in
  list) exit 0 ;;
  version) echo "OpenSSL 3.0.0 (fake)"; exit 0 ;;
  speed) case " $* " in
           *" -bytes "*) echo "+H:1048576"; echo "+F:22:x:7000000000" ;;
           *) echo "+H:16:64:256:1024:8192:16384"; echo "+F:22:x:1e9:2e9:3e9:4e9:5e9:6e9" ;;
         esac ;;
esac
"""


def test_speed_writes_under_build(tmp_path):
    fake = tmp_path / "openssl"
    fake.write_text(FAKE_OPENSSL)
    fake.chmod(0o755)
    env = dict(os.environ, OPENSSL=str(fake), SPEED_PROVIDER="default", SPEED_ROUNDS="1")
    env.pop("SPEED_OUT", None)
    r = subprocess.run(["sh", str(REPO / "bench" / "scripts" / "speed.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "build" / "results" / "speed-latest.md"
    assert out.exists(), list(tmp_path.rglob("*"))
    assert "| aes-128-ctr | encrypt | 1048576 |" in out.read_text()
    assert not (tmp_path / "bench").exists()


def test_bench_results_dir_is_under_build():
    import run
    assert run.RESULTS == REPO / "build" / "results"


def test_speed_plot_colours_and_legend(tmp_path):
    if os.environ.get("ACCELAES_SANITIZER"):
        pytest.skip("python exited without a report when matplotlib loaded under the preloaded sanitizer runtime: "
                    "the plain run checks the plot")
    pytest.importorskip("matplotlib", reason="matplotlib not installed (sh scripts/dev/install-deps.sh bench)")
    import matplotlib.pyplot as plt
    import plots
    rows = [{"cipher": f"aes-{b}-ctr", "op": op, "provider": p, "size": s, "median": m * s}
            for b in (128, 256) for op in ("encrypt", "decrypt") for p, m in (("default", 1e3), ("accelaes", 2e3))
            for s in (16, 1024, 16384)]
    seen = {}
    real_savefig = plt.Figure.savefig

    def capture(fig, path, **kw):
        seen["fig"] = fig
        return real_savefig(fig, path, **kw)
    plt.Figure.savefig = capture
    try:
        plots.speed_plot({"rows": rows}, "accelaes", tmp_path / "speed.png")
    finally:
        plt.Figure.savefig = real_savefig
    assert (tmp_path / "speed.png").stat().st_size > 0
    fig = seen["fig"]
    colours = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            prov = line.get_label().split(",")[0]
            colours.setdefault(prov, set()).add(line.get_color())
    assert set(colours) == {"default", "accelaes"}
    assert colours["default"].isdisjoint(colours["accelaes"]), colours
    assert len(fig.legends) == 1 and fig.legends[0].get_texts()[0].get_fontsize() >= 9
    assert len(fig.legends[0].get_texts()) == 4   # two providers x two key sizes
