#!/usr/bin/python3
"""Two experiments on a model's forward, end to end (docs/user_guide.md, "Interventions"):

1. Sink removal: the attention every query pays the first token is taken away and each row
   renormalised, in every layer, and the rest of the forward runs on that. How much worse does
   the model predict its text, and how much more spread out is its attention?
2. Activation patching: "The cat sat on the mat." and "The dog sat on the mat." differ in one
   token. Which layer's residual stream, and which head's output, carries what the source run
   knows about its next tokens into the target run?

    /usr/bin/python3 examples/interventions.py [--model PATH]
"""

import argparse

import numpy as np

import sinkscope

TEXTS = ["Once upon a time there was a little girl named Lily.",
         "The dog ran to the park and saw a big red ball.",
         "Tom and his mom baked a cake for the birthday party."]


def mean_nll(logits, tokens):
    """Mean next-token NLL (nats) of one sequence's logits [T, vocab]."""
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.mean([logp[i, tokens[i + 1]] for i in range(len(tokens) - 1)])


def row_entropy(pattern):
    """Mean entropy (nats) of the attention rows [H, T, T] from the third query on."""
    p = pattern[:, 2:, :].astype(np.float64)
    return float(np.mean(-(p * np.log(np.where(p > 0, p, 1))).sum(-1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint (default: the shipped model)")
    args = ap.parse_args()
    model = sinkscope.Model.load(args.model)
    last = model.cfg["n_layers"] - 1
    pattern = f"blocks.{last}.attn.hook_pattern"

    print("1. sink removal (sink_removal: first token, rows renormalised, every layer)")
    print(f"   {'text':<52} {'NLL':>7} {'NLL no sink':>12} {'H(row)':>7} {'H no sink':>10}")
    for text in TEXTS:
        tokens = model.to_tokens(text)
        logits, cache = model.run_with_cache(tokens, names_filter=pattern)
        cut, cut_cache = model.run_with_cache(tokens, names_filter=pattern,
                                              intervene="sink_removal")
        print(f"   {text:<52} {mean_nll(logits[0], tokens[0]):7.3f} "
              f"{mean_nll(cut[0], tokens[0]):12.3f} {row_entropy(cache[pattern][0]):7.3f} "
              f"{row_entropy(cut_cache[pattern][0]):10.3f}")

    print("2. activation patching: source 'The cat sat on the mat.' into target "
          "'The dog sat on the mat.'")
    r = model.patch("The cat sat on the mat.", "The dog sat on the mat.", hook_kinds="resid_pre,z",
                    per_position=True)
    t = r["table"]
    print(f"   metric: mean NLL of the source's next tokens; target run "
          f"{r['target_value']:.4f}, source run {r['source_value']:.4f}")
    heads = [i for i, h in enumerate(t["head"]) if h >= 0 and t["position"][i] < 0]
    best = sorted(heads, key=lambda i: -abs(t["recovered"][i]))[:5]
    print("   heads whose output moves the target most toward the source (recovered = share of "
          "the gap):")
    for i in best:
        print(f"     {t['hook'][i]:<24} head {t['head'][i]}: recovered {t['recovered'][i]:+.3f}")
    print("   the residual stream entering each layer, one position at a time (recovered):")
    tokens = model.to_str_tokens("The dog sat on the mat.")
    for layer in range(model.cfg["n_layers"]):
        name = f"blocks.{layer}.hook_resid_pre"
        cells = [f"{tokens[t['position'][i]]!r}:{t['recovered'][i]:+.2f}"
                 for i, h in enumerate(t["hook"]) if h == name and t["position"][i] >= 0]
        print(f"     {name:<24} " + " ".join(cells))
    print(f"     every hook patched: {t['value'][-1]:.4f} = the source run's "
          f"{r['source_value']:.4f}")


if __name__ == "__main__":
    main()
