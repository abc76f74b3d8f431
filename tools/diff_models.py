"""Differential run of fstok against the reference libraries on every model file of the shared data.

    python tools/diff_models.py                 # everything (minutes)
    python tools/diff_models.py --quick         # a sample: 300 lines per corpus, 1/16 of the code points
    python tools/diff_models.py --only gemma    # model files whose path contains "gemma"

SentencePiece `.model` files against `sentencepiece` (`sp.encode(text)` ids, `sp.decode(ids)`);
Unigram / SentencePiece-style BPE tokenizer.json files against `tokenizers` (ids, character offsets,
decode with skip_special_tokens True and False; with and without add_special_tokens).  Inputs: every
line and the whole text of each corpus file, every code point alone and in a context, and hypothesis
strings.  When tools/diff_models_hf.py exists, its `run(args)` covers the byte-level tokenizer.json
families.  Exit status 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
if not os.path.isdir(os.path.join(SHARED, "corpus")):
    SHARED = "/work/shared/data"
CORPUS = os.path.join(SHARED, "corpus")
MODELS = os.path.join(SHARED, "vocab", "models")


def model_files() -> list[str]:
    """Every SentencePiece ModelProto and every Unigram / SentencePiece-style tokenizer.json under the
    shared vocabularies (by content, whatever the file is called)."""
    import json

    from fstok.compile.hf_spm_tables import is_spm_style
    from fstok.loaders.spm_model import looks_like_model

    out = []
    for p in sorted(glob.glob(os.path.join(SHARED, "vocab", "**", "*"), recursive=True)):
        if not os.path.isfile(p):
            continue
        with open(p, "rb") as f:
            head = f.read(1 << 16)
        if looks_like_model(head):
            out.append(p)
        elif p.endswith(".json"):
            try:
                obj = json.load(open(p, encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict) and isinstance(obj.get("model"), dict) and is_spm_style(obj):
                out.append(p)
    return out


def inputs(quick: bool, seed: int = 0):
    """(label, text) pairs: corpus lines, whole corpus files, code points, hypothesis strings."""
    rng = random.Random(seed)
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.txt"))):
        name = os.path.basename(path)
        text = open(path, encoding="utf-8", newline="").read()
        lines = text.split("\n")
        if quick:
            lines = lines[:300]
        for i, ln in enumerate(lines):
            yield f"{name}:{i + 1}", ln
        yield f"{name}:whole", text if not quick else text[:200000]
    step = 16 if quick else 1
    batch = []
    for cp in range(0, 0x110000, step):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        yield f"U+{cp:04X}", c
        batch.append(c)
        if len(batch) == 64:
            yield f"U+{cp:04X} in context", "a" + " ".join(batch) + " a" + "".join(batch) + "\r\n"
            batch = []
    yield "hyp", ""
    try:
        from hypothesis import strategies as st
    except ImportError:
        st = None
    n = 300 if quick else 3000
    alphabet = [chr(c) for c in list(range(0x20, 0x7F)) + [0x9, 0xA, 0xD, 0x3000, 0x2581, 0x301, 0x308, 0x200D,
                                                           0xFE0F, 0x1F3FB, 0x1F1EB, 0x1F1F7, 0xFF21, 0xFB01]]
    for k in range(n):
        if st is not None:
            s = st.text(max_size=60).example() if k % 2 else ""
        else:
            s = ""
        s += "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        yield f"hyp{k}", s


class Report:
    def __init__(self, name: str):
        self.name, self.n, self.bad, self.first = name, 0, 0, []

    def check(self, ok: bool, what: str, label: str, text: str, want, got):
        self.n += 1
        if not ok:
            self.bad += 1
            if len(self.first) < 5:
                self.first.append(f"  {what} {label} {text[:60]!r}: want {str(want)[:120]} got {str(got)[:120]}")

    def line(self) -> str:
        return f"{self.name}: {self.n} checks, {self.bad} mismatches" + "".join("\n" + x for x in self.first)


def diff_model(path: str, quick: bool) -> Report:
    import sentencepiece as spm

    import fstok

    r = Report(os.path.relpath(path, SHARED))
    tok = fstok.compile(path)
    sp = spm.SentencePieceProcessor(model_file=path)
    for label, text in inputs(quick):
        want = sp.encode(text)
        got = tok.encode(text)
        r.check(want == got, "ids", label, text, want, got)
        r.check(sp.decode(want) == tok.decode(want), "decode", label, text, sp.decode(want), tok.decode(want))
    rng = random.Random(1)
    n = sp.get_piece_size()
    for k in range(2000 if not quick else 200):
        ids = [rng.randrange(n) for _ in range(rng.randrange(1, 10))] + [rng.randrange(min(300, n))]
        rng.shuffle(ids)
        r.check(sp.decode(ids) == tok.decode(ids), "decode(random ids)", str(k), "", sp.decode(ids), tok.decode(ids))
    return r


def diff_json(path: str, quick: bool) -> Report:
    import tokenizers

    import fstok

    r = Report(os.path.relpath(path, SHARED))
    tok = fstok.compile(path)
    hf = tokenizers.Tokenizer.from_file(path)
    for label, text in inputs(quick):
        for add in (False, True):
            e = hf.encode(text, add_special_tokens=add)
            ids, offs = tok.encode_with_offsets(text, add_special_tokens=add)
            r.check(ids == e.ids, f"ids(add_special_tokens={add})", label, text, e.ids, ids)
            r.check(offs == e.offsets, f"offsets(add_special_tokens={add})", label, text, e.offsets, offs)
            fast = tok.encode(text, add_special_tokens=add)  # the string path (no alignments)
            r.check(fast == e.ids, f"encode(add_special_tokens={add})", label, text, e.ids, fast)
        for skip in (True, False):
            want, got = hf.decode(e.ids, skip_special_tokens=skip), tok.decode(e.ids, skip_special_tokens=skip)
            r.check(want == got, f"decode(skip={skip})", label, text, want, got)
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a sample of the inputs")
    ap.add_argument("--only", default="", help="only model files whose path contains this")
    ap.add_argument("--no-hf-module", action="store_true", help="skip tools/diff_models_hf.py")
    args = ap.parse_args(argv)
    bad = 0
    for path in model_files():
        if args.only and args.only not in path:
            continue
        t = time.time()
        r = diff_json(path, args.quick) if path.endswith(".json") else diff_model(path, args.quick)
        print(r.line(), f"({time.time() - t:.0f} s)", flush=True)
        bad += r.bad
    hf_mod = os.path.join(os.path.dirname(os.path.abspath(__file__)), "diff_models_hf.py")
    if os.path.exists(hf_mod) and not args.no_hf_module:
        spec = importlib.util.spec_from_file_location("diff_models_hf", hf_mod)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        rc = mod.run(["--quick"] if args.quick else [])
        bad += int(bool(rc))
    print("OK: 0 mismatches" if bad == 0 else f"FAILED: {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
