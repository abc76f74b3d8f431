#!/usr/bin/env python3
"""Generate fstok/data/hf_pipeline_unicode.npz: per-code-point facts of HF tokenizers' pipeline stages whose
Unicode tables (Rust crates) differ from Python's `unicodedata`, asked of the installed HF `tokenizers`.

  marks    uint32  code points the StripAccents normalizer removes (`is_combining_mark`)
  numeric  uint32  code points the Digits pre-tokenizer splits on (`char::is_numeric`)
  nfkd_*   HF's full compatibility decomposition (NFKD) of each code point where it differs from HF's NFD
           (keys, offsets into vals, vals: the code points of the decompositions, concatenated)

tests/test_hf_pipelines.py re-checks samples of both against the installed HF.
"""
from __future__ import annotations

import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fstok", "data",
                   "hf_pipeline_unicode.npz")


def main() -> int:
    import tokenizers
    from tokenizers import normalizers, pre_tokenizers

    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    strip = normalizers.StripAccents()
    digits = pre_tokenizers.Digits(individual_digits=True)
    marks, numeric = [], []
    nfd, nfkd = normalizers.NFD(), normalizers.NFKD()
    compat: dict[int, str] = {}
    step = 4096
    for k in range(0, len(cps), step):
        part = cps[k:k + step]
        for c in part:
            ch = chr(c)
            if strip.normalize_str("a" + ch + "a") == "aa":
                marks.append(c)
            k = nfkd.normalize_str(ch)
            if k != nfd.normalize_str(ch):
                compat[c] = k
        s = "a".join(chr(c) for c in part)
        for piece, (a, b) in digits.pre_tokenize_str("a" + s + "a"):
            if len(piece) == 1 and piece != "a":
                numeric.append(ord(piece))
    keys = sorted(compat)
    offs = np.cumsum([0] + [len(compat[k]) for k in keys]).astype(np.uint32)
    vals = np.array([ord(x) for k in keys for x in compat[k]], dtype=np.uint32)
    np.savez_compressed(OUT, marks=np.array(sorted(set(marks)), dtype=np.uint32),
                        numeric=np.array(sorted(set(numeric)), dtype=np.uint32),
                        nfkd_keys=np.array(keys, dtype=np.uint32), nfkd_offs=offs, nfkd_vals=vals,
                        source=np.frombuffer(f"tokenizers {tokenizers.__version__}".encode(), dtype=np.uint8))
    print(f"{OUT}: {len(marks)} marks, {len(numeric)} numeric, {len(keys)} compatibility decompositions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
