#!/usr/bin/python3
"""Assembles a natural-English prose corpus from documentation that Debian packages install.

No download at run time: every byte comes from files of the packages below, read in the order
of their sorted paths. Markup (reStructuredText, HTML) is stripped by the code here; what is kept
is paragraphs of prose (code blocks, tables, command lines, titles, short or symbol-heavy
paragraphs and paragraphs with characters outside ASCII after folding are dropped), with
whitespace, quotes and dashes normalised. Paragraphs are deduplicated (exact, after
normalisation; the first occurrence stays) and written one per line. Every 20th kept paragraph
(index 19, 39, ...; --heldout-every) goes to the held-out file, the rest to the training file.
The same installed package versions give the same bytes; the manifest records the versions, the
counts and each file's sha256.

    apt-get install fortunes fortunes-min debian-handbook python3-doc debian-policy \\
        developers-reference debian-reference-en   # or: scripts/install-deps.sh --corpus
    /usr/bin/python3 scripts/make_english_corpus.py --out-dir corpus-en
    # scripts/make_default_model.sh runs this and trains models/default on train.txt

Packages (licences as their /usr/share/doc/<pkg>/copyright states them):
  python3-doc -> python3.X-doc  the Python documentation's reST sources  PSF License v2
  debian-handbook               The Debian Administrator's Handbook     GPL-2+ or CC-BY-SA-3.0
  debian-reference-en           Debian Reference (English)              GPL-2+
  debian-policy                 Debian Policy Manual (reST sources)     GPL-2+
  developers-reference          Debian Developer's Reference (reST)     GPL-2
  fortunes, fortunes-min        BSD fortune(6) data files               BSD (3-clause)
"""
import argparse
import gzip
import hashlib
import html
import html.parser
import json
import os
import re
import subprocess
import sys
import unicodedata


class SourceError(Exception):
    pass


# ----------------------------------------------------------------------------- packages

def package_version(pkg):
    """The installed version of a Debian package, or None when it is not installed."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg],
                           capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SourceError("dpkg-query not found: this script reads Debian packages' files")
    if r.returncode != 0 or "\t" not in r.stdout:
        return None
    status, version = r.stdout.split("\t", 1)
    return version if status.endswith(" installed") and "not-installed" not in status else None


def python_doc_package():
    """python3-doc depends on the python3.X-doc of Debian's default Python: that one."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", "python3-doc"],
                       capture_output=True, text=True, check=False)
    m = re.search(r"(python3\.\d+-doc)", r.stdout) if r.returncode == 0 else None
    return m.group(1) if m else None


# ----------------------------------------------------------------------------- normalisation

TRANSLATE = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u00b4": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u00ab": '"', "\u00bb": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": " - ", "\u2015": " - ",
    "\u2212": "-", "\u2026": "...", "\u00a0": " ", "\u202f": " ", "\u2009": " ", "\u2002": " ",
    "\u2003": " ", "\u200b": "", "\u00ad": "", "\ufeff": "", "\u00d7": "x", "\u2122": "(tm)",
    "\u00a9": "(c)", "\u00ae": "(R)", "\u2022": "*",
}
_TRANS_TABLE = str.maketrans(TRANSLATE)


def fold_ascii(s):
    """Typographic punctuation to ASCII, accented Latin letters to their base letter."""
    s = s.translate(_TRANS_TABLE)
    if s.isascii():
        return s
    out = []
    for ch in s:
        if ch.isascii():
            out.append(ch)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", ch)
                       if not unicodedata.combining(c))
        out.append(base if base.isascii() and base else ch)
    return "".join(out)


def normalise(s):
    s = fold_ascii(s)
    s = s.replace("``", '"').replace("''", '"')          # TeX-style quotes (fortunes)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r" - - ", " -- ", s)
    return s


WORD = re.compile(r"^[(\"']*[A-Za-z][A-Za-z'-]*[)\"',.;:!?]*$")


