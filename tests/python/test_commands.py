"""The commands from Python write and return what the command line writes; Ctrl-C during a long
run raises KeyboardInterrupt before the run ends and leaves no output behind."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sinkscope
from conftest import assert_results_equal

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")


def test_analyze_equals_cli(tmp_path, tiny_model, cli):
    cli("analyze", "--model", tiny_model, "--max-tokens", 24, "--samples", 40, "--threads", 1,
        "--analyses", "compositional,heads,graphs,sink_eps", "--sink", "first",
        "--out", tmp_path / "cli", "--progress", "never")
    r = sinkscope.analyze(tiny_model, max_tokens=24, samples=40, threads=1,
                          analyses="compositional,heads,graphs,sink_eps", sink="first")
    assert r.out is None  # a temporary run directory, removed
    on_disk = sinkscope.Results.from_run(tmp_path / "cli")
    assert_results_equal(on_disk, r)
    assert r.record["options"] == on_disk.record["options"]
    assert "analyzed 40 inputs" in r.summary


def test_analyze_with_out_and_progress(tmp_path, tiny_model):
    seen = []
    r = sinkscope.analyze(tiny_model, out=tmp_path / "run", max_tokens=16, samples=5,
                          analyses="sink_eps", threads=1, report=False, progress=seen.append)
    assert seen == [1, 2, 3, 4, 5]
    assert r.out == str(tmp_path / "run") and (tmp_path / "run" / "run.json").exists()
    assert "sink_eps" in r


def test_analyze_options_are_validated_like_the_cli(tiny_model, tmp_path):
    with pytest.raises(sinkscope.UsageError, match="--max-tokens"):
        sinkscope.analyze(tiny_model, max_tokens=1, out=tmp_path / "x")
    with pytest.raises(TypeError, match="unknown option 'max_token'"):
        sinkscope.analyze(tiny_model, max_token=3)
    assert not (tmp_path / "x").exists()


def test_analyze_some_layers(tiny_model, tmp_path):
    # analyze --layers as a keyword: run.json records the selection; a layer the model lacks is
    # refused naming the option, before anything is written.
    r = sinkscope.analyze(tiny_model, layers="1", max_tokens=16, samples=3, analyses="sink_eps",
                          threads=1)
    assert r.record["layers"]["analysed"] == [1]
    assert r.record["options"]["layers"] == "1"
    with pytest.raises(sinkscope.UsageError, match="--layers '7': the model has 2 layers"):
        sinkscope.analyze(tiny_model, layers="7", out=tmp_path / "x", samples=3)
    assert not (tmp_path / "x").exists()


def test_progress_callback_error_propagates(tiny_model, tmp_path):
    def boom(n):
        raise RuntimeError(f"stop at {n}")
    with pytest.raises(RuntimeError, match="stop at 1"):
        sinkscope.analyze(tiny_model, out=tmp_path / "run", samples=3, analyses="sink_eps",
                          progress=boom)
    assert not (tmp_path / "run").exists()


N_CTRL_C_INPUTS = 20000


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing(tmp_path, tiny_model):
    # What the user needs from Ctrl-C: KeyboardInterrupt, the run stopped before its last input,
    # no output left. No wall-clock bound (a busy machine breaks any): the latency is measured
    # by bench/ctrl_c_latency.py.
    data = tmp_path / "many.txt"
    data.write_text("".join(f"Once upon a time there were {i} cats in a garden.\n"
                            for i in range(N_CTRL_C_INPUTS)))
    script = textwrap.dedent(f"""
        import sys, sinkscope
        done = 0
        def progress(n):
            global done
            done = n
            if n == 3:
                print("running", flush=True)
        try:
            sinkscope.analyze({str(tiny_model)!r}, {str(data)!r}, out={str(tmp_path / "run")!r},
                              max_tokens=16, threads=1, progress=progress)
        except KeyboardInterrupt:
            print("interrupted", done, flush=True)
            sys.exit(0)
        print("finished", done, flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    assert p.stdout.readline().strip() == "running"
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline().split()
    # Without the interrupt the run ends by itself after its inputs, so this wait is bounded.
    assert p.wait() == 0
    assert line[0] == "interrupted", line
    assert 3 <= int(line[1]) < N_CTRL_C_INPUTS, line
    # Nothing is left: the run directory never appears, and its staging folder goes too (it
    # would stay as <out>.partial only once a state had been saved, every 25 inputs, for
    # resume=True, as when the command line is interrupted).
    assert sorted(os.listdir(tmp_path)) == ["many.txt"]


def test_compare_of_two_runs(tmp_path, tiny_model):
    for name, sink in (("a", "first"), ("b", "argmax")):
        sinkscope.analyze(tiny_model, out=tmp_path / name, samples=10, max_tokens=16,
                          threads=1, sink=sink, report=False, analyses="compositional,heads")
    r = sinkscope.compare(tmp_path / "a", tmp_path / "b", allow_mixed=True, report=False)
    assert len(r["models"]["run"]) == 2


def test_dynamics_of_the_same_weights_twice_changes_nothing(tmp_path, tiny_model):
    # Two "checkpoints" with the same weights: every row's entropy is unchanged, so the exact
    # split of spec section 6 has a zero sink term and a zero content term.
    (tmp_path / "m.csv").write_text(f"path,step\n{tiny_model},0\n{tiny_model},10\n")
    seen = []
    r = sinkscope.dynamics(tmp_path / "m.csv", samples=4, max_tokens=16, threads=1,
                           report=False, progress=seen.append)
    assert seen == [1, 2]
    split = r["entropy_split"]
    assert len(split["sink_term"]) > 0
    assert np.all(split["sink_term"] == 0) and np.all(split["content_term"] == 0)
