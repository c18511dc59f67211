"""Without out= the commands keep their results in memory: the same tables, streamed tables,
arrays, texts and run.json fields as the run directory out= writes (read back by
Results.from_run), cell for cell and dtype for dtype, and no file is written anywhere meanwhile
(TMPDIR and the working directory stay empty; out= is neither checked nor created)."""

import contextlib
import os
import tempfile
import time

import numpy as np
import pytest

import sinkscope
from conftest import assert_tables_equal

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

# run.json fields that measure the run itself (time, memory), not its results.
VOLATILE = {"wall_time_s", "peak_rss_bytes", "started_utc", "finished_utc"}


@contextlib.contextmanager
def untouched_disk(tmp_path, monkeypatch):
    """TMPDIR and the working directory point to empty folders, which must be untouched
    afterwards: still empty, and not modified in between (a folder's mtime moves when an entry is
    created in it, even one removed again, as a temporary run folder would be). The C++ library
    reads TMPDIR through std::filesystem::temp_directory_path, Python through tempfile (whose
    cached folder is reset)."""
    tmpdir, cwd = tmp_path / "tmpdir", tmp_path / "cwd"
    tmpdir.mkdir()
    cwd.mkdir()
    time.sleep(0.05)  # past the file system clock's tick: any later change moves the mtimes
    before = [os.stat(f).st_mtime_ns for f in (tmpdir, cwd)]
    with monkeypatch.context() as m:
        m.setenv("TMPDIR", str(tmpdir))
        m.setattr(tempfile, "tempdir", None)
        m.chdir(cwd)
        yield
    for folder, mtime in zip((tmpdir, cwd), before):
        assert os.listdir(folder) == [], f"files written during an in-memory call: {folder}"
        assert os.stat(folder).st_mtime_ns == mtime, f"{folder} was written to and cleaned"


def assert_columns_identical(a, b, where):
    """Two tables with the same columns, dtypes and cells (NaN equal to NaN)."""
    assert list(a) == list(b), f"{where}: columns {list(a)} vs {list(b)}"
    for col in a:
        x, y = a[col], b[col]
        assert x.dtype == y.dtype, f"{where}.{col}: {x.dtype} vs {y.dtype}"
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), f"{where}.{col} differs"
        else:
            assert list(x) == list(y), f"{where}.{col} differs"


def assert_identical(mem, disk):
    """What an in-memory run returns equals what its run directory holds."""
    assert mem.out is None and disk.out is not None
    for kind in ("tables", "streams"):
        a, b = getattr(mem, kind), getattr(disk, kind)
        assert sorted(a) == sorted(b), f"{kind}: {sorted(a)} vs {sorted(b)}"
        for name in a:
            assert_columns_identical(a[name], b[name], name)
    assert sorted(mem.arrays) == sorted(disk.arrays)
    for name, x in mem.arrays.items():
        y = disk.arrays[name]
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y, equal_nan=True), f"{name} differs"
    assert mem.texts == disk.texts
    keys = (set(mem.record) | set(disk.record)) - VOLATILE
    assert {k: mem.record.get(k) for k in keys} == {k: disk.record.get(k) for k in keys}


ANALYZE = dict(max_tokens=16, samples=6, threads=1, analyses="all,entropy_rows", per_input=True,
               report=False)


def test_analyze_in_memory_equals_its_run_directory(tmp_path, monkeypatch, tiny_model):
    with untouched_disk(tmp_path, monkeypatch):
        mem = sinkscope.analyze(tiny_model, **ANALYZE)
    disk = sinkscope.analyze(tiny_model, out=tmp_path / "run", **ANALYZE)
    assert_identical(mem, disk)
    # Every kind of output is there: tables, the streamed tables, arrays and texts.
    assert "heads" in mem.tables and "sinks" in mem.streams and "heads_per_input" in mem.streams
    assert "entropy_rows" in mem.arrays and "frame.json" in mem.texts
    assert mem.record["subcommand"] == "analyze"
    assert "analyzed 6 inputs" in mem.summary and "wrote" not in mem.summary


