#!/usr/bin/env python3
"""Cold one-pass speed of fstok's tokenizer.json pipeline against HF tokenizers (and fastokens / gigatoken where
installed and able to load the file), 1 thread, MB/s of UTF-8.

    python tools/speed_pipelines.py [--mb 1] FILE.json ...

Each tokenizer first encodes a warm-up text (the first 200 KB of ../shared/data/corpus/code.txt), then one pass
over ~`--mb` MB of english.txt it has not seen, in ~8 KB documents."""
from __future__ import annotations

import argparse
import os
import sys
import time

CORPUS = "/work/shared/data/corpus"


def docs(path: str, mb: float, size: int = 8192) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read(int(mb * 1_000_000))
    return [text[i:i + size] for i in range(0, len(text), size)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mb", type=float, default=1.0)
    a = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import tokenizers

    import fstok

    warm = docs(os.path.join(CORPUS, "code.txt"), 0.2)
    test = docs(os.path.join(CORPUS, "english.txt"), a.mb)
    nbytes = sum(len(d.encode("utf-8")) for d in test)
    for f in a.files:
        runners = {"fstok": fstok.compile(f)}
        runners["hf-tokenizers"] = tokenizers.Tokenizer.from_file(f)
        try:
            import fastokens

            runners["fastokens"] = fastokens.Tokenizer.from_file(f)
        except Exception:
            runners["fastokens"] = None
        try:
            import gigatoken

            with open(f, encoding="utf-8") as fh:
                runners["gigatoken"] = gigatoken.Tokenizer.from_json(fh.read())
        except Exception:
            runners["gigatoken"] = None
        print(os.path.relpath(f, "/work/shared/data/vocab"), f"({nbytes / 1e6:.2f} MB)")
        for name, tok in runners.items():
            if tok is None:
                print(f"  {name:14s} does not load it")
                continue
            if name == "hf-tokenizers":
                enc = lambda d, t=tok: t.encode(d, add_special_tokens=False).ids  # noqa: E731
            else:
                enc = lambda d, t=tok: t.encode(d)  # noqa: E731
            for d in warm:
                enc(d)
            t0 = time.perf_counter()
            for d in test:
                enc(d)
            dt = time.perf_counter() - t0
            print(f"  {name:14s} {nbytes / dt / 1e6:7.2f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