def is_prose(p, min_chars, min_words):
    """A paragraph of ordinary sentences: long enough, ASCII, mostly plain words, ends a sentence."""
    if len(p) < min_chars or re.search(r"[^\x20-\x7e]", p):
        return False
    words = p.split(" ")
    if len(words) < min_words:
        return False
    if not re.match(r"^[(\"']?[A-Z0-9]", p):
        return False
    if not re.search(r"[.!?:][\"')]*$", p):
        return False
    plain = sum(1 for w in words if WORD.match(w))
    if plain < 0.8 * len(words):
        return False
    letters = sum(1 for c in p if c.isalpha() or c == " ")
    if letters < 0.85 * len(p):
        return False
    # Code, command lines and markup leftovers (file paths and names in a sentence are kept).
    if re.search(r"[{}<>|\\=$#@`^~]", p):
        return False
    if re.search(r"\(\)|\w\.\w+\(|\w::\w|://|\s--?\w", p):
        return False
    return True


# ----------------------------------------------------------------------------- reST

# Directives whose body is prose and is kept (the directive line itself is dropped).
REST_PROSE_DIRECTIVES = {
    "function", "method", "class", "attribute", "data", "exception", "decorator",
    "decoratormethod", "classmethod", "staticmethod", "abstractmethod", "coroutinefunction",
    "coroutinemethod", "describe", "option", "envvar", "cmdoption", "module", "currentmodule",
    "note", "warning", "important", "tip", "hint", "caution", "attention", "danger", "admonition",
    "versionadded", "versionchanged", "deprecated", "deprecated-removed", "seealso", "impl-detail",
    "availability", "rubric", "topic", "sidebar", "glossary", "opcode", "pdbcommand", "audit-event",
    "c:function", "c:type", "c:member", "c:macro", "c:var", "c:struct", "c:enum", "c:enumerator",
    "c:union", "c:data", "sectionauthor", "moduleauthor", "highlight",
    "only", "centered", "epigraph", "container", "compound", "rst-class", "footnote",
}
# Of these, the directive's argument line is dropped but the body kept; the rest of the
# directives (code-block, literalinclude, doctest, tables, toctree, images, raw, math, ...) are
# dropped with their bodies.
REST_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(\|[^|]+\|\s+)?([\w:-]+)::(.*)$")
REST_COMMENT = re.compile(r"^(\s*)\.\.(\s|$)")
REST_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+:.<>_])\1{2,}\s*$")
REST_FIELD = re.compile(r"^\s*:[\w .+-]+:(\s|$)")
REST_BULLET = re.compile(r"^(\s*)([-*+\u2022]|#\.|\d+\.|\(\d+\)|[a-z]\.|\d+\))\s+")
REST_TABLE = re.compile(r"^\s*(\+[-=+]+\+|=+(\s+=+)+)\s*$")


