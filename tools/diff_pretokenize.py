#!/usr/bin/env python3
"""Differential test of fstok's compiled pre-tokenization regexes against the reference engines.

    python tools/diff_pretokenize.py                 # everything, full size (minutes)
    python tools/diff_pretokenize.py --quick         # the sample the test suite runs
    python tools/diff_pretokenize.py --only corpus --patterns o200k_base,hf-llama3
    python tools/diff_pretokenize.py --k 5           # exhaustive cell strings up to length 5

References:
  * the `regex` module running the original pattern (finditer for tiktoken patterns, an
    Isolated-split pipeline for HF pre-tokenizers), on text whose characters the `regex`
    module classifies like the engine (it has Unicode 17.0 tables, the engines 16.0);
  * HF `tokenizers` itself (`pre_tokenizer.pre_tokenize_str`) for the tokenizer.json files;
  * tiktoken itself, by encoding: the real vocabulary encodes the text natively and piece by
    piece along fstok's spans, and the token ids must agree.

Checks (one mismatch is a bug; each prints the first differing piece):
  corpus     every line and every whole file of ../shared/data/corpus/*
  codepoints every code point U+0000..U+10FFFF (no surrogates) alone and embedded between
             letters, digits, spaces and newlines
  cells      every string of length <= k over representatives of the pattern's Unicode cells
  adversarial 1 MB of one repeated character / of spaces / ... (time must stay linear)

This module is also imported by tests/test_regex_*.py for their fast samples.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import sys
import time
from typing import Callable, Iterable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
# $FSTOK_SHARED_DATA (set by tests/conftest.py) or ../shared/data next to the checkout
SHARED = os.path.normpath(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"))
CORPUS = os.path.join(SHARED, "corpus")
VOCAB = os.path.join(SHARED, "vocab")
CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]

import regex  # noqa: E402

from fstok.compile.unicode_props import VALID, tables  # noqa: E402
from fstok.pretokenize import (NAMED_PATTERNS, CompiledPattern, get_pattern,  # noqa: E402
                               hf_pre_tokenizer_levels)

TIKTOKEN_NAMES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
HF_FILES = {
    "hf:deepseek": "hf/deepseek_tokenizer.json",
    "hf:anthropic": "hf/anthropic_tokenizer.json",
    "hf:llama3": "hf-derived/llama3.tokenizer.json",
}
GCS = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
       "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"]


# ------------------------------------------------------------------------------ subjects
class Subject:
    """One pre-tokenizer under test: fstok's compiled form plus its references."""

    def __init__(self, name: str):
        self.name = name
        self.hf = None
        if name in HF_FILES:
            path = os.path.join(VOCAB, HF_FILES[name])
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)["pre_tokenizer"]
            self.levels = hf_pre_tokenizer_levels(cfg)
            self.mode = "split"
            self.compiled = CompiledPattern.from_hf_pre_tokenizer(cfg, name)
            self.hf_path = path
        else:
            spec = NAMED_PATTERNS[name]
            self.levels = list(spec.levels)
            self.mode = spec.mode
            self.compiled = get_pattern(name)
            self.hf_path = None
        self.dialects = {d for _, d in self.levels}
        self._rx = [regex.compile(p) for p, _ in self.levels]

    def fstok(self, text: str) -> list[tuple[int, int]]:
        return self.compiled.spans(text)

    def regex_ref(self, text: str) -> list[tuple[int, int]]:
        """The `regex` module running the original pattern(s)."""
        if self.mode == "find":
            return [m.span() for m in self._rx[0].finditer(text)]
        pieces = [(0, len(text))] if text else []
        for rx in self._rx:
            nxt = []
            for lo, hi in pieces:
                pos = lo
                for m in rx.finditer(text, lo, hi):
                    a, b = m.span()
                    if a > pos:
                        nxt.append((pos, a))
                    nxt.append((a, b))
                    pos = b
                if pos < hi:
                    nxt.append((pos, hi))
            pieces = nxt
        return pieces

    def engine(self) -> Optional[Callable[[str], list[tuple[int, int]]]]:
        """The tokenizer's own engine, when it reports spans (HF tokenizers)."""
        if self.hf_path is None and self.mode == "find":
            return None
        if self.hf is None:
            from tokenizers import Tokenizer

            if self.hf_path:
                self.hf = Tokenizer.from_file(self.hf_path).pre_tokenizer
            else:
                from tokenizers import Regex, pre_tokenizers

                self.hf = pre_tokenizers.Sequence(
                    [pre_tokenizers.Split(Regex(p), behavior="isolated") for p, _ in self.levels])
        return lambda text: [off for _, off in self.hf.pre_tokenize_str(text)]

    def unsafe(self) -> frozenset:
        """Code points the `regex` module classifies unlike the engine (Unicode 17 vs 16, \\w...)."""
        if getattr(self, "_unsafe", None) is None:
            out: set = set()
            for p, d in self.levels:
                used = "".join(c for c in "sdw" if "\\" + c in p or "\\" + c.upper() in p)
                out |= disagreement(d, used)
            self._unsafe = frozenset(out)
        return self._unsafe


