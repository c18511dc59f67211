"""sinkscope.metrics on numpy arrays: the same numbers as `sinkscope metrics` (same code: equal
to the last bit), the same numbers for every layout and dtype of the same values, and the
command line's errors as ValueError."""

import gc
import os
import resource
import tracemalloc

import numpy as np
import pytest

import sinkscope
from conftest import assert_results_equal, assert_tables_equal


@pytest.fixture(scope="module")
def example():
    return sinkscope.metrics.example_attention()


@pytest.fixture(scope="module")
def baseline(example):
    return sinkscope.metrics.analyze(example, name="example")


def test_equals_cli_metrics(tmp_path, example, baseline, cli):
    np.save(tmp_path / "example.npy", example)
    cli("metrics", "--attention", tmp_path / "example.npy", "--out", tmp_path / "cli")
    on_disk = sinkscope.Results.from_run(tmp_path / "cli")
    # Every table and array the command line wrote, equal to the in-memory results.
    assert_results_equal(baseline, on_disk)
    assert_tables_equal(baseline.streams["sinks"], on_disk.streams["sinks"], "sinks")
    # The keyword defaults are the command line's: the CLI run used its defaults.
    assert on_disk.record["options"] == sinkscope.metrics.defaults()


def test_out_writes_the_cli_run_directory(tmp_path, example, baseline):
    r = sinkscope.metrics.analyze(example, name="example", out=tmp_path / "run", report=False)
    assert r.out == str(tmp_path / "run")
    assert os.path.exists(tmp_path / "run" / "run.json")
    assert_results_equal(baseline, sinkscope.Results.from_run(tmp_path / "run"))
    assert_results_equal(baseline, r)


@pytest.mark.parametrize("layout", ["fortran", "float64", "float64_fortran", "strided",
                                    "batch_2x4"])
def test_every_layout_gives_the_same_numbers(example, baseline, layout):
    if layout == "fortran":
        a = np.asfortranarray(example)
    elif layout == "float64":
        a = example.astype(np.float64)  # float32 -> float64 widening is exact
    elif layout == "float64_fortran":
        a = np.asfortranarray(example.astype(np.float64))
    elif layout == "strided":  # a view into a larger array: every second element of each axis
        big = np.zeros(tuple(2 * s for s in example.shape), dtype=np.float32)
        big[::2, ::2, ::2, ::2, ::2] = example
        a = big[::2, ::2, ::2, ::2, ::2]
        assert not a.flags["C_CONTIGUOUS"] and not a.flags["F_CONTIGUOUS"]
    else:  # leading batch dimensions (2, 4) merge into the 8 inputs
        a = example.reshape((2, 4) + example.shape[1:])
    r = sinkscope.metrics.analyze(a, name="example")
    assert_results_equal(baseline, r, layout + ": ")


def test_float16_equals_its_float64_widening(example):
    h = example.astype(np.float16)
    a = sinkscope.metrics.analyze(h, analyses="compositional,heads", zeros="replace:1e-9")
    b = sinkscope.metrics.analyze(h.astype(np.float64), analyses="compositional,heads",
                                  zeros="replace:1e-9")
    assert_results_equal(a, b)


def test_borrowed_not_copied(example):
    # The array is read in place: a view's base keeps the data, nothing is converted up front.
    big = np.repeat(example, 4, axis=0)  # (32, 4, 4, 16, 16)
    tracemalloc.start()
    sinkscope.metrics.analyze(big, analyses="sink_eps")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # numpy allocations are traced: a copy of the input would show up as >= its size.
    assert peak < big.nbytes // 2


def test_convenience_functions(example, baseline):
    assert np.array_equal(sinkscope.metrics.head_distances(example, "dA_perp"),
                          baseline.arrays["distances/dA_perp"])
    assert_tables_equal(sinkscope.metrics.reversal_rates(example), baseline["reversal"])
    assert_tables_equal(sinkscope.metrics.betti_curves(example, name="example"),
                        baseline["betti"])
    rows = sinkscope.metrics.decompose(example)
    # Exact identity of spec section 6 on every row: H = H_b(s) + (1 - s) H(pi).
    s, c = rows["sink_mass"], rows["content_mass"]
    hb = -s * np.log(s) - c * np.log(c)
    assert np.allclose(rows["entropy"], hb + c * rows["content_entropy"], rtol=0, atol=1e-12)
    assert len(s) == 8 * 4 * 4 * (16 - 2)  # rows with at least min_parts = 3 visible keys


