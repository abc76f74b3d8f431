#!/usr/bin/env python3
"""Long differential run of the BPE safe split: whole corpus documents, every proven boundary.

    python tools/diff_parallel.py                     # all encodings, all long documents, 3 random configs each
    python tools/diff_parallel.py --encodings cl100k_base --docs stress --configs 10

For every (encoding, document):
  1. pre-token spans of the whole document == the spans of the pieces cut at *every* proven boundary
     (fstok.safe_split), shifted back (a difference with the `regex` module's spans is reported,
     not counted: its Unicode tables differ from rust-regex's on a few code points of `stress`);
  2. encode_long(strategy="safe") and encode_ordinary(num_threads=N) == encode_ordinary for random thread
     counts / chunk lengths, and with specials inserted at random places, encode_long(...,
     allowed_special="all") and encode(..., "all", num_threads=N) == encode(..., "all"); the same split's
     encode_to_numpy(num_threads=N) and count(num_threads=N) agree too.
Encodings: r50k_base, cl100k_base, o200k_base (bundled), llama3 (tokenizer.model + Llama-3 pattern),
llama3-hf (hf-derived tokenizer.json, Split + ByteLevel), qwen (qwen.tiktoken + Qwen2 pattern).
"""
import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
DATA = os.path.normpath(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"))

import fstok  # noqa: E402
from fstok.safe_split import boundary_table  # noqa: E402
from fstok.parallel import bpe_splitter, encode_long  # noqa: E402
from fstok.pretokenize import LLAMA3_PAT, QWEN2_PAT, CompiledPattern  # noqa: E402

ALL = ["r50k_base", "cl100k_base", "o200k_base", "llama3", "llama3-hf", "qwen"]


def load(name):
    v = os.path.join(DATA, "vocab")
    if name == "llama3":
        return fstok.compile(os.path.join(v, "llama3", "tokenizer.model"), pattern=LLAMA3_PAT,
                             special_tokens={"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001})
    if name == "llama3-hf":
        return fstok.compile(os.path.join(v, "hf-derived", "llama3.tokenizer.json"))
    if name == "qwen":
        return fstok.compile(os.path.join(v, "qwen", "qwen.tiktoken"), pattern=QWEN2_PAT,
                             special_tokens={"<|endoftext|>": 151643, "<|im_start|>": 151644})
    return fstok.get_encoding(name)


def check_spans(tok, text):
    cp = CompiledPattern.from_sections(tok._art, "dfa.")
    bt = boundary_table(cp.levels[0], cp.mode)
    full = cp.spans(text)
    pos = bt.positions(text).tolist()
    bounds = [0] + pos + [len(text)]
    got = []
    for a, b in zip(bounds, bounds[1:]):
        got += [(x + a, y + a) for x, y in cp.spans(text[a:b])]
    ok = got == full
    note = ""
    if cp.mode == "find":  # informational: the regex module's Unicode tables are not rust-regex's
        import regex

        rx = [m.span() for m in regex.finditer(cp.levels[0].pattern, text)]
        if rx != full:
            k = next(i for i, (a, b) in enumerate(zip(rx + [None], full + [None])) if a != b)
            c = full[k][0] if k < len(full) else len(text)
            note = f" (regex module differs from fstok at char {c}: U+{ord(text[c]):04X}..., Unicode tables)"
    return ok, len(pos), note


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encodings", default=",".join(ALL))
    ap.add_argument("--docs", default="english,chinese_long,code,stress,multilingual")
    ap.add_argument("--configs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bad = 0
    for name in args.encodings.split(","):
        tok = load(name)
        if bpe_splitter(tok) is None:
            print(f"{name}: no proven boundaries (not a DFA pre-tokenizer)")
            continue
        specials = sorted(tok.special_tokens)[:2]
        for doc in args.docs.split(","):
            with open(os.path.join(DATA, "corpus", f"{doc}.txt"), encoding="utf-8", newline="") as f:
                text = f.read()
            t0 = time.perf_counter()
            ok, npos, note = check_spans(tok, text)
            ref = tok.encode_ordinary(text)
            res = [ok]
            for _ in range(args.configs):
                nt = rng.randint(2, 16)
                chunk = rng.choice([None, rng.randint(1, 100), rng.randint(100, 100_000)])
                res.append(encode_long(tok, text, num_threads=nt, chunk_chars=chunk, strategy="safe") == ref)
                res.append(tok.encode_ordinary(text, num_threads=nt) == ref)  # native cut search (encode_proven)
                if hasattr(tok, "count_batch"):  # BPE: the uint32 and count outputs of the same split
                    res.append(tok.encode_to_numpy(text, disallowed_special=(), num_threads=nt).tolist() == ref)
                    res.append(tok.count(text, num_threads=nt) == len(ref))
            if specials:
                parts, i = [], 0
                sub = text[:300_000]
                while i < len(sub):
                    k = rng.randint(1, 5000)
                    parts += [sub[i:i + k], rng.choice(specials)]
                    i += k
                st = "".join(parts)
                want = tok.encode(st, allowed_special="all")
                res.append(encode_long(tok, st, num_threads=rng.randint(2, 8), chunk_chars=rng.randint(1, 3000),
                                       allowed_special="all") == want)
                res.append(tok.encode(st, allowed_special="all", num_threads=rng.randint(2, 16)) == want)
                if hasattr(tok, "count_batch"):
                    res.append(tok.encode_to_numpy(st, allowed_special="all",
                                                   num_threads=rng.randint(2, 16)).tolist() == want)
            status = "ok" if all(res) else f"MISMATCH {res}"
            bad += not all(res)
            print(f"{name:<12}{doc:<14}{len(text):>10,} chars {npos:>9,} proven  {status}  "
                  f"({time.perf_counter() - t0:.1f} s){note}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
