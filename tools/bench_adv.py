#!/usr/bin/env python3
"""Adversarial inputs for the byte-level BPE encoders: time and memory per input byte.

    tools/bench adv                                    # every model below, every input
    tools/bench adv --models llama3 --inputs one-char,spaces

Each (model, input) runs in a fresh process: load the model, encode a little other text (code paths warm, caches
empty of the input), then encode the input (about 1 MB of UTF-8) as one text, three times with the piece caches
emptied before each (`clear_cache()`); the best CPU time is reported as ns per input byte.  Memory: the growth of
the process's peak resident set (VmHWM, reset before the calls) over its resident set before them, per input
byte (the result list itself included).

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


def _inputs() -> dict[str, str]:
    rnd = random.Random(0)
    return {
        "one-char": "a" * N,
        "spaces": " " * N,
        "digits": "".join(rnd.choice("0123456789") for _ in range(N)),
        "random-bytes": bytes(rnd.randrange(256) for _ in range(N * 2 // 3)).decode("latin-1"),
        "cjk": "".join(chr(rnd.randrange(0x4E00, 0xA000)) for _ in range(N // 3)),
    }


def _load(model: str):
    sys.path.insert(0, HERE)
    import bench_cold

    import fstok

    if bench_cold.MODELS[model][0] == "hfjson":
        return fstok.compile(bench_cold._hf_json(model))
    return fstok.get_encoding(model)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(field + ":"):
                return int(ln.split()[1])
    return 0


def worker(model: str, name: str) -> dict:
    text = _inputs()[name]
    t = _load(model)
    t.encode_ordinary("warm up: Hello world 123, " * 50)
    nb = len(text.encode("utf-8"))
    import gc

    gc.collect()
    try:  # reset the peak resident set to the current one (Linux)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    rss0 = _status_kb("VmRSS")
    best, ntok = 1e18, 0
    for _ in range(3):
        t.clear_cache()
        t0 = time.process_time()
        ids = t.encode_ordinary(text)
        best = min(best, time.process_time() - t0)
        ntok = len(ids)
        del ids
    rss1 = _status_kb("VmHWM")
    return {"ns_per_byte": best * 1e9 / nb, "bytes_per_byte": max(0, rss1 - rss0) * 1024 / nb, "tokens": ntok,
            "bytes": nb}


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/bench adv", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--inputs", default="one-char,spaces,digits,random-bytes,cjk")
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
            cells.append(f"{x['ns_per_byte']:.1f} ns, {x['bytes_per_byte']:.1f} B")
            print(f"{model} {name}: {cells[-1]} ({x['tokens']} tokens)", file=sys.stderr, flush=True)
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    print("CPU time per input byte (best of 3 calls, caches emptied before each) and peak memory growth per input byte:")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
