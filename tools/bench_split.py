#!/usr/bin/env python3
"""tools/bench split: thread scaling of the native long-text paths alone (no Python-side work).

    tools/bench split                          # 1 MB english + chinese_long, threads 2,4,8,16
    tools/bench split --threads 2 --mb 0.5

For each document and thread count: `tok.encode(text, num_threads=N)` (list of ids) and, for WordPiece,
`tok.encode_to_numpy(text, num_threads=N)` (uint32 array: no Python int per token), as the ratio of the
best of --reps calls (after --warmup untimed ones) to the best one-shot call of the same API in the same run. Tokenizers:
bert-base-uncased, bert-base-multilingual-cased (WordPiece), cl100k_base, o200k_base (BPE).
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fstok  # noqa: E402

CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "corpus"))


WARMUP = 10


def best(f, reps: int) -> float:
    # warm-up calls first: each thread's pre-token memo must have seen the text's words before the timed
    # calls, as the one-shot call's single memo has (without them 16 threads time 16 memos filling up)
    for _ in range(WARMUP):
        f()
    b = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t0)
    return b * 1e3


def main() -> None:
    p = argparse.ArgumentParser(prog="tools/bench split", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", default="english,chinese_long")
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--threads", default="2,4,8,16")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--encodings", default="bert-base-uncased,bert-base-multilingual-cased,cl100k_base,o200k_base")
    p.add_argument("--corpus", default=CORPUS)
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before each timed series (default 10)")
    a = p.parse_args()
    global WARMUP
    WARMUP = a.warmup
    threads = [int(x) for x in a.threads.split(",")]
    print(f"tools/bench split {' '.join(sys.argv[1:])}; cpu_count {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.1f}; best of {a.reps} after {a.warmup} warm-up calls; ratio = threaded / one-shot (same API, same run)")
    for name in a.encodings.split(","):
        tok = fstok.get_encoding(name)
        is_wp = hasattr(tok, "encode_word")
        for doc in a.docs.split(","):
            with open(os.path.join(a.corpus, f"{doc}.txt"), encoding="utf-8") as f:
                text = f.read().encode("utf-8")[: int(a.mb * 1e6)].decode("utf-8", "ignore")
            enc = tok.encode if is_wp else tok.encode_ordinary
            want = enc(text)
            one = best(lambda: enc(text), a.reps)
            cells = []
            for nt in threads:
                assert enc(text, num_threads=nt) == want, (name, doc, nt)
                cells.append(f"{nt}t {best(lambda: enc(text, num_threads=nt), a.reps) / one:.3f}")
            print(f"{name:30s} {doc:13s} list : one-shot {one:6.2f} ms | " + " | ".join(cells))
            if is_wp:
                one_np = best(lambda: tok.encode_to_numpy(text), a.reps)
                cells = [f"{nt}t {best(lambda: tok.encode_to_numpy(text, num_threads=nt), a.reps) / one_np:.3f}"
                         for nt in threads]
                print(f"{'':30s} {'':13s} numpy: one-shot {one_np:6.2f} ms | " + " | ".join(cells))


if __name__ == "__main__":
    main()
