#!/usr/bin/env python3
"""fstok.Tokenizer vs HF tokenizers on any tokenizer.json: CPU time of one pass over unseen lines.

    python tools/time_hf_face.py FILE [FILE ...] [--lines 1500] [--rounds 3] [--stride 64:16] [--pair]
                                                [--modes encoding single numpy]
    python tools/time_hf_face.py --all [--rounds 3]     # every tokenizer.json under ../shared/data/vocab/

Contenders, each in a fresh process (TOKENIZERS_PARALLELISM=false, one thread), warmed up on 300 other lines,
then timed (process CPU time, which a shared host disturbs less than wall time) on one pass over `--lines`
lines interleaved from the shared corpora (English, multilingual, code, stress, Chinese):
  encoding   encode_batch(lines): Encoding objects (ids, tokens, offsets, word ids, ...)
  single     encode(line) for each line: one Encoding per call
  numpy      ids and attention mask padded to the batch's longest, truncated to 128: fstok's
             encode_batch_numpy; HF's encode_batch then np.array of each field
--stride MAX:STRIDE times the encoding path only, with enable_truncation(MAX, stride=STRIDE) (each long text
gives overflowing windows); --pair encodes each line paired with another line of the pass (a pair whose two
texts overflow gives the cross product of their windows, as in HF).
Rounds alternate the contenders; the median of the rounds is printed in ms per line and MB/s.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"


def lines(n: int) -> tuple[list[str], list[str]]:
    per = []
    for name in ("english", "multilingual", "code", "stress", "chinese_long"):
        with open(os.path.join(DATA, "corpus", f"{name}.txt"), encoding="utf-8") as f:
            per.append([x for x in f.read().splitlines() if x.strip()])
    warm = [x for ls in per for x in ls[:60]]
    out: list[str] = []
    k = 60
    while len(out) < n and any(k < len(ls) for ls in per):
        out += [ls[k] for ls in per if k < len(ls)]
        k += 1
    return warm, out[:n]


def every_tokenizer_json() -> list[str]:
    """The HF tokenizer.json files of the shared data (tools/diff_hf.py checks the same set)."""
    every = sorted(set(glob.glob(os.path.join(DATA, "vocab", "**", "*.json"), recursive=True)))
    return [f for f in every if os.path.basename(f) != "vocab.json" and "tekken" not in f]


def child(path: str, who: str, mode: str, n: int, stride: str, pair: bool) -> None:
    import time

    import numpy as np

    warm, test = lines(n)
    if pair:
        warm = [(x, warm[(i * 7919 + 1) % len(warm)]) for i, x in enumerate(warm)]
        test = [(x, test[(i * 7919 + 1) % len(test)]) for i, x in enumerate(test)]
    if who == "hf":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(path)
    else:
        import fstok

        tok = fstok.Tokenizer.from_file(path)
    if mode == "numpy":
        pad = tok.id_to_token(0)
        tok.enable_padding(pad_id=0, pad_token=pad)
        tok.enable_truncation(128)
        if who == "hf":
            def run(xs):
                es = tok.encode_batch(xs)
                return np.array([e.ids for e in es]), np.array([e.attention_mask for e in es])
        else:
            def run(xs):
                return tok.encode_batch_numpy(xs)
    elif mode == "single":
        def run(xs):
            return [tok.encode(*x) if isinstance(x, (tuple, list)) else tok.encode(x) for x in xs]
    else:
        if stride:
            m, st = (int(x) for x in stride.split(":"))
            tok.enable_truncation(m, stride=st)

        def run(xs):
            return tok.encode_batch(xs)
    run(warm)
    t0 = time.process_time()
    run(test)
    dt = time.process_time() - t0
    print(dt, sum(len("".join(x).encode("utf-8")) for x in test))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--lines", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stride", default="", metavar="MAX:STRIDE",
                    help="truncation with a stride (encoding path only), e.g. 64:16")
    ap.add_argument("--pair", action="store_true", help="encode pairs of lines")
    ap.add_argument("--modes", nargs="+", choices=("encoding", "single", "numpy"), default=["encoding", "single", "numpy"])
    ap.add_argument("--all", action="store_true",
                    help="every tokenizer.json under ../shared/data/vocab/ (models/ and hf/ included)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.all:
        a.files += every_tokenizer_json()
    if not a.files and not a.child:
        ap.error("give tokenizer.json files or --all")
    if a.child:
        child(a.child[0], a.child[1], a.child[2], a.lines, a.stride, a.pair)
        return 0
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1")
    print("| file | path | fstok.Tokenizer | HF tokenizers | fstok vs HF |")
    print("|---|---|---:|---:|---:|")
    for path in a.files:
        for mode in ("encoding",) if a.stride else a.modes:
            got: dict[str, list[float]] = {"fstok": [], "hf": []}
            nbytes = 0
            for _ in range(a.rounds):
                for who in ("fstok", "hf"):
                    extra = (["--stride", a.stride] if a.stride else []) + (["--pair"] if a.pair else [])
                    out = subprocess.run([sys.executable, __file__, "--lines", str(a.lines), *extra,
                                          "--child", path, who, mode],
                                         env=env, capture_output=True, text=True, check=True).stdout.split()
                    got[who].append(float(out[0]))
                    nbytes = int(out[1])
            f, h = statistics.median(got["fstok"]), statistics.median(got["hf"])
            cell = lambda t: f"{t * 1e3 / a.lines:.3f} ms/line ({nbytes / t / 1e6:.2f} MB/s)"  # noqa: E731
            name = os.path.relpath(path, os.path.join(DATA, "vocab")) if path.startswith(DATA) else path
            if a.stride or a.pair:
                mode += "".join((f", stride {a.stride}" if a.stride else "", ", pairs" if a.pair else ""))
            print(f"| {name} | {mode} | {cell(f)} | {cell(h)} | {h / f:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
