#!/usr/bin/env python3
"""Generate fstok/data/hf_scripts.npz: the script classes HF tokenizers' UnicodeScripts pre-tokenizer splits on,
asked of the installed HF `tokenizers` over every code point.

  starts   uint32  first code point of each run of equal class (runs cover 0..0x10FFFF)
  classes  uint16  the run's class: 0 = "Any" (joins either neighbour: ' ' and code points outside every
                   script), other values number the scripts as HF groups them (Hiragana and Katakana with Han,
                   U+30FC with Han); only equality between classes matters, not the numbers

How: a character c is Any exactly when neither "aca" (Latin) nor "αcα" (Greek) splits around c (a script
character would split from one of the two).  Consecutive non-Any characters split exactly where their scripts
differ, which gives runs; one representative per run is then compared with one representative per class found
so far ("rc" is one piece exactly when r and c share a script).  tests/test_pipeline_pretokenizers.py re-checks
samples against the installed HF.
"""
from __future__ import annotations

import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fstok", "data", "hf_scripts.npz")


def _splits_around(pt, sep: str, cps: list[int]) -> set[int]:
    """The code points of `cps` that HF splits from `sep` on either side."""
    out = set()
    step = 8192
    for k in range(0, len(cps), step):
        part = cps[k:k + step]
        s = sep + sep.join(chr(c) for c in part) + sep
        # pieces: a character not joined with its separators shows up in a piece that starts with it
        for piece, (a, b) in pt.pre_tokenize_str(s):
            if piece[0] != sep:
                out.update(ord(ch) for ch in piece if ch != sep)
    return out


def main() -> int:
    import tokenizers
    from tokenizers import pre_tokenizers

    pt = pre_tokenizers.UnicodeScripts()
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    non_any = _splits_around(pt, "a", cps) | _splits_around(pt, "\u03b1", cps)
    non_any.update(c for c in cps if chr(c) in "a\u03b1" or False)
    order = [c for c in cps if c in non_any]
    # runs of equal script among consecutive non-Any characters
    s = "".join(chr(c) for c in order)
    run_first: list[int] = []  # index into order of each run's first character
    pos = 0
    for piece, (a, b) in pt.pre_tokenize_str(s):
        run_first.append(a)
    cls_of_run: list[int] = []
    reps: list[str] = []
    for a in run_first:
        c = s[a]
        for k, r in enumerate(reps):
            if len(pt.pre_tokenize_str(r + c)) == 1:
                cls_of_run.append(k + 1)
                break
        else:
            reps.append(c)
            cls_of_run.append(len(reps))
    cls = np.zeros(0x110000, dtype=np.uint16)
    bounds = run_first + [len(order)]
    arr = np.array(order, dtype=np.int64)
    for i in range(len(run_first)):
        cls[arr[bounds[i]:bounds[i + 1]]] = cls_of_run[i]
    change = np.flatnonzero(np.diff(cls.astype(np.int32))) + 1
    starts = np.concatenate([[0], change]).astype(np.uint32)
    np.savez_compressed(OUT, starts=starts, classes=cls[starts].astype(np.uint16),
                        tokenizers_version=np.array(tokenizers.__version__))
    print(f"{OUT}: {len(starts)} runs, {len(reps)} script classes, {len(order)} non-Any code points "
          f"(tokenizers {tokenizers.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
