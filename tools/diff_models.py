"""Differential run of fstok against the reference libraries on every model file of the shared data.

    python tools/diff_models.py                          # every file, every input (long: run per file)
    python tools/diff_models.py --list                   # the files and the reference each is checked against
    python tools/diff_models.py --files phi-3 e5 --out results/   # files whose path contains a word; one JSON each
    python tools/diff_models.py --quick                  # a sample: 300 lines per corpus, 1/16 of the code points
    python tools/diff_models.py --every 8 --files e5     # every 8th line and code point, whole files, all the rest
    python tools/diff_models.py --inputs codepoints hypothesis --files clip   # only these kinds of input
    python tools/diff_models.py --files path/to/tokenizer.json       # a file outside the shared data too

Every file under ../shared/data/vocab/ is recognised by content and checked against its own library:
- SentencePiece ModelProto files (`.model`, whatever the name): `sentencepiece` — ids of `sp.encode(text)` and
  of `sp.encode(text, add_bos=True)` against `encode(text, add_special_tokens=False/True)`, the character
  offsets of each piece (sentencepiece's begin/end bytes, mapped to characters) against
  `encode_with_offsets`, `sp.decode(ids)` against `decode(ids)`, and decode of random id sequences;
- tokenizer.json files (every model type): HF `tokenizers` — `encode(text, add_special_tokens=False/True)`
  ids and offsets against both faces of fstok, the tokenizer `fstok.compile(path)` returns (its `encode`,
  `encode_with_offsets`, `encode_batch` and `decode` where its API has them) and `fstok.Tokenizer.from_file(path)`
  (`encode_batch` ids and offsets, `decode` with skip_special_tokens True and False);
- Mistral tekken files: `mistral-common`'s Tekkenizer — ids with and without BOS, decode of ids with BOS and EOS
  (special tokens ignored and kept).
Inputs: every line and the whole text of each corpus file, every code point alone and 64 at a time in a
context, edge strings, seeded strings over a tricky alphabet, and hypothesis-generated strings (derandomized).
Identical inputs are checked once.  Both sides are called on batches (HF's `encode_batch` on one thread).

`--out DIR` writes one JSON per file (checks and mismatches per kind, the first mismatches, seconds) and
skips files whose JSON is already there, so that a long run resumes.  Exit status 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import bisect
import glob
import inspect
import json
import os
import random
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
if not os.path.isdir(os.path.join(SHARED, "corpus")):
    SHARED = "/work/shared/data"
CORPUS = os.path.join(SHARED, "corpus")
VOCAB = os.path.join(SHARED, "vocab")
CHUNK = 2048


# ----------------------------------------------------------------------------------------------- files
def classify(path: str) -> str | None:
    """'sentencepiece', 'tokenizers', 'tekken' or None, from the file's content."""
    from fstok.loaders.spm_model import looks_like_model

    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if looks_like_model(head):
        return "sentencepiece"
    if not head.lstrip().startswith(b"{"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("model"), dict):
        return "tokenizers"
    if isinstance(obj.get("config"), dict) and "pattern" in obj["config"] and isinstance(obj.get("vocab"), list):
        return "tekken"
    return None


def model_files() -> list[tuple[str, str]]:
    out = []
    for p in sorted(glob.glob(os.path.join(VOCAB, "**", "*"), recursive=True)):
        if os.path.isfile(p) and not p.endswith((".md", "LICENSE", ".txt")):
            kind = classify(p)
            if kind:
                out.append((p, kind))
    return out


# ---------------------------------------------------------------------------------------------- inputs
EDGE = ["", " ", "  ", "\n", "\r\n", "Hello world!", "  leading and trailing  ", "It's 1234567 apples...",
        "a\u0301e\u0301\u0323", "ﬁ ﬂ Ǖ ǅ İ ẞ Σ", "日本語のテキスト", "😀👍🏽 e\u200dx", "<s>x</s> <mask>  <mask>",
        "<|endoftext|>a<|endoftext|>", "<|startoftext|>Hi<|endoftext|>", "[CLS] a [SEP][PAD]", "<unk><pad>",
        "\t\ttabs\r\nCRLF", "x" * 3000, " " * 500 + "y", "١٢٣ ٤٥ ²³ ½", "a.b,c;d!e?f", "\u2581\u2581a\u2581",
        "<0x41><0xE2>", "\u3000\u00a0\u2028\u0085\ufeff"]


