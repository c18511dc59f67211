"""sinkscope.analyze over two processes from Python (world_size, rank, master: the command line's
--world-size, --rank, --master), results kept in memory: rank 0 returns the merged tables, equal to
one process's within the rule of the C++ distributed tests (tests/cli/integration_distributed.cpp):
the streamed tables (sinks, per-input values) and entropy_rows exactly, as the merge concatenates
them; every other number within 1e-12 * max(1, |a|, |b|), since the shards' fp64 sums are added
at rank 0 in another association (N * 2^-53 relative for N inputs, times the conditioning of the
derived quantities), with the C++ test's allowances for section 8's std columns and regions.csv;
text cells exactly. The other rank returns None."""

import os
import pickle
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sinkscope

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

OPTIONS = dict(samples=12, max_tokens=16, threads=1, per_input=True,
               analyses="compositional,heads,graphs,sink_eps,entropy_rows")
REL = 1e-12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, model, world):
    master = f"127.0.0.1:{free_port()}"
    procs = []
    for rank in range(world):
        script = textwrap.dedent(f"""
            import pickle, sinkscope
            r = sinkscope.analyze({str(model)!r}, world_size={world}, rank={rank},
                                  master={master!r}, dist_timeout=60, **{OPTIONS!r})
            if {rank} == 0:
                with open({str(tmp_path / "rank0.pickle")!r}, "wb") as f:
                    pickle.dump((r.tables, r.streams, r.arrays, r.record, r.out), f)
            else:
                assert r is None, r
        """)
        procs.append(subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=dict(os.environ)))
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}: {err}"
    with open(tmp_path / "rank0.pickle", "rb") as f:
        return pickle.load(f)


def regions_scale(t):
    """regions.csv: a quantity's statistics (t, p, intervals...) amplify a relative change d of
    its values by up to kappa = 1 + |mean| / sd of its regions (the C++ test's regions_kappa);
    infinite (the rows are not compared) where a region's sd is 0 and its mean is not."""
    keys = list(zip(t["table"], t["metric"], t["param"]))
    moments = {}
    for k, region, stat, v in zip(keys, t["region"], t["statistic"], t["value"]):
        m = moments.setdefault(k, {}).setdefault(region, [np.nan, np.nan])
        if stat in ("mean", "sd"):
            m[stat == "sd"] = v
    kappa = {}
    for k, regions in moments.items():
        kappa[k] = 1.0
        for mean, sd in regions.values():
            if np.isfinite(mean) and np.isfinite(sd):
                kappa[k] = max(kappa[k], 1 + abs(mean) / sd if sd > 0 else
                               np.inf if mean != 0 else 1.0)
    return np.array([kappa[k] for k in keys])


def moment_std_tol(t):
    """Section 8's std columns, sqrt(S2 / n - (S1 / n)^2): re-associated sums move the variance
    by up to (3n + 4) eps E[x^2], which the root turns into its square root, twice (both runs);
    E[x^2] = value^2 + std^2 (the C++ test's moment_std_tol)."""
    n = np.asarray(t["n"], np.float64) if "n" in t else 0.0
    value, sd = np.asarray(t["value"], np.float64), np.asarray(t["std"], np.float64)
    return 2 * np.sqrt((3 * n + 4) * np.finfo(np.float64).eps * (value ** 2 + sd ** 2))


def assert_close(want, got, name, exact):
    assert list(want) == list(got), f"{name}: columns"
    n_rows = len(next(iter(want.values())))
    assert len(next(iter(got.values()))) == n_rows, f"{name}: rows"
    scale = regions_scale(want) if name == "regions" else np.ones(n_rows)
    rows = np.isfinite(scale)
    for col in want:
        a, b = np.asarray(want[col])[rows], np.asarray(got[col])[rows]
        assert a.shape == b.shape, f"{name}.{col}: rows"
        if a.dtype.kind != "f" or b.dtype.kind != "f" or exact:
            assert a.dtype == b.dtype and (np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                                           if a.dtype.kind == "f" else list(a) == list(b)), \
                f"{name}.{col} differs"
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{name}.{col}: NaN cells differ"
        finite = np.isfinite(a)
        infinite = ~finite & ~np.isnan(a)
        assert np.array_equal(a[infinite], b[infinite]), f"{name}.{col}: infinite cells differ"
        a, b = a[finite], b[finite]
        assert np.all(np.isfinite(b)), f"{name}.{col}: infinite cells differ"
        tol = REL * scale[rows][finite] * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
        if col == "std":
            tol = np.maximum(tol, moment_std_tol(want)[rows][finite])
        bad = ~(np.abs(a - b) <= tol)
        assert not bad.any(), f"{name}.{col}: {a[bad][:3]!r} vs {b[bad][:3]!r}"


def test_two_ranks_equal_one_process(tmp_path, tiny_model):
    one = sinkscope.analyze(tiny_model, **OPTIONS)
    tables, streams, arrays, record, out = run_ranks(tmp_path, tiny_model, 2)
    assert out is None and sorted(os.listdir(tmp_path)) == ["rank0.pickle"]  # nothing written
    assert record["distributed"]["world_size"] == 2
    assert one.record["distributed"]["world_size"] == 1
    assert sorted(tables) == sorted(one.tables) and len(tables) >= 5
    for name in tables:
        assert_close(one.tables[name], tables[name], name, exact=False)
    assert sorted(streams) == sorted(one.streams) and "sinks" in streams
    for name in streams:
        assert_close(one.streams[name], streams[name], name, exact=True)
    assert sorted(arrays) == sorted(one.arrays)
    assert np.array_equal(arrays["entropy_rows"], one.arrays["entropy_rows"])
    for name in arrays:
        a, b = one.arrays[name], arrays[name]
        assert a.shape == b.shape and np.allclose(a, b, rtol=REL, atol=REL, equal_nan=True), name


def test_rank_outside_the_world_is_refused(tiny_model):
    with pytest.raises(sinkscope.UsageError, match=r"--rank \(RANK\) 2 outside \[0, 2\)"):
        sinkscope.analyze(tiny_model, world_size=2, rank=2, master="127.0.0.1:1", samples=2)
