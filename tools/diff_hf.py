#!/usr/bin/env python3
"""fstok.Tokenizer vs HF tokenizers.Tokenizer: every Encoding field, on every corpus line, single and pair;
then transformers patched vs unpatched.

    python tools/diff_hf.py [--max-lines N [--spread]] [--files WORD ...] [--parts tokenizers transformers]
                            [--corpora NAME ...] [--settings NAME ...] [--shard K/N] [--out DIR] [--summary]

tokenizers part (every tokenizer.json under ../shared/data/vocab/, models/ and hf/ included): each corpus line
is encoded alone and paired with another line, under up to six settings: the file's own truncation/padding
(where the file sets any), none, truncation with stride (right) + batch padding, truncation with stride
(left, longest_first) + left padding to a multiple of 8, only_first with stride (right) + padding to a multiple
of 16, only_second with stride (left) without padding (HF refuses a single text there: fstok must too). Chunks of lines go through encode_batch on both
sides and are compared in bulk: ids, type_ids, tokens, offsets, word_ids, special_tokens_mask,
attention_mask, sequence_ids, n_sequences and the overflowing windows (recursively), one list per field;
a chunk that differs is redone item by item through encode, to name the inputs and the field. Every 16th
item also goes through encode on both sides; the numpy batch (encode_batch_numpy) is checked where the
setting pads; decode_batch (skip_special_tokens True and False) of the untruncated ids.
transformers part (those files, and the SentencePiece .model files through transformers' own conversion):
fstok.transformers.patch() vs unpatched on a directory holding the file: the __call__ forms with padding,
truncation, stride, offsets, token type ids, special-tokens mask and overflow, single and pair (every key,
dtype and value); batch_decode; apply_chat_template; streaming decode.
A file fstok refuses counts as a difference. Exit status 1 on any difference.  Identical lines are checked
once.  `--out DIR` writes one JSON per file and part (checks, differing, the first reports, seconds) and
skips those already there, so that a long run resumes and shards by file (and, with `--settings`, by
setting, with `--corpora` by corpus file and with `--shard K/N` by slice of the lines); `--summary --out DIR` prints
their table; `--files` takes paths or words of the path.
"""
from __future__ import annotations

import argparse
import glob
import json
import operator
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
DATA = os.environ.get("FSTOK_SHARED_DATA") or os.path.join(HERE, "..", "..", "shared", "data")
if not os.path.isdir(os.path.join(DATA, "corpus")):
    DATA = "/work/shared/data"

FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids", "n_sequences")
SETTINGS = [
    ("file", None, None),
    ("none", "off", "off"),
    ("stride-right", {"max_length": 64, "stride": 16}, {}),
    ("stride-left", {"max_length": 40, "stride": 8, "direction": "left"}, {"direction": "left", "pad_to_multiple_of": 8}),
    ("only-first", {"max_length": 48, "stride": 8, "strategy": "only_first"}, {"pad_to_multiple_of": 16}),
    ("only-second", {"max_length": 48, "stride": 4, "strategy": "only_second", "direction": "left"}, "off"),
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


def corpus(max_lines: int, spread: bool = False, names: list[str] | None = None) -> list[str]:
    """The lines of every corpus file, or of those named (`english`, `code`, ...), the first max_lines of
    each, or with spread max_lines evenly spaced through each; 0: all), each distinct line once."""
    out = []
    for p in sorted(glob.glob(os.path.join(DATA, "corpus", "*.txt"))):
        if names and os.path.basename(p)[:-4] not in names:
            continue
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


_GETTERS = [(f, operator.attrgetter(f)) for f in FIELDS]


def _windows(e) -> list:
    """The overflowing windows of an encoding that is itself a window. fstok's `overflowing` returns fresh
    copies of the whole tree below (as HF returns new objects); the windows read at the top are already
    such copies, so below the top its list is read as is (the tree is walked once, not once per level)."""
    w = getattr(e, "_overflowing", None)
    return e.overflowing if w is None else w


def table(encs, top: bool = True) -> dict:
    """Every field of every encoding as one list per field (the overflowing windows flattened into a table
    of their own, with each encoding's number of windows), so that two batches compare with one `==`."""
    cols = {f: [g(e) for e in encs] for f, g in _GETTERS}
    ovs = [e.overflowing for e in encs] if top else [_windows(e) for e in encs]
    cols["n_overflowing"] = [len(o) for o in ovs]
    flat = [o for os_ in ovs for o in os_]
    if flat:
        cols["overflowing"] = table(flat, False)
    return cols


def first_difference(a, b) -> str:
    """The first field (overflowing windows included) where two encodings differ."""
    fa, fb = fields(a), fields(b)
    for f in (*FIELDS, "overflowing"):
        if fa[f] != fb[f]:
            if f == "overflowing" and len(fa[f]) == len(fb[f]):
                k = next(i for i, (x, y) in enumerate(zip(fa[f], fb[f])) if x != y)
                return f"overflowing[{k}]: " + first_difference(a.overflowing[k], b.overflowing[k])
            return f"{f}: HF {fa[f]!r:.300} fstok {fb[f]!r:.300}"
    return "(no field differs)"


def partner(lines: list[str], i: int) -> str:
    """The line paired with line i: a fixed, scattered choice over the whole corpus."""
    return lines[(i * 7919 + 1) % len(lines)]


# A pair truncated with a stride yields the cross product of both texts' windows (HF's semantics): two long
# lines give thousands of encodings. Chunks are cut by this estimate of their windows (a window of the
# stride-left setting can advance by about 11 tokens, a token can be one character), so that memory stays
# bounded whatever the lines, as well as by a number of lines.
WINDOW_CHARS = 8
WINDOW_BUDGET = 20_000


def pair_cost(lines: list[str], i: int) -> int:
    """The window estimate of line i paired with its partner under a truncation with a stride."""
    return (1 + len(lines[i]) // WINDOW_CHARS) * (1 + len(partner(lines, i)) // WINDOW_CHARS)


def paired(lines: list[str], k: int, e: int, truncates: bool) -> tuple[list[int], int]:
    """The lines of [k, e) that go paired with their partner, and how many are left out: under truncation,
    a pair whose windows alone would exceed the budget (HF builds the cross product of both texts' windows:
    a 150,000-character line with a 20,000-character partner is millions of encodings) is checked alone only."""
    idx = [i for i in range(k, e) if not truncates or pair_cost(lines, i) <= WINDOW_BUDGET]
    return idx, e - k - len(idx)


def spans(lines: list[str], chunk: int) -> list[tuple[int, int]]:
    """Consecutive [k, e) ranges of at most `chunk` lines whose pairs' window estimate stays in budget."""
    out, k, cost = [], 0, 0
    for i, x in enumerate(lines):
        c = min(pair_cost(lines, i), WINDOW_BUDGET)  # a pair over the budget is checked alone (paired)
        if i > k and (i - k >= chunk or cost + c > WINDOW_BUDGET):
            out.append((k, i))
            k, cost = i, 0
        cost += c
    if k < len(lines):
        out.append((k, len(lines)))
    return out


def diff_file(path: str, lines: list[str], report=lambda s: None, chunk: int = 512, single_every: int = 16,
              ours_path: str | None = None, settings: list[str] | None = None) -> tuple[int, int]:
    """fstok.Tokenizer vs tokenizers.Tokenizer on `path` (fstok on `ours_path` where given: a way to check
    that the comparison sees a planted difference). Per setting, chunks of `chunk` lines, alone and paired,
    go through encode_batch on both sides and are compared field by field in bulk (the items of a differing
    chunk one by one); every `single_every`-th item also through encode on both sides; decode_batch of the
    ids without truncation and padding (skip_special_tokens True and False) and, where the setting pads,
    the numpy batch. One check is one encoding (with its overflowing windows), one decoded text or one numpy row.
    Returns (checks, differing)."""
    import tokenizers

    import fstok

    try:
        ours0 = fstok.Tokenizer.from_file(ours_path or path)
    except (NotImplementedError, ValueError) as e:
        report(f"  DIFF: fstok.Tokenizer refuses the file: {str(e)[:200]}")
        return 1, 1
    checks = bad = 0
    # one tokenizer of each side through the settings in order (the file's own first): compiling once
    ours, hf = ours0, tokenizers.Tokenizer.from_file(path)
    own = hf.truncation is not None or hf.padding is not None
    for name, trunc, pad in SETTINGS:
        if settings and name not in settings:
            continue
        if name == "file" and not own:
            continue  # the file sets neither: the same as "none"
        try:
            apply(hf, trunc, pad)
        except Exception as e:
            report(f"  {name}: HF refuses the setting ({e}); skipped")
            continue
        apply(ours, trunc, pad)
        pads = pad is not None and pad != "off" or name == "file" and hf.padding is not None
        truncates = hf.truncation is not None
        nb = unpaired = 0
        checks0, t0 = checks, time.time()

        def note(what):
            nonlocal bad, nb
            bad += 1
            nb += 1
            if nb <= 3:
                report(f"  {name}: DIFF {what}")

        for k, e in spans(lines, chunk):
            xs = lines[k:e]
            idx, left = paired(lines, k, e, truncates)
            unpaired += left
            for inputs in (xs, [(lines[i], partner(lines, i)) for i in idx]):
                a = outcome(hf.encode_batch, inputs)
                b = outcome(ours.encode_batch, inputs)
                if a[0] == b[0] == "ok" and table(a[1]) == table(b[1]):
                    checks += len(inputs)
                    A = a[1]
                else:  # item by item: which inputs differ, and in what
                    A = None
                    for x in inputs:
                        args = (x,) if isinstance(x, str) else x
                        ea, eb = outcome(hf.encode, *args), outcome(ours.encode, *args)
                        checks += 1
                        if ea[0] != eb[0]:
                            note(f"on {args!r:.160}: HF {ea[1] if ea[0] == 'error' else 'ok'}, "
                                 f"fstok {eb[1] if eb[0] == 'error' else 'ok'}")
                        elif ea[0] == "ok" and fields(ea[1]) != fields(eb[1]):
                            note(f"on {args!r:.160}: {first_difference(ea[1], eb[1])}")
                    if a[0] == b[0] == "ok":
                        # each item equal alone but the batch differs: the batch path (padding) differs
                        checks += 1
                        if nb == 0:
                            i = next(i for i, (x, y) in enumerate(zip(a[1], b[1])) if fields(x) != fields(y))
                            note(f"encode_batch item {i} of chunk {k}: {first_difference(a[1][i], b[1][i])}")
                    elif a[0] != b[0]:
                        checks += 1
                        note(f"encode_batch of chunk {k}: HF {a[1] if a[0] == 'error' else 'ok'}, "
                             f"fstok {b[1] if b[0] == 'error' else 'ok'}")
                    continue
                # the single-text path of fstok (encode) on a sample, against HF's encode
                for i in range(0, len(inputs), single_every):
                    args = (inputs[i],) if isinstance(inputs[i], str) else inputs[i]
                    ea, eb = outcome(hf.encode, *args), outcome(ours.encode, *args)
                    checks += 1
                    if not ((ea[0] == eb[0] == "error") or
                            (ea[0] == eb[0] == "ok" and fields(ea[1]) == fields(eb[1]))):
                        note(f"encode on {args!r:.160}: " + (first_difference(ea[1], eb[1]) if ea[0] == eb[0]
                                                             else f"HF {ea[0]}, fstok {eb[0]}"))
                ids = [e.ids for e in A]
                for skip in ((True, False) if name == "none" else ()):  # decode of whole, unpadded encodings
                    da, db = hf.decode_batch(ids, skip_special_tokens=skip), ours.decode_batch(ids, skip)
                    checks += len(ids)
                    if da != db:
                        i = next(i for i, (x, y) in enumerate(zip(da, db)) if x != y)
                        note(f"decode(skip_special_tokens={skip}) of {ids[i]!r:.160}: HF {da[i]!r:.160} "
                             f"fstok {db[i]!r:.160}")
                if pads:
                    single = inputs if inputs is xs else [p[0] for p in inputs]
                    pair = None if inputs is xs else [p[1] for p in inputs]
                    try:
                        got = ours.encode_batch_numpy(single, pair)
                    except ValueError:
                        continue  # rows of different lengths (HF's Fixed padding below a row's length)
                    checks += len(A)
                    for key, want in (("input_ids", ids), ("attention_mask", [e.attention_mask for e in A]),
                                      ("token_type_ids", [e.type_ids for e in A])):
                        if got[key].tolist() != want:
                            note(f"encode_batch_numpy {key} at chunk {k}")
        alone = f", {unpaired} lines over the window budget checked alone, not paired" if unpaired else ""
        report(f"  {name}: {checks - checks0} checks, {nb} differing{alone} ({time.time() - t0:.0f} s)")
    return checks, bad


# (a tokenizer.json without a tokenizer class in its config loads as TokenizersBackend, whose model inputs are
# input_ids and attention_mask only: token_type_ids are asked for)
TF_CALLS = [
    dict(padding=True, truncation=True, max_length=64, return_tensors="np", return_offsets_mapping=True,
         return_token_type_ids=True),
    dict(padding="max_length", truncation=True, max_length=32, stride=8, return_tensors="np",
         return_special_tokens_mask=True, return_token_type_ids=True),
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


# the transformers class that reads a SentencePiece .model of each model type (ModelProto's TrainerSpec.model_type)
SPM_CLASSES = {1: "T5Tokenizer", 2: "LlamaTokenizer"}


def spm_class(path: str) -> str | None:
    """For a SentencePiece ModelProto file, the transformers tokenizer class that loads it; else None."""
    from fstok.loaders.spm_model import looks_like_model, read_model

    with open(path, "rb") as f:
        if not looks_like_model(f.read(1 << 16)):
            return None
    return SPM_CLASSES.get(read_model(path).trainer.model_type)


def diff_transformers(path: str, lines: list[str], report=lambda s: None, chunk: int = 64,
                      ours_path: str | None = None) -> tuple[int, int]:
    """transformers with fstok.transformers.patch() vs unpatched on the same directory: the __call__ forms of
    TF_CALLS (single and pair), batch_decode, apply_chat_template and a streaming decode (decode of every
    growing prefix, as TextStreamer does). One check is one row of a call, one decoded text, one chat or one
    prefix. The patched side loads `ours_path` where given (a way to check that the comparison sees a planted
    difference). Returns (checks, differing)."""
    import json
    import shutil
    import tempfile
    import warnings

    import tokenizers
    import transformers

    import fstok.transformers as ftr

    d = tempfile.mkdtemp(prefix="fstok-diff-tf-")
    try:
        spm = spm_class(path)
        cfg = {"chat_template": CHAT}
        if spm:  # transformers converts the .model into a tokenizer.json pipeline itself
            shutil.copy(path, os.path.join(d, "tokenizer.model"))
            cfg["tokenizer_class"] = spm
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hf = transformers.AutoTokenizer.from_pretrained(d)._tokenizer
        else:
            shutil.copy(path, os.path.join(d, "tokenizer.json"))
            hf = tokenizers.Tokenizer.from_file(path)
        specials = [a.content for a in hf.get_added_tokens_decoder().values() if a.special]
        first = hf.id_to_token(0)
        cfg["pad_token"] = next((t for t in specials if "pad" in t.lower()), first)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = transformers.AutoTokenizer.from_pretrained(d)
            if ours_path:
                shutil.copy(ours_path, os.path.join(d, "tokenizer.model" if spm else "tokenizer.json"))
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
    for k, e in spans(lines, chunk):
        xs = lines[k:e]
        idx, _ = paired(lines, k, e, True)  # every call truncates
        ps = [partner(lines, i) for i in idx]
        for n, kw in enumerate(TF_CALLS):
            for firsts, tp in ((xs, None), ([lines[i] for i in idx], ps)):
                if not firsts:
                    continue
                a = outcome(plain, firsts, text_pair=tp, **kw)
                b = outcome(patched, firsts, text_pair=tp, **kw)
                checks += len(firsts)
                if a[0] != b[0]:
                    note(f"call {n} pair={tp is not None} chunk {k}: {a[0]} vs {b[0]} {a[1] if a[0] == 'error' else b[1]}")
                    continue
                if a[0] == "error":
                    continue
                A, B = a[1], b[1]
                if list(A.keys()) != list(B.keys()) or not all(_same(A[x], B[x]) for x in A) or \
                        A.n_sequences != B.n_sequences or (A.encodings and
                                                            [A.word_ids(i) for i in range(len(firsts))] !=
                                                            [B.word_ids(i) for i in range(len(firsts))]):
                    keys = sorted(set(A.keys()) ^ set(B.keys())) or [x for x in A if not _same(A[x], B[x])]
                    note(f"call {n} pair={tp is not None} chunk {k}: {', '.join(keys) or 'word_ids/n_sequences'}")
        ids = plain(xs)["input_ids"]
        for skip in (False, True):
            checks += len(ids)
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
        checks += len(seq)
        if [plain.decode(seq[:j], skip_special_tokens=True) for j in range(1, len(seq) + 1)] != \
                [patched.decode(seq[:j], skip_special_tokens=True) for j in range(1, len(seq) + 1)]:
            note(f"streaming decode chunk {k}")
    report(f"  transformers: {checks} checks, {bad} differing")
    return checks, bad


PARTS = {"tokenizers": diff_file, "transformers": diff_transformers}


def result_path(out: str, f: str, part: str, settings: list[str] | None = None) -> str:
    tail = f".{part}" + ("." + "+".join(settings) if settings and part == "tokenizers" else "")
    return os.path.join(out, os.path.relpath(f, DATA).replace(os.sep, "__") + tail + ".json")


def summary(out: str) -> int:
    """A markdown table of the results under `out` (one row per file and part)."""
    rows = []
    for p in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(p, encoding="utf-8") as fh:
            rows.append(json.load(fh))
    print("| file | part | lines | checks | differing |")
    print("|---|---|---|---|---|")
    for r in rows:
        part = r["part"] if r.get("settings", "all") == "all" else f"{r['part']} ({', '.join(r['settings'])})"
        part += "" if r.get("shard", "all") == "all" else f", lines {r['shard']}"
        part += "" if r.get("corpora", "all") == "all" else f", {'+'.join(r['corpora'])}"
        print(f"| `{r['file']}` | {part} | {r['lines']:,} | {r['checks']:,} | {r['differing']:,} |")
    print(f"| all | | | {sum(r['checks'] for r in rows):,} | {sum(r['differing'] for r in rows):,} |")
    return 1 if any(r["differing"] for r in rows) else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-lines", type=int, default=0, help="lines per corpus file (0: all)")
    ap.add_argument("--spread", action="store_true",
                    help="with --max-lines N: N distinct lines evenly spaced through each corpus file")
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--parts", nargs="*", choices=sorted(PARTS), default=sorted(PARTS),
                    help="tokenizers (fstok.Tokenizer vs tokenizers.Tokenizer) and/or transformers (patched vs "
                         "unpatched); default both")
    ap.add_argument("--no-transformers", action="store_true", help="the tokenizers part only")
    ap.add_argument("--settings", nargs="*", choices=[s[0] for s in SETTINGS],
                    help="tokenizers part: only these settings (a long run sharded by setting)")
    ap.add_argument("--corpora", nargs="*", metavar="NAME",
                    help="only these corpus files (english, code, multilingual, stress, chinese_long); a long run "
                         "split by corpus")
    ap.add_argument("--shard", help="K/N: only the K-th of N equal slices of the lines (K from 1), a long run "
                                    "split over processes or machines")
    ap.add_argument("--chunk", type=int, default=512, help="lines per batch call (default 512)")
    ap.add_argument("--out", help="directory for one JSON result per file and part; those already there are "
                                  "skipped, so that a long run resumes")
    ap.add_argument("--summary", action="store_true", help="with --out: a markdown table of the results there")
    args = ap.parse_args(argv)
    if args.summary:
        return summary(args.out)
    parts = [p for p in args.parts if not (args.no_transformers and p == "transformers")]
    every = sorted(set(glob.glob(os.path.join(DATA, "vocab", "**", "*.json"), recursive=True)))
    every = [f for f in every if os.path.basename(f) not in ("vocab.json",) and "tekken" not in f]
    if "transformers" in parts:  # SentencePiece .model files: through transformers' own conversion only
        every += sorted(f for f in glob.glob(os.path.join(DATA, "vocab", "**", "*"), recursive=True)
                        if os.path.isfile(f) and not f.endswith((".json", ".txt", ".md")) and spm_class(f))
    files = [f for w in args.files for f in ([w] if os.path.isfile(w) else [g for g in every if w in g])] \
        if args.files else every
    lines = corpus(args.max_lines, args.spread, args.corpora)
    shard = "." + "+".join(args.corpora) if args.corpora else ""
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            ap.error(f"--shard {args.shard}: K must be 1..N")
        lines = lines[(k - 1) * len(lines) // n:k * len(lines) // n]
        shard += f".shard{k}of{n}"
    print(f"{len(lines)} distinct lines", flush=True)
    total = total_bad = 0
    for f in dict.fromkeys(files):
        for part in parts:
            if part == "tokenizers" and spm_class(f):
                continue  # HF tokenizers does not read .model files (tools/diff_models.py checks them)
            t0 = time.time()
            print(os.path.relpath(f, DATA), part, flush=True)
            out = result_path(args.out, f, part, args.settings) if args.out else None
            out = out[:-len(".json")] + shard + ".json" if out else None
            if out and os.path.exists(out):
                with open(out, encoding="utf-8") as fh:
                    res = json.load(fh)
                print(f"  {res['checks']} checks, {res['differing']} differing (from {out})", flush=True)
                total += res["checks"]
                total_bad += res["differing"]
                continue
            report: list[str] = []

            def say(s):
                report.append(s)
                print(s, flush=True)

            kw = {"settings": args.settings} if part == "tokenizers" and args.settings else {}
            c, b = PARTS[part](f, lines, say, chunk=args.chunk, **kw)
            total += c
            total_bad += b
            print(f"  {c} checks, {b} differing, {time.time() - t0:.0f}s", flush=True)
            if out:
                os.makedirs(args.out, exist_ok=True)
                with open(out + ".tmp", "w", encoding="utf-8") as fh:
                    json.dump({"file": os.path.relpath(f, DATA), "part": part, "settings": args.settings or "all",
                               "shard": args.shard or "all", "corpora": args.corpora or "all",
                               "lines": len(lines),
                               "max_lines": args.max_lines, "spread": args.spread, "checks": c, "differing": b,
                               "report": report[:40], "seconds": round(time.time() - t0)}, fh, indent=1)
                os.replace(out + ".tmp", out)
    print(f"TOTAL {total} checks, {total_bad} differing")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
