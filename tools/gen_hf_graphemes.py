#!/usr/bin/env python3
"""Generate fstok/data/hf_graphemes.npz: the grapheme-cluster classes the Precompiled normalizer of the
tokenizer.json pipeline (fstok.pipeline.normalizers) splits text with, from the `regex` module's Unicode tables
(the same ranges fstok.compile.hf_spm_tables.grapheme_ranges puts in the SentencePiece-style artifacts).

  starts  uint32  first code point of each run with a class
  ends    uint32  last code point of the run (inclusive)
  bits    uint8   Grapheme_Cluster_Break class (low 4 bits) and the Extended_Pictographic / Indic_Conjunct_Break
                  flags (fstok.hf_norm's G_* constants)

Shipped as data so that a pipeline tokenizer loaded from its artifact needs neither the compiler nor `regex`.
"""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fstok", "data", "hf_graphemes.npz")


def main() -> int:
    sys.path.insert(0, ROOT)
    from fstok.compile.hf_spm_tables import grapheme_ranges

    starts, ends, bits = grapheme_ranges()
    np.savez_compressed(OUT, starts=starts, ends=ends, bits=bits)
    print(f"{OUT}: {len(starts)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
