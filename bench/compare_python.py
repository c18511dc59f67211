#!/usr/bin/python3
"""The metric suite of `sinkscope metrics` against the same analyses written with numpy/scipy.

Generates one seeded attention file (N, L, H, T, T) float32 of random Dirichlet-like causal rows
with a sink on key 0, runs `sinkscope metrics` on it, computes the same analyses in Python the
way a careful researcher would (float64, scipy.spatial.distance.pdist, scipy.cluster.hierarchy,
vectorised numpy), and prints per analysis both CPU times, the ratio and the largest
difference of the results. bench/README.md has the figures and what is covered.

Covered (spec/METRICS.md): sections 1-2 (the `compositional` analysis: per-head means, the nine
head distance matrices, dispersion and rho), sections 3, 4, 7 (the `heads` analysis: exact
reversal rates over all triples, the k chosen by the dA_perp silhouette, MDS, average-linkage
clusters and their silhouettes, ARI, the regime rows) and the reference-frame analyses computed from
attention alone (bench/compare_section8.py: `graphs` with networkx, `topology` with gudhi,
`kl`, `spectra`, `entropy`, `tokens` keyed by position, `frame`; every cell of their tables:
value, std, n, n_nonfinite, plus token_keys.csv, frame.json and the saved diagrams). Not covered:
what needs a model (value space, hidden-state quantities, Fisher, token strings), compat and
--per-head, the statistics analysis.

Usage (from the repository root, after building):
    /usr/bin/python3 bench/compare_python.py [--sinkscope build/sinkscope] [--inputs 2]
        [--layers 32] [--heads 32] [--tokens 128] [--seed 0] [--threads 2] [--work DIR]
        [--section8-only]
CPU times are process CPU seconds of every thread (the child's rusage for sinkscope,
time.process_time() for Python, which includes BLAS threads).
"""

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from scipy.cluster.hierarchy import cut_tree, linkage
from scipy.linalg import eigh
from scipy.spatial.distance import pdist, squareform

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_section8 as s8  # noqa: E402  (next to this file)

MIN_PARTS = 3  # spec 0 default
TIE_REL = 1e-12  # spec 10.f
REGIME_LO, REGIME_HI, UNSAFE_FLIP = 0.2, 0.5, 0.15  # spec 7 defaults
DISTANCES = ["dA", "dA_perp", "sink_term", "cosine_keep", "cosine_drop", "js_keep", "js_drop",
             "euclidean_keep", "euclidean_drop"]
CLUSTERED = ["dA", "dA_perp", "cosine_keep", "cosine_drop", "js_keep", "js_drop",
             "euclidean_keep", "euclidean_drop"]
# spec 3 comparisons in table order: (comparison, metric, first, second)
COMPARISONS = [("flip", "cosine", "cosine_keep", "cosine_drop"),
               ("flip", "js", "js_keep", "js_drop"),
               ("flip", "euclidean", "euclidean_keep", "euclidean_drop"),
               ("vs_content", "cosine", "cosine_keep", "dA_perp"),
               ("vs_content", "js", "js_keep", "dA_perp"),
               ("vs_content", "euclidean", "euclidean_keep", "dA_perp"),
               ("dA_vs_dA_perp", "dA", "dA", "dA_perp"),
               ("check", "dA_perp", "dA_perp", "dA_perp")]