def hypothesis_texts(n: int) -> list[str]:
    """n strings from hypothesis' text strategy (derandomized: the same strings on every run)."""
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError:
        return []
    out: list[str] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.text(max_size=80),
                     st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
                     st.lists(st.sampled_from(["<s>", "</s>", " ", "  ", "\n", "a", "\u2581", "1", "é", "'s", "<unk>",
                                               "[SEP]", "<|endoftext|>", "\u0301", "日", "😀"]), max_size=20).map("".join)))
    def collect(s):
        out.append(s)

    collect()
    return out


INPUT_KINDS = ("lines", "files", "codepoints", "edge", "seeded", "hypothesis")


def inputs(quick: bool, n_hyp: int, seed: int = 0, every: int = 1,
           kinds: tuple[str, ...] = INPUT_KINDS) -> list[tuple[str, str]]:
    """(label, text), identical texts once: corpus lines, whole corpus files, code points alone and in a
    context, edge strings, seeded strings, hypothesis strings.  Labels of code points alone start with "U+"
    (the light checks: ids and decode; in a context every check).  `every` N > 1: a deterministic sample,
    the lines numbered 1, N+1, 2N+1, ... of each file and every N-th code point (alone, and every N-th
    group of 64 in a context); whole files, edge, seeded and hypothesis strings all.  `kinds`: only these
    kinds of input (INPUT_KINDS: corpus lines, whole corpus files, code points alone and in a context, edge,
    seeded and hypothesis strings)."""
    rng = random.Random(seed)
    out: dict[str, str] = {}

    def add(label, s):
        out.setdefault(s, label)

    for path in sorted(glob.glob(os.path.join(CORPUS, "*.txt"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        lines = text.split("\n")
        for i, ln in enumerate(lines[:300] if quick else lines):
            if i % every == 0 and "lines" in kinds:
                add(f"{name}:{i + 1}", ln)
        if "files" in kinds:
            add(f"{name}:whole", text[:200000] if quick else text)
    step = 16 if quick else 1
    batch = []
    group = 0
    for cp in range(0, 0x110000 if "codepoints" in kinds else 0, step):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if cp // step % every == 0:
            add(f"U+{cp:04X}", c)
        batch.append(c)
        if len(batch) == 64:
            if group % every == 0:
                add(f"U+{cp:04X} in context", "a" + " ".join(batch) + " a" + "".join(batch) + "\r\n")
            group += 1
            batch = []
    for i, s in enumerate(EDGE if "edge" in kinds else []):
        add(f"edge#{i}", s)
    alphabet = [chr(c) for c in list(range(0x20, 0x7F)) + [0x9, 0xA, 0xD, 0x3000, 0x2581, 0x301, 0x308, 0x200D, 0xFE0F,
                                                           0x1F3FB, 0x1F1EB, 0x1F1F7, 0xFF21, 0xFB01, 0xA0, 0x85]]
    for k in range((300 if quick else 3000) if "seeded" in kinds else 0):
        add(f"gen#{k}", "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))))
    for k, s in enumerate(hypothesis_texts(n_hyp) if "hypothesis" in kinds else []):
        add(f"hyp#{k}", s)
    return [(label, s) for s, label in out.items()]


# --------------------------------------------------------------------------------------------- report
class Report:
    def __init__(self, path: str, kind: str):
        self.path, self.kind = path, kind
        self.checks: dict[str, int] = {}
        self.bad: dict[str, int] = {}
        self.first: list[str] = []

    def check(self, ok: bool, what: str, label: str, text: str, want, got) -> None:
        self.checks[what] = self.checks.get(what, 0) + 1
        if not ok:
            self.bad[what] = self.bad.get(what, 0) + 1
            if len(self.first) < 12:
                msg = f"{what} {label} {text[:60]!r}: want {str(want)[:160]} got {str(got)[:160]}"
                self.first.append(msg)
                print("  MISMATCH", msg, flush=True)

    @property
    def n(self) -> int:
        return sum(self.checks.values())

    @property
    def n_bad(self) -> int:
        return sum(self.bad.values())

    def line(self) -> str:
        return f"{os.path.relpath(self.path, SHARED)} ({self.kind}): {self.n} checks, {self.n_bad} mismatches"


def split_light(items):
    """(full, light): code points alone get the light checks (ids with and without special tokens, decode)."""
    full = [x for x in items if not (x[0].startswith("U+") and not x[0].endswith("context"))]
    light = [x for x in items if x[0].startswith("U+") and not x[0].endswith("context")]
    return full, light


def chunks(xs, n=CHUNK):
    for k in range(0, len(xs), n):
        yield xs[k:k + n]


def _accepts(tok, method: str, name: str) -> bool:
    fn = getattr(type(tok), method, None)  # the class's signature (an instance may hold a native fast path)
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ----------------------------------------------------------------------------------------- references
def _char_offsets(text: str, begin: int, end: int, cum: list[int] | None) -> tuple[int, int]:
    """sentencepiece's byte span -> characters (a start inside a character rounds down, an end up)."""
    if cum is None:
        return begin, end
    return bisect.bisect_right(cum, begin) - 1, bisect.bisect_left(cum, end)


def diff_sentencepiece(path: str, items, r: Report) -> None:
    import sentencepiece as spm

    import fstok

    tok = fstok.compile(path)
    sp = spm.SentencePieceProcessor(model_file=path)
    items, light = split_light(items)
    for chunk in chunks(light, 16384):
        texts = [s for _, s in chunk]
        want = sp.encode(texts, num_threads=1)
        want_bos = sp.encode(texts, add_bos=True, num_threads=1)
        dec_want = sp.decode(want, num_threads=1)
        for (label, s), w, wb, g, dw in zip(chunk, want, want_bos, tok.encode_batch(texts), dec_want):
            r.check(w == g, "ids", label, s, w, g)
            gb = tok.encode(s, add_special_tokens=True)
            r.check(wb == gb, "ids(add_special_tokens=True)", label, s, wb, gb)
            gd = tok.decode(w)
            r.check(dw == gd, "decode", label, s, dw, gd)
    for chunk in chunks(items):
        texts = [s for _, s in chunk]
        want = sp.encode(texts, num_threads=1)
        want_bos = sp.encode(texts, add_bos=True, num_threads=1)
        protos = sp.encode(texts, return_type="proto", num_threads=1)
        got = tok.encode_batch(texts)
        dec_want = sp.decode(want, num_threads=1)
        for (label, s), w, wb, pr, g, dw in zip(chunk, want, want_bos, protos, got, dec_want):
            r.check(w == g, "ids", label, s, w, g)
            gb = tok.encode(s, add_special_tokens=True)
            r.check(wb == gb, "ids(add_special_tokens=True)", label, s, wb, gb)
            cum = None
            if not s.isascii():
                cum = [0]
                for c in s:
                    cum.append(cum[-1] + len(c.encode("utf-8", "surrogatepass")))
            wo = [_char_offsets(s, p.begin, p.end, cum) for p in pr.pieces]
            gi, go = tok.encode_with_offsets(s)
            r.check(gi == w and [tuple(o) for o in go] == wo, "offsets", label, s, wo, go)
            gd = tok.decode(w)
            r.check(dw == gd, "decode", label, s, dw, gd)
    rng = random.Random(1)
    n = sp.get_piece_size()
    for k in range(2000):
        ids = [rng.randrange(n) for _ in range(rng.randrange(1, 10))] + [rng.randrange(min(300, n))]
        rng.shuffle(ids)
        w, g = sp.decode(ids), tok.decode(ids)
        r.check(w == g, "decode(random ids)", str(k), "", w, g)


def diff_tokenizers(path: str, items, r: Report) -> None:
    import tokenizers

    import fstok

    hf = tokenizers.Tokenizer.from_file(path)
    hf.no_truncation()
    hf.no_padding()
    tok = fstok.compile(path)
    face = fstok.Tokenizer.from_file(path)
    face.no_truncation()
    face.no_padding()
    enc_kw = {"allowed_special": "all"} if _accepts(tok, "encode", "allowed_special") else {}
    has_add = _accepts(tok, "encode", "add_special_tokens")
    has_offs = hasattr(tok, "encode_with_offsets") and _accepts(tok, "encode_with_offsets", "add_special_tokens")
    offs_kw = enc_kw if has_offs and _accepts(tok, "encode_with_offsets", "allowed_special") else {}
    dec_skip = _accepts(tok, "decode", "skip_special_tokens")
    items, light = split_light(items)
    for chunk in chunks(light, 16384):
        texts = [s for _, s in chunk]
        for add in (False, True):
            if add and not has_add:
                continue
            kw = dict(enc_kw, add_special_tokens=True) if add else enc_kw
            encs = hf.encode_batch(texts, add_special_tokens=add)
            for (label, s), e in zip(chunk, encs):
                g = tok.encode(s, **kw)
                r.check(g == e.ids, f"compile ids(add_special_tokens={add})", label, s, e.ids, g)
            if hasattr(tok, "encode_batch") and all(_accepts(tok, "encode_batch", k) for k in kw):
                for (label, s), e, g in zip(chunk, encs, tok.encode_batch(texts, **kw)):
                    r.check(g == e.ids, f"compile encode_batch(add_special_tokens={add})", label, s, e.ids, g)
            batch_ids = [e.ids for e in encs]
        for skip in (True, False):
            if skip and not dec_skip:
                continue
            want = hf.decode_batch(batch_ids, skip_special_tokens=skip)
            for (label, s), ids, w in zip(chunk, batch_ids, want):
                g = tok.decode(ids, skip_special_tokens=skip) if dec_skip else tok.decode(ids)
                r.check(w == g, f"compile decode(skip_special_tokens={skip})", label, s, w, g)
    for chunk in chunks(items):
        texts = [s for _, s in chunk]
        for add in (False, True):
            encs = hf.encode_batch(texts, add_special_tokens=add)
            mine = face.encode_batch(texts, add_special_tokens=add)
            for (label, s), e, m in zip(chunk, encs, mine):
                ids, offs = e.ids, e.offsets
                r.check(m.ids == ids and m.offsets == offs, f"Tokenizer ids+offsets(add_special_tokens={add})",
                        label, s, (ids, offs), (m.ids, m.offsets))
                if has_add or not add:
                    kw = dict(enc_kw, add_special_tokens=True) if add else enc_kw
                    g = tok.encode(s, **kw)
                    r.check(g == ids, f"compile ids(add_special_tokens={add})", label, s, ids, g)
                if has_offs and not add:  # the post-processor's offsets: through fstok.Tokenizer above
                    gi, go = tok.encode_with_offsets(s, add_special_tokens=add, **offs_kw)
                    go = [tuple(o) for o in go]
                    r.check(gi == ids and go == offs, f"compile offsets(add_special_tokens={add})", label, s,
                            (ids, offs), (gi, go))
            if add:
                batch_ids = [e.ids for e in encs]
        for skip in (True, False):
            want = hf.decode_batch(batch_ids, skip_special_tokens=skip)
            mine = face.decode_batch(batch_ids, skip_special_tokens=skip)
            for (label, s), ids, w, m in zip(chunk, batch_ids, want, mine):
                r.check(w == m, f"Tokenizer decode(skip_special_tokens={skip})", label, s, w, m)
                if dec_skip or not skip:
                    g = tok.decode(ids, skip_special_tokens=skip) if dec_skip else tok.decode(ids)
                    r.check(w == g, f"compile decode(skip_special_tokens={skip})", label, s, w, g)


def diff_tekken(path: str, items, r: Report) -> None:
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    import fstok

    tok = fstok.compile(path)
    ref = Tekkenizer.from_file(path)
    items, light = split_light(items)
    for chunk in chunks(light, 16384):
        texts = [s for _, s in chunk]
        for (label, s), g in zip(chunk, tok.encode_batch(texts)):
            w = ref.encode(s, bos=False, eos=False)
            r.check(w == g, "ids", label, s, w, g)
            a, b = ref.decode(w), tok.decode(w)
            r.check(a == b, "decode(specials ignored)", label, s, a, b)
    for chunk in chunks(items):
        texts = [s for _, s in chunk]
        got = tok.encode_batch(texts)
        for (label, s), g in zip(chunk, got):
            w = ref.encode(s, bos=False, eos=False)
            r.check(w == g, "ids", label, s, w, g)
            wb, gb = ref.encode(s, bos=True, eos=False), tok.encode(s, add_special_tokens=True)
            r.check(wb == gb, "ids(add_special_tokens=True)", label, s, wb, gb)
            ids = [ref.bos_id] + w + [ref.eos_id]
            a, b = ref.decode(ids), tok.decode(ids)
            r.check(a == b, "decode(specials ignored)", label, s, a, b)
            a, b = ref.decode(ids, special_token_policy=SpecialTokenPolicy.KEEP), tok.decode(ids, skip_special_tokens=False)
            r.check(a == b, "decode(specials kept)", label, s, a, b)


DIFFERS = {"sentencepiece": diff_sentencepiece, "tokenizers": diff_tokenizers, "tekken": diff_tekken}


def slug(path: str) -> str:
    return os.path.relpath(path, VOCAB).replace(os.sep, "__")


def summary(out: str) -> int:
    """A markdown table of the per-file results in `out`."""
    ref = {"sentencepiece": "sentencepiece", "tokenizers": "tokenizers", "tekken": "mistral-common"}
    print("| file | reference | inputs | checks | mismatches |\n|---|---|---|---|---|")
    n = bad = 0
    for p in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(p, encoding="utf-8") as f:
            r = json.load(f)
        sample = f" (every {r['every']}th)" if r.get("every", 1) > 1 else ""
        if set(r.get("inputs", INPUT_KINDS)) != set(INPUT_KINDS):
            sample += f" ({', '.join(k for k in INPUT_KINDS if k in r['inputs'])})"
        print(f"| `{r['file']}` | {ref[r['kind']]} | {r['n_inputs']:,}{sample} | {r['n_checks']:,} | {r['n_mismatches']} |")
        n += r["n_checks"]
        bad += r["n_mismatches"]
    print(f"| all | | | {n:,} | {bad} |")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a sample of the inputs")
    ap.add_argument("--every", type=int, default=1, metavar="N",
                    help="a deterministic sample: every N-th line of each corpus file and every N-th code point "
                         "(whole files and the other inputs all); default 1, every input")
    ap.add_argument("--inputs", nargs="+", choices=INPUT_KINDS, default=list(INPUT_KINDS),
                    help="only these kinds of input (default all): corpus lines, whole corpus files, code points "
                         "(alone and in a context), edge, seeded and hypothesis strings; a long run split by kind")
    ap.add_argument("--files", "--only", nargs="*", default=[], help="only files whose path contains one of these")
    ap.add_argument("--kind", nargs="*", choices=sorted(DIFFERS), help="only files of these kinds")
    ap.add_argument("--out", help="directory for one JSON result per file; files with a result there are skipped")
    ap.add_argument("--hypothesis", type=int, default=3000, help="hypothesis-generated strings (default 3000)")
    ap.add_argument("--list", action="store_true", help="list the files and their kind, and exit")
    ap.add_argument("--summary", action="store_true", help="with --out: a markdown table of the results there")
    args = ap.parse_args(argv)
    if args.summary:
        return summary(args.out)
    files = [(p, k) for p, k in model_files()
             if (not args.files or any(w in p for w in args.files)) and (not args.kind or k in args.kind)]
    for w in args.files:  # a path to a file outside the shared data (e.g. tools/bench_pipelines.py's qwen3_json())
        if os.path.isfile(w) and os.path.abspath(w) not in {os.path.abspath(p) for p, _ in files} and classify(w):
            files.append((w, classify(w)))
    if args.list:
        for p, k in files:
            print(f"{k:14s} {os.path.relpath(p, SHARED)}")
        return 0
    items = None
    bad = total = 0
    for path, kind in files:
        part = "" if set(args.inputs) == set(INPUT_KINDS) else "." + "+".join(k for k in INPUT_KINDS if k in args.inputs)
        out = os.path.join(args.out, slug(path) + part + ".json") if args.out else None
        if out and os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                res = json.load(f)
            print(f"{os.path.relpath(path, SHARED)}: {res['n_checks']} checks, {res['n_mismatches']} mismatches "
                  f"(from {out})", flush=True)
            bad += res["n_mismatches"]
            total += res["n_checks"]
            continue
        if items is None:
            items = inputs(args.quick, 300 if args.quick else args.hypothesis, every=args.every,
                           kinds=tuple(args.inputs))
            print(f"{len(items)} distinct inputs", flush=True)
        t = time.time()
        r = Report(path, kind)
        try:
            DIFFERS[kind](path, items, r)
        except Exception as e:  # a file fstok refuses, or a crash: a mismatch, with the reason
            r.check(False, "refused/crashed", "-", "", "a result", f"{type(e).__name__}: {e}")
        dt = time.time() - t
        print(r.line(), f"({dt:.0f} s)", " ".join(f"{k}={v}" for k, v in sorted(r.checks.items())), flush=True)
        bad += r.n_bad
        total += r.n
        if out:
            os.makedirs(args.out, exist_ok=True)
            with open(out + ".tmp", "w", encoding="utf-8") as f:
                json.dump({"file": os.path.relpath(path, SHARED), "kind": kind, "quick": args.quick,
                           "every": args.every, "inputs": sorted(args.inputs),
                           "n_inputs": len(items), "n_checks": r.n, "n_mismatches": r.n_bad, "checks": r.checks,
                           "mismatches": r.bad, "first": r.first, "seconds": round(dt)}, f, indent=1)
            os.replace(out + ".tmp", out)
    print(f"TOTAL {total} checks, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
