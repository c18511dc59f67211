"""Results of an analysis as Python objects: tables as columns of numpy arrays, arrays, run.json.

A table is a dict {column name: numpy array} (int64, float64, or object when the column holds
text), with the same rows and numbers as the CSV file the command line writes. ``to_pandas``
turns one into a DataFrame when pandas is installed.
"""

import json
import os

import numpy as np

from . import _sinkscope


def _array_key(path):
    """'distances/dA_perp.npy' -> 'distances/dA_perp' (the same key in memory and on disk)."""
    return path[:-4] if path.endswith(".npy") else path


class Results:
    """Tables, arrays and provenance of one run.

    Attributes
    ----------
    tables : dict
        name (the CSV file's stem, e.g. ``"heads"``) -> {column: numpy array}.
    arrays : dict
        relative path without ``.npy`` (e.g. ``"distances/dA_perp"``) -> numpy array.
    texts : dict
        relative path -> text (e.g. ``"frame.json"``).
    streams : dict
        tables written row by row during the run (``"sinks"``, ``"<table>_per_input"``).
    record : dict
        what run.json records (options, conventions, sink positions, ...).
    summary : str
        the lines the command line prints.
    out : str or None
        the run directory when one was written.
    """

    def __init__(self, tables=None, arrays=None, texts=None, streams=None, record=None,
                 summary="", warnings=(), out=None):
        self.tables = dict(tables or {})
        self.arrays = dict(arrays or {})
        self.texts = dict(texts or {})
        self.streams = dict(streams or {})
        self.record = dict(record or {})
        self.summary = summary
        self.warnings = list(warnings)
        self.out = out

    @classmethod
    def _from_native(cls, native, out=None):
        arrays = {_array_key(k): v for k, v in native["arrays"].items()}
        return cls(native["tables"], arrays, native["texts"], native["streams"], native["record"],
                   native["summary"], native["warnings"], out)

    @classmethod
    def from_run(cls, directory, summary=""):
        """Reads a run directory written by sinkscope (any command)."""
        directory = os.fspath(directory)
        tables, arrays, texts, streams = {}, {}, {}, {}
        for root, _dirs, files in os.walk(directory):
            rel_root = os.path.relpath(root, directory)
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = name if rel_root == "." else os.path.join(rel_root, name)
                if name.endswith(".csv"):
                    stem = rel[:-4]
                    target = streams if (stem == "sinks" or stem.endswith("_per_input")) \
                        else tables
                    target[stem] = _sinkscope.read_table(path)
                elif name.endswith(".npy"):
                    arrays[_array_key(rel)] = np.load(path)
                elif name.endswith(".json") and name != "run.json":
                    with open(path, encoding="utf-8") as f:
                        texts[rel] = f.read()
        record = {}
        run_json = os.path.join(directory, "run.json")
        if os.path.exists(run_json):
            with open(run_json, encoding="utf-8") as f:
                record = json.load(f)
        return cls(tables, arrays, texts, streams, record, summary, (), directory)

    def __getitem__(self, name):
        """The table ``name`` (e.g. ``results["heads"]``)."""
        if name in self.tables:
            return self.tables[name]
        if name in self.streams:
            return self.streams[name]
        raise KeyError(f"no table {name!r}; tables: {', '.join(sorted(self.tables))}")

    def __contains__(self, name):
        return name in self.tables or name in self.streams

    def to_pandas(self, name):
        """The table ``name`` as a pandas DataFrame (needs pandas)."""
        try:
            import pandas
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas needs pandas (Debian: python3-pandas)") from e
        return pandas.DataFrame(self[name])

    def __repr__(self):
        where = f" in {self.out}" if self.out else ""
        return (f"<sinkscope.Results{where}: tables {sorted(self.tables)}, "
                f"{len(self.arrays)} arrays>")