def make_attention(path, n_inputs, n_layers, n_heads, t, t_keys, seed):
    """Causal rows: Gamma(alpha_h) weights (a Dirichlet row once closed), key 0 scaled by a
    per-head sink factor, zeros above the diagonal, float32 like a real attention dump."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.5, 2.0, size=(n_layers, n_heads))
    sink = np.exp(rng.normal(2.0, 1.5, size=(n_layers, n_heads)))
    mask = np.tril(np.ones((t, t), dtype=bool))
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                    shape=(n_inputs, n_layers, n_heads, t, t))
    for n in range(n_inputs):
        for l in range(n_layers):
            g = rng.gamma(alpha[l][:, None, None], size=(n_heads, t, t))
            g[:, :, 0] *= sink[l][:, None]
            g = np.where(mask, g, 0.0)
            out[n, l] = (g / g.sum(-1, keepdims=True)).astype(np.float32)
    out.flush()
    del out


def run_sinkscope(exe, attention, out, analyses, threads, report=True):
    """CPU seconds (all threads) and wall seconds of one `sinkscope metrics` run (with
    report.html unless report is False)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [exe, "metrics", "--attention", attention, "--out", out, "--overwrite",
           "--threads", str(threads)]
    if analyses:
        cmd += ["--analyses", analyses]
    if not report:
        cmd.append("--no-report")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


# ---- sections 1-2 ------------------------------------------------------------------------------

def compositional(path):
    """Per-head means, the nine head distance matrices, dispersion (spec 1-2)."""
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers, n_heads, t, _ = att.shape
    n = n_layers * n_heads
    n_pairs = n * (n - 1) // 2
    sums = {name: np.zeros(n_pairs) for name in DISTANCES}
    means = {m: np.zeros(n) for m in ["sink_mass", "sink_balance", "entropy",
                                      "binary_sink_entropy", "content_entropy_renorm"]}
    disp_layer = np.zeros((n_layers, 2))
    disp_model = np.zeros(2)
    rows = 0
    for inp in range(n_inputs):
        for i in range(MIN_PARTS - 1, t):
            d = i + 1
            a = np.asarray(att[inp, :, :, i, :d], dtype=np.float64).reshape(n, d)
            p = a / a.sum(1, keepdims=True)  # closure (10.a)
            s = p[:, 0]
            content = p[:, 1:].sum(1)
            pi = p[:, 1:] / content[:, None]
            logp = np.log(p)
            clr = logp - logp.mean(1, keepdims=True)
            clr_content = logp[:, 1:] - logp[:, 1:].mean(1, keepdims=True)
            b = np.sqrt(d / (d - 1)) * clr[:, 0]
            means["sink_mass"] += s
            means["sink_balance"] += b
            means["entropy"] += -(p * logp).sum(1)
            means["binary_sink_entropy"] += -s * np.log(s) - content * np.log(content)
            means["content_entropy_renorm"] += -(pi * np.log(pi)).sum(1)
            sums["dA"] += pdist(clr, "sqeuclidean")
            sums["dA_perp"] += pdist(clr_content, "sqeuclidean")
            sums["sink_term"] += pdist(b[:, None], "sqeuclidean")
            for conv, x in (("keep", p), ("drop", pi)):
                sums["cosine_" + conv] += pdist(x, "cosine")
                sums["js_" + conv] += pdist(x, "jensenshannon") ** 2  # scipy: sqrt(JS), nats
                sums["euclidean_" + conv] += pdist(x, "euclidean")
            cc = clr_content.reshape(n_layers, n_heads, d - 1)
            bb = b.reshape(n_layers, n_heads)
            disp_layer[:, 0] += ((cc - cc.mean(1, keepdims=True)) ** 2).sum((1, 2)) / n_heads
            disp_layer[:, 1] += bb.var(1)
            disp_model[0] += ((clr_content - clr_content.mean(0)) ** 2).sum() / n
            disp_model[1] += b.var()
            rows += 1
    out = {}
    for name in DISTANCES:
        m = sums[name] / rows
        if name in ("dA", "dA_perp", "sink_term"):
            m = np.sqrt(m)
        out[name] = squareform(m)
    for k, v in means.items():
        out["mean/" + k] = v / rows
    disp_layer /= rows
    disp_model /= rows
    out["dispersion/layer"] = np.column_stack(
        [disp_layer, disp_layer[:, 1] / disp_layer.sum(1)])  # c_perp, v_b, rho
    out["dispersion/model"] = np.array(
        [disp_model[0], disp_model[1], disp_model[1] / disp_model.sum()])
    return out


