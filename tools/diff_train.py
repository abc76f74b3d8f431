#!/usr/bin/env python3
"""Long differential runs for BPE training (the tests run small samples of each).

    python tools/diff_train.py naive   [--chars 1000000 --merges 2000]   # native == python-fast == naive
    python tools/diff_train.py hf      [--vocab 8000,32000]              # vs HF BpeTrainer: merges, vocab overlap
    python tools/diff_train.py encode  [--vocab 32000]                   # exported tokenizer.json / tiktoken ids

hf: for each corpus and pattern, HF's BpeTrainer is trained on the whole text (train_from_iterator, so
both see the same pre-tokens; no special tokens on either side, since HF does not remove them from
the training text) and compared with fstok (a) tie_break="hf" -- should be identical -- and
(b) fstok's own rule: index of the first different merge, its count, and the vocabulary overlap.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
CORPUS = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus"))
NAMES = ["english", "multilingual", "code", "chinese_long", "stress"]
PATTERNS = ["r50k_base", "cl100k_base", "o200k_base"]


def read(name: str) -> str:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8", newline="") as f:
        return f.read()


def cmd_naive(args) -> int:
    from fstok.train import as_dict, count_corpus, merge_loop, naive_merges

    bad = 0
    for name in args.corpora.split(","):
        text = read(name)[: args.chars]
        for pattern in args.patterns.split(","):
            counts = count_corpus([text], pattern, ("<|endoftext|>",), pretokenizer="regex")
            t = time.perf_counter()
            ref = naive_merges(as_dict(counts), args.merges)
            tn = time.perf_counter() - t
            t = time.perf_counter()
            nat, _ = merge_loop(counts, args.merges, backend="native")
            tc = time.perf_counter() - t
            py, _ = merge_loop(counts, args.merges, backend="python")
            ok = ref == nat == py
            bad += not ok
            print(f"{name:<13} {pattern:<12} merges {len(ref):>5}  naive {tn:7.2f}s  native {tc:6.3f}s  "
                  f"{'identical' if ok else 'DIFFERENT'}", flush=True)
    return 1 if bad else 0


def _hf_merges(text: str, pattern: str, vocab: int) -> list[tuple[str, str]]:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from fstok.train.export import hf_pattern
    from fstok.train.pretok import PATTERNS as P

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(hf_pattern(P[pattern])), behavior="isolated"),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    hf.train_from_iterator([text], tr)
    ms = json.loads(hf.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in ms]


def cmd_hf(args) -> int:
    from fstok.train import train_bpe
    from fstok.train.export import byte_level

    bad = 0
    print(f"{'corpus':<13} {'pattern':<12} {'vocab':>6} {'hf-order':>9} {'1st diff':>8} {'count':>7} {'overlap':>8}")
    for name in args.corpora.split(","):
        text = read(name)
        for pattern in args.patterns.split(","):
            for v in (int(x) for x in args.vocab.split(",")):
                hfm = _hf_merges(text, pattern, v)
                same = train_bpe([text], v, pattern=pattern, special_tokens=(), tie_break="hf")
                mine_hf = [(byte_level(a), byte_level(b)) for a, b in same.merges]
                ident = mine_hf == hfm
                if not ident:
                    bad += 1
                    i = next((i for i, (x, y) in enumerate(zip(mine_hf, hfm)) if x != y), min(len(mine_hf), len(hfm)))
                    print(f"  hf-order differs at merge {i}: fstok {mine_hf[i:i + 1]} hf {hfm[i:i + 1]}")
                ours = train_bpe([text], v, pattern=pattern, special_tokens=())
                mine = [(byte_level(a), byte_level(b)) for a, b in ours.merges]
                first = next((i for i, (x, y) in enumerate(zip(mine, hfm)) if x != y), None)
                ov = len({a + b for a, b in mine} & {a + b for a, b in hfm}) / max(1, len(hfm))
                cnt = ours.merge_counts[first] if first is not None else "-"
                print(f"{name:<13} {pattern:<12} {v:>6} {'identical' if ident else 'DIFFERENT':>9} "
                      f"{first if first is not None else '-':>8} {cnt:>7} {ov * 100:7.2f}%", flush=True)
    return 1 if bad else 0


def cmd_encode(args) -> int:
    import tempfile

    import tiktoken
    from tokenizers import Tokenizer

    from fstok.train import train_bpe

    bad = 0
    train = read("english") + read("multilingual") + read("code")
    for pattern in args.patterns.split(","):
        for v in (int(x) for x in args.vocab.split(",")):
            tok = train_bpe([train], v, pattern=pattern)
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "tokenizer.json")
                tok.export(p, format="tokenizer.json")
                hf = Tokenizer.from_file(p)
                tp = os.path.join(d, "t.tiktoken")
                tok.export(tp)
            enc = tiktoken.Encoding("t", pat_str=tok.pattern, mergeable_ranks=tok.ranks, special_tokens=tok.special_tokens)
            for name in NAMES:
                lines = read(name).split("\n")
                want = [tok.encode(l, allowed_special="all") for l in lines]
                got = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
                tk = enc.encode_batch(lines, allowed_special="all")
                nh = sum(a != b for a, b in zip(want, got))
                nt = sum(a != b for a, b in zip(want, tk))
                rt = sum(tok.decode(w) != l for w, l in zip(want, lines))
                bad += nh + nt + rt
                print(f"{pattern:<12} {v:>6} {name:<13} lines {len(lines):>7}  hf mismatches {nh}  tiktoken mismatches {nt}  "
                      f"round-trip failures {rt}", flush=True)
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("naive")
    n.add_argument("--corpora", default=",".join(NAMES))
    n.add_argument("--patterns", default=",".join(PATTERNS))
    n.add_argument("--chars", type=int, default=300_000)
    n.add_argument("--merges", type=int, default=1000)
    h = sub.add_parser("hf")
    h.add_argument("--corpora", default=",".join(NAMES))
    h.add_argument("--patterns", default=",".join(PATTERNS))
    h.add_argument("--vocab", default="8000,32000")
    e = sub.add_parser("encode")
    e.add_argument("--patterns", default=",".join(PATTERNS))
    e.add_argument("--vocab", default="32000")
    args = ap.parse_args()
    return {"naive": cmd_naive, "hf": cmd_hf, "encode": cmd_encode}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
