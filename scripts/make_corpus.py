#!/usr/bin/python3
"""Writes the synthetic story corpus the embedded default model is trained on.

Every sentence comes from the small grammar below (written for sinkscope; no text is copied
from anywhere), drawn with a seeded generator, so the same seed and size give the same file:

    /usr/bin/python3 scripts/make_corpus.py --seed 1 --bytes 2000000 --out corpus.txt
"""
import argparse
import random

NAMES = ["Tom", "Mia", "Ben", "Lily", "Sam", "Anna", "Max", "Zoe", "Leo", "Ruby", "Finn", "Ella"]
ANIMALS = ["dog", "cat", "bird", "frog", "fox", "duck", "rabbit", "mouse", "horse", "owl"]
THINGS = ["ball", "kite", "box", "cake", "hat", "boat", "drum", "book", "apple", "cup", "shell",
          "key", "lamp", "sock", "stone", "map"]
COLORS = ["red", "blue", "green", "yellow", "big", "small", "old", "shiny", "soft", "funny"]
PLACES = ["the park", "the garden", "the beach", "the forest", "the house", "the river",
          "the hill", "the shop", "the school", "the farm"]
FEEL_GOOD = ["happy", "glad", "proud", "excited", "calm"]
FEEL_BAD = ["sad", "scared", "angry", "tired", "worried"]
VERBS = ["played with", "looked at", "found", "carried", "painted", "hid", "shared", "lost"]
TIMES = ["One day", "In the morning", "After lunch", "At night", "Once upon a time", "Later"]


def story(r):
    a, b = r.sample(NAMES, 2)
    pet = r.choice(ANIMALS)
    thing = r.choice(THINGS)
    color = r.choice(COLORS)
    place, place2 = r.sample(PLACES, 2)
    good, bad = r.choice(FEEL_GOOD), r.choice(FEEL_BAD)
    s = [f"{r.choice(TIMES)}, {a} went to {place} with a {pet}."]
    s.append(f"{a} had a {color} {thing}. The {pet} {r.choice(VERBS)} the {thing}.")
    kind = r.randrange(4)
    if kind == 0:
        s.append(f"Then the {thing} was gone. {a} was {bad}.")
        s.append(f"{b} came and said, \"I will help you find it.\"")
        s.append(f"They looked in {place2} and under a tree. At last they found the {thing}.")
        s.append(f"{a} was {good} and said, \"Thank you, {b}!\"")
    elif kind == 1:
        s.append(f"{b} wanted the {thing} too. {a} did not want to share.")
        s.append(f"{b} was {bad}. The {pet} looked at {a}.")
        s.append(f"{a} gave the {thing} to {b}. Now they played together and were {good}.")
    elif kind == 2:
        n = r.randrange(2, 6)
        s.append(f"{a} counted {n} {thing}s. {b} counted {n + 1} {thing}s.")
        s.append(f"\"You have one more,\" said {a}. {b} laughed and gave one {thing} to {a}.")
        s.append(f"Now they both had {n} {thing}s, and they were {good}.")
    else:
        s.append(f"It began to rain in {place}. The {pet} was {bad} and ran to {place2}.")
        s.append(f"{a} and {b} ran after the {pet}. When the sun came out, they found it.")
        s.append(f"They went home with the {pet} and the {color} {thing}. Everyone was {good}.")
    if r.random() < 0.5:
        s.append(f"The end.")
    return " ".join(s)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bytes", type=int, default=2_000_000, help="stop after this many bytes")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    r = random.Random(a.seed)
    n = 0
    with open(a.out, "w", encoding="utf-8") as f:
        while n < a.bytes:
            line = story(r) + "\n"
            f.write(line)
            n += len(line.encode("utf-8"))


if __name__ == "__main__":
    main()