def rest_inline(s):
    s = re.sub(r":[\w:.+-]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", s)                  # :role:`title <t>`
    s = re.sub(r":[\w:.+-]+:`!?~?([^`]*)`",
               lambda m: m.group(1).split(".")[-1] if m.group(0).find("~") >= 0 else m.group(1), s)
    s = re.sub(r"`([^`<]*?)\s*<[^`>]*>`__?", r"\1", s)                          # `text <url>`_
    s = re.sub(r"``([^`]*)``", r"\1", s)
    s = re.sub(r"`([^`]*)`_{0,2}", r"\1", s)
    s = re.sub(r"\[(#\w*|\*|\d+)\]_", "", s)                                   # footnote refs
    s = re.sub(r"(?<![\w*])\*\*([^*]+)\*\*", r"\1", s)
    s = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*", r"\1", s)
    s = re.sub(r"\|([\w -]+)\|_?", r"\1", s)
    s = re.sub(r"(?<![\w-])([A-Za-z][\w-]*[A-Za-z0-9])_(?!\w)", r"\1", s)          # word_ refs
    s = s.replace("\\ ", "").replace("\\", "")
    return s


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def rest_paragraphs(text):
    lines = text.expandtabs(8).splitlines()
    paras, cur = [], []
    skip_deeper = None        # drop lines indented deeper than this (a dropped block's body)
    literal_after = None      # a paragraph ended in '::': its indented block is a literal
    cur_indent = None

    def flush():
        nonlocal cur, cur_indent, literal_after
        if cur:
            joined = " ".join(l.strip() for l in cur)
            if joined.endswith("::"):
                literal_after = cur_indent
                joined = joined[:-2].rstrip()
                joined = joined + ":" if joined and joined[-1].isalnum() else joined
            if not any(REST_TABLE.match(l) for l in cur) and \
                    not cur[0].lstrip().startswith((">>>", "...", "$ ", "# ")):
                paras.append(joined)
        cur, cur_indent = [], None

    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        if not line.strip():
            flush()
            continue
        ind = indent_of(line)
        if skip_deeper is not None:
            if ind > skip_deeper:
                continue
            skip_deeper = None
        if literal_after is not None:
            if ind > literal_after:
                skip_deeper = literal_after
                literal_after = None
                flush()
                continue
            literal_after = None
        # Section titles: a line under- (and maybe over-) lined.
        if REST_UNDERLINE.match(line):
            cur = []
            cur_indent = None
            continue
        if i < len(lines) and REST_UNDERLINE.match(lines[i]) and \
                len(lines[i].strip()) >= len(line.strip()) and ind == 0:
            flush()
            continue
        m = REST_DIRECTIVE.match(line)
        if m:
            flush()
            name = m.group(3)
            if name in REST_PROSE_DIRECTIVES and not m.group(2):
                # Skip the directive's options and argument continuation lines.
                while i < len(lines) and lines[i].strip() and (
                        REST_FIELD.match(lines[i]) or indent_of(lines[i]) > ind + 3 or
                        indent_of(lines[i]) == len(m.group(1)) + 3 and
                        lines[i].strip().endswith(")")):
                    i += 1
            else:
                skip_deeper = ind
            continue
        if REST_COMMENT.match(line):
            flush()
            skip_deeper = ind
            continue
        if REST_FIELD.match(line):
            flush()
            skip_deeper = ind
            continue
        b = REST_BULLET.match(line)
        if b:
            flush()
            cur = [line[b.end():]]
            cur_indent = ind
            continue
        if cur and ind > cur_indent and not REST_BULLET.match(cur[0]) and len(cur) == 1 and \
                ind - cur_indent >= 2 and not cur[0].rstrip().endswith("::"):
            # A definition list: drop the term, the definition is a paragraph of its own.
            cur = []
        if not cur:
            cur_indent = ind
        cur.append(line)
    flush()
    return [rest_inline(p) for p in paras]


# ----------------------------------------------------------------------------- HTML

class ProseHTML(html.parser.HTMLParser):
    """Text of paragraph elements (<p>, <div class="para">), without <pre>, tables and scripts."""
    BLOCK = {"p", "div", "li", "ul", "ol", "dl", "dt", "dd", "pre", "table", "tr", "td", "th",
             "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "br", "hr", "body", "html",
             "head", "title", "section", "article", "nav", "header", "footer", "figure"}
    SKIP = {"pre", "table", "script", "style", "head", "title", "code_block", "kbd",
            "screen", "samp"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paras, self.buf = [], []
        self.in_para = 0          # depth of open paragraph elements
        self.stack = []           # (tag, is_para, is_skip)
        self.skip = 0

    def flush(self):
        if self.buf:
            self.paras.append("".join(self.buf))
        self.buf = []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "hr", "img", "meta", "link", "input", "wbr"):
            if tag == "br" and self.in_para:
                self.buf.append(" ")
            return
        cls = dict(attrs).get("class") or ""
        is_para = tag == "p" and "title" not in cls.split() or \
            tag == "div" and "para" in cls.split()
        is_skip = tag in self.SKIP or "programlisting" in cls or "screen" in cls or \
            "navheader" in cls or "navfooter" in cls or "docnav" in cls or \
            "legalnotice" in cls or "synopsis" in cls
        if tag in self.BLOCK:
            self.flush()
        self.stack.append((tag, is_para, is_skip))
        self.in_para += is_para
        self.skip += is_skip

    def handle_endtag(self, tag):
        if not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, is_para, is_skip = self.stack.pop()
            self.in_para -= is_para
            self.skip -= is_skip
            if t in self.BLOCK:
                self.flush()
            if t == tag:
                break

    def handle_data(self, data):
        if self.in_para and not self.skip:
            self.buf.append(data)