@functools.lru_cache(maxsize=None)
def _all_text() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


@functools.lru_cache(maxsize=None)
def disagreement(dialect: str, shorthands: str = "sdw") -> frozenset:
    """Code points whose General_Category, or membership in the `shorthands` classes (\\s \\d \\w),
    differs between the `regex` module and the engine tables fstok uses for `dialect`."""
    u = tables(dialect)
    allt = _all_text()
    bad: set = set()
    for g in GCS:
        ours = u.gc[g] & VALID
        theirs = {ord(m.group()) for m in regex.finditer(r"\p{%s}" % g, allt)}
        bad |= set(ours) ^ theirs
    for sh in shorthands:
        theirs = {ord(m.group()) for m in regex.finditer("\\" + sh, allt)}
        bad |= set(u.shorthand(sh) & VALID) ^ theirs
    return frozenset(bad)


@functools.lru_cache(maxsize=None)
def tiktoken_encoding(name: str):
    """tiktoken Encoding built offline from ../shared/data/vocab/tiktoken (pattern from fstok,
    which tests check against tiktoken_ext)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(os.path.join(VOCAB, "tiktoken", f"{name}.tiktoken"))
    return tiktoken.Encoding(f"{name}-local", pat_str=NAMED_PATTERNS[name].levels[0][0], mergeable_ranks=ranks,
                             special_tokens={})


def tiktoken_agrees(name: str, text: str, spans: list[tuple[int, int]]) -> bool:
    """tiktoken's own splitting (Rust fancy-regex) agrees with `spans`, checked by encoding."""
    enc = tiktoken_encoding(name)
    native = enc.encode_ordinary(text)
    ours: list[int] = []
    for a, b in spans:
        ours.extend(enc._core_bpe.encode_single_piece(text[a:b].encode("utf-8")))
    return native == ours


