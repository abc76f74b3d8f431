#!/usr/bin/env python3
"""tools/bench long: latency of one very long text, one-shot vs LoPT vs safe-boundary split (issue 5).

    tools/bench long                       # ~1 MB english + chinese_long, bert-base-uncased, 1 and 2 threads
    tools/bench long --mb 0.25 --reps 7 --threads 1,2,4 --encoding bert-base-multilingual-cased

Rows: HF one-shot, HF LoPT (HFOffsetsAdapter), fstok one-shot, fstok LoPT, fstok safe split, and when
tools/lopt_baselines.py is present the delimiter (whitespace/comma/period) and id-overlap baselines over
fstok. Columns: min and median latency (ms), ratio of mins to fstok one-shot, accuracy (1.0 = ids identical to the
one-shot ids of the same tokenizer).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "corpus"))
VOCAB = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "vocab"))

import fstok  # noqa: E402
from fstok.parallel import HFOffsetsAdapter, LoptStats, encode_long  # noqa: E402


def prefix_bytes(name: str, mb: float) -> str:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8", newline="") as f:
        text = f.read()
    limit = int(mb * 1_000_000)
    b = text.encode("utf-8")[:limit]
    return b.decode("utf-8", errors="ignore")


def timeit(fn, reps: int):
    fn()  # warm
    ts = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    # min is the least contended sample on a shared machine; the median is printed beside it
    return min(ts) * 1e3, out, statistics.median(ts) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(prog="tools/bench long", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="english,chinese_long")
    ap.add_argument("--mb", type=float, default=1.0, help="document size (UTF-8 MB prefix)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--encoding", default="bert-base-uncased")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-baselines", action="store_true")
    args = ap.parse_args()
    threads = [int(x) for x in args.threads.split(",")]
    tok = fstok.get_encoding(args.encoding)
    hf = None
    if not args.no_hf:
        try:
            from tokenizers import BertWordPieceTokenizer

            lower = "uncased" in args.encoding
            h = BertWordPieceTokenizer(os.path.join(VOCAB, args.encoding, "vocab.txt"), lowercase=lower)
            h._tokenizer.encode_special_tokens = True
            hf = HFOffsetsAdapter(h)
        except Exception as e:  # pragma: no cover
            print(f"(HF tokenizers unavailable: {e})")
    baselines = None
    if not args.no_baselines:
        try:
            sys.path.insert(0, HERE)
            import lopt_baselines as baselines  # noqa: F811
        except ImportError:
            baselines = None
    print(f"encoding {args.encoding}; cpu_count {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
          f"min/median of {args.reps}; ratio = min / fstok one-shot min")
    for doc in args.docs.split(","):
        text = prefix_bytes(doc, args.mb)
        ref_ms, ref, ref_med = timeit(lambda: tok.encode(text), args.reps)
        rows = [("fstok one-shot", 1, ref_ms, ref_med, 1.0, "")]
        hf_ref = None
        if hf is not None:
            ms, hf_ref, med = timeit(lambda: hf.encode(text), args.reps)
            rows.insert(0, ("HF one-shot", 1, ms, med, 1.0 if hf_ref == ref else 0.0, "acc vs fstok"))
        for nt in threads:
            for strategy in ("lopt", "safe"):
                st = LoptStats()
                ms, out, med = timeit(lambda: encode_long(tok, text, num_threads=nt, strategy=strategy, stats=st),
                                 args.reps)
                note = f"chunks={st.num_chunks} rounds={st.rounds}"
                rows.append((f"fstok {strategy}", nt, ms, med, float(out == ref), note))
            if hf is not None:
                st = LoptStats()
                ms, out, med = timeit(lambda: encode_long(hf, text, num_threads=nt, strategy="lopt", stats=st),
                                 args.reps)
                rows.append(("HF lopt", nt, ms, med, float(out == hf_ref), f"chunks={st.num_chunks} rounds={st.rounds}"))
            if baselines is not None:
                for bname, fn in baselines.BASELINES.items():
                    ms, out, med = timeit(lambda: fn(tok, text, nt), args.reps)
                    rows.append((f"fstok {bname}", nt, ms, med, float(out == ref), ""))
        print(f"\n{doc}: {len(text):,} chars, {len(text.encode('utf-8')) / 1e6:.2f} MB, {len(ref):,} tokens")
        print(f"{'method':<28}{'threads':>8}{'min ms':>10}{'med ms':>10}{'x one-shot':>12}{'accuracy':>10}  notes")
        for name, nt, ms, med, acc, note in rows:
            print(f"{name:<28}{nt:>8}{ms:>10.1f}{med:>10.1f}{ms / ref_ms:>12.2f}{acc:>10.1f}  {note}")


if __name__ == "__main__":
    main()
