#!/usr/bin/env python3
"""Generate fstok/data/unicode/<dialect>.txt: the Unicode tables each regex engine really uses.

fstok compiles a pre-tokenization regex for the engine its tokenizer was made for, so the
character classes must be the ones *that engine* uses, not Python's `unicodedata` (Unicode 14.0
in Python 3.11) nor the `regex` module's (Unicode 17.0 in regex 2026.x).  This tool asks the
installed engines about every code point and writes what they answer:

  rust-regex   tiktoken (fancy-regex on top of the Rust regex-syntax crate)
               probed through `tiktoken.Encoding(pat_str=...)` with a byte-level vocabulary:
               `encode_ordinary` drops unmatched text, so the decoded output is the set of
               code points the class matches.
  oniguruma    HF tokenizers (`Split` pre-tokenizer, Oniguruma in Ruby syntax)
               probed through `pre_tokenizers.Split(Regex(p), behavior="removed")`.

For each dialect it records: the General_Category of every code point (probed one category
at a time, checked to be a partition and to agree with the group properties L, M, N, P, S, Z,
C, LC), the sets of the shorthand classes \\s \\d \\w, and the simple case-folding orbits used by
(?i) (candidate orbits from the `regex` module, each one confirmed with the engine).  The
Unicode version is identified from sentinel code points first assigned in 14.0 .. 17.0.

Run:  python tools/gen_unicode_props.py            (writes both dialects)
      python tools/gen_unicode_props.py --check    (re-probe and compare with the checked-in files)
"""
from __future__ import annotations

import argparse
import os
import sys

MAXCP = 0x110000
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(HERE), "fstok", "data", "unicode")

GCS = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
       "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"]
GROUPS = {"L": ["Lu", "Ll", "Lt", "Lm", "Lo"], "M": ["Mn", "Mc", "Me"], "N": ["Nd", "Nl", "No"],
          "P": ["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"], "S": ["Sm", "Sc", "Sk", "So"], "Z": ["Zs", "Zl", "Zp"],
          "C": ["Cc", "Cf", "Co", "Cn"], "LC": ["Lu", "Ll", "Lt"]}
# first code point assigned in each version (a letter or digit, so \p{L}|\p{N} tells)
SENTINELS = [("14.0.0", 0x0870), ("15.0.0", 0x31350), ("15.1.0", 0x2EBF0), ("16.0.0", 0x1C89), ("17.0.0", 0x323B0)]

ALL = [c for c in range(MAXCP) if not 0xD800 <= c <= 0xDFFF]


class Probe:
    def __init__(self, dialect: str):
        self.dialect = dialect
        if dialect == "rust-regex":
            import tiktoken

            self.engine = f"tiktoken {tiktoken.__version__} (fancy-regex + Rust regex-syntax)"
            self._ranks = {bytes([i]): i for i in range(256)}
            self._tk = tiktoken
        else:
            import tokenizers
            from tokenizers import Regex, pre_tokenizers

            self.engine = f"tokenizers {tokenizers.__version__} (Oniguruma, Ruby syntax)"
            self._Regex, self._pt = Regex, pre_tokenizers

    def matched(self, pattern: str, cps) -> set[int]:
        """Code points among `cps` matched (each as a one-char match) by `pattern`."""
        text = "".join(map(chr, cps))
        if self.dialect == "rust-regex":
            enc = self._tk.Encoding("fstok-probe", pat_str=pattern, mergeable_ranks=self._ranks, special_tokens={})
            out = bytes(enc.encode_ordinary(text)).decode("utf-8")
            return set(map(ord, out))
        pt = self._pt.Split(self._Regex(pattern), behavior="removed")
        kept = set()
        for _, (a, b) in pt.pre_tokenize_str(text):
            kept.update(map(ord, text[a:b]))
        return set(cps) - kept

    def pieces(self, pattern: str, text: str) -> list[str]:
        """Matched substrings (for multi-char probes)."""
        if self.dialect == "rust-regex":
            enc = self._tk.Encoding("fstok-probe", pat_str=pattern, mergeable_ranks=self._ranks, special_tokens={})
            return [bytes(enc.encode_ordinary(text)).decode("utf-8")]
        pt = self._pt.Split(self._Regex(pattern), behavior="isolated")
        return [p for p, _ in pt.pre_tokenize_str(text)]


def ranges(cps) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for c in sorted(cps):
        if out and out[-1][1] + 1 == c:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


def fold_candidates() -> list[list[int]]:
    """Simple case-folding orbits (size > 1), from the `regex` module; confirmed per engine later."""
    import regex

    related: dict[int, set[int]] = {}
    for c in ALL:
        ch = chr(c)
        for m in (ch.lower(), ch.upper(), ch.title(), ch.casefold()):
            if len(m) == 1 and ord(m) != c and not 0xD800 <= ord(m) <= 0xDFFF:
                related.setdefault(c, set()).add(ord(m))
                related.setdefault(ord(m), set()).add(c)
    seen: set[int] = set()
    orbits = []
    for c in sorted(related):
        if c in seen:
            continue
        comp, stack = set(), [c]
        while stack:
            x = stack.pop()
            if x in comp:
                continue
            comp.add(x)
            stack.extend(related.get(x, ()))
        seen |= comp
        # keep only members the regex module says fold together with c (simple folding)
        pat = regex.compile("(?i)" + regex.escape(chr(c)))
        orb = sorted(x for x in comp if pat.fullmatch(chr(x)))
        if len(orb) > 1:
            orbits.append(orb)
    return orbits