def html_paragraphs(text):
    p = ProseHTML()
    p.feed(text)
    p.close()
    p.flush()
    return p.paras


# ----------------------------------------------------------------------------- fortunes

def fortune_paragraphs(text):
    out = []
    for entry in re.split(r"\n%\n", "\n" + text.replace("\r", "") + "\n"):
        lines = entry.strip("\n").splitlines()
        if not lines:
            continue
        # Attribution lines ("\t\t-- Mark Twain") and everything after them.
        for k, l in enumerate(lines):
            if re.match(r"^\s+--\s*\S", l) or re.match(r"^\s*-- ", l) and k > 0:
                lines = lines[:k]
                break
        if not lines:
            continue
        # Verse, dialogue and art: many short or indented lines.
        if any(re.search(r"[|\\/_]{3,}|[#*=]{4,}", l) for l in lines):
            continue
        short = sum(1 for l in lines if len(l.strip()) < 40)
        if len(lines) >= 4 and short > len(lines) // 2:
            continue
        if any(re.match(r"^\s*[A-Z][\w .]{0,20}:\s", l) for l in lines):
            continue   # "Q: ... A: ...", "Tom: ... Mary: ..."
        out.append(" ".join(l.strip() for l in lines))
    return out


# ----------------------------------------------------------------------------- sources

def read_text(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def package_files(pkg):
    """The regular files a package installed (dpkg-query -L), symlinks left out."""
    r = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return []
    return [f for f in r.stdout.splitlines() if os.path.isfile(f) and not os.path.islink(f)]


# (package named to the user, package whose files are read, pattern of the paths read, parser).
# python3-doc is resolved to the python3.X-doc it depends on. Left out: the Python changelog,
# licence texts and C API (lists of issue numbers, legal boilerplate, C declarations); the
# fortune files of ASCII art, riddles, definitions and Linux kernel messages.
SOURCES = [
    ("python3-doc", None,
     r"^/usr/share/doc/python3\.\d+/html/_sources/(?!whatsnew/changelog|license|c-api/|bugs)"
     r".*\.rst\.txt$", rest_paragraphs),
    ("debian-handbook", "debian-handbook",
     r"^/usr/share/doc/debian-handbook/html/en-US/[^/]+\.html$", html_paragraphs),
    ("debian-reference-en", "debian-reference-en",
     r"^/usr/share/debian-reference/[^/]+\.en\.html$", html_paragraphs),
    ("debian-policy", "debian-policy",
     r"^/usr/share/doc/debian-policy/policy\.html/_sources/[^/]+\.rst\.txt$", rest_paragraphs),
    ("developers-reference", "developers-reference",
     r"^/usr/share/developers-reference/_sources/[^/]+\.rst\.txt$", rest_paragraphs),
    ("fortunes", "fortunes",
     r"^/usr/share/games/fortunes/(?!art$|ascii-art$|riddles$|definitions$|linuxcookie$)"
     r"[a-z-]+$", fortune_paragraphs),
    ("fortunes-min", "fortunes-min",
     r"^/usr/share/games/fortunes/(?!riddles$)[a-z-]+$", fortune_paragraphs),
]


def sources():
    """(name, package, version, [files], parser) for each source; a missing package stops."""
    out = []
    for name, pkg, pattern, parser in SOURCES:
        if package_version(name) is None:
            raise SourceError("package %s is not installed (apt-get install %s, or "
                              "scripts/install-deps.sh --corpus)" % (name, name))
        if pkg is None:
            pkg = python_doc_package()
            if pkg is None or package_version(pkg) is None:
                raise SourceError("package %s (python3-doc's documentation) is not installed "
                                  "(apt-get install python3-doc)" % (pkg or "python3.X-doc"))
        version = package_version(pkg)
        fs = sorted(f for f in package_files(pkg) if re.match(pattern, f))
        if not fs:
            raise SourceError("package %s is installed but none of its files is there "
                              "(apt-get install --reinstall %s)" % (pkg, pkg))
        out.append((name, pkg, version, fs, parser))
    return out


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", required=True,
                   help="writes train.txt, heldout.txt and corpus_manifest.json here")
    p.add_argument("--heldout-every", type=int, default=20,
                   help="every Nth kept paragraph (the Nth, 2Nth, ...) goes to heldout.txt")
    p.add_argument("--min-chars", type=int, default=80, help="shortest paragraph kept")
    p.add_argument("--min-words", type=int, default=12, help="fewest words of a paragraph kept")
    p.add_argument("--max-bytes", type=int, default=0,
                   help="stop after this many bytes of kept paragraphs (0: all)")
    a = p.parse_args()
    if a.heldout_every < 2:
        p.error("--heldout-every must be >= 2")

    try:
        return build(a, sources())
    except SourceError as e:
        print("make_english_corpus: error: %s" % e, file=sys.stderr)
    except OSError as e:
        print("make_english_corpus: error: %s: %s" % (e.filename, e.strerror), file=sys.stderr)
    return 1


