#!/usr/bin/env python3
"""Measure the WordPiece table layout trade-off: dense-row threshold vs size vs lookups/byte.

    python tools/wordpiece_tables.py [--vocab PATH] [--corpus PATH]

For each fan-out threshold (a state gets a full delta'/sigma' row when it has at least that
many children; r and r# always do) prints: dense rows, artifact size, average table lookups
per input byte (pure-Python executor of the same tables on the corpus) and C throughput.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fstok.compile.wordpiece as cw  # noqa: E402
from fstok.loaders.bert import read_vocab_txt  # noqa: E402
from fstok.reference.wordpiece import TableExecutor  # noqa: E402
from fstok.wordpiece import WordPieceTokenizer  # noqa: E402

SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default=os.path.join(SHARED, "vocab", "bert-base-multilingual-cased", "vocab.txt"))
    ap.add_argument("--corpus", default=os.path.join(SHARED, "corpus", "multilingual.txt"))
    ap.add_argument("--thresholds", default="1000000,64,24,8,4,2")
    a = ap.parse_args()
    text = open(a.corpus, encoding="utf-8").read()
    lines = [l for l in text.split("\n") if l]
    nb = sum(len(l.encode()) for l in lines)
    print("| dense if fan-out >= | dense rows | artifact MB | lookups / byte | failure steps / byte | C MB/s (lines, CPU time) |")
    print("|---:|---:|---:|---:|---:|---:|")
    orig = cw.DENSE_FANOUT
    for th in map(int, a.thresholds.split(",")):
        cw.build_tables.__defaults__ = (th,)
        src = read_vocab_txt(a.vocab, lowercase=False)
        tok = WordPieceTokenizer.from_source(src)
        ex = TableExecutor(tok)
        ex.encode(text)
        enc = tok._model.encode
        best = 1e9
        for _ in range(3):
            t = time.process_time()  # CPU time: less sensitive to other processes on a shared machine
            for l in lines:
                enc(l, 2)
            best = min(best, time.process_time() - t)
        print(f"| {th if th < 10**6 else 'r, r# only'} | {tok._art.meta['n_dense']} | {tok._art.nbytes() / 1e6:.2f} | "
              f"{ex.stats.lookups_per_byte:.3f} | {ex.stats.failure_steps / ex.stats.bytes_fed:.3f} | {nb / best / 1e6:.1f} |")
    cw.build_tables.__defaults__ = (orig,)


if __name__ == "__main__":
    main()