def generate(dialect: str) -> str:
    pr = Probe(dialect)
    print(f"[{dialect}] probing {pr.engine}", file=sys.stderr)
    gc: dict[str, set[int]] = {}
    for g in GCS:
        gc[g] = pr.matched(r"\p{%s}" % g, ALL)
    owner: dict[int, str] = {}
    for g, s in gc.items():
        for c in s:
            if c in owner:
                raise SystemExit(f"{dialect}: U+{c:04X} in both {owner[c]} and {g}")
            owner[c] = g
    missing = [c for c in ALL if c not in owner]
    if missing:
        raise SystemExit(f"{dialect}: {len(missing)} code points in no category, e.g. U+{missing[0]:04X}")
    for grp, members in GROUPS.items():
        got = pr.matched(r"\p{%s}" % grp, ALL)
        want = set().union(*(gc[m] for m in members))
        if got != want:
            raise SystemExit(f"{dialect}: \\p{{{grp}}} is not the union of {members} ({len(got ^ want)} differ)")
    letters_digits = gc["Lu"] | gc["Ll"] | gc["Lt"] | gc["Lm"] | gc["Lo"] | gc["Nd"] | gc["Nl"] | gc["No"]
    version = "unknown"
    for v, cp in SENTINELS:
        if cp in letters_digits:
            version = v
    shorthands = {name: pr.matched(pat, ALL) for name, pat in (("space", r"\s"), ("digit", r"\d"), ("word", r"\w"))}
    # case folding orbits, each confirmed with the engine
    cands = fold_candidates()
    universe = sorted({c for o in cands for c in o} | set(range(128)))
    orbits = []
    for orb in cands:
        got = pr.matched("(?i:%s)" % _esc(chr(orb[0])), universe)
        if orb[0] not in got:
            raise SystemExit(f"{dialect}: (?i) U+{orb[0]:04X} does not match itself")
        orbits.append(sorted(got))
    orbits = sorted({tuple(o) for o in orbits if len(o) > 1})
    # multi-character full case folds: (?i) literals containing them are rejected in that dialect
    multi = []
    for c in universe + [c for c in ALL if len(chr(c).casefold()) > 1]:
        f = chr(c).casefold()
        if len(f) > 1:
            # does the engine let the folded string (as a literal under (?i)) match the one char?
            ps = pr.pieces("(?i:%s)" % "".join(_esc(x) for x in f), "\x00" + chr(c) + "\x00")
            multi.append((c, f, chr(c) in ps))
    multi = sorted(set(multi))

    lines = [
        f"# fstok Unicode property table, dialect {dialect}",
        f"# generated by tools/gen_unicode_props.py from the installed engine: {pr.engine}",
        "# gc <first-cp-hex> <category>: runs of General_Category over U+0000..U+10FFFF (surrogates are Cs)",
        "# set <name> <lo>-<hi> ...: shorthand classes \\s (space), \\d (digit), \\w (word)",
        "# fold <cp> <cp> ...: simple case-folding orbit used by (?i)",
        "# mfold <cp> <folded hex...> <0/1>: full case fold of cp; 1 = the engine lets (?i)<folded> match cp",
        f"dialect {dialect}",
        f"engine {pr.engine}",
        f"unicode {version}",
    ]
    prev = None
    for c in range(MAXCP):
        g = "Cs" if 0xD800 <= c <= 0xDFFF else owner[c]
        if g != prev:
            lines.append(f"gc {c:X} {g}")
            prev = g
    for name, s in shorthands.items():
        lines.append(f"set {name} " + " ".join(f"{a:X}-{b:X}" for a, b in ranges(s)))
    for o in orbits:
        lines.append("fold " + " ".join(f"{c:X}" for c in o))
    for c, f, used in multi:
        lines.append(f"mfold {c:X} {' '.join(f'{ord(x):X}' for x in f)} {int(used)}")
    print(f"[{dialect}] unicode {version}, {len(lines)} lines", file=sys.stderr)
    return "\n".join(lines) + "\n"


def _esc(ch: str) -> str:
    return "\\x{%X}" % ord(ch) if ord(ch) > 0x7F or not ch.isalnum() else ch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the checked-in files instead of writing")
    ap.add_argument("--dialect", choices=["rust-regex", "oniguruma"], action="append")
    args = ap.parse_args()
    bad = 0
    for d in args.dialect or ["rust-regex", "oniguruma"]:
        text = generate(d)
        path = os.path.join(OUT_DIR, f"{d}.txt")
        if args.check:
            with open(path, encoding="utf-8") as f:
                same = f.read() == text
            print(f"{path}: {'up to date' if same else 'DIFFERS from the installed engine'}")
            bad += not same
        else:
            os.makedirs(OUT_DIR, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {path}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
