#!/usr/bin/env python3
"""A padded, truncated numpy batch of BERT inputs, end to end: fstok.Tokenizer vs HF tokenizers vs transformers.

    tools/bench hf [--lines 20000] [--threads 1,2] [--batch 20000]

The tokenizer is all-MiniLM-L6-v2's tokenizer.json (WordPiece, BertProcessing template, truncation 128 and
fixed padding 128 stored in the file). Each contender produces input_ids, attention_mask and token_type_ids
as numpy arrays for the same lines (English, multilingual, code and stress corpora interleaved):
  fstok          fstok.Tokenizer.encode_batch_numpy(lines)
  tokenizers     HF Tokenizer.encode_batch(lines), then np.array of ids / attention_mask / type_ids
  transformers   PreTrainedTokenizerFast(...)(lines, padding="max_length", truncation=True, max_length=128,
                 return_tensors="np"), unpatched and with fstok.transformers.patch()
Every contender is warmed up on other lines first, then timed on one pass over lines it has not seen. Each
thread count runs in its own process (HF's thread pool size is fixed at its first use: RAYON_NUM_THREADS).
The outputs are checked equal before the timings count.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"
TOK = os.path.join(DATA, "vocab", "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")


def corpus_lines(n: int, skip: int) -> list[str]:
    """n non-empty lines interleaved from the corpora, after skipping `skip` per corpus (warm-up lines)."""
    per = []
    for name in ("english.txt", "code.txt", "multilingual.txt", "stress.txt", "chinese_long.txt"):
        with open(os.path.join(DATA, "corpus", name), encoding="utf-8") as f:
            per.append([ln for ln in f.read().splitlines() if ln.strip()])
    out: list[str] = []
    idx = [skip] * len(per)
    while len(out) < n:
        moved = False
        for k, ls in enumerate(per):
            if idx[k] < len(ls) and len(out) < n:
                out.append(ls[idx[k]])
                idx[k] += 1
                moved = True
        if not moved:
            break
    return out


def child(threads: int, n: int) -> dict:
    import numpy as np
    import tokenizers

    import fstok

    warm = corpus_lines(2000, 0)
    lines = corpus_lines(n, 400)  # past the warm-up lines of every corpus
    warm = [w for w in warm if w not in set(lines)] or warm[:10]
    res: dict = {"threads": threads, "lines": len(lines), "bytes": sum(len(x.encode()) for x in lines)}

    ours = fstok.Tokenizer.from_file(TOK)
    hf = tokenizers.Tokenizer.from_file(TOK)

    def run_ours(xs):
        return ours.encode_batch_numpy(xs, num_threads=threads)

    def run_hf(xs):
        encs = hf.encode_batch(xs)
        return {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}

    contenders = {"fstok.Tokenizer": run_ours, "HF tokenizers": run_hf}
    try:
        import transformers  # noqa: F401
        from transformers import PreTrainedTokenizerFast

        import fstok.transformers as ftr

        def make_tf():
            return PreTrainedTokenizerFast(tokenizer_file=TOK)

        tf_plain = make_tf()
        ftr.patch()
        try:
            tf_patched = make_tf()
        finally:
            ftr.unpatch()

        def run_tf(t):
            def f(xs):
                r = t(xs, padding="max_length", truncation=True, max_length=128, return_tensors="np",
                      return_token_type_ids=True, return_attention_mask=True)
                return {k: r[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
            return f

        contenders["transformers"] = run_tf(tf_plain)
        contenders["transformers + fstok.patch()"] = run_tf(tf_patched)
    except ImportError as e:
        res["skipped"] = f"transformers: {e}"
    ref = None
    for name, f in contenders.items():
        f(warm)
        t0 = time.perf_counter()
        out = f(lines)
        dt = time.perf_counter() - t0
        if ref is None:
            ref = out
        else:
            for k in ref:
                if not np.array_equal(np.asarray(out[k]), np.asarray(ref[k])):
                    raise SystemExit(f"{name}: {k} differs from fstok.Tokenizer")
        res[name] = dt
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.lines)))
        return
    rows = []
    for t in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(t), "--lines", str(args.lines)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr[-3000:])
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    names = [k for k in rows[0] if k not in ("threads", "lines", "bytes", "skipped")]
    print(f"all-MiniLM-L6-v2 tokenizer.json, {rows[0]['lines']} unseen lines ({rows[0]['bytes'] / 1e6:.2f} MB), "
          "padded/truncated to 128, numpy input_ids + attention_mask + token_type_ids")
    print(f"| threads | {' | '.join(names)} | fstok vs HF tokenizers |")
    print("|---:|" + "---:|" * (len(names) + 1))
    for r in rows:
        cells = [f"{r[n] * 1e3:.0f} ms" for n in names]
        print(f"| {r['threads']} | {' | '.join(cells)} | {r['HF tokenizers'] / r['fstok.Tokenizer']:.1f}x |")
    if "skipped" in rows[0]:
        print("skipped:", rows[0]["skipped"])


if __name__ == "__main__":
    main()