@pytest.mark.parametrize("call,message", [
    (lambda a: sinkscope.metrics.analyze(a[0, 0]), "has rank 3, expected (..., L, H, T, T)"),
    (lambda a: sinkscope.metrics.analyze(a[..., :15]),
     "the last two dimensions (query, key) must be equal"),
    (lambda a: sinkscope.metrics.analyze(a.astype(np.complex64)), "dtype complex64 is not"),
    (lambda a: sinkscope.metrics.analyze(a.astype(">f4")), "big-endian"),
    (lambda a: sinkscope.metrics.analyze(a, scores=a[:4]), "scores shape"),
    (lambda a: sinkscope.metrics.analyze(a, min_parts=1), "--min-parts must be >= 2"),
    (lambda a: sinkscope.metrics.analyze(a, masking="sideways"), "masking must be auto"),
    (lambda a: sinkscope.metrics.analyze(a, lengths=np.zeros(8, np.int64)),
     "length of input 0 is 0"),
    (lambda a: sinkscope.metrics.analyze(a * 2), "sums to 2"),
])
def test_bad_input_raises_value_error(example, call, message):
    with pytest.raises(ValueError) as e:
        call(example)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_nan_names_the_entry(example):
    a = example.copy()
    a[0, 0, 0, 3, 1] = np.nan
    with pytest.raises(sinkscope.InputError, match=r"NaN at visible entry .* = \(0, 0, 0, 3, 1\)"):
        sinkscope.metrics.analyze(a)


def test_unknown_option_is_a_type_error(example):
    with pytest.raises(TypeError, match="unknown analysis option 'min_part'"):
        sinkscope.metrics.analyze(example, min_part=3)


def test_no_leaks_over_1000_calls(example):
    small = np.ascontiguousarray(example[:1, :2, :2, :8, :8])
    small = small / small.sum(-1, keepdims=True)
    call = lambda: sinkscope.metrics.analyze(small, analyses="compositional")  # noqa: E731
    for _ in range(50):  # warm-up: caches, first-use allocations
        call()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(1000):
        call()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # A leaked result (a few KiB of tables per call) would add megabytes over 1,000 calls.
    assert grown < 256 * 1024, f"Python heap grew by {grown} bytes over 1000 calls"
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    assert rss_after - rss_before < 16 * 1024, "peak RSS grew by over 16 MiB in 1000 calls"


def test_zero_stride_view_of_a_huge_shape_is_refused_before_any_work():
    # A few bytes viewed as 10^6 x 10^6 heads (issue 46 item 10: it ran for hours): the elements
    # the shape declares are checked against the limit array_elements first, one ValueError
    # naming the array, the limit and how to raise it.
    row = np.full(4, 0.25, dtype=np.float32)
    view = np.lib.stride_tricks.as_strided(row, shape=(1, 10**6, 10**6, 4, 4),
                                           strides=(0, 0, 0, 0, 4))
    with pytest.raises(ValueError) as e:
        sinkscope.metrics.analyze(view)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("attention: shape (1, 1000000, 1000000, 4, 4): elements")
    assert "array_elements" in message


def test_set_limit_raises_the_array_limit_for_a_genuine_view(example):
    # A broadcast view within a raised limit runs, and gives the numbers of the same values held
    # in memory.
    view = np.broadcast_to(example[:1], (2,) + example.shape[1:])
    sinkscope.set_limit("array_elements=%d" % (view.size - 1))
    try:
        with pytest.raises(ValueError, match="array_elements"):
            sinkscope.metrics.analyze(view, analyses=["compositional"])
    finally:
        sinkscope.set_limit("array_elements=%d" % (1 << 36))
    r = sinkscope.metrics.analyze(view, analyses=["compositional"])
    held = sinkscope.metrics.analyze(np.ascontiguousarray(view), analyses=["compositional"])
    assert_results_equal(r, held)
