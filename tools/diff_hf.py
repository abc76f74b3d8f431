#!/usr/bin/env python3
"""fstok.Tokenizer vs HF tokenizers.Tokenizer: every Encoding field, on every corpus line, single and pair.

    python tools/diff_hf.py [--max-lines N [--spread]] [--files a.json b.json ...] [--out DIR]

For every tokenizer.json under ../shared/data/vocab/ (models/ included) that fstok compiles, each corpus line
is encoded alone and paired with another line, under four settings: the file's own truncation/padding, none,
truncation with stride (right) + batch padding, truncation with stride (left, longest_first) + left padding to
a multiple of 8. Compared: ids, type_ids, tokens, offsets, word_ids, special_tokens_mask, attention_mask,
sequence_ids, n_sequences and the overflowing windows (recursively); then encode_batch and the numpy batch,
and decode of every encoding. Then transformers with fstok.transformers.patch() vs unpatched on the same
file (diff_transformers: the __call__ forms with padding, truncation, stride, offsets and overflow, single and
pair; batch_decode; apply_chat_template; streaming decode). A file fstok refuses counts as a difference. Exit
status 1 on any difference.  Identical lines are checked once.  `--out DIR` writes one JSON per file (checks,
differing, seconds) and skips files whose JSON is already there, so that a long run resumes; `--files` takes
paths or words of the path.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"

FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids", "n_sequences")
SETTINGS = [
    ("file", None, None),
    ("none", "off", "off"),
    ("stride-right", {"max_length": 64, "stride": 16}, {}),
    ("stride-left", {"max_length": 40, "stride": 8, "direction": "left"}, {"direction": "left", "pad_to_multiple_of": 8}),
]


def fields(e) -> dict:
    d = {f: getattr(e, f) for f in FIELDS}
    d["overflowing"] = [fields(o) for o in e.overflowing]
    return d


def apply(tok, trunc, pad) -> None:
    if trunc == "off":
        tok.no_truncation()
    elif trunc is not None:
        tok.enable_truncation(**trunc)
    if pad == "off":
        tok.no_padding()
    elif pad is not None:
        tok.enable_padding(**pad)


def corpus(max_lines: int, spread: bool = False) -> list[str]:
    """The lines of every corpus file (the first max_lines of each, or with spread max_lines evenly spaced
    through each; 0: all), each distinct line once."""
    out = []
    for p in sorted(glob.glob(os.path.join(DATA, "corpus", "*.txt"))):
        with open(p, encoding="utf-8") as f:
            lines = list(dict.fromkeys(f.read().splitlines()))
        if max_lines and spread:
            lines = [lines[k * len(lines) // max_lines] for k in range(min(max_lines, len(lines)))]
        out += lines[:max_lines] if max_lines else lines
    return list(dict.fromkeys(out))


def outcome(f, *a, **k):
    try:
        return ("ok", f(*a, **k))
    except BaseException as e:  # HF panics (pyo3 PanicException) where fstok raises ValueError
        if isinstance(e, KeyboardInterrupt):
            raise
        return ("error", type(e).__name__)


def diff_file(path: str, lines: list[str], report=lambda s: None) -> tuple[int, int]:
    import numpy as np
    import tokenizers

    import fstok

    try:
        ours0 = fstok.Tokenizer.from_file(path)
    except (NotImplementedError, ValueError) as e:
        report(f"  DIFF: fstok.Tokenizer refuses the file: {str(e)[:200]}")
        return 1, 1
    checks = bad = 0
    # one tokenizer of each side through the settings in order (the file's own first): compiling once
    ours, hf = ours0, tokenizers.Tokenizer.from_file(path)
    for name, trunc, pad in SETTINGS:
        try:
            apply(hf, trunc, pad)
        except Exception as e:
            report(f"  {name}: HF refuses the setting ({e}); skipped")
            continue
        apply(ours, trunc, pad)
        nb = 0
        for i, line in enumerate(lines):
            other = lines[(i * 7919 + 1) % len(lines)]
            for args in ((line,), (line, other)):
                a = outcome(hf.encode, *args)
                b = outcome(ours.encode, *args)
                checks += 1
                same = (a[0] == b[0] == "error") or (a[0] == b[0] == "ok" and fields(a[1]) == fields(b[1]))
                if same and a[0] == "ok":
                    dec_h = hf.decode(a[1].ids)
                    same = dec_h == ours.decode(a[1].ids)
                if not same:
                    bad += 1
                    nb += 1
                    if nb <= 3:
                        report(f"  {name}: DIFF on {args!r:.160}")
        for k in range(0, len(lines), 256):
            chunk = lines[k:k + 256]
            pairs = list(zip(chunk, chunk[::-1]))
            for inputs in (chunk, pairs):
                a = outcome(hf.encode_batch, inputs)
                b = outcome(ours.encode_batch, inputs)
                checks += 1
                if not ((a[0] == b[0] == "error") or (a[0] == b[0] == "ok" and
                                                      [fields(x) for x in a[1]] == [fields(x) for x in b[1]])):
                    bad += 1
                    report(f"  {name}: encode_batch DIFF at chunk {k}")
                if a[0] == "ok" and (pad is not None and pad != "off" or name == "file" and hf.padding):
                    single = inputs if inputs is chunk else [p[0] for p in inputs]
                    pair = None if inputs is chunk else [p[1] for p in inputs]
                    try:
                        got = ours.encode_batch_numpy(single, pair)
                    except ValueError:
                        continue  # rows of different lengths (HF's Fixed padding below a row's length)
                    checks += 1
                    if got["input_ids"].tolist() != [e.ids for e in a[1]] or \
                            got["attention_mask"].tolist() != [e.attention_mask for e in a[1]] or \
                            got["token_type_ids"].tolist() != [e.type_ids for e in a[1]]:
                        bad += 1
                        report(f"  {name}: encode_batch_numpy DIFF at chunk {k}")
        report(f"  {name}: {nb} differing encodings")
    return checks, bad


TF_CALLS = [
    dict(padding=True, truncation=True, max_length=64, return_tensors="np", return_offsets_mapping=True),
    dict(padding="max_length", truncation=True, max_length=32, stride=8, return_tensors="np",
         return_special_tokens_mask=True),
    dict(padding=True, truncation=True, max_length=48, return_offsets_mapping=True, return_overflowing_tokens=True,
         stride=8),
]
CHAT = ("{% for m in messages %}{{ bos }}{{ m['role'] }}: {{ m['content'] }}{{ eos }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")


def _same(a, b) -> bool:
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            a.shape == b.shape and np.array_equal(a, b)
    return a == b


def diff_transformers(path: str, lines: list[str], report=lambda s: None, chunk: int = 64) -> tuple[int, int]:
    """transformers with fstok.transformers.patch() vs unpatched on the same directory: the __call__ forms of
    TF_CALLS (single and pair), batch_decode, apply_chat_template and a streaming decode (decode of every
    growing prefix, as TextStreamer does). Returns (checks, differing)."""
    import json
    import shutil
    import tempfile
    import warnings

    import tokenizers
    import transformers

    import fstok.transformers as ftr

    d = tempfile.mkdtemp(prefix="fstok-diff-tf-")
    try:
        shutil.copy(path, os.path.join(d, "tokenizer.json"))
        hf = tokenizers.Tokenizer.from_file(path)
        specials = [a.content for a in hf.get_added_tokens_decoder().values() if a.special]
        first = hf.id_to_token(0)
        pad = next((t for t in specials if "pad" in t.lower()), first)
        cfg = {"pad_token": pad, "chat_template": CHAT}
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = transformers.AutoTokenizer.from_pretrained(d)
            ftr.patch()
            try:
                patched = transformers.AutoTokenizer.from_pretrained(d)
            finally:
                ftr.unpatch()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if not isinstance(patched._tokenizer, ftr.Backend):
        report("  transformers: DIFF: the patched tokenizer kept HF's backend")
        return 1, 1
    checks = bad = 0

    def note(what):
        nonlocal bad
        bad += 1
        if bad <= 5:
            report(f"  transformers: DIFF {what}")

    bos = specials[0] if specials else ""
    eos = specials[-1] if specials else ""
    for k in range(0, len(lines), chunk):
        xs = lines[k:k + chunk]
        ps = xs[::-1]
        for n, kw in enumerate(TF_CALLS):
            for tp in (None, ps):
                a = outcome(plain, xs, text_pair=tp, **kw)
                b = outcome(patched, xs, text_pair=tp, **kw)
                checks += 1
                if a[0] != b[0]:
                    note(f"call {n} pair={tp is not None} chunk {k}: {a[0]} vs {b[0]} {a[1] if a[0] == 'error' else b[1]}")
                    continue
                if a[0] == "error":
                    continue
                A, B = a[1], b[1]
                if list(A.keys()) != list(B.keys()) or not all(_same(A[x], B[x]) for x in A) or \
                        A.n_sequences != B.n_sequences or (A.encodings and
                                                            [A.word_ids(i) for i in range(len(xs))] !=
                                                            [B.word_ids(i) for i in range(len(xs))]):
                    note(f"call {n} pair={tp is not None} chunk {k}")
        ids = plain(xs)["input_ids"]
        for skip in (False, True):
            checks += 1
            if plain.batch_decode(ids, skip_special_tokens=skip) != patched.batch_decode(ids, skip_special_tokens=skip):
                note(f"batch_decode skip={skip} chunk {k}")
        msgs = [{"role": "user", "content": xs[0]}, {"role": "assistant", "content": xs[-1]}]
        for gen in (False, True):
            checks += 1
            a = outcome(plain.apply_chat_template, msgs, add_generation_prompt=gen, bos=bos, eos=eos)
            b = outcome(patched.apply_chat_template, msgs, add_generation_prompt=gen, bos=bos, eos=eos)
            if a != b:
                note(f"apply_chat_template chunk {k}")
        seq = ids[0][:40]
        checks += 1
        if [plain.decode(seq[:j], skip_special_tokens=True) for j in range(1, len(seq) + 1)] != \
                [patched.decode(seq[:j], skip_special_tokens=True) for j in range(1, len(seq) + 1)]:
            note(f"streaming decode chunk {k}")
    report(f"  transformers: {checks} checks, {bad} differing")
    return checks, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-lines", type=int, default=0, help="lines per corpus file (0: all)")
    ap.add_argument("--spread", action="store_true",
                    help="with --max-lines N: N distinct lines evenly spaced through each corpus file")
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--no-transformers", action="store_true", help="skip the transformers patched/unpatched part")
    ap.add_argument("--out", help="directory for one JSON result per file; files with a result there are skipped")
    args = ap.parse_args()
    every = sorted(set(glob.glob(os.path.join(DATA, "vocab", "**", "*.json"), recursive=True)))
    every = [f for f in every if os.path.basename(f) not in ("vocab.json",) and "tekken" not in f]
    files = [f for w in args.files for f in ([w] if os.path.isfile(w) else [g for g in every if w in g])] \
        if args.files else every
    lines = corpus(args.max_lines, args.spread)
    print(f"{len(lines)} distinct lines", flush=True)
    total = total_bad = 0
    for f in dict.fromkeys(files):
        t0 = time.time()
        print(os.path.relpath(f, DATA), flush=True)
        out = os.path.join(args.out, os.path.relpath(f, DATA).replace(os.sep, "__") + ".json") if args.out else None
        if out and os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                res = json.load(fh)
            print(f"  {res['checks']} checks, {res['differing']} differing (from {out})", flush=True)
            total += res["checks"]
            total_bad += res["differing"]
            continue
        c, b = diff_file(f, lines, lambda s: print(s, flush=True))
        if not args.no_transformers:
            c2, b2 = diff_transformers(f, lines, lambda s: print(s, flush=True))
            c, b = c + c2, b + b2
        total += c
        total_bad += b
        print(f"  {c} checks, {b} differing, {time.time() - t0:.0f}s", flush=True)
        if out:
            os.makedirs(args.out, exist_ok=True)
            with open(out + ".tmp", "w", encoding="utf-8") as fh:
                json.dump({"file": os.path.relpath(f, DATA), "lines": len(lines), "max_lines": args.max_lines,
                           "spread": args.spread,
                           "transformers": not args.no_transformers, "checks": c, "differing": b,
                           "seconds": round(time.time() - t0)}, fh)
            os.replace(out + ".tmp", out)
    print(f"TOTAL {total} checks, {total_bad} differing")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
