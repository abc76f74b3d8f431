#!/usr/bin/env python3
"""Time of constructing a byte-level BPE model from its (cached) artifact: validation of the tables and the tables
derived at load (fstok.bpe.BPETokenizer(art)), in one process, by CPU time, rounds interleaved between builds.

    python tools/ab_load.py MODELS ROUNDS [DIR ...]
    python tools/ab_load.py roberta-base,olmo-2,tekken,o200k_base 15            # the installed fstok.runtime._bpe
    python tools/ab_load.py olmo-2,o200k_base 15 /tmp/base /tmp/new              # builds to compare (as tools/ab_cold.py)

MODELS: OpenAI encodings (o200k_base, cl100k_base, ...) or the files of tools/bench pipelines (roberta-base, olmo-2,
whisper-large-v3, tekken, ...).  Prints the median and the fastest construction per build, in ms.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_cold  # noqa: E402
import bench_pipelines as bp  # noqa: E402
import fstok  # noqa: E402
import fstok.bpe as fb  # noqa: E402


def bpe_of(name: str):
    """The byte-level BPE tokenizer (fstok.bpe.BPETokenizer) inside the model's compiled tokenizer."""
    tok = fstok.compile(bp.FILES[name]) if name in bp.FILES else fstok.get_encoding(name)
    for attr in ("inner", "_tables"):  # (tekken, tokenizer.json pipelines)
        if not isinstance(tok, fb.BPETokenizer):
            tok = getattr(tok, attr, tok)
    if not isinstance(tok, fb.BPETokenizer):
        sys.exit(f"{name}: not a byte-level BPE model")
    return tok


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    models, rounds, builds = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3:]
    mods = [ab_cold.load_build(b) for b in builds] if builds else [fb._native()]
    builds = builds or ["installed"]
    for name in models:
        bt = bpe_of(name)
        res: dict[int, list[float]] = {i: [] for i in range(len(mods))}
        for r in range(rounds):
            for i in (range(len(mods)) if r % 2 == 0 else reversed(range(len(mods)))):
                fb._native = lambda m=mods[i]: m
                gc.collect()
                t0 = time.process_time()
                t = type(bt)(bt._art)
                res[i].append((time.process_time() - t0) * 1e3)
                del t
        print(f"{name:16s} " + "  ".join(f"{builds[i]}: median {statistics.median(res[i]):5.1f} ms, fastest "
                                         f"{min(res[i]):5.1f}" for i in res), flush=True)


if __name__ == "__main__":
    main()
