#!/usr/bin/env python3
"""Differential check of fstok's tokenizer.json pipelines and tekken against their references.

    python tools/diff_models_hf.py                      # every file, every corpus line and whole file
    python tools/diff_models_hf.py --quick              # 2,000 lines per corpus file, no whole files
    python tools/diff_models_hf.py --only falcon clip   # files whose path contains one of the words

Each tokenizer.json under ../shared/data/vocab (models/bytelevel-bpe, models/charbpe, hf, hf-derived) that
fstok compiles is compared with HF `tokenizers` 0.23.3: ids and offsets of `encode(text,
add_special_tokens=False/True)` and `decode(ids, skip_special_tokens=True/False)`, on every line and every
whole file of ../shared/data/corpus and on generated strings (seeded, over a tricky alphabet and over all of Unicode).  The tekken file is compared
with mistral-common's Tekkenizer (ids with and without BOS, decode).  Files fstok refuses are listed with
the reason.  Exit status 1 on any mismatch.  `run(args)` is the entry point tools/diff_models.py calls.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "..", "..", "shared", "data", "vocab")
if not os.path.isdir(VOCAB):
    VOCAB = "/work/shared/data/vocab"
CORPUS = os.path.join(os.path.dirname(VOCAB), "corpus")


def json_files() -> list[str]:
    out = []
    for pat in ("models/bytelevel-bpe/*/*.json", "models/charbpe/*/*.json", "hf/*.json", "hf-derived/*.json"):
        out += sorted(glob.glob(os.path.join(VOCAB, pat)))
    return out


def tekken_files() -> list[str]:
    return sorted(glob.glob(os.path.join(VOCAB, "models/tekken/*/*.json")))


def corpus_texts(quick: bool) -> list[tuple[str, str]]:
    out = []
    for f in sorted(glob.glob(os.path.join(CORPUS, "*.txt"))):
        with open(f, encoding="utf-8") as fh:
            whole = fh.read()
        lines = whole.splitlines(keepends=True)
        if quick:
            lines = lines[:2000]
        out += [(f"{os.path.basename(f)}:{i + 1}", s) for i, s in enumerate(lines)]
        if not quick:
            out.append((f"{os.path.basename(f)} (whole file)", whole))
    return out


EDGE = ["", " ", "  ", "\n", "Hello world!", "  leading and trailing  ", "It's 1234567 apples...", "a\u0301e\u0301\u0323",
        "ﬁ ﬂ Ǖ ǅ İ ẞ Σ", "日本語のテキスト", "😀👍🏽 e\u200dx", "<s>x</s> <mask>  <mask>", "<|endoftext|>a<|endoftext|>",
        "<|startoftext|>Hi<|endoftext|>", "\t\ttabs\r\nCRLF", "x" * 3000, " " * 500 + "y", "١٢٣ ٤٥ ²³ ½", "a.b,c;d!e?f"]


def generated_texts(n: int) -> list[tuple[str, str]]:
    """n short strings over a tricky alphabet and n over all of Unicode (no surrogates), seeded."""
    import random

    rnd = random.Random(1234)
    alphabet = (" \t\n\r'.,!?-_0123456789aAbBzZéÉßıİΣσς日本😀\u0301\u0323\u200d\u00a0\u3000²½١<>|/sdmtlvre"
                "ǅﬁ" + "".join(chr(c) for c in (0x85, 0x2028, 0xFEFF, 0xE000, 0x10FFFF, 0x1F600, 0x0345, 0x0F73)))
    out = []
    for k in range(n):
        out.append((f"gen#{k}", "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))))
    for k in range(n):
        cps = [rnd.choice((rnd.randint(0, 0x2FFF), rnd.randint(0, 0x10FFFF))) for _ in range(rnd.randint(0, 20))]
        out.append((f"uni#{k}", "".join(chr(c) for c in cps if not 0xD800 <= c <= 0xDFFF)))
    return out


def diff_json(path: str, texts: list[tuple[str, str]], max_report: int = 5) -> tuple[int, int, str]:
    import tokenizers

    import fstok

    try:
        tok = fstok.compile(path)
    except ValueError as e:
        return 0, 0, f"refused: {e}"
    hf = tokenizers.Tokenizer.from_file(path)
    pipeline = hasattr(tok, "encode_with_offsets") and "add_special_tokens" in tok.encode.__code__.co_varnames
    checks = bad = 0
    for where, s in texts:
        for ast in (False, True):
            e = hf.encode(s, add_special_tokens=ast)
            if pipeline:
                ids, offs = tok.encode_with_offsets(s, add_special_tokens=ast)
                offs = [tuple(o) for o in offs]
                ok = ids == e.ids and offs == [tuple(o) for o in e.offsets]
            else:
                if ast:
                    continue  # the compiled byte-level BPE has no post-processor step
                ids = tok.encode(s, allowed_special="all")  # HF matches special added tokens in any text
                ok = ids == e.ids
            checks += 1
            if not ok:
                bad += 1
                if bad <= max_report:
                    print(f"  MISMATCH {where} add_special_tokens={ast}: {s[:60]!r}\n    fstok {ids[:16]}\n    hf    {e.ids[:16]}")
        ids = hf.encode(s, add_special_tokens=True).ids
        for sk in (True, False):
            got = tok.decode(ids, sk) if pipeline else tok.decode(ids)
            if not pipeline and sk:
                continue
            want = hf.decode(ids, skip_special_tokens=sk)
            checks += 1
            if got != want:
                bad += 1
                if bad <= max_report:
                    print(f"  DECODE {where} skip_special_tokens={sk}: {got[:60]!r} != {want[:60]!r}")
    kind = type(tok).__name__
    return checks, bad, kind


def diff_tekken(path: str, texts: list[tuple[str, str]], max_report: int = 5) -> tuple[int, int, str]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    import fstok

    tok = fstok.compile(path)
    ref = Tekkenizer.from_file(path)
    checks = bad = 0
    for where, s in texts:
        want = ref.encode(s, bos=False, eos=False)
        for got, w in ((tok.encode(s), want), (tok.encode(s, add_special_tokens=True), ref.encode(s, bos=True, eos=False))):
            checks += 1
            if got != w:
                bad += 1
                if bad <= max_report:
                    print(f"  MISMATCH {where}: {s[:60]!r}\n    fstok {got[:16]}\n    ref   {w[:16]}")
        ids = [ref.bos_id] + want + [ref.eos_id]
        checks += 1
        if tok.decode(ids) != ref.decode(ids):
            bad += 1
            if bad <= max_report:
                print(f"  DECODE {where}: {tok.decode(ids)[:60]!r} != {ref.decode(ids)[:60]!r}")
    return checks, bad, type(tok).__name__


def run(args: argparse.Namespace | list[str] | None = None) -> int:
    if not isinstance(args, argparse.Namespace):
        args = parser().parse_args(args)
    texts = [(f"edge#{i}", s) for i, s in enumerate(EDGE)] + corpus_texts(args.quick) + generated_texts(args.generated)
    total_bad = 0
    files = json_files() + tekken_files()
    if args.only:
        files = [f for f in files if any(w in f for w in args.only)]
    for f in files:
        t0 = time.time()
        rel = os.path.relpath(f, VOCAB)
        if f in tekken_files():
            checks, bad, kind = diff_tekken(f, texts)
        else:
            checks, bad, kind = diff_json(f, texts)
        total_bad += bad
        print(f"{rel:58s} {kind:20s} checks {checks:7d}  mismatches {bad:5d}  {time.time() - t0:6.1f}s", flush=True)
    print(f"total mismatches: {total_bad}")
    return 1 if total_bad else 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 lines per corpus file, no whole files")
    ap.add_argument("--only", nargs="*", help="files whose path contains one of these words")
    ap.add_argument("--generated", type=int, default=500, help="generated strings of each kind")
    return ap


if __name__ == "__main__":
    sys.exit(run())
