#!/usr/bin/env python3
"""tokenizer.json pipeline variants (tools/diff_variants.py) whose model the byte-level BPE tables do not run:
fstok.compile against HF tokenizers, one pass over ~8 KB documents the process has not seen.

    python tools/bench_variants.py                          # the variants of the table in docs/pipelines.md
    python tools/bench_variants.py --only "minilm whitespace" --corpus multilingual --bytes 300000

Per variant: both tokenizers load the same edited file, warm up on other documents of the corpus (its second
half), then encode the timed documents (its first half, ~`--bytes` of UTF-8) once, one call per document
(HF: `encode(text, add_special_tokens=False)`, no truncation).  Timed by the process's CPU time (the host is
shared); MB/s of UTF-8; ×N = fstok over HF; `≠` where the ids differ.  "what runs" names the path fstok takes.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_cold as C  # noqa: E402
import diff_variants as DV  # noqa: E402

DEFAULT = ["minilm whitespace pretok", "minilm normalizer sequence", "minilm punctuation Removed", "minilm wordlevel bert",
           "e5 split Isolated invert=False", "e5 digits+metaspace", "e5 bertnorm metaspace", "phi3 digits+metaspace",
           "phi3 NFKC strip split digits", "clip bert pretok"]


def _take(docs: list[str], n: int) -> tuple[list[str], int]:
    out, k = [], 0
    for d in docs:
        out.append(d)
        k += len(d.encode("utf-8"))
        if k >= n:
            break
    return out, k


def what_runs(tok) -> str:
    kind = type(tok).__name__
    if kind != "PipelineTokenizer":
        return kind
    m = type(tok.model).__name__
    if tok._tables is not None:
        return f"{m}: byte-level BPE tables (C)"
    if tok._model_native is not None:
        return f"{m} in C ({tok._model_native.kind})" + (", normalizer fast form" if tok._norm_fast else "")
    return f"{m} in Python (stages)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=None, help="variants whose name contains one of these words")
    ap.add_argument("--corpus", default="english")
    ap.add_argument("--bytes", type=int, default=200_000, help="UTF-8 bytes of timed documents (default 200000)")
    args = ap.parse_args(argv)
    import tokenizers

    import fstok

    timed, warm = C.texts("docs", args.corpus)
    timed, nb = _take(timed, args.bytes)
    warm, _ = _take(warm, 40_000)
    names = args.only if args.only is not None else DEFAULT
    print("| variant | what fstok runs | fstok MB/s | HF tokenizers MB/s | × |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["FSTOK_CACHE_DIR"] = os.path.join(tmp, "cache")
        for name, base, edits in DV.variants():
            if not any((w == name) if args.only is None else (w in name) for w in names):
                continue
            path = DV.write_variant(name, base, edits, tmp)
            tok = fstok.compile(path)
            hf = tokenizers.Tokenizer.from_file(path)
            hf.no_truncation()
            hf.no_padding()
            res = {}
            for who, enc in (("fstok", tok.encode), ("hf", lambda t: hf.encode(t, add_special_tokens=False).ids)):
                for w in warm:
                    enc(w)
                t0 = time.process_time()
                ids = [enc(t) for t in timed]
                res[who] = (nb / max(time.process_time() - t0, 1e-9) / 1e6, ids)
            same = "" if res["fstok"][1] == res["hf"][1] else " ≠"
            print(f"| {name} | {what_runs(tok)} | {res['fstok'][0]:.2f}{same} | {res['hf'][0]:.2f} | "
                  f"×{res['fstok'][0] / res['hf'][0]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