# ---- sections 3, 4, 7 --------------------------------------------------------------------------

def verdicts(x):
    """Verdict codes of all candidate pairs for one anchor row x (spec 3, ties 10.f)."""
    diff = x[:, None] - x[None, :]
    tol = TIE_REL * np.maximum(np.abs(x)[:, None], np.abs(x)[None, :])
    return (diff > tol).astype(np.int8) - (diff < -tol).astype(np.int8)


def reversal_counts(mats, comparisons, heads):
    """Exact (compared, disagree) per comparison over the triples of `heads`."""
    heads = np.asarray(heads)
    counts = np.zeros((len(comparisons), 2), dtype=np.int64)
    names = sorted({m for c in comparisons for m in c})
    for a in heads:
        others = heads[heads != a]
        code = {m: verdicts(mats[m][a, others]) for m in names}
        for q, (first, second) in enumerate(comparisons):
            prod = code[first].astype(np.int16) * code[second]
            # the code matrix is antisymmetric, the product symmetric: each pair counted twice
            counts[q, 0] += np.count_nonzero(prod) // 2
            counts[q, 1] += np.count_nonzero(prod < 0) // 2
    return counts


def silhouette(d, labels):
    n = len(labels)
    k = labels.max() + 1
    one_hot = np.zeros((n, k))
    one_hot[np.arange(n), labels] = 1
    sums = d @ one_hot  # [n, k] sum of distances to each cluster (d_ii = 0)
    count = one_hot.sum(0)
    own = count[labels]
    a = sums[np.arange(n), labels] / np.maximum(own - 1, 1)
    other = np.where(one_hot > 0, np.inf, sums / np.maximum(count, 1))
    other[:, count == 0] = np.inf
    b = other.min(1)
    s = np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-300), 0.0)
    return s.mean()


def first_appearance(labels):
    """Relabels clusters 0, 1, ... in order of first appearance (sinkscope's convention)."""
    mapping = {}
    return np.array([mapping.setdefault(v, len(mapping)) for v in labels])


def cluster(d, k):
    z = linkage(squareform(d, checks=False), method="average")
    # cut_tree gives exactly k clusters (fcluster's maxclust may give fewer)
    return first_appearance(cut_tree(z, n_clusters=k)[:, 0])


def classical_mds(d):
    n = len(d)
    sq = (0.5 * (d + d.T)) ** 2
    j = np.eye(n) - 1.0 / n
    b = -0.5 * j @ sq @ j
    values, vectors = eigh(b, subset_by_index=[n - 2, n - 1])
    coords = vectors[:, ::-1] * np.sqrt(np.maximum(values[::-1], 0))
    for c in range(2):  # spec 10.h: the largest |coordinate| of each axis is positive
        if coords[np.argmax(np.abs(coords[:, c])), c] < 0:
            coords[:, c] = -coords[:, c]
    return coords


def ari(x, y):
    from scipy.special import comb
    table = np.zeros((x.max() + 1, y.max() + 1))
    np.add.at(table, (x, y), 1)
    index = comb(table, 2).sum()
    rows, cols = comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum()
    expected = rows * cols / comb(len(x), 2)
    top = 0.5 * (rows + cols)
    return 1.0 if top == expected else (index - expected) / (top - expected)


def regime(rho, compared, disagree):
    rate = disagree / compared if compared else np.nan
    return rho, rate


