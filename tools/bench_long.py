#!/usr/bin/env python3
"""tools/bench long: latency of one very long text, one-shot vs LoPT vs safe-boundary split (issue 5).

    tools/bench long                       # ~1 MB english + chinese_long, bert-base-uncased, 1 and 2 threads
    tools/bench long --mb 0.25 --reps 7 --threads 1,2,4 --encoding bert-base-multilingual-cased
    tools/bench long --encoding cl100k_base     # fstok BPE: one-shot vs LoPT (+ baselines)

Rows: HF one-shot, HF LoPT (HFOffsetsAdapter), fstok one-shot, fstok LoPT, fstok safe split, and when
tools/lopt_baselines.py is present the delimiter (whitespace/comma/period) and id-overlap baselines over
fstok. Columns: min and median latency (ms, methods interleaved round-robin), process CPU ms, ratio of mins to fstok one-shot, accuracy (1.0 = ids identical to the
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
    ap.add_argument("--plot", metavar="DIR", help="also write PNG figures (latency vs length, vs chunk size) to DIR")
    args = ap.parse_args()
    threads = [int(x) for x in args.threads.split(",")]
    tok = fstok.get_encoding(args.encoding)
    hf = None
    if not args.no_hf and args.encoding.startswith("bert"):
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
          f"min/median of {args.reps} round-robin reps; ratio = min / fstok one-shot min; "
          f"cpu = process CPU ms of the min run")
    for doc in args.docs.split(","):
        text = prefix_bytes(doc, args.mb)
        one_shot = getattr(tok, "encode_ordinary", None) if not args.encoding.startswith("bert") else None
        one_shot = one_shot or tok.encode
        ref = one_shot(text)
        hf_ref = hf.encode(text) if hf is not None else None
        # (name, threads, fn, reference, stats)
        methods = []
        if hf is not None:
            methods.append(("HF one-shot", 1, lambda: hf.encode(text), ref, None))
        methods.append(("fstok one-shot", 1, lambda: one_shot(text), ref, None))
        for nt in threads:
            for strategy in (("safe", "lopt") if args.encoding.startswith("bert") else ("lopt",)):
                st = LoptStats()
                methods.append((f"fstok {strategy}", nt, (lambda nt=nt, strategy=strategy, st=st: encode_long(
                    tok, text, num_threads=nt, strategy=strategy, stats=st)), ref, st))
            if hf is not None:
                st = LoptStats()
                methods.append(("HF lopt", nt, (lambda nt=nt, st=st: encode_long(hf, text, num_threads=nt, stats=st)),
                                hf_ref, st))
            if baselines is not None and nt > 1:
                for bname, fn in baselines.BASELINES.items():
                    methods.append((f"fstok {bname}", nt, (lambda fn=fn, nt=nt: fn(tok, text, nt)), ref, None))
        times = [[] for _ in methods]
        acc = []
        for k, (_, _, fn, r, _) in enumerate(methods):  # warm + accuracy
            acc.append(float(fn() == r))
        for _ in range(args.reps):
            for k, (_, _, fn, _, _) in enumerate(methods):
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0, time.process_time() - c0))
        ref_ms = min(times[1 if hf is not None else 0])[0] * 1e3
        print(f"\n{doc}: {len(text):,} chars, {len(text.encode('utf-8')) / 1e6:.2f} MB, {len(ref):,} tokens")
        print(f"{'method':<26}{'threads':>8}{'min ms':>9}{'med ms':>9}{'cpu ms':>9}{'x one-shot':>12}{'accuracy':>10}  notes")
        for k, (name, nt, _, _, st) in enumerate(methods):
            best = min(times[k])
            med = statistics.median(t for t, _ in times[k]) * 1e3
            note = f"chunks={st.num_chunks} rounds={st.rounds}" if st is not None else ""
            if name == "HF one-shot":
                note = "accuracy = ids == fstok one-shot"
            print(f"{name:<26}{nt:>8}{best[0] * 1e3:>9.1f}{med:>9.1f}{best[1] * 1e3:>9.1f}"
                  f"{best[0] * 1e3 / ref_ms:>12.2f}{acc[k]:>10.1f}  {note}")
    if args.plot:
        plots(tok, args, threads)


def plots(tok, args, threads) -> None:
    """latency_vs_length.png (4k .. ~1M tokens, english) and latency_vs_chunk.png (1 MB english)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.plot, exist_ok=True)
    full = prefix_bytes("english", 6.0)
    nt = max(threads)

    def best(fn, reps=3):
        fn()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return min(out) * 1e3

    sizes = [int(len(full) * f) for f in (0.004, 0.01, 0.03, 0.1, 0.3, 0.7)]
    series = {"fstok one-shot": [], f"fstok safe {nt}t": [], f"fstok lopt {nt}t": []}
    ntoks = []
    for sz in sizes:
        text = full[:sz]
        ntoks.append(len(tok.encode(text)))
        series["fstok one-shot"].append(best(lambda: tok.encode(text)))
        series[f"fstok safe {nt}t"].append(best(lambda: encode_long(tok, text, num_threads=nt, strategy="safe")))
        series[f"fstok lopt {nt}t"].append(best(lambda: encode_long(tok, text, num_threads=nt, strategy="lopt")))
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in series.items():
        ax.loglog(ntoks, ys, marker="o", label=name)
    ax.set_xlabel("tokens")
    ax.set_ylabel("latency (ms, best of 3)")
    ax.set_title(f"{args.encoding}, english; cpu_count {os.cpu_count()}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.plot, "latency_vs_length.png"), dpi=120)
    text = prefix_bytes("english", args.mb)
    chunks = [2 ** k for k in range(12, 21) if 2 ** k < len(text)]
    ys = {"lopt": [], "safe": []}
    for c in chunks:
        for strategy in ys:
            ys[strategy].append(best(lambda: encode_long(tok, text, num_threads=nt, chunk_chars=c, strategy=strategy)))
    one = best(lambda: tok.encode(text))
    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy, v in ys.items():
        ax.semilogx(chunks, v, marker="o", label=f"fstok {strategy} {nt}t")
    ax.axhline(one, color="gray", ls="--", label="fstok one-shot")
    ax.set_xlabel("chunk length (chars)")
    ax.set_ylabel("latency (ms, best of 3)")
    ax.set_title(f"{len(text) / 1e6:.1f} MB english")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.plot, "latency_vs_chunk.png"), dpi=120)
    print(f"\nwrote {args.plot}/latency_vs_length.png, {args.plot}/latency_vs_chunk.png")


if __name__ == "__main__":
    main()
