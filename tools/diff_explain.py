#!/usr/bin/env python3
"""Differential check of `fstok.inspect.explain` against `encode`: the explanation, computed in pure Python
from the compiled tables, must give exactly the ids of the C runtime.

    python tools/diff_explain.py                      # every bundled encoding, every line of every corpus
    python tools/diff_explain.py --models o200k_base --corpora multilingual --every 10
    python tools/diff_explain.py --sources ../shared/data/vocab/models   # also every model file that compiles

Prints one line per (model, corpus) with the number of lines checked and mismatches; exits 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import fstok  # noqa: E402
from fstok.inspect import explain  # noqa: E402

SHARED = next((c for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(os.path.dirname(HERE), "..", "shared", "data"),
                           "/work/shared/data") if c and os.path.isdir(os.path.join(c, "corpus"))), "../shared/data")
CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]


def lines_of(corpus: str, every: int) -> list[str]:
    with open(os.path.join(SHARED, "corpus", f"{corpus}.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return lines[::every]


def check(tok, lines: list[str]) -> tuple[int, list[str]]:
    bad = []
    for ln in lines:
        try:
            want = tok.encode(ln, allowed_special="all") if hasattr(tok, "_special_tokens") else tok.encode(ln)
            kw = {"allowed_special": "all"} if hasattr(tok, "_special_tokens") else {}
            got = explain(tok, ln, **kw).ids
        except Exception as e:  # noqa: BLE001 - reported as a mismatch with its reason
            bad.append(f"{ln[:60]!r}: {type(e).__name__}: {e}")
            continue
        if got != want:
            bad.append(f"{ln[:60]!r}: explain {got[:12]} != encode {want[:12]}")
    return len(lines), bad


def sources(root: str) -> list[str]:
    out = []
    for p in sorted(glob.glob(os.path.join(root, "**", "*"), recursive=True)):
        if os.path.isfile(p) and not p.endswith((".md", "LICENSE")) and "PROVENANCE" not in p:
            out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(fstok.list_encodings()), help="comma-separated bundled names")
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--every", type=int, default=1, help="check every k-th line")
    ap.add_argument("--sources", help="also every tokenizer source file under this folder that fstok compiles")
    a = ap.parse_args()
    toks = [(m, fstok.get_encoding(m)) for m in a.models.split(",") if m]
    if a.sources:
        for p in sources(a.sources):
            try:
                toks.append((os.path.relpath(p, a.sources), fstok.compile(p)))
            except Exception as e:  # noqa: BLE001 - a source fstok does not compile is listed, not checked
                print(f"skip {p}: {type(e).__name__}: {str(e)[:100]}")
    total_bad = 0
    for name, tok in toks:
        for c in a.corpora.split(","):
            t = time.perf_counter()
            n, bad = check(tok, lines_of(c, a.every))
            total_bad += len(bad)
            print(f"{name:<40} {c:<14} {n:>8} lines  {len(bad)} mismatches  ({time.perf_counter() - t:.1f} s)", flush=True)
            for b in bad[:5]:
                print("    " + b)
    print(f"total mismatches: {total_bad}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
