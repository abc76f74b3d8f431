#!/usr/bin/env python3
"""Generate fstok/data/bert_unicode.npz: per-code-point BERT normalization facts.

The reference for BERT text handling is HF `tokenizers` (BertNormalizer + BertPreTokenizer),
whose Unicode tables (Rust std, unicode_categories, unicode-normalization crates) are not
Python's.  So instead of re-deriving them from `unicodedata`, this tool *asks HF* about
every code point and stores the answers; fstok compiles its runtime tables from this file,
and tests/test_wordpiece_unicode.py re-checks every code point against the installed HF.

Stored arrays (code points U+0000..U+10FFFF; surrogates are never valid input):
  clean      uint8  0 = kept, 1 = deleted by clean_text, 2 = replaced by ' ' (whitespace)
  cjk        uint8  1 = padded with spaces by handle_chinese_chars
  pretok     uint8  0 = word char, 1 = whitespace (split, removed), 2 = punctuation (isolated)
  ccc        uint8  canonical combining class as HF's NFD applies it (probed: see probe_ccc)
  lower_keys/lower_offs/lower_vals   cp -> lowercase string (only where it differs)
  nfd_keys/nfd_offs/nfd_vals         cp -> NFD string (only where it differs)
  strip_keys/strip_offs/strip_vals   cp -> NFD-then-drop-Mn string (only where != cp)
  mn         uint8  1 = dropped by strip_accents (Mn, HF's table)
"""
from __future__ import annotations

import argparse
import os
import sys
import unicodedata

import numpy as np

MAXCP = 0x110000
SEP = "|"  # a starter that no normalization touches and that nothing maps to


def all_chars():
    return [chr(c) if not (0xD800 <= c <= 0xDFFF) else None for c in range(MAXCP)]


def probe_map(fn, chars):
    """Apply a str->str normalizer to every char at once, split back per char."""
    out = [None] * len(chars)
    idx = [i for i, c in enumerate(chars) if c is not None and c != SEP]
    step = 50000
    for s in range(0, len(idx), step):
        part = idx[s : s + step]
        res = fn(SEP.join(chars[i] for i in part)).split(SEP)
        if len(res) != len(part):
            res = [fn(chars[i]) for i in part]
        for i, r in zip(part, res):
            out[i] = r
    out[ord(SEP)] = fn(SEP)
    return out


def probe_ccc(nfd, chars) -> np.ndarray:
    """Canonical combining classes as HF's NFD crate knows them (its Unicode version is older
    than Python's): order each candidate mark against reference marks of every class.

    For a reference r of class k: NFD(x c r) puts r first iff ccc(c) > k, and NFD(x r c) puts c
    first iff 0 < ccc(c) < k.  A candidate's class is the reference class it never reorders with.
    """
    # one reference mark per class, checked to behave as that class in HF's NFD (a mark newer
    # than HF's tables acts as a starter there and would make a wrong reference)
    by_class: dict[int, list[str]] = {}
    for cp in range(0x300, 0x20000):
        c = chr(cp)
        k = unicodedata.combining(c)
        if k and unicodedata.decomposition(c) == "":
            by_class.setdefault(k, []).append(c)
    acute, low = "\u0301", "\u0334"  # classes 230 and 1, Unicode 1.1

    def behaves(r: str, k: int) -> bool:
        a, b = nfd("x" + acute + r), nfd("x" + r + acute)
        if k < 230:
            ok = a == "x" + r + acute and b == "x" + r + acute
        elif k > 230:
            ok = a == "x" + acute + r and b == "x" + acute + r
        else:
            ok = a == "x" + acute + r and b == "x" + r + acute
        if k > 1:
            ok = ok and nfd("x" + r + low) == "x" + low + r
        return ok

    refs: dict[int, str] = {}
    for k, cs in by_class.items():
        for c in cs:
            if behaves(c, k):
                refs[k] = c
                break
    cands = [i for i, c in enumerate(chars) if c is not None and unicodedata.combining(c)]
    # candidates unknown to Python's tables cannot be marks for HF either (HF is older)
    ccc = np.zeros(len(chars), np.uint8)
    ks = sorted(refs)
    for i in cands:
        c = chars[i]
        probes = []
        for k in ks:
            probes.append("x" + c + refs[k])
            probes.append("x" + refs[k] + c)
        outs = nfd(SEP.join(probes)).split(SEP)
        assert len(outs) == len(probes)
        greater, less, same = [], [], []
        for j, k in enumerate(ks):
            if refs[k] == c:
                same.append(k)  # c is the reference of its own class
                continue
            if outs[2 * j] == "x" + refs[k] + c:
                greater.append(k)
            if outs[2 * j + 1] == "x" + c + refs[k]:
                less.append(k)
        if same:
            ccc[i] = same[0]
            continue
        if not greater and not less:
            continue
        lo, hi = max(greater, default=0), min(less, default=256)
        inside = [k for k in ks if lo < k < hi]
        ccc[i] = inside[0] if inside else lo + 1
    return ccc