def test_dynamics_in_memory_equals_its_run_directory(tmp_path, monkeypatch, tiny_model):
    (tmp_path / "m.csv").write_text(f"path,step\n{tiny_model},0\n{tiny_model},10\n")
    kw = dict(samples=3, max_tokens=16, threads=1, report=False, analyses="compositional")
    with untouched_disk(tmp_path, monkeypatch):
        mem = sinkscope.dynamics(tmp_path / "m.csv", **kw)
    disk = sinkscope.dynamics(tmp_path / "m.csv", out=tmp_path / "run", **kw)
    assert_identical(mem, disk)
    # The checkpoints' own runs too, under their folders.
    assert "entropy_split" in mem.tables and "checkpoints/001_10/heads" in mem.tables


def test_prune_and_fisher_in_memory_equal_their_run_directories(tmp_path, monkeypatch,
                                                                tiny_model):
    data, held_out = tmp_path / "data.txt", tmp_path / "held_out.txt"
    for f, names in ((data, ("Tom", "Mia", "Ben", "Lily")), (held_out, ("Sam", "Zoe", "Max"))):
        f.write_text("".join(f"Once upon a time a cat named {n} found a ball in the garden.\n"
                             for n in names))
    prune = dict(calib=data, eval=held_out, max_tokens=16, sparsity="0.25", channels="js",
                 random_seeds=1, threads=1)
    fisher = dict(samples=4, max_tokens=16, threads=1)
    with untouched_disk(tmp_path, monkeypatch):
        mem_prune = sinkscope.prune(tiny_model, **prune)
        mem_fisher = sinkscope.fisher(tiny_model, data, **fisher)
    assert_identical(mem_prune, sinkscope.prune(tiny_model, out=tmp_path / "p", **prune))
    assert_identical(mem_fisher, sinkscope.fisher(tiny_model, data, out=tmp_path / "f", **fisher))
    assert "prune" in mem_prune.tables and "fisher" in mem_fisher.tables


def test_compare_in_memory_equals_its_run_directory(tmp_path, monkeypatch, tiny_model):
    for name, sink in (("a", "first"), ("b", "argmax")):
        sinkscope.analyze(tiny_model, out=tmp_path / name, samples=4, max_tokens=16, threads=1,
                          sink=sink, report=False, analyses="compositional,heads")
    runs = (tmp_path / "a", tmp_path / "b")
    with untouched_disk(tmp_path, monkeypatch):
        mem = sinkscope.compare(*runs, allow_mixed=True)
    assert_identical(mem, sinkscope.compare(*runs, allow_mixed=True, out=tmp_path / "c"))
    assert len(mem["models"]["run"]) == 2


def test_metrics_streams_stay_in_memory(tmp_path, monkeypatch):
    # The streamed tables of sinkscope.metrics.analyze (sinks, per-input values) are collected in
    # memory, read as their files are read.
    example = sinkscope.metrics.example_attention()
    with untouched_disk(tmp_path, monkeypatch):
        mem = sinkscope.metrics.analyze(example, name="example", per_input=True, threads=1)
    sinkscope.metrics.analyze(example, name="example", per_input=True, threads=1,
                              out=tmp_path / "run", report=False)
    disk = sinkscope.Results.from_run(tmp_path / "run")
    assert sorted(mem.streams) == sorted(disk.streams) and "sinks" in mem.streams
    for name in mem.streams:
        assert_columns_identical(mem.streams[name], disk.streams[name], name)
    for name in disk.tables:  # in memory the cells keep their types (int64 columns)
        assert_tables_equal(mem.tables[name], disk.tables[name], name)


def test_resume_needs_an_output_folder(tiny_model):
    with pytest.raises(sinkscope.UsageError, match="a run in memory keeps no saved state"):
        sinkscope.analyze(tiny_model, samples=2, resume=True)
