#!/usr/bin/env python3
"""Adversarial inputs for the byte-level BPE encoders: time per input byte.

    tools/bench adv                                    # every model below, every input
    tools/bench adv --models llama3 --inputs one-char,spaces

Each (model, input) runs in a fresh process: load the model, encode small other inputs of each kind (code paths
and tables built on first use warm), then encode the input (about 1 MB of UTF-8) as one text, three times with
the piece caches emptied before each (`clear_cache()`); the best CPU time is reported as ns per input byte.

Models: the OpenAI encodings (o200k_base, cl100k_base) and Llama 3's tokenizer.json (`llama3`, whose merges are
not rank-monotone).  Inputs: one character repeated, spaces, digits, random bytes (as Latin-1 text: every byte
value, multi-byte UTF-8 above 0x7F), random CJK.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["o200k_base", "cl100k_base", "llama3"]
N = 1_000_000


def _input(name: str, n: int = N, seed: int = 0) -> str:
    rnd = random.Random(seed)
    make = {
        "one-char": lambda: "a" * n,
        "spaces": lambda: " " * n,
        "digits": lambda: "".join(rnd.choice("0123456789") for _ in range(n)),
        "random-bytes": lambda: bytes(rnd.randrange(256) for _ in range(n * 2 // 3)).decode("latin-1"),
        "cjk": lambda: "".join(chr(rnd.randrange(0x4E00, 0xA000)) for _ in range(n // 3)),
    }
    return make[name]()


INPUTS = ["one-char", "spaces", "digits", "random-bytes", "cjk"]


def _load(model: str):
    sys.path.insert(0, HERE)
    import bench_cold

    import fstok

    if bench_cold.MODELS[model][0] == "hfjson":
        return fstok.compile(bench_cold._hf_json(model))
    return fstok.get_encoding(model)


def worker(model: str, name: str) -> dict:
    t = _load(model)
    # warm-up on small, other inputs of every kind: tables built on first use are not counted as the input's memory
    for other in INPUTS:
        t.encode_ordinary(_input(other, 20_000, seed=1))
    text = _input(name)
    nb = len(text.encode("utf-8"))
    best, ntok = 1e18, 0
    for _ in range(3):
        t.clear_cache()
        t0 = time.process_time()
        ids = t.encode_ordinary(text)
        best = min(best, time.process_time() - t0)
        ntok = len(ids)
        del ids
    return {"ns_per_byte": best * 1e9 / nb, "tokens": ntok, "bytes": nb}


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/bench adv", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--inputs", default=",".join(INPUTS))
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(*a.worker)))
        return 0
    names = a.inputs.split(",")
    rows = ["| model | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for model in a.models.split(","):
        cells = []
        for name in names:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", model, name],
                               capture_output=True, text=True, cwd=ROOT)
            if r.returncode:
                cells.append("error: " + (r.stderr.strip().splitlines() or ["?"])[-1][:60])
                continue
            x = json.loads(r.stdout.strip().splitlines()[-1])
            cells.append(f"{x['ns_per_byte']:.1f}")
            print(f"{model} {name}: {cells[-1]} ({x['tokens']} tokens)", file=sys.stderr, flush=True)
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    print("ns of CPU time per input byte (best of 3 calls, piece caches emptied before each):")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
