#!/usr/bin/env python3
"""tools/bench long: latency of one very long text, one-shot vs LoPT vs safe-boundary split.

    tools/bench long                       # ~1 MB english + chinese_long, bert-base-uncased, 1 and 2 threads
    tools/bench long --mb 0.25 --reps 7 --threads 1,2,4 --encoding bert-base-multilingual-cased
    tools/bench long --encoding cl100k_base     # fstok BPE: one-shot vs safe split vs LoPT (+ baselines)
    tools/bench long --encoding o200k_base --threads 1,2,4,8,16 --reps 7 --out long-o200k.txt   # scaling

Rows: HF one-shot, HF LoPT (HFOffsetsAdapter), tiktoken one-shot (BPE, from the local .tiktoken file),
fstok one-shot, fstok safe split (proven boundaries: whitespace for BERT, the compiled pre-tokenizer's
proven boundaries for BPE), fstok LoPT, fstok encode(num_threads=N) (BPE: one serial pre-tokenization pass,
BPE of the pieces on N threads), and when tools/lopt_baselines.py is present the delimiter
(whitespace/comma/period) and id-overlap baselines over fstok (2+ threads, skipped above 4 threads).
Columns: min and median latency (ms, methods interleaved round-robin; latency is the call until its result
is in hand: each result is freed after the clock stops, for every method alike), process CPU ms, ratio of mins to
fstok one-shot, accuracy (1.0 = ids identical to the one-shot ids of the same tokenizer).  With several
thread counts a scaling table (ratio to fstok one-shot by threads) follows.  --out FILE also writes
everything printed to FILE.  Needs only numpy (+ tokenizers for the HF rows, tiktoken for its row).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
CORPUS = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus"))
VOCAB = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "vocab"))

import fstok  # noqa: E402
from fstok.parallel import HFOffsetsAdapter, LoptStats, bpe_splitter, encode_long  # noqa: E402

_LINES: list = []


def out(line: str = "") -> None:
    print(line, flush=True)
    _LINES.append(line)


def prefix_bytes(name: str, mb: float) -> str:
    with open(os.path.join(os.environ.get("FSTOK_CORPUS") or CORPUS, f"{name}.txt"), encoding="utf-8",
              newline="") as f:
        text = f.read()
    limit = int(mb * 1_000_000)
    b = text.encode("utf-8")[:limit]
    return b.decode("utf-8", errors="ignore")


def tiktoken_peer(name: str):
    """tiktoken.Encoding built from the local vocabulary file (no download), or None."""
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        return None
    from fstok.pretokenize import NAMED_PATTERNS

    path = os.path.join(VOCAB, "tiktoken", f"{name}.tiktoken")
    spec = NAMED_PATTERNS.get(name)
    if not os.path.exists(path) or spec is None:
        return None
    ranks = load_tiktoken_bpe(path)
    return tiktoken.Encoding(name=f"local-{name}", pat_str=spec.levels[0][0], mergeable_ranks=ranks, special_tokens={})


def main() -> None:
    ap = argparse.ArgumentParser(prog="tools/bench long", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="english,chinese_long")
    ap.add_argument("--mb", type=float, default=1.0, help="document size (UTF-8 MB prefix)")
    ap.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2,4,8,16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--encoding", default="bert-base-uncased")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-tiktoken", action="store_true")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--out", metavar="FILE", help="also write the tables to FILE")
    ap.add_argument("--corpus", metavar="DIR", help=f"folder with <doc>.txt (default {CORPUS})")
    ap.add_argument("--plot", metavar="DIR", help="also write PNG figures (latency vs length, vs chunk size) to DIR")
    args = ap.parse_args()
    threads = [int(x) for x in args.threads.split(",")]
    if args.corpus:
        os.environ["FSTOK_CORPUS"] = args.corpus
    tok = fstok.get_encoding(args.encoding)
    is_bert = args.encoding.startswith("bert")
    hf = None
    if not args.no_hf and is_bert:
        try:
            from tokenizers import BertWordPieceTokenizer

            lower = "uncased" in args.encoding
            h = BertWordPieceTokenizer(os.path.join(VOCAB, args.encoding, "vocab.txt"), lowercase=lower)
            h._tokenizer.encode_special_tokens = True
            hf = HFOffsetsAdapter(h)
        except Exception as e:  # pragma: no cover
            out(f"(HF tokenizers unavailable: {e})")
    tt = None if (args.no_tiktoken or is_bert) else tiktoken_peer(args.encoding)
    baselines = None
    if not args.no_baselines:
        try:
            sys.path.insert(0, HERE)
            import lopt_baselines as baselines  # noqa: F811
        except ImportError:
            baselines = None
    splitter = None if is_bert else bpe_splitter(tok)
    out(f"tools/bench long {' '.join(sys.argv[1:])}")
    out(f"encoding {args.encoding}; cpu_count {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"min/median of {args.reps} round-robin reps; ratio = min / fstok one-shot min; "
        f"cpu = process CPU ms of the min run")
    scaling: dict = {}
    for doc in args.docs.split(","):
        text = prefix_bytes(doc, args.mb)
        one_shot = getattr(tok, "encode_ordinary", None) if not is_bert else None
        one_shot = one_shot or tok.encode
        ref = one_shot(text)
        hf_ref = hf.encode(text) if hf is not None else None
        # (name, threads, fn, reference, stats)
        methods = []
        if hf is not None:
            methods.append(("HF one-shot", 1, lambda: hf.encode(text), ref, None))
        methods.append(("fstok one-shot", 1, lambda: one_shot(text), ref, None))
        strategies = ("safe", "lopt") if (is_bert or splitter is not None) else ("lopt",)
        for nt in threads:
            for strategy in strategies:
                st = LoptStats()
                methods.append((f"fstok {strategy}", nt, (lambda nt=nt, strategy=strategy, st=st: encode_long(
                    tok, text, num_threads=nt, strategy=strategy, stats=st)), ref, st))
            if not is_bert and nt > 1:
                methods.append(("fstok encode(num_threads)", nt,
                                (lambda nt=nt: tok.encode_ordinary(text, num_threads=nt)), ref, None))
            if hf is not None:
                st = LoptStats()
                methods.append(("HF lopt", nt, (lambda nt=nt, st=st: encode_long(hf, text, num_threads=nt, stats=st)),
                                hf_ref, st))
            if baselines is not None and 1 < nt <= 4:
                for bname, fn in baselines.BASELINES.items():
                    methods.append((f"fstok {bname}", nt, (lambda fn=fn, nt=nt: fn(tok, text, nt)), ref, None))
        if tt is not None:  # last: a slow peer run right before fstok rows would leave them cold caches
            methods.append(("tiktoken one-shot", 1, lambda: tt.encode_ordinary(text), ref, None))
        times = [[] for _ in methods]
        acc = []
        for k, (_, _, fn, r, _) in enumerate(methods):  # warm + accuracy
            acc.append(float(fn() == r))
        for _ in range(args.reps):
            for k, (_, _, fn, _, _) in enumerate(methods):
                c0, t0 = time.process_time(), time.perf_counter()
                res = fn()
                times[k].append((time.perf_counter() - t0, time.process_time() - c0))
                del res  # (freed after the clock stops: latency = until the ids are in hand, every method alike)
        ref_ms = min(times[1 if hf is not None else 0])[0] * 1e3
        out()
        out(f"{doc}: {len(text):,} chars, {len(text.encode('utf-8')) / 1e6:.2f} MB, {len(ref):,} tokens")
        if splitter is not None:
            t0 = time.perf_counter()
            npos = len(splitter.positions(text))
            dt = (time.perf_counter() - t0) * 1e3
            out(f"proven boundaries: {npos:,} ({npos / (len(text.encode('utf-8')) / 1e3):.1f} per KB; "
                f"all of them found in {dt:.1f} ms)")
        out(f"{'method':<28}{'threads':>8}{'min ms':>9}{'med ms':>9}{'cpu ms':>9}{'x one-shot':>12}{'accuracy':>10}  notes")
        for k, (name, nt, _, _, st) in enumerate(methods):
            best = min(times[k])
            med = statistics.median(t for t, _ in times[k]) * 1e3
            note = f"chunks={st.num_chunks} rounds={st.rounds} ({st.strategy})" if st is not None else ""
            if name == "HF one-shot":
                note = "accuracy = ids == fstok one-shot"
            ratio = best[0] * 1e3 / ref_ms
            scaling.setdefault((doc, name), {})[nt] = ratio
            out(f"{name:<28}{nt:>8}{best[0] * 1e3:>9.1f}{med:>9.1f}{best[1] * 1e3:>9.1f}"
                f"{ratio:>12.2f}{acc[k]:>10.1f}  {note}")
    if len(threads) > 1:
        out()
        out("scaling: min latency / fstok one-shot min (same run), by threads")
        out(f"{'doc':<14}{'method':<28}" + "".join(f"{t:>8}" for t in threads))
        for (doc, name), by in scaling.items():
            if len(by) > 1:
                out(f"{doc:<14}{name:<28}" + "".join(f"{by[t]:>8.2f}" if t in by else f"{'':>8}" for t in threads))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(_LINES) + "\n")
        print(f"wrote {args.out}")
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
            res = fn()
            out.append(time.perf_counter() - t0)
            del res
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