def heads(comp, n_layers, n_heads):
    n = n_layers * n_heads
    mats = {name: comp[name] for name in DISTANCES}
    out = {}
    pairs = [(c[2], c[3]) for c in COMPARISONS]
    counts = reversal_counts(mats, pairs, np.arange(n))
    for q, c in enumerate(COMPARISONS):
        out["reversal/" + "/".join(c)] = counts[q]
    # k by the dA_perp silhouette (spec 4), then every matrix
    d = mats["dA_perp"]
    best, k_best = -np.inf, 0
    for k in range(2, min(12, n - 1) + 1):
        s = silhouette(d, cluster(d, k))
        out["silhouette/dA_perp/%d" % k] = s
        if s > best:
            best, k_best = s, k
    out["k"] = k_best
    labels = {}
    for name in CLUSTERED:
        labels[name] = cluster(mats[name], k_best)
        out["labels/" + name] = labels[name]
        out["mds/" + name] = classical_mds(mats[name])
        out["silhouette/%s/%d" % (name, k_best)] = silhouette(mats[name], labels[name])
    for i, x in enumerate(CLUSTERED):
        for y in CLUSTERED[i + 1:]:
            out["ari/%s/%s" % (x, y)] = ari(labels[x], labels[y])
    # spec 7: model row with the pooled model flips; layer rows with within-layer flips
    flips = sum(counts[q] for q, c in enumerate(COMPARISONS) if c[0] == "flip")
    out["regime/model"] = np.array(regime(comp["dispersion/model"][2], *flips))
    flip_pairs = [(c[2], c[3]) for c in COMPARISONS if c[0] == "flip"]
    for l in range(n_layers):
        lc = reversal_counts(mats, flip_pairs, np.arange(l * n_heads, (l + 1) * n_heads)).sum(0)
        out["regime/layer/%d" % l] = np.array(regime(comp["dispersion/layer"][l, 2], *lc))
    return out


# ---- reading sinkscope's outputs ---------------------------------------------------------------

def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def sinkscope_compositional(out, n_layers, n_heads):
    res = {name: np.load(os.path.join(out, "distances", name + ".npy")) for name in DISTANCES}
    n = n_layers * n_heads
    for row in read_csv(os.path.join(out, "heads.csv")):
        key = "mean/" + row["metric"]
        if row["metric"] == "n_rows":
            continue
        res.setdefault(key, np.zeros(n))[int(row["layer"]) * n_heads + int(row["head"])] = float(
            row["value"])
    layer = np.zeros((n_layers, 3))
    for row in read_csv(os.path.join(out, "dispersion.csv")):
        v = [float(row["c_perp"]), float(row["v_b"]), float(row["rho"])]
        if row["scope"] == "model":
            res["dispersion/model"] = np.array(v)
        else:
            layer[int(row["layer"])] = v
    res["dispersion/layer"] = layer
    return res


def sinkscope_heads(out, n_layers, n_heads):
    res = {}
    for row in read_csv(os.path.join(out, "reversal.csv")):
        if row["scope"] != "model":
            continue
        key = "reversal/" + "/".join([row["comparison"], row["metric"], row["first"],
                                      row["second"]])
        res[key] = np.array([int(row["n_compared"]), int(row["n_disagree"])])
    for row in read_csv(os.path.join(out, "silhouette.csv")):
        res["silhouette/%s/%s" % (row["matrix"], row["k"])] = float(row["mean_silhouette"])
        if row["matrix"] == "dA_perp" and row["selected"] == "1":
            res["k"] = int(row["k"])
    n = n_layers * n_heads
    for row in read_csv(os.path.join(out, "clusters.csv")):
        lab = res.setdefault("labels/" + row["matrix"], np.zeros(n, dtype=int))
        lab[int(row["layer"]) * n_heads + int(row["head"])] = int(row["cluster"])
    for name in CLUSTERED:
        res["mds/" + name] = np.load(os.path.join(out, "mds", name + ".npy"))
    for row in read_csv(os.path.join(out, "ari.csv")):
        res["ari/%s/%s" % (row["first"], row["second"])] = float(row["ari"])
    for row in read_csv(os.path.join(out, "regime.csv")):
        key = "regime/model" if row["scope"] == "model" else "regime/layer/" + row["layer"]
        res[key] = np.array([float(row["rho"]), float(row["flip_rate"])])
    return res


