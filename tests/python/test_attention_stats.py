"""The attention_stats analysis against numpy: per input and layer, the mean, maximum and standard
deviation (ddof 0) of the n x n entries of the head-averaged attention (each row renormalised to
sum 1, as the principled convention reads rows), masked zeros included; the table holds their
means over inputs."""

import numpy as np

import sinkscope

# Every value is a sum of at most n^2 = 256 double terms of magnitude <= 1 (a mean, or squared
# deviations), computed in another order than numpy's pairwise sums: the two differ by at most
# about 256 * 2^-52 ~ 6e-14 before the division; 1e-12 leaves room and still fails on any real
# difference (the statistics differ between layers by more than 1e-3).
TOL = 1e-12


def reference(a, lengths):
    """[L] x {mean, max, std}: numpy on each input's head average, then the mean over inputs."""
    per_input = []
    for i, n in enumerate(lengths):
        x = a[i, :, :, :n, :n].astype(np.float64)
        # The principled convention reads each stored row renormalised to sum 1 (in double).
        x = x / x.sum(axis=-1, keepdims=True)
        avg = x.mean(axis=1)  # [L, n, n]
        per_input.append([(m.mean(), m.max(), m.std()) for m in avg])
    return np.array(per_input).mean(axis=0)  # [L, 3]


def table_values(t):
    out = {}
    for layer, head, metric, value in zip(t["layer"], t["head"], t["metric"], t["value"]):
        assert head == -1
        out[(int(layer), str(metric))] = float(value)
    return out


def test_equals_numpy_on_the_example():
    a = sinkscope.metrics.example_attention()
    n = a.shape[-1]
    got = table_values(sinkscope.metrics.analyze(a, analyses="attention_stats")["attention_stats"])
    want = reference(a, [n] * a.shape[0])
    for layer in range(a.shape[1]):
        for k, metric in enumerate(["attention_mean", "attention_max", "attention_std"]):
            assert abs(got[(layer, metric)] - want[layer, k]) <= TOL, (layer, metric)
        # Rows sum to 1: the mean is 1/n (an identity independent of numpy).
        assert abs(got[(layer, "attention_mean")] - 1.0 / n) <= TOL
    # The layers differ: a comparison that cannot tell them apart would be vacuous.
    stds = [got[(layer, "attention_std")] for layer in range(a.shape[1])]
    assert max(stds) - min(stds) > 1e-3


def test_inputs_of_different_lengths_use_their_own_n():
    a = sinkscope.metrics.example_attention()
    lengths = np.array([16, 12, 9, 16, 5, 16, 14, 7], dtype=np.int64)
    # Each input's attention over its own n positions: the causal rows renormalised to sum 1.
    b = np.zeros_like(a)
    for i, n in enumerate(lengths):
        block = np.tril(a[i, :, :, :n, :n].astype(np.float64))
        b[i, :, :, :n, :n] = block / block.sum(axis=-1, keepdims=True)
    got = table_values(sinkscope.metrics.analyze(b, lengths=lengths,
                                                 analyses="attention_stats")["attention_stats"])
    want = reference(b, lengths)
    for layer in range(a.shape[1]):
        for k, metric in enumerate(["attention_mean", "attention_max", "attention_std"]):
            assert abs(got[(layer, metric)] - want[layer, k]) <= TOL, (layer, metric)
        assert abs(got[(layer, "attention_mean")] - np.mean(1.0 / lengths)) <= TOL