def pack(mapping: dict[int, str]):
    keys = np.array(sorted(mapping), dtype=np.uint32)
    offs = [0]
    vals: list[int] = []
    for k in keys:
        vals.extend(ord(c) for c in mapping[int(k)])
        offs.append(len(vals))
    return keys, np.array(offs, dtype=np.uint32), np.array(vals, dtype=np.uint32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(__file__), "..", "fstok", "data", "bert_unicode.npz"))
    args = ap.parse_args()
    import tokenizers
    from tokenizers import normalizers, pre_tokenizers

    def bn(**kw):
        base = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
        base.update(kw)
        return normalizers.BertNormalizer(**base).normalize_str

    chars = all_chars()
    clean = np.zeros(MAXCP, np.uint8)
    for i, r in enumerate(probe_map(bn(clean_text=True), chars)):
        if r is None:
            continue
        if r == "":
            clean[i] = 1
        elif r == " " and chars[i] != " ":
            clean[i] = 2
        elif r != chars[i]:
            sys.exit(f"unexpected clean_text output for U+{i:04X}: {r!r}")
    cjk = np.zeros(MAXCP, np.uint8)
    for i, r in enumerate(probe_map(bn(handle_chinese_chars=True), chars)):
        if r is not None and r != chars[i]:
            if r != f" {chars[i]} ":
                sys.exit(f"unexpected chinese-char output for U+{i:04X}: {r!r}")
            cjk[i] = 1
    lower = {i: r for i, r in enumerate(probe_map(bn(lowercase=True), chars)) if r is not None and r != chars[i]}
    strip = {i: r for i, r in enumerate(probe_map(bn(strip_accents=True), chars)) if r is not None and r != chars[i]}
    nfdf = normalizers.NFD().normalize_str
    nfd = {i: r for i, r in enumerate(probe_map(nfdf, chars)) if r is not None and r != chars[i]}
    # Which characters strip_accents drops: a char whose own NFD is itself and strip gives "".
    mn = np.zeros(MAXCP, np.uint8)
    for i, c in enumerate(chars):
        if c is not None and strip.get(i) == "" and i not in nfd:
            mn[i] = 1
    # Pre-tokenizer classes: "x" between every char.
    pre = pre_tokenizers.BertPreTokenizer()
    pretok = np.zeros(MAXCP, np.uint8)
    idx = [i for i, c in enumerate(chars) if c is not None and c != "x"]
    step = 20000
    for s in range(0, len(idx), step):
        part = idx[s : s + step]
        text = "x" + "x".join(chars[i] for i in part) + "x"
        covered = {}
        for piece, (a, b) in pre.pre_tokenize_str(text):
            for p in range(a, b):
                covered[p] = (a, b)
        for j, i in enumerate(part):
            p = 2 * j + 1
            if p not in covered:
                pretok[i] = 1
            elif covered[p] == (p, p + 1):
                pretok[i] = 2
    ccc = probe_ccc(nfdf, chars)
    arrays = dict(clean=clean, cjk=cjk, pretok=pretok, ccc=ccc, mn=mn)
    for name, m in (("lower", lower), ("nfd", nfd), ("strip", strip)):
        k, o, v = pack(m)
        arrays[f"{name}_keys"], arrays[f"{name}_offs"], arrays[f"{name}_vals"] = k, o, v
    arrays["source"] = np.frombuffer(
        f"tokenizers=={tokenizers.__version__}; all facts probed from it".encode(), np.uint8
    )
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out}: {len(lower)} lowercase, {len(nfd)} nfd, {len(strip)} strip mappings; "
          f"deleted={int((clean == 1).sum())} ws={int((clean == 2).sum())} cjk={int(cjk.sum())} "
          f"punct={int((pretok == 2).sum())} space={int((pretok == 1).sum())} mn={int(mn.sum())}")


if __name__ == "__main__":
    main()
