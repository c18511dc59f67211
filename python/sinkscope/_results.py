"""Results of an analysis as Python objects: tables as columns of numpy arrays, arrays, run.json.

A table is a dict {column name: numpy array} (int64, float64, or object when the column holds
text), with the same rows and numbers as the CSV file the command line writes. ``to_pandas``
turns one into a DataFrame when pandas is installed.
"""

import io
import json
import os

import numpy as np

from . import _sinkscope


def _array_key(path):
    """'distances/dA_perp.npy' -> 'distances/dA_perp' (the same key in memory and on disk)."""
    return path[:-4] if path.endswith(".npy") else path


# The run folder's own bookkeeping (core/output_dir.hpp), not a result.
_RUN_FILES = "run_files.json"


def _read_entries(entries):
    """tables, arrays, texts, streams, record of a run's files, given as (relative path, opener)
    pairs, opener(kind) -> the file as a table ("table"), an array ("array") or text ("text").
    One rule for a run directory and for a run's files kept in memory."""
    tables, arrays, texts, streams, record = {}, {}, {}, {}, {}
    for rel, opener in entries:
        name = rel.rsplit("/", 1)[-1]
        if name.endswith(".csv"):
            stem = rel[:-4]
            target = streams if (stem == "sinks" or stem.endswith("_per_input")) else tables
            target[stem] = opener("table")
        elif name.endswith(".npy"):
            arrays[_array_key(rel)] = opener("array")
        elif rel == "run.json":
            record = json.loads(opener("text"))
        elif name.endswith(".json") and name not in ("run.json", _RUN_FILES):
            texts[rel] = opener("text")
    return tables, arrays, texts, streams, record


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

        def opener(path):
            def open_as(kind):
                if kind == "table":
                    return _sinkscope.read_table(path)
                if kind == "array":
                    return np.load(path)
                with open(path, encoding="utf-8") as f:
                    return f.read()
            return open_as

        entries = []
        for root, _dirs, files in os.walk(directory):
            rel_root = os.path.relpath(root, directory)
            for name in sorted(files):
                rel = name if rel_root == "." else "/".join((*rel_root.split(os.sep), name))
                entries.append((rel, opener(os.path.join(root, name))))
        return cls(*_read_entries(entries), summary, (), directory)

    @classmethod
    def _from_files(cls, files, summary=""):
        """A run's files kept in memory ({relative path: bytes}), read as from_run reads them
        from a run directory."""
        def opener(rel, data):
            def open_as(kind):
                if kind == "table":
                    return _sinkscope.parse_table(data, "<memory>/" + rel)
                if kind == "array":
                    return np.load(io.BytesIO(data))
                return data.decode("utf-8")
            return open_as

        return cls(*_read_entries((rel, opener(rel, data)) for rel, data in sorted(files.items())),
                   summary, (), None)

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
