#!/usr/bin/env python3
"""A padded, truncated numpy batch of BERT inputs, end to end: fstok.Tokenizer vs HF tokenizers vs transformers.

    tools/bench hf [--lines 20000] [--threads 1,2] [--scenarios single,pairs+offsets,lists] [--clock wall|cpu]

The tokenizer is all-MiniLM-L6-v2's tokenizer.json (WordPiece, BertProcessing template, truncation 128 and
fixed padding 128 stored in the file). Each contender produces numpy input_ids, attention_mask and
token_type_ids (and offset_mapping in the pairs+offsets scenario) for the same lines (English, multilingual,
code, stress and Chinese corpora interleaved):
  fstok.Tokenizer   encode_batch_numpy(lines[, pairs], return_offsets_mapping=...)
  HF tokenizers     Tokenizer.encode_batch(lines), then np.array of each field
  transformers      PreTrainedTokenizerFast(...)(lines, text_pair=..., return_tensors="np", ...), unpatched
                    and with fstok.transformers.patch()
Scenarios: "single" pads every text to 128 (padding="max_length"); "pairs+offsets" encodes text pairs padded to
the batch's longest (padding=True) with return_offsets_mapping=True; "lists" is the call without numpy output
(fstok.Tokenizer and HF: encode_batch Encoding objects; transformers: Python lists), padded to the longest. Each contender runs in a fresh process
(one per thread count; HF's pool size is fixed at first use: RAYON_NUM_THREADS), is warmed up on other lines,
and is timed on one pass over lines that process has not seen. The arrays of all contenders are checked
identical (a digest) before the timings count. `--clock cpu` reports the process's CPU time (every thread's,
so a second thread shows the work it adds rather than the time it saves; a shared host disturbs it less than
wall time), `--clock wall` (the default) the elapsed time.
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


CONTENDERS = ["fstok.Tokenizer", "HF tokenizers", "transformers", "transformers + fstok.patch()"]
SCENARIOS = {
    # name: (pairs?, transformers kwargs, numpy output?)
    "single": (False, dict(padding="max_length", truncation=True, max_length=128), True),
    "pairs+offsets": (True, dict(padding=True, truncation=True, max_length=128, return_offsets_mapping=True), True),
    # Encoding objects / Python lists: fstok.Tokenizer.encode_batch, transformers without return_tensors
    "lists": (False, dict(padding=True, truncation=True, max_length=128), False),
}


def child(threads: int, n: int, contender: str, scenario: str) -> dict:
    """One contender in a fresh process: load, warm up on other lines, one timed pass over unseen lines."""
    import hashlib

    import numpy as np

    def encodings_to_arrays(encs):
        out = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
               "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
               "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
        if offsets:
            out["offset_mapping"] = np.array([e.offsets for e in encs], dtype=np.int64)
        return out

    warm = corpus_lines(2000, 0)
    lines = corpus_lines(n, 400)  # past the warm-up lines of every corpus
    seen = set(lines)
    warm = [w for w in warm if w not in seen] or warm[:10]
    with_pairs, tf_kw, numpy_out = SCENARIOS[scenario]
    offsets = bool(tf_kw.get("return_offsets_mapping"))
    pairs = lines[1:] + lines[:1] if with_pairs else None
    warm_pairs = warm[1:] + warm[:1] if with_pairs else None
    if contender == "fstok.Tokenizer":
        import fstok

        ours = fstok.Tokenizer.from_file(TOK)
        if scenario != "single":
            ours.enable_padding(pad_id=0, pad_token="[PAD]")  # batch longest, as transformers' padding=True

        def run(xs, ps):
            if not numpy_out:
                return encodings_to_arrays(ours.encode_batch(xs if ps is None else list(zip(xs, ps))))
            return ours.encode_batch_numpy(xs, ps, num_threads=threads, return_offsets_mapping=offsets)
    elif contender == "HF tokenizers":
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(TOK)
        if scenario != "single":
            hf.enable_padding(pad_id=0, pad_token="[PAD]")

        def run(xs, ps):
            return encodings_to_arrays(hf.encode_batch(xs if ps is None else list(zip(xs, ps))))
    else:
        from transformers import PreTrainedTokenizerFast

        if contender == "transformers + fstok.patch()":
            import fstok.transformers as ftr

            ftr.patch()
        tf = PreTrainedTokenizerFast(tokenizer_file=TOK)
        tf.pad_token = "[PAD]"

        def run(xs, ps):
            r = tf(xs, text_pair=ps, return_tensors="np" if numpy_out else None, return_token_type_ids=True,
                   return_attention_mask=True, **tf_kw)
            return {k: np.asarray(r[k]) for k in ("input_ids", "attention_mask", "token_type_ids", "offset_mapping")
                    if k in r}
    run(warm, warm_pairs)
    t0, c0 = time.perf_counter(), time.process_time()
    out = run(lines, pairs)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    h = hashlib.sha256()
    for k in sorted(out):
        h.update(k.encode() + np.ascontiguousarray(out[k], dtype=np.int64).tobytes())
    return {"seconds": dt, "cpu": cpu, "digest": h.hexdigest(), "lines": len(lines),
            "bytes": sum(len(x.encode()) for x in lines + (pairs or []))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: elapsed time; cpu: the process's CPU time, all threads (default wall)")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--contender", help=argparse.SUPPRESS)
    ap.add_argument("--scenario", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.lines, args.contender, args.scenario)))
        return
    for scenario in args.scenarios.split(","):
        pairs, kw, numpy_out = SCENARIOS[scenario]
        rows = []
        for t in [int(x) for x in args.threads.split(",")]:
            env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
            row = {"threads": t}
            for c in CONTENDERS:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(t), "--lines",
                                    str(args.lines), "--contender", c, "--scenario", scenario],
                                   env=env, capture_output=True, text=True)
                if r.returncode != 0:
                    if "No module named 'transformers'" in r.stderr:
                        continue
                    sys.exit(f"{c}: {r.stderr[-3000:]}")
                row[c] = json.loads(r.stdout.strip().splitlines()[-1])
                if args.clock == "cpu":
                    row[c]["seconds"] = row[c]["cpu"]
            digests = {v["digest"] for k, v in row.items() if k != "threads"}
            if len(digests) != 1:
                sys.exit(f"{scenario}: the contenders' arrays differ")
            rows.append(row)
        first = rows[0][CONTENDERS[0]]
        print(f"\n{scenario}: all-MiniLM-L6-v2 tokenizer.json, {first['lines']} unseen lines"
              f"{' + pairs' if pairs else ''} ({first['bytes'] / 1e6:.2f} MB), transformers call "
              f"{', '.join(f'{k}={v!r}' for k, v in kw.items())}, "
              f"{'return_tensors=np' if numpy_out else 'lists (fstok and HF: encode_batch Encoding objects)'}; each contender in a fresh "
              f"process, warmed up on other lines; {'CPU' if args.clock == 'cpu' else 'wall'} time")
        names = [c for c in CONTENDERS if c in rows[0]]
        print(f"| threads | {' | '.join(names)} | fstok vs HF tokenizers | patched vs unpatched transformers |")
        print("|---:|" + "---:|" * (len(names) + 2))
        for r in rows:
            cells = [f"{r[n]['seconds'] * 1e3:.0f} ms" for n in names]
            ratio = r["HF tokenizers"]["seconds"] / r["fstok.Tokenizer"]["seconds"]
            tf = (f"{r['transformers']['seconds'] / r['transformers + fstok.patch()']['seconds']:.1f}x"
                  if "transformers" in r and "transformers + fstok.patch()" in r else "-")
            print(f"| {r['threads']} | {' | '.join(cells)} | {ratio:.1f}x | {tf} |")


if __name__ == "__main__":
    main()
