#!/usr/bin/env python3
"""Long differential runs for fstok BPE (the fast tests run samples of the same checks).

    python tools/diff_bpe.py                    # everything below (~10-20 min on 2 cores)
    python tools/diff_bpe.py --only tiktoken    # OpenAI encodings vs tiktoken only
    python tools/diff_bpe.py --only hf --models deepseek
    python tools/diff_bpe.py --fuzz 200000      # more random strings

Checks (ids must be identical; one mismatch is a bug):
  tiktoken  r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base vs tiktoken 0.14 (built offline
            from ../shared/data/vocab/tiktoken): every line and every whole file of ../shared/data/corpus
            (encode_ordinary; encode(allowed_special="all") on the whole file; encode_batch of all lines),
            decode(encode(x)) == x, count == len(encode), encode_with_offsets vs decode_with_offsets.
  fuzz      random strings (token concatenations, random code points incl. lone surrogates, special
            tokens, whitespace runs) vs tiktoken, and each span encoder vs the pure-Python reference.
  hf        tokenizer.json models vs HF tokenizers 0.23 (llama3 hf-derived, deepseek, anthropic, GPT-2
            vocab.json/merges.txt): every line and every whole file.
Exit status 1 if anything differs.  Unicode-version notes: the anthropic model's NFKC runs in Python
(Unicode 14); lines with code points unassigned in Unicode 14 are counted separately, not as failures.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
SHARED = os.path.normpath(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"))
VOCAB = os.path.join(SHARED, "vocab")
CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]
OPENAI = ["r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"]
HF = {
    "llama3": os.path.join(VOCAB, "hf-derived", "llama3.tokenizer.json"),
    "deepseek": os.path.join(VOCAB, "hf", "deepseek_tokenizer.json"),
    "anthropic": os.path.join(VOCAB, "hf", "anthropic_tokenizer.json"),
    "gpt2": os.path.join(VOCAB, "gpt2", "vocab.json"),
}


class Report:
    def __init__(self):
        self.checks = 0
        self.fails: list[str] = []
        self.notes: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        self.checks += 1
        if not ok:
            self.fails.append(what)
            if len(self.fails) <= 30:
                print("  MISMATCH", what[:300], flush=True)


def read(corpus: str) -> str:
    with open(os.path.join(SHARED, "corpus", f"{corpus}.txt"), encoding="utf-8", newline="") as f:
        return f.read()


def first_diff(a, b) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"at token {i}: {a[max(0, i - 2):i + 3]} vs {b[max(0, i - 2):i + 3]}"
    return f"lengths {len(a)} vs {len(b)}"


def run_tiktoken(args, rep: Report) -> None:
    import fstok
    from bpe_helpers import tiktoken_encoding

    for name in args.encodings:
        t0 = time.time()
        f, t = fstok.get_encoding(name), tiktoken_encoding(name)
        for corpus in args.corpora:
            text = read(corpus)
            a, b = f.encode_ordinary(text), t.encode_ordinary(text)
            rep.check(a == b, f"{name}/{corpus} whole file: {first_diff(a, b)}")
            rep.check(f.decode(a) == text, f"{name}/{corpus} whole file decode roundtrip")
            rep.check(f.count(text) == len(b), f"{name}/{corpus} count")
            a2, b2 = f.encode(text, allowed_special="all"), t.encode(text, allowed_special="all")
            rep.check(a2 == b2, f"{name}/{corpus} whole file allowed_special=all: {first_diff(a2, b2)}")
            lines = text.split("\n")
            got = f.encode_ordinary_batch(lines, num_threads=args.threads)
            want = t.encode_ordinary_batch(lines, num_threads=args.threads)
            bad = [i for i, (x, y) in enumerate(zip(got, want)) if x != y]
            rep.check(not bad and len(got) == len(want), f"{name}/{corpus}: {len(bad)} of {len(lines)} lines differ, first "
                      + (repr(lines[bad[0]][:120]) if bad else ""))
            single = [f.encode_ordinary(ln) for ln in lines[:: max(1, len(lines) // 2000)]]
            rep.check(single == want[:: max(1, len(lines) // 2000)], f"{name}/{corpus}: encode_ordinary != batch")
            sample = lines[:: max(1, len(lines) // 300)]
            for ln in sample:
                ids = want[lines.index(ln)] if False else t.encode_ordinary(ln)
                got_ids, offs = f.encode_with_offsets(ln)
                rep.check(got_ids == ids and offs == t.decode_with_offsets(ids)[1] if _valid_utf8_tokens(t, ids) else got_ids == ids,
                          f"{name}/{corpus}: offsets {ln[:80]!r}")
        print(f"  tiktoken {name}: done in {time.time() - t0:.0f}s", flush=True)


def _valid_utf8_tokens(t, ids) -> bool:
    try:
        t.decode_with_offsets(ids)
        return True
    except UnicodeDecodeError:
        return False


def run_fuzz(args, rep: Report) -> None:
    import fstok
    from bpe_helpers import tiktoken_encoding, tiktoken_path

    from fstok.reference.bpe import merge_ranks
    from fstok.loaders.tiktoken_file import read_tiktoken_ranks

    rnd = random.Random(args.seed)
    pool = (list(" \t\n\r\u00a0\u3000'sdtlmvreSDT0123456789!?.,-/<|>") + ["<|endoftext|>", "<|endofprompt|>", "'s", "'LL", "\r\n"]
            + [chr(rnd.randint(0xA0, 0x2FFF)) for _ in range(300)] + [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(100)]
            + [chr(rnd.randint(0x1F300, 0x1FAFF)) for _ in range(60)] + ["\ud800", "\udfff", "\ud83d\ude00"])
    for name in args.encodings:
        f, t = fstok.get_encoding(name), tiktoken_encoding(name)
        ranks = read_tiktoken_ranks(tiktoken_path(name))
        vals = f.token_byte_values()
        bad = 0
        for i in range(args.fuzz):
            if i % 3 == 0:
                s = b"".join(rnd.choice(vals) for _ in range(rnd.randint(1, 12))).decode("utf-8", "replace")
            else:
                s = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 40)))
            a, b = f.encode_ordinary(s), t.encode_ordinary(s)
            c, d = f.encode(s, allowed_special="all"), t.encode(s, allowed_special="all")
            if a != b or c != d:
                bad += 1
                rep.check(False, f"fuzz {name}: {s!r}")
        rep.check(bad == 0, f"fuzz {name}: {bad} of {args.fuzz} strings differ")
        # span encoders vs the reference on random pieces
        bad = 0
        for i in range(args.fuzz // 20):
            piece = b"".join(rnd.choice(vals) for _ in range(rnd.randint(1, 10)))
            want = merge_ranks(piece, ranks)
            for mode in (1, 2, 3):
                if f._model.encode_piece(piece, mode) != want:
                    bad += 1
                    rep.check(False, f"encoder {mode} {name}: {piece!r}")
        rep.check(bad == 0, f"span encoders {name}: {bad} differ")
        print(f"  fuzz {name}: done", flush=True)


def run_hf(args, rep: Report) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    from fstok.bpe import BPETokenizer

    for model in args.models:
        t0 = time.time()
        if model == "gpt2":
            f = BPETokenizer.compile_gpt2(HF["gpt2"])
            hf = Tokenizer(models.BPE.from_file(HF["gpt2"], os.path.join(VOCAB, "gpt2", "merges.txt")))
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        else:
            f = BPETokenizer.compile_tokenizer_json(HF[model], name=model)
            hf = Tokenizer.from_file(HF[model])
        for corpus in args.corpora:
            text = read(corpus)
            lines = text.split("\n")
            skipped = 0
            todo = []
            for ln in lines:
                if model == "anthropic" and any(unicodedata.category(c) == "Cn" for c in ln):
                    skipped += 1
                    continue
                todo.append(ln)
            got = f.encode_ordinary_batch(todo, num_threads=args.threads)
            want = [e.ids for e in hf.encode_batch(todo, add_special_tokens=False)]
            bad = [i for i, (x, y) in enumerate(zip(got, want)) if x != y]
            rep.check(not bad, f"hf {model}/{corpus}: {len(bad)} of {len(todo)} lines differ, first "
                      + (repr(todo[bad[0]][:120]) if bad else ""))
            if skipped:
                rep.notes.append(f"hf {model}/{corpus}: {skipped} lines with code points unassigned in Unicode 14 not compared")
            if model != "anthropic" or not skipped:
                a, b = f.encode_ordinary(text), hf.encode(text, add_special_tokens=False).ids
                rep.check(a == b, f"hf {model}/{corpus} whole file: {first_diff(a, b)}")
        print(f"  hf {model}: done in {time.time() - t0:.0f}s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["tiktoken", "fuzz", "hf"], action="append")
    ap.add_argument("--encodings", default=",".join(OPENAI))
    ap.add_argument("--models", default=",".join(HF))
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--fuzz", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    args.encodings = args.encodings.split(",")
    args.models = args.models.split(",")
    args.corpora = args.corpora.split(",")
    parts = args.only or ["tiktoken", "fuzz", "hf"]
    rep = Report()
    t0 = time.time()
    if "tiktoken" in parts:
        run_tiktoken(args, rep)
    if "fuzz" in parts:
        run_fuzz(args, rep)
    if "hf" in parts:
        run_hf(args, rep)
    print(f"\n{rep.checks} checks, {len(rep.fails)} mismatches, {time.time() - t0:.0f}s")
    for n in rep.notes:
        print("note:", n)
    sys.exit(1 if rep.fails else 0)


if __name__ == "__main__":
    main()
