#!/usr/bin/env python3
"""The tokenizer.json and tekken part of tools/diff_models.py (same options).

    python tools/diff_models_hf.py                         # every tokenizer.json and tekken file, every input
    python tools/diff_models_hf.py --files falcon clip --out results/

Each tokenizer.json under ../shared/data/vocab against HF `tokenizers` (ids and offsets of `encode(text,
add_special_tokens=False/True)` through `fstok.compile(path)` and `fstok.Tokenizer`, `decode(ids,
skip_special_tokens=True/False)`), each tekken file against mistral-common's Tekkenizer.  Exit status 1 on any
mismatch.  `run(args)` is the entry point.
"""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args: list[str] | None = None) -> int:
    spec = importlib.util.spec_from_file_location("diff_models", os.path.join(HERE, "diff_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(list(sys.argv[1:] if args is None else args) + ["--kind", "tokenizers", "tekken"])


if __name__ == "__main__":
    sys.exit(run())
