"""One figure of each paper, reproduced from Python on sinkscope's default model.

    PYTHONPATH=build/python /usr/bin/python3 examples/paper_figures.py --out runs/figures

1. Compositional attention (Papamichalis & Ruane): how often "head b is closer to head a than
   head c" flips when the sink is dropped from the rows (keep vs drop convention), per classical
   metric; the paper's abstract reports 17-47% on trained models. Bars: flip rate, with the
   disagreement between the Aitchison distance and its content part for reference.
2. Sinks as reference frames (Ruscio et al.): persistent homology of each layer's attention,
   Betti-0 (connected components) of the Vietoris-Rips filtration over eps in [0, 1]. Curves: one
   per layer, averaged over the prompts.

Each figure is written as an SVG (no plotting library needed) next to the run it is drawn from.
"""

import argparse
import os

import numpy as np

import sinkscope


def svg_chart(path, title, xlabel, ylabel, series, kind="line", categories=None):
    """A minimal SVG chart: `series` is [(label, xs, ys)], or for bars [(label, ys)]."""
    w, h, left, bottom, top, right = 640, 400, 70, 50, 40, 150
    pw, ph = w - left - right, h - top - bottom
    colors = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2"]
    ys_all = np.concatenate([np.asarray(s[-1], float) for s in series])
    y_max = max(1e-12, float(np.nanmax(ys_all))) * 1.05
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>',
           f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">{xlabel}</text>',
           f'<text x="15" y="{top + ph / 2}" transform="rotate(-90 15 {top + ph / 2})" '
           f'text-anchor="middle">{ylabel}</text>']
    for k in range(5):
        v = y_max * k / 4
        y = top + ph - ph * k / 4
        out.append(f'<text x="{left - 5}" y="{y + 4}" text-anchor="end">{v:.3g}</text>')
    if kind == "line":
        x_min = min(float(np.min(s[1])) for s in series)
        x_max = max(float(np.max(s[1])) for s in series)
        for k in range(5):
            v = x_min + (x_max - x_min) * k / 4
            out.append(f'<text x="{left + pw * k / 4}" y="{top + ph + 18}" '
                       f'text-anchor="middle">{v:.3g}</text>')
        for i, (label, xs, ys) in enumerate(series):
            pts = " ".join(f"{left + pw * (x - x_min) / (x_max - x_min or 1):.1f},"
                           f"{top + ph - ph * y / y_max:.1f}" for x, y in zip(xs, ys))
            c = colors[i % len(colors)]
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>')
            out.append(f'<text x="{left + pw + 10}" y="{top + 16 * i + 10}" fill="{c}">'
                       f'{label}</text>')
    else:
        n_groups, n_series = len(categories), len(series)
        group_w = pw / n_groups
        bar_w = group_w * 0.8 / n_series
        for g, cat in enumerate(categories):
            out.append(f'<text x="{left + group_w * (g + 0.5)}" y="{top + ph + 18}" '
                       f'text-anchor="middle">{cat}</text>')
        for i, (label, ys) in enumerate(series):
            c = colors[i % len(colors)]
            for g, y in enumerate(ys):
                x = left + group_w * g + group_w * 0.1 + bar_w * i
                bh = ph * y / y_max
                out.append(f'<rect x="{x:.1f}" y="{top + ph - bh:.1f}" width="{bar_w:.1f}" '
                           f'height="{bh:.1f}" fill="{c}"/>')
            out.append(f'<text x="{left + pw + 10}" y="{top + 16 * i + 10}" fill="{c}">'
                       f'{label}</text>')
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/figures", help="folder for the run and the figures")
    p.add_argument("--samples", type=int, default=60, help="prompts of the built-in set")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # One run of every analysis on the default model (the command line's `sinkscope analyze`).
    run_dir = os.path.join(args.out, "analyze")
    run = sinkscope.analyze(out=run_dir, samples=args.samples, max_tokens=48, overwrite=True,
                            report=False)
    print(f"analysis of {args.samples} prompts in {run_dir}")

    # Figure 1 (compositional paper): flip rates of the classical metrics, keep vs drop.
    rev = run["reversal"]
    flips = {m: float(r) for c, m, r in zip(rev["comparison"], rev["metric"], rev["rate"])
             if c == "flip"}
    vs_content = {m: float(r) for c, m, r in zip(rev["comparison"], rev["metric"], rev["rate"])
                  if c == "vs_content"}
    metrics = [m for m in ("js", "cosine", "euclidean") if m in flips]
    svg_chart(os.path.join(args.out, "figure_p1_flip_rates.svg"),
              "Verdict flips when the sink is dropped (keep vs drop)", "classical metric",
              "reversal rate", [("keep vs drop", [flips[m] for m in metrics]),
                                ("keep vs dA_perp", [vs_content.get(m, 0.0) for m in metrics])],
              kind="bar", categories=metrics)
    for m in metrics:
        print(f"  flip rate {m}: {flips[m]:.3f}")

    # Figure 2 (reference-frame paper): Betti-0 curves per layer.
    betti = run["betti"]
    is_b0 = (betti["metric"] == "betti0") & (betti["head"] == -1)
    series = []
    for layer in sorted(set(int(l) for l in betti["layer"][is_b0])):
        sel = is_b0 & (betti["layer"] == layer)
        eps = np.asarray([float(e) for e in betti["param"][sel]])
        order = np.argsort(eps)
        series.append((f"layer {layer}", eps[order], np.asarray(betti["value"][sel])[order]))
    svg_chart(os.path.join(args.out, "figure_p2_betti0.svg"),
              "Betti-0 of the attention Rips filtration, per layer", "eps (distance 1 - A)",
              "connected components (mean over prompts)", series)
    print(f"figures: {args.out}/figure_p1_flip_rates.svg, {args.out}/figure_p2_betti0.svg")


if __name__ == "__main__":
    main()
