#!/usr/bin/env python3
"""tools/bench split: thread scaling of the native long-text paths alone (no Python-side work).

    tools/bench split                          # 1 MB english + chinese_long, threads 2,4,8,16
    tools/bench split --threads 2 --mb 0.5

For each document and thread count: `tok.encode(text, num_threads=N)` (list of ids) and
`tok.encode_to_numpy(text, num_threads=N)` (uint32 array: no Python int per token), as the ratio of the
best of --reps calls (after --warmup untimed ones) to the best one-shot call of the same API in the same run. Tokenizers:
bert-base-uncased, bert-base-multilingual-cased (WordPiece), cl100k_base, o200k_base (BPE).

Each ratio is the call's latency (until the result is in hand; the result is freed after the clock
stops), and in parentheses the same with freeing the result inside the timing.
"""
import argparse
import functools
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fstok  # noqa: E402

CORPUS = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus"))


WARMUP = 10


def best(f, reps: int) -> tuple[float, float]:
    """(latency, latency + freeing the result), best of reps each, in ms.

    Latency is the call until the result is in hand: the result is freed after the clock stops.  Freeing
    a list of 240k ids (the previous timing's `f()` without an assignment freed it inside the timing) costs
    0.25-0.45 ms on CPython 3.12, the same for one-shot and threaded calls; it is a constant that happens
    whenever the caller drops the list, not part of tokenizing.  Both figures are printed."""
    # warm-up calls first: each thread's pre-token memo must have seen the text's words before the timed
    # calls, as the one-shot call's single memo has (without them 16 threads time 16 memos filling up)
    for _ in range(WARMUP):
        f()
    held = freed = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        r = f()
        t1 = time.perf_counter()
        del r
        t2 = time.perf_counter()
        held = min(held, t1 - t0)
        freed = min(freed, t2 - t0)
    return held * 1e3, freed * 1e3


def best_interleaved(fs: list, reps: int) -> list[tuple[float, float]]:
    """best() for several calls at once, timed in alternating rounds (one call of each per round, the order
    reversed every other round): on a shared 2-vCPU host the speed drifts by up to 2x between seconds, and a
    series timed after another series compares two host states, not two methods (--series: the old way)."""
    for f in fs:
        for _ in range(WARMUP):
            f()
    held = [float("inf")] * len(fs)
    freed = [float("inf")] * len(fs)
    for r in range(reps):
        for i in (range(len(fs)) if r % 2 == 0 else reversed(range(len(fs)))):
            t0 = time.perf_counter()
            res = fs[i]()
            t1 = time.perf_counter()
            del res
            t2 = time.perf_counter()
            held[i] = min(held[i], t1 - t0)
            freed[i] = min(freed[i], t2 - t0)
    return [(h * 1e3, fr * 1e3) for h, fr in zip(held, freed)]


def timings(fs: list, reps: int, series: bool) -> list[tuple[float, float]]:
    return [best(f, reps) for f in fs] if series else best_interleaved(fs, reps)


def cell(nt: int, t: tuple[float, float], one: tuple[float, float]) -> str:
    return f"{nt}t {t[0] / one[0]:.3f} ({t[1] / one[1]:.3f})"


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
    p.add_argument("--series", action="store_true",
                   help="time each method in a series of its own (the older method); default: interleaved rounds")
    a = p.parse_args()
    global WARMUP
    WARMUP = a.warmup
    threads = [int(x) for x in a.threads.split(",")]
    print(f"tools/bench split {' '.join(sys.argv[1:])}; cpu_count {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.1f}; best of {a.reps} after {a.warmup} warm-up calls, {'series' if a.series else 'interleaved rounds'}; ratio = threaded / one-shot (same API, same run), "
          f"latency (result freed outside the timing) and, in parentheses, with the free timed")
    for name in a.encodings.split(","):
        tok = fstok.get_encoding(name)
        is_wp = hasattr(tok, "encode_word")
        for doc in a.docs.split(","):
            with open(os.path.join(a.corpus, f"{doc}.txt"), encoding="utf-8") as f:
                text = f.read().encode("utf-8")[: int(a.mb * 1e6)].decode("utf-8", "ignore")
            enc = tok.encode if is_wp else tok.encode_ordinary
            want = enc(text)
            for nt in threads:
                assert enc(text, num_threads=nt) == want, (name, doc, nt)
            one, *ts = timings([lambda: enc(text)] + [lambda nt=nt: enc(text, num_threads=nt) for nt in threads],
                               a.reps, a.series)
            cells = [cell(nt, t, one) for nt, t in zip(threads, ts)]
            print(f"{name:30s} {doc:13s} list : one-shot {one[0]:6.2f} ms ({one[1]:6.2f}) | " + " | ".join(cells))
            # (BPE: special-token text is ordinary here, as in encode_ordinary above)
            enc_np = tok.encode_to_numpy if is_wp else functools.partial(tok.encode_to_numpy, disallowed_special=())
            for nt in threads:
                assert enc_np(text, num_threads=nt).tolist() == want, (name, doc, nt, "numpy")
            one_np, *ts = timings([lambda: enc_np(text)] +
                                  [lambda nt=nt: enc_np(text, num_threads=nt) for nt in threads], a.reps, a.series)
            cells = [cell(nt, t, one_np) for nt, t in zip(threads, ts)]
            print(f"{'':30s} {'':13s} numpy: one-shot {one_np[0]:6.2f} ms ({one_np[1]:6.2f}) | " + " | ".join(cells))


if __name__ == "__main__":
    main()
