"""Shared fixtures of the Python binding tests (run by ctest, or directly:
PYTHONPATH=build/python SINKSCOPE_CLI=build/sinkscope /usr/bin/python3 -m pytest tests/python).
"""

import os
import subprocess

import numpy as np
import pytest



def _shared():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("SINKSCOPE_SHARED") or os.path.join(here, "..", "..", "..", "shared")
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def shared():
    """../shared (test material); tests that need it skip with a message when it is absent."""
    path = _shared()
    if not os.path.isdir(os.path.join(path, "models")):
        pytest.skip(f"shared test material not found at {path} (set SINKSCOPE_SHARED)")
    return path


@pytest.fixture(scope="session")
def tiny_model(shared):
    return os.path.join(shared, "models", "tinystories656K")


@pytest.fixture(scope="session")
def cli():
    """Runs the sinkscope executable of the same build; returns its CompletedProcess."""
    exe = os.environ.get("SINKSCOPE_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("SINKSCOPE_CLI (the sinkscope executable of this build) is not set")

    def run(*args, check=True):
        r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"sinkscope {' '.join(map(str, args))} exited {r.returncode}: "
                                 f"{r.stderr}")
        return r
    return run


def assert_tables_equal(a, b, where=""):
    """Two tables ({column: array}) hold the same cells: numbers equal exactly (NaN == NaN),
    text equal. A column may be int64 on one side and float64 on the other (a CSV read back
    parses every number as a double); both are the same value."""
    assert list(a) == list(b), f"{where}: columns {list(a)} vs {list(b)}"
    for col in a:
        x, y = np.asarray(a[col]), np.asarray(b[col])
        assert x.shape == y.shape, f"{where}.{col}: {x.shape} rows vs {y.shape}"
        if x.dtype.kind in "if" and y.dtype.kind in "if":
            assert np.array_equal(x.astype(np.float64), y.astype(np.float64), equal_nan=True), \
                f"{where}.{col} differs"
        else:
            sx = [_cell(v) for v in x]
            sy = [_cell(v) for v in y]
            assert sx == sy, f"{where}.{col} differs"


def _cell(v):
    """A cell as the CSV file holds it: text that reads as a number is that number."""
    if isinstance(v, (int, float, np.integer, np.floating)):
        return ("n", float(v))
    try:
        return ("n", float(v)) if v.strip() else ("s", v)
    except ValueError:
        return ("s", str(v))


def assert_results_equal(a, b, where=""):
    assert sorted(a.tables) == sorted(b.tables), f"{where}: tables differ"
    for name in a.tables:
        assert_tables_equal(a.tables[name], b.tables[name], f"{where}{name}")
    assert sorted(a.arrays) == sorted(b.arrays), f"{where}: arrays differ"
    for name in a.arrays:
        x, y = a.arrays[name], b.arrays[name]
        assert x.dtype == y.dtype and x.shape == y.shape, f"{where}{name}"
        assert np.array_equal(x, y, equal_nan=True), f"{where}{name} differs"


def adjusted_rand_index(a, b):
    """ARI from the contingency table (Hubert & Arabie 1985): (index - expected) / (max -
    expected); 1 when both partitions are trivial the same way. Written here, independent of
    sinkscope, for the clustering tests."""
    from scipy.special import comb
    _, ai = np.unique(np.asarray(a), return_inverse=True)
    _, bi = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(table, (ai, bi), 1)
    index = comb(table, 2).sum()
    rows, cols = comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum()
    expected = rows * cols / comb(len(ai), 2)
    top = 0.5 * (rows + cols)
    return 1.0 if top == expected else (index - expected) / (top - expected)


def training_corpus(folder):
    """The C++ tests' training corpus (tests/testing/testing.cpp write_training_corpus), written to
    folder/corpus.txt; returns its path."""
    names, things = ["Tom", "Mia", "Ben", "Lily"], ["ball", "cat", "kite", "box", "cake"]
    text = "".join(f"{names[i % 4]} had a {things[i * 7 % 5]}. {names[i % 4]} liked the "
                   f"{things[i * 7 % 5]}.\n" for i in range(400))
    path = folder / "corpus.txt"
    path.write_text(text)
    return path