def max_difference(ours, theirs):
    """Largest |difference| over every result of the Python side; integer results (counts,
    labels, k) must agree exactly and are reported as the number of mismatches."""
    worst, worst_key, mismatches, keys = 0.0, "", 0, 0
    for key, v in theirs.items():
        if key not in ours:
            raise SystemExit("sinkscope output lacks " + key)
        keys += 1
        a, b = np.asarray(ours[key]), np.asarray(v)
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            mismatches += int(np.count_nonzero(a != b))
            if np.any(a != b):
                worst_key += " " + key
        else:
            diff = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
            if diff > worst:
                worst, worst_key = diff, key
    return worst, mismatches, keys, worst_key


def timed(fn, *a):
    """(result, process CPU seconds, wall seconds) of fn(*a)."""
    t, w = time.process_time(), time.perf_counter()
    r = fn(*a)
    return r, time.process_time() - t, time.perf_counter() - w


def print_row(name, s_cpu, s_wall, p_cpu, p_wall, diff, bad, keys, where, std=None):
    print("%-22s %10.2f s %10.2f s %10.2f s %10.2f s %8.1fx %12.3g %12s %d / %d  (%s)" %
          (name, s_cpu, s_wall, p_cpu, p_wall, p_cpu / s_cpu, diff,
           "" if std is None else "%.3g" % std, bad, keys, where))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sinkscope", default="build/sinkscope")
    ap.add_argument("--inputs", type=int, default=2)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--baseline", default=None,
                    help="another sinkscope executable (an earlier build) timed on the same runs")
    ap.add_argument("--work", default=None, help="folder for the .npy and outputs (temp)")
    ap.add_argument("--section8-only", action="store_true",
                    help="skip sections 1-4, 7 (the compositional and heads analyses)")
    args = ap.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="sinkscope-compare-")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "attention.npy")
    shape = (args.inputs, args.layers, args.heads, args.tokens, args.tokens)
    make_attention(path, *shape, args.seed)  # shape ends (T, T)
    print("attention %s float32, seed %d, %s; sinkscope --threads %d" %
          ("x".join(map(str, shape)), args.seed, path, args.threads))

    # sinkscope runs: sections 1-4, 7 and every analysis with report.html (as the figures in
    # bench/README.md were taken); each reference-frame analysis alone, all seven in one run and the
    # fixed cost of a run (process start, reading and hashing the input, the tiny sink_eps
    # analysis) with --no-report: the page is not analysis work, and `--analyses entropy` alone
    # fails without it (report.html has no figure for entropy.csv and refuses a run without one).
    plan = [] if args.section8_only else [("compositional", "compositional", True),
                                          ("compositional+heads", "compositional,heads", True),
                                          ("all", "", True)]
    plan += [(name, name, False) for name in s8.SECTION8]
    plan += [("section8", ",".join(s8.SECTION8), False), ("sink_eps", "sink_eps", False)]
    runs, base = {}, {}
    for name, analyses, report in plan:
        out = os.path.join(work, "out_" + name.replace("+", "_"))
        runs[name] = (run_sinkscope(args.sinkscope, path, out, analyses, args.threads, report),
                      out)
        label = "(all)" if not analyses else "(section 8)" if name == "section8" else analyses
        print("  sinkscope metrics --analyses %-22s CPU %8.2f s  wall %8.2f s" %
              (label, runs[name][0][0], runs[name][0][1]))
        if args.baseline:
            base[name] = run_sinkscope(args.baseline, path, out + "_baseline", analyses,
                                       args.threads, report)
            print("  baseline  metrics --analyses %-22s CPU %8.2f s  wall %8.2f s" %
                  (label, base[name][0], base[name][1]))

    rows = []
    if not args.section8_only:
        comp, c_pcpu, c_pwall = timed(compositional, path)
        head, h_pcpu, h_pwall = timed(heads, comp, args.layers, args.heads)
        ss_comp = sinkscope_compositional(runs["compositional"][1], args.layers, args.heads)
        ss_head = sinkscope_heads(runs["compositional+heads"][1], args.layers, args.heads)
        (c_cpu, c_wall), _ = runs["compositional"]
        (ch_cpu, ch_wall), _ = runs["compositional+heads"]
        d, bad, keys, where = max_difference(ss_comp, comp)
        rows.append(("compositional (1-2)", c_cpu, c_wall, c_pcpu, c_pwall, d, bad, keys, where))
        d, bad, keys, where = max_difference(ss_head, head)
        rows.append(("heads (3, 4, 7)", ch_cpu - c_cpu, ch_wall - c_wall, h_pcpu, h_pwall, d, bad,
                     keys, where))
    mismatched = {}
    for name in s8.SECTION8:
        res, p_cpu, p_wall = timed(s8.PYTHON[name], path)
        (s_cpu, s_wall), out = runs[name]
        d, where, d_std, where_std, bad, which, keys = s8.compare(
            s8.read_sinkscope(out, name), res)
        rows.append(("%s (8)" % name, s_cpu, s_wall, p_cpu, p_wall, d, bad, keys,
                     where + ("; std: " + where_std if where_std else ""), d_std))
        if bad:
            mismatched[name] = which

    print("\n%-22s %12s %12s %12s %12s %9s %12s %12s %s" %
          ("analysis", "sinkscope", "(wall)", "python", "(wall)", "CPU ratio", "max |diff|",
           "std |diff|", "integer mismatches / results"))
    for row in rows:
        print_row(*row)
    s8_rows = [r for r in rows if r[0].endswith("(8)")]
    p8_cpu, p8_wall = sum(r[3] for r in s8_rows), sum(r[4] for r in s8_rows)
    (b_cpu, b_wall), _ = runs["section8"]
    print("%-22s %10.2f s %10.2f s %10.2f s %10.2f s %8.1fx   (one sinkscope run of the seven; "
          "separate runs sum to %.2f s CPU)" %
          ("section 8 together", b_cpu, b_wall, p8_cpu, p8_wall, p8_cpu / b_cpu,
           sum(r[1] for r in s8_rows)))
    (e_cpu, e_wall), _ = runs["sink_eps"]
    print("%-22s %10.2f s %10.2f s   (fixed cost in every sinkscope time above: process start, "
          "reading and hashing the input)" % ("--analyses sink_eps", e_cpu, e_wall))
    if b_cpu > e_cpu:
        print("%-22s %10.2f s %10.2f s %10.2f s %10.2f s %8.1fx" %
              ("section 8 net of that", b_cpu - e_cpu, b_wall - e_wall, p8_cpu, p8_wall,
               p8_cpu / (b_cpu - e_cpu)))
    if not args.section8_only:
        total = [sum(r[j] for r in rows[:2]) for j in (1, 2, 3, 4)]
        print("%-22s %10.2f s %10.2f s %10.2f s %10.2f s %8.1fx" %
              ("sections 1-4, 7", total[0], total[1], total[2], total[3], total[2] / total[0]))
        (a_cpu, a_wall), _ = runs["all"]
        print("%-22s %10.2f s %10.2f s   (every analysis of `sinkscope metrics`)" %
              ("sinkscope all", a_cpu, a_wall))
    print("\nnot covered on the Python side: " + s8.NOT_COVERED)
    for note in s8.NOTES:
        print("note: " + note)
    for name, which in mismatched.items():
        print("%s mismatches: %s" % (name, ", ".join(
            "%s x%d" % kv for kv in sorted(which.items())[:12])))
    if base:
        print("\nbaseline %s (CPU s / wall s): " % args.baseline + ", ".join(
            "%s %.2f / %.2f" % (name, c, w) for name, (c, w) in base.items()))


if __name__ == "__main__":
    sys.exit(main())
