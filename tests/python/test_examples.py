"""examples/paper_figures.py runs on the default model and draws both figures from the run's
tables."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import sinkscope

import pytest

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")


def test_paper_figures(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "paper_figures.py")
    r = subprocess.run([sys.executable, script, "--out", str(tmp_path), "--samples", "12"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "flip rate js:" in r.stdout
    ns = "{http://www.w3.org/2000/svg}"
    bars = ET.parse(tmp_path / "figure_p1_flip_rates.svg").getroot().findall(f"{ns}rect")
    curves = ET.parse(tmp_path / "figure_p2_betti0.svg").getroot().findall(f"{ns}polyline")
    assert len(bars) == 6  # 3 metrics x (keep vs drop, keep vs dA_perp)
    assert len(curves) >= 2  # one curve per layer of the default model
    assert (tmp_path / "analyze" / "run.json").exists()


def test_interventions_example():
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "interventions.py")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "1. sink removal" in r.stdout and "2. activation patching" in r.stdout
    # the last line: every hook patched gives the source run's value, printed the same
    last = r.stdout.strip().splitlines()[-1].split()
    assert last[3] == last[-1], r.stdout
