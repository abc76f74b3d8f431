#!/usr/bin/env python3
"""fstok.Tokenizer vs HF tokenizers.Tokenizer: every Encoding field, on every corpus line, single and pair.

    python tools/diff_hf.py [--max-lines N] [--files a.json b.json ...]

For every tokenizer.json under ../shared/data/vocab/ (models/ included) that fstok compiles, each corpus line
is encoded alone and paired with another line, under four settings: the file's own truncation/padding, none,
truncation with stride (right) + batch padding, truncation with stride (left, longest_first) + left padding to
a multiple of 8. Compared: ids, type_ids, tokens, offsets, word_ids, special_tokens_mask, attention_mask,
sequence_ids, n_sequences and the overflowing windows (recursively); then encode_batch and the numpy batch,
and decode of every encoding. Files fstok cannot compile are listed with the reason. Exit status 1 on any
difference.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"

FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids", "n_sequences")
SETTINGS = [
    ("file", None, None),
    ("none", "off", "off"),
    ("stride-right", {"max_length": 64, "stride": 16}, {}),
    ("stride-left", {"max_length": 40, "stride": 8, "direction": "left"}, {"direction": "left", "pad_to_multiple_of": 8}),
]


def fields(e) -> dict:
    d = {f: getattr(e, f) for f in FIELDS}
    d["overflowing"] = [fields(o) for o in e.overflowing]
    return d


def apply(tok, trunc, pad) -> None:
    if trunc == "off":
        tok.no_truncation()
    elif trunc is not None:
        tok.enable_truncation(**trunc)
    if pad == "off":
        tok.no_padding()
    elif pad is not None:
        tok.enable_padding(**pad)


def corpus(max_lines: int) -> list[str]:
    out = []
    for p in sorted(glob.glob(os.path.join(DATA, "corpus", "*.txt"))):
        with open(p, encoding="utf-8") as f:
            lines = f.read().splitlines()
        out += lines[:max_lines] if max_lines else lines
    return out


def outcome(f, *a, **k):
    try:
        return ("ok", f(*a, **k))
    except BaseException as e:  # HF panics (pyo3 PanicException) where fstok raises ValueError
        if isinstance(e, KeyboardInterrupt):
            raise
        return ("error", type(e).__name__)


def diff_file(path: str, lines: list[str], report=lambda s: None) -> tuple[int, int]:
    import numpy as np
    import tokenizers

    import fstok

    try:
        ours0 = fstok.Tokenizer.from_file(path)
    except (NotImplementedError, ValueError) as e:
        report(f"  DIFF: fstok.Tokenizer refuses the file: {str(e)[:200]}")
        return 1, 1
    checks = bad = 0
    # one tokenizer of each side through the settings in order (the file's own first): compiling once
    ours, hf = ours0, tokenizers.Tokenizer.from_file(path)
    for name, trunc, pad in SETTINGS:
        try:
            apply(hf, trunc, pad)
        except Exception as e:
            report(f"  {name}: HF refuses the setting ({e}); skipped")
            continue
        apply(ours, trunc, pad)
        nb = 0
        for i, line in enumerate(lines):
            other = lines[(i * 7919 + 1) % len(lines)]
            for args in ((line,), (line, other)):
                a = outcome(hf.encode, *args)
                b = outcome(ours.encode, *args)
                checks += 1
                same = (a[0] == b[0] == "error") or (a[0] == b[0] == "ok" and fields(a[1]) == fields(b[1]))
                if same and a[0] == "ok":
                    dec_h = hf.decode(a[1].ids)
                    same = dec_h == ours.decode(a[1].ids)
                if not same:
                    bad += 1
                    nb += 1
                    if nb <= 3:
                        report(f"  {name}: DIFF on {args!r:.160}")
        for k in range(0, len(lines), 256):
            chunk = lines[k:k + 256]
            pairs = list(zip(chunk, chunk[::-1]))
            for inputs in (chunk, pairs):
                a = outcome(hf.encode_batch, inputs)
                b = outcome(ours.encode_batch, inputs)
                checks += 1
                if not ((a[0] == b[0] == "error") or (a[0] == b[0] == "ok" and
                                                      [fields(x) for x in a[1]] == [fields(x) for x in b[1]])):
                    bad += 1
                    report(f"  {name}: encode_batch DIFF at chunk {k}")
                if a[0] == "ok" and (pad is not None and pad != "off" or name == "file" and hf.padding):
                    single = inputs if inputs is chunk else [p[0] for p in inputs]
                    pair = None if inputs is chunk else [p[1] for p in inputs]
                    try:
                        got = ours.encode_batch_numpy(single, pair)
                    except ValueError:
                        continue  # rows of different lengths (HF's Fixed padding below a row's length)
                    checks += 1
                    if got["input_ids"].tolist() != [e.ids for e in a[1]] or \
                            got["attention_mask"].tolist() != [e.attention_mask for e in a[1]] or \
                            got["token_type_ids"].tolist() != [e.type_ids for e in a[1]]:
                        bad += 1
                        report(f"  {name}: encode_batch_numpy DIFF at chunk {k}")
        report(f"  {name}: {nb} differing encodings")
    return checks, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-lines", type=int, default=0, help="lines per corpus file (0: all)")
    ap.add_argument("--files", nargs="*")
    args = ap.parse_args()
    files = args.files or sorted(set(glob.glob(os.path.join(DATA, "vocab", "**", "*.json"), recursive=True)))
    files = [f for f in files if os.path.basename(f) not in ("vocab.json",) and "tekken" not in f]
    lines = corpus(args.max_lines)
    total = total_bad = 0
    for f in files:
        t0 = time.time()
        print(os.path.relpath(f, DATA), flush=True)
        c, b = diff_file(f, lines, lambda s: print(s, flush=True))
        total += c
        total_bad += b
        print(f"  {c} checks, {b} differing, {time.time() - t0:.0f}s", flush=True)
    print(f"TOTAL {total} checks, {total_bad} differing")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