def tiktoken_pieces(pattern: str, text: str, candidates: Iterable[str]) -> list[str]:
    """tiktoken's own pieces of `text` (Rust fancy-regex splitting), when each is among
    `candidates`: with a vocabulary of the 256 bytes plus every candidate string, tiktoken turns a
    piece that is a candidate into exactly one token (its whole-piece lookup), so decoding the
    tokens one by one gives its pieces.  Pass the pieces of every plausible split (fstok's and the
    `regex` module's); a piece outside them comes back as several byte-level tokens."""
    import tiktoken

    ranks = {bytes([i]): i for i in range(256)}
    for c in candidates:
        b = c.encode("utf-8")
        if b not in ranks:
            ranks[b] = len(ranks)
    enc = tiktoken.Encoding("fstok-probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return [enc.decode_single_token_bytes(t).decode("utf-8", "replace") for t in enc.encode_ordinary(text)]


# ----------------------------------------------------------------------------- reporting
class Mismatch(AssertionError):
    pass


def first_diff(text: str, got, want) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            break
    else:
        i = min(len(got), len(want))
    g = got[i] if i < len(got) else None
    w = want[i] if i < len(want) else None
    ctx_lo = max(0, min(x[0] for x in (g, w) if x) - 10) if (g or w) else 0
    return (f"piece {i}: fstok {g} {text[g[0]:g[1]]!r} vs reference {w} {text[w[0]:w[1]] if w else None!r}; "
            f"context {text[ctx_lo:ctx_lo + 40]!r}")


def compare(subject: Subject, text: str, ref: str = "regex") -> None:
    got = subject.fstok(text)
    if ref == "regex":
        want = subject.regex_ref(text)
    else:
        want = subject.engine()(text)
    if got != want:
        raise Mismatch(f"{subject.name} vs {ref}: {first_diff(text, got, want)}")


def safe(subject: Subject, text: str) -> bool:
    u = subject.unsafe()
    return not any(ord(c) in u for c in text)


# ----------------------------------------------------------------------------------- checks
def read_corpus(name: str) -> str:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8", newline="") as f:
        return f.read()


def check_corpus(subject: Subject, every: int = 1, whole_limit: Optional[int] = None, engine_whole: bool = True,
                 corpora=CORPORA, log=print) -> int:
    """Each line (every `every`-th) and each whole file (or its first `whole_limit` chars)."""
    n = 0
    engine = subject.engine()
    for cname in corpora:
        text = read_corpus(cname)
        whole = text if whole_limit is None else text[:whole_limit]
        lines = text.split("\n")[::every]
        for line in lines:
            if safe(subject, line):
                compare(subject, line, "regex")
            elif engine is not None:
                compare(subject, line, "engine")
            elif subject.mode == "find" and subject.name in TIKTOKEN_NAMES:
                if not tiktoken_agrees(subject.name, line, subject.fstok(line)):
                    raise Mismatch(f"{subject.name}: tiktoken encodes {line[:80]!r} differently")
            n += 1
        is_safe = safe(subject, whole)
        if is_safe:
            compare(subject, whole, "regex")
        if engine is not None and (engine_whole or not is_safe):
            compare(subject, whole, "engine")
        if subject.name in TIKTOKEN_NAMES and (whole_limit is None or not is_safe):
            if not tiktoken_agrees(subject.name, whole, subject.fstok(whole)):
                raise Mismatch(f"{subject.name}: tiktoken encodes corpus {cname} differently")
        n += 1
        log(f"  {subject.name}: corpus {cname}: {len(lines)} lines + whole file ok")
    return n


CONTEXTS = ["{c}", "a{c}a", "1{c}1", " {c} ", "\n{c}\n", "{c}{c}", "A{c}", "{c}b", " {c}", "{c}  x", "'{c}"]
COMPACT = ["a{c}1{c} {c}\n{c}"]  # between a letter, a digit, a space and a newline, in one string


def codepoint_text(cps: Iterable[int], contexts=CONTEXTS, sep: str = "\x00") -> str:
    parts = []
    for c in cps:
        ch = chr(c)
        for ctx in contexts:
            parts.append(ctx.format(c=ch))
    return sep.join(parts)


def check_codepoints(subject: Subject, step: int = 1, chunk: int = 20000, contexts=CONTEXTS, alone_step: int = 1,
                     engine_step: int = 1, log=print) -> int:
    """Every `step`-th code point embedded in `contexts` (all of them in bulk texts), and every
    `alone_step`-th one alone as a whole text (so the end of the text follows it)."""
    cps = [c for c in range(0, 0x110000, step) if not 0xD800 <= c <= 0xDFFF]
    unsafe = subject.unsafe()
    engine = subject.engine()
    good = [c for c in cps if c not in unsafe]
    bad = [c for c in cps if c in unsafe]
    for i in range(0, len(good), chunk):
        compare(subject, codepoint_text(good[i:i + chunk], contexts), "regex")
    fst, ref = subject.fstok, subject.regex_ref
    for c in good[::alone_step]:
        t = chr(c)
        if fst(t) != ref(t):
            raise Mismatch(f"{subject.name}: U+{c:04X} alone: fstok {fst(t)} vs regex {ref(t)}")
    if engine is not None:
        sub = cps[::engine_step]
        for i in range(0, len(sub), chunk * 4):
            compare(subject, codepoint_text(sub[i:i + chunk * 4], contexts=["a{c}a", " {c}1", "\n{c}{c}"]), "engine")
        for i in range(0, len(bad), chunk):
            compare(subject, codepoint_text(bad[i:i + chunk]), "engine")
    elif subject.name in TIKTOKEN_NAMES:
        for i in range(0, len(bad), chunk):
            t = codepoint_text(bad[i:i + chunk])
            if not tiktoken_agrees(subject.name, t, subject.fstok(t)):
                raise Mismatch(f"{subject.name}: tiktoken disagrees on code points {bad[i]:X}..")
    log(f"  {subject.name}: {len(cps)} code points ({len(bad)} where `regex` has other Unicode data: "
        f"checked against the engine) ok")
    return len(cps)


def cell_representatives(subject: Subject, per_length: bool = False) -> list[int]:
    """Representatives of the Unicode cells of the pattern's character sets (all levels):
    the smallest code point of each cell that the `regex` module classifies like the engine,
    plus (per_length) one per UTF-8 length present in the cell."""
    from fstok.compile.regex_nfa import build_alphabet
    from fstok.compile.regex_parse import char_sets, parse

    sets = []
    for p, d in subject.levels:
        sets += [s & VALID for s in char_sets(parse(p, d))]
    alpha = build_alphabet(sets)
    unsafe = subject.unsafe()
    reps: list[int] = []
    by_cell: dict[int, dict[int, int]] = {}
    for lo, hi, cell in zip(alpha.runs_lo, alpha.runs_hi, alpha.runs_cell):
        slot = by_cell.setdefault(cell, {})
        for L, (a, b) in ((1, (0, 0x7F)), (2, (0x80, 0x7FF)), (3, (0x800, 0xFFFF)), (4, (0x10000, 0x10FFFF))):
            if L in slot:
                continue
            x, y = max(lo, a), min(hi, b)
            c = x
            while c <= y and c in unsafe:
                c += 1
            if c <= y:
                slot[L] = c
    for cell in sorted(by_cell):
        slot = by_cell[cell]
        if not slot:
            continue
        if per_length:
            reps.extend(sorted(slot.values()))
        else:
            reps.append(min(slot.values()))
    return reps


def check_cells(subject: Subject, k: int, per_length_upto: int = 3, log=print) -> int:
    """Every string of length <= k over the cell representatives, each as a text of its own."""
    n = 0
    for length in range(1, k + 1):
        reps = [chr(c) for c in cell_representatives(subject, per_length=length <= per_length_upto)]
        fst, ref = subject.fstok, subject.regex_ref
        for tup in itertools.product(reps, repeat=length):
            t = "".join(tup)
            if fst(t) != ref(t):
                raise Mismatch(f"{subject.name}: cell string {t!r}: fstok {fst(t)} vs regex {ref(t)}")
            n += 1
        log(f"  {subject.name}: {len(reps)} representatives, all {len(reps) ** length} strings of length {length} ok")
    return n


def check_adversarial(subject: Subject, size: int = 1 << 20, log=print) -> dict:
    """1 MB of one char (several kinds), spaces, newlines, alternations: linear time, exact."""
    out = {}
    t_small = None
    for name, unit in [("a", "a"), ("space", " "), ("newline", "\n"), ("digit", "7"), ("apostrophe", "'"),
                       ("cjk", "\u4e00"), ("space-tab", " \t"), ("crlf", "\r\n"), ("punct", "!"), ("mark", "\u0301")]:
        text = unit * (size // len(unit.encode("utf-8")))
        t0 = time.perf_counter()
        got = subject.fstok(text)
        dt = time.perf_counter() - t0
        small = text[: len(text) // 16]
        t1 = time.perf_counter()
        subject.fstok(small)
        dts = time.perf_counter() - t1
        want = subject.regex_ref(text)
        if got != want:
            raise Mismatch(f"{subject.name}: adversarial {name}: {first_diff(text, got, want)}")
        out[name] = (dt, dts)
        t_small = dts
    log(f"  {subject.name}: adversarial inputs of {size} bytes ok "
        f"(worst {max(v[0] for v in out.values()) * 1e3:.1f} ms)")
    del t_small
    return out


# ------------------------------------------------------------------------------------ main
ALL_SUBJECTS = TIKTOKEN_NAMES + ["llama3", "qwen2", "hf-bytelevel", "hf-llama3", "hf-qwen2"] + list(HF_FILES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patterns", default=",".join(ALL_SUBJECTS))
    ap.add_argument("--only", default="corpus,codepoints,cells,adversarial")
    ap.add_argument("--k", type=int, default=5, help="longest exhaustive cell string (default 5)")
    ap.add_argument("--quick", action="store_true", help="the fast sample the tests run")
    args = ap.parse_args()
    only = set(args.only.split(","))
    t0 = time.time()
    failures = 0
    for name in args.patterns.split(","):
        subject = Subject(name)
        print(f"{name}: {subject.compiled!r}")
        try:
            if "corpus" in only:
                check_corpus(subject, every=50 if args.quick else 1, whole_limit=200_000 if args.quick else None)
            if "codepoints" in only:
                check_codepoints(subject, step=7 if args.quick else 1)
            if "cells" in only:
                check_cells(subject, 3 if args.quick else args.k)
            if "adversarial" in only:
                check_adversarial(subject)
        except Mismatch as e:
            failures += 1
            print(f"MISMATCH {e}")
    print(f"done in {time.time() - t0:.0f}s: {failures} failing pattern(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