def build(a, srcs):
    """Reads every source, writes the corpus and its manifest into a.out_dir."""
    # Every file of every source, in the order of its path.
    files = sorted((f, name, parser) for name, _, _, fs, parser in srcs for f in fs)
    seen, kept = set(), []
    per_pkg = {name: {"files": 0, "paragraphs": 0, "bytes": 0} for name, *_ in srcs}
    total = 0
    for path, name, parser in files:
        per_pkg[name]["files"] += 1
        for raw in parser(read_text(path)):
            # (HTML character references are already resolved by the parser: convert_charrefs.)
            para = normalise(raw)
            if not is_prose(para, a.min_chars, a.min_words) or para in seen:
                continue
            seen.add(para)
            kept.append(para)
            per_pkg[name]["paragraphs"] += 1
            per_pkg[name]["bytes"] += len(para) + 1
            total += len(para) + 1
            if a.max_bytes and total >= a.max_bytes:
                break
        if a.max_bytes and total >= a.max_bytes:
            break

    train = [q for k, q in enumerate(kept) if k % a.heldout_every != a.heldout_every - 1]
    held = [q for k, q in enumerate(kept) if k % a.heldout_every == a.heldout_every - 1]
    os.makedirs(a.out_dir, exist_ok=True)
    out = {}
    for fname, paras in (("train.txt", train), ("heldout.txt", held)):
        path = os.path.join(a.out_dir, fname)
        with open(path, "w", encoding="ascii", newline="\n") as f:
            f.write("".join(q + "\n" for q in paras))
        out[fname] = {"paragraphs": len(paras), "bytes": os.path.getsize(path),
                      "sha256": sha256(path)}
    manifest = {
        "script": "scripts/make_english_corpus.py",
        "options": {"heldout_every": a.heldout_every, "min_chars": a.min_chars,
                    "min_words": a.min_words, "max_bytes": a.max_bytes},
        "python": "%d.%d.%d" % sys.version_info[:3],
        "unicode": unicodedata.unidata_version,
        "packages": [{"package": pkg, "source": name, "version": ver, **per_pkg[name]}
                     for name, pkg, ver, _, _ in srcs],
        "files": out,
        "split": "paragraph k (0-based, after deduplication) is held out when "
                 "k %% %d == %d" % (a.heldout_every, a.heldout_every - 1),
    }
    with open(os.path.join(a.out_dir, "corpus_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    for name, pkg, ver, _, _ in srcs:
        s = per_pkg[name]
        print("%-22s %-24s %5d files %7d paragraphs %9d bytes" %
              (pkg, ver, s["files"], s["paragraphs"], s["bytes"]))
    for fname, s in out.items():
        print("%s  %s  (%d paragraphs, %d bytes)" % (s["sha256"], os.path.join(a.out_dir, fname),
                                                     s["paragraphs"], s["bytes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
