#!/usr/bin/env python
"""Load and use corrupted artifacts of every kind; none may crash, hang or fail with anything but a
clear `ArtifactError` naming the section.

    python tools/fuzz_artifacts.py                     # 10,000 cases, seed 0, 2 worker processes
    python tools/fuzz_artifacts.py --n 300 --seed 7 --json out.json

Base artifacts (built once into --dir): a tiny WordPiece (compiled/fig1-vocab.txt), bert-base-uncased,
small regex DFAs in find and split mode, the o200k_base pre-tokenizer DFA (give-back boundary states),
small byte-level BPEs whose pre-tokenizer is a DFA in find, split and whole-text mode, and (when the
shared models are present) SentencePiece BPE and Unigram models.

Mutations (each case is one, drawn from the case number and the seed):
  flip      1-4 random bytes anywhere, checksums left alone (the checksums must catch it)
  sflip     1-3 random bytes inside one section, checksums recomputed
  elem      one element of one section set to a boundary value (0, 1, -1, max, count, count - 1,
            another element's value, NONE, 2**31, ...), checksums recomputed
  meta      one meta field (or a field one level down) deleted, retyped or set to an odd value
  trunc     the file cut short (half the time with the header's size patched and resealed)
  header    a header field or a section-table entry (kind, count, offset, size, dtype, name) changed

Each case is loaded (`fstok.loads`) in a worker process; a loaded tokenizer is then used (encode,
batch encode on 2 threads, offsets, count, decode of what it encoded; spans for a pattern).  The parent
restarts a worker that dies (a crash) or answers nothing within --timeout seconds (a hang).
Outcome per case: rejected (ArtifactError naming a section or the header), rejected-late (the same, raised
by the first use of a section read lazily: a pipeline's tokenizer.json), loaded (and used), or a failure: crash, hang, another exception type, an ArtifactError that names nothing, or an
exception while using a loaded tokenizer.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

OK_OUTCOMES = ("rejected", "rejected-late", "loaded")
MUTATIONS = ("flip", "sflip", "elem", "meta", "trunc", "header")
WEIGHTS = (8, 22, 32, 16, 6, 16)
# the share of cases per base (big bases cost more per case)
BASES = {
    "wp_tiny": 14, "wp_bert": 4, "dfa_small": 14, "dfa_split": 10, "dfa_o200k": 4,
    "bpe_find": 24, "bpe_split": 16, "bpe_whole": 10, "spm_bpe": 6, "spm_unigram": 6,
    "json_roberta": 5, "json_llama3": 5, "json_olmo2": 4, "json_falcon": 4, "json_whisper": 4, "json_clip": 6,
    "json_phi3": 6, "json_e5": 6, "json_minilm": 5, "tekken": 5,
    "json_minilm_ws": 5, "json_e5_digits": 5, "json_phi3_digits": 5, "json_e5_split": 5,
}
SPM_SOURCES = {"spm_bpe": "models/spm-bpe/llama-2/tokenizer.model",
               "spm_unigram": "models/unigram/maxtext-default-c4/tokenizer.default"}
# tokenizer.json and tekken files of the shared models, each shrunk to a few hundred tokens (the same
# pipeline and options, the same artifact kind and sections; small enough to load thousands of times)
JSON_SOURCES = {"json_roberta": "models/bytelevel-bpe/roberta-base/tokenizer.json",
                "json_llama3": "hf-derived/llama3.tokenizer.json",
                "json_olmo2": "models/bytelevel-bpe/olmo-2/allenai_dolma2.json",
                "json_falcon": "models/bytelevel-bpe/falcon-7b/tokenizer.json",
                "json_whisper": "models/bytelevel-bpe/whisper-large-v3/tokenizer.json",
                "json_clip": "models/charbpe/clip-vit-base-patch32/tokenizer.json",
                "json_phi3": "models/spm-bpe/phi-3-mini/tokenizer.json",
                "json_e5": "models/unigram/multilingual-e5-small/tokenizer.json",
                "json_minilm": "models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
                "tekken": "models/tekken/mistral-nemo/tekken_240718.json",
                # pipelines whose model runs in C over pieces cut in C (fstok.pipeline.model_tables)
                "json_minilm_ws": "models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
                "json_e5_digits": "models/unigram/multilingual-e5-small/tokenizer.json",
                "json_phi3_digits": "models/spm-bpe/phi-3-mini/tokenizer.json",
                "json_e5_split": "models/unigram/multilingual-e5-small/tokenizer.json"}
_META = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
JSON_EDITS = {  # the shared file's stages replaced (a pipeline fstok.compile does not take as a whole-file kind)
    "json_minilm_ws": {"pre_tokenizer": {"type": "Whitespace"}, "truncation": None, "padding": None},
    "json_e5_digits": {"normalizer": {"type": "BertNormalizer", "lowercase": True}, "pre_tokenizer": {
        "type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _META]}},
    "json_phi3_digits": {"normalizer": None, "pre_tokenizer": {
        "type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": False}, _META]}},
    "json_e5_split": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [  # (its Precompiled normalizer kept)
        {"type": "Split", "pattern": {"Regex": "\\s+|\\p{P}"}, "behavior": "Isolated", "invert": False}, _META]}},
}
SHARED_SOURCES = {**SPM_SOURCES, **JSON_SOURCES}
HEADER_WORDS = ("header", "the section is missing", "checksum", "truncated", "padded", "magic", "format version", "section table",
                "artifact kind", "meta", "not an fstok artifact", "expected 'bpe'", "expected 'wordpiece'",
                "expected 'regex_dfa'")
TEXTS = [
    "Hello world, this is a test.",
    "   \n\n\t 1234567890 a  b\r\n  x\u3000y\xa0z  ",
    "unaffable [CLS] héllo WORLD!! 東京 ☃ 😀 <|endoftext|> it's 'll",
    "हिन्दी नमस्ते दुनिया ক্ষ্মী ‍ abc",
    "a" * 300 + " " * 200 + "1" * 50,
    "",
]
SMALL_PAT = r"""'s|'t| ?[a-zA-Z]+| ?[0-9]{1,3}| ?[^\s a-zA-Z0-9]+|\s+(?!\S)|\s+"""


# ---------------------------------------------------------------------------------------------- bases
def _small_ranks(n: int = 700) -> dict:
    import base64

    path = os.path.join(ROOT, "fstok", "data", "tiktoken", "r50k_base.tiktoken")
    if not os.path.exists(path):
        path = "/work/shared/data/vocab/tiktoken/r50k_base.tiktoken"
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            tok, r = line.split()
            if int(r) < n:
                ranks[base64.b64decode(tok)] = int(r)
    return ranks


def _shared_vocab() -> str:
    for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"), "/work/shared/data"):
        if c and os.path.isdir(os.path.join(c, "vocab")):
            return os.path.join(c, "vocab")
    return ""


def available_bases() -> dict[str, int]:
    """BASES without the shared models' ones when their models (shared data) or fstok.spm are absent."""
    out = dict(BASES)
    vocab = _shared_vocab()
    try:
        import fstok.spm  # noqa: F401
    except ImportError:
        vocab = ""
    for k, rel in SHARED_SOURCES.items():
        if not vocab or not os.path.exists(os.path.join(vocab, rel)):
            out.pop(k)
    return out


def build_bases(d: str) -> dict[str, str]:
    """name -> artifact path (built once)."""
    os.makedirs(d, exist_ok=True)
    out = {b: os.path.join(d, b + ".fst") for b in available_bases()}
    if all(os.path.exists(p) for p in out.values()):
        return out
    import fstok
    from fstok.bpe import BPETokenizer
    from fstok.loaders.bpe_source import BPESource, PreTokStage
    from fstok.pretokenize import CompiledPattern

    fstok.compile(os.path.join(ROOT, "compiled", "fig1-vocab.txt"), lowercase=False).save(out["wp_tiny"])
    fstok.get_encoding("bert-base-uncased").save(out["wp_bert"])
    CompiledPattern.compile(SMALL_PAT).save(out["dfa_small"])
    CompiledPattern.pipeline([(r"\s+|[a-z]+", "oniguruma"), (r"[aeiou]|\s(?!\S)", "oniguruma")]).save(out["dfa_split"])
    CompiledPattern.named("o200k_base").save(out["dfa_o200k"])
    ranks = _small_ranks()
    specials = {"<|endoftext|>": 700, "<|x|>": 702}
    BPETokenizer.from_ranks(ranks, SMALL_PAT, specials, name="fuzz_find").save(out["bpe_find"])
    for name, stages in (("bpe_split", [PreTokStage(r"\s+|[a-z]+", True, "oniguruma"),
                                        PreTokStage(r"[0-9]|\s(?!\S)", True, "oniguruma")]),
                         ("bpe_whole", [])):
        src = BPESource(name=name, tokens=dict(ranks), stages=stages, special_tokens=dict(specials),
                        semantics="hf" if not stages else "tiktoken")
        BPETokenizer.from_source(src).save(out[name])
    for name, rel in SPM_SOURCES.items():
        if name in out:
            fstok.compile(os.path.join(_shared_vocab(), rel)).save(out[name])
    for name, rel in JSON_SOURCES.items():
        if name in out:
            with open(os.path.join(_shared_vocab(), rel), encoding="utf-8") as f:
                obj = json.load(f)
            obj.update(JSON_EDITS.get(name, {}))
            src = os.path.join(d, name + (".tekken.json" if name == "tekken" else ".tokenizer.json"))
            with open(src, "w", encoding="utf-8") as f:
                json.dump(shrink_tekken(obj) if name == "tekken" else shrink_tokenizer_json(obj), f)
            fstok.compile(src).save(out[name])
    return out


def _keep_renumbered(old_ids: dict, keep) -> dict:
    """token -> new dense id for the kept tokens, in the order of their old ids."""
    kept = sorted((i, t) for t, i in old_ids.items() if keep(t, i))
    return {t: n for n, (_, t) in enumerate(kept)}


def shrink_tokenizer_json(obj: dict, n: int = 300) -> dict:
    """The tokenizer.json `obj` with its model cut to about `n` pieces (BPE: the first n merges and the
    tokens they join, every one-character token and byte-fallback piece; Unigram and WordPiece: the first n
    pieces and the unknown one); ids renumbered densely, added tokens and post-processor ids following."""
    m = obj["model"]
    t = m.get("type") or ("BPE" if "merges" in m else "Unigram" if isinstance(m.get("vocab"), list) else "WordPiece")
    specials = {a["content"] for a in obj.get("added_tokens") or []}
    if t == "BPE":
        merges = [tuple(x.split(" ", 1)) if isinstance(x, str) else tuple(x) for x in m["merges"]]
        pre = m.get("continuing_subword_prefix") or ""
        voc = m["vocab"]
        joined = set()
        kept_merges = []
        for a, b in merges[:n]:
            r = a + (b[len(pre):] if pre and b.startswith(pre) else b)
            if a in voc and b in voc and r in voc:
                kept_merges.append((a, b))
                joined |= {a, b, r}
        base = {tok for tok in voc if len(tok) == 1 or re.fullmatch(r"<0x[0-9A-F]{2}>", tok)
                or (m.get("end_of_word_suffix") and tok == tok[:1] + m["end_of_word_suffix"])}
        keep = joined | base | specials | {m.get("unk_token")}
        new = _keep_renumbered(voc, lambda tok, i: tok in keep)
        strings = isinstance(m["merges"][0], str) if m["merges"] else False
        m["merges"] = [f"{a} {b}" if strings else [a, b] for a, b in kept_merges]
        m["vocab"] = new
    elif t == "Unigram":
        unk = m.get("unk_id")
        pieces = m["vocab"]
        idx = [i for i, (p, _) in enumerate(pieces) if i < n or i == unk or p in specials]
        m["vocab"] = [pieces[i] for i in idx]
        if unk is not None:
            m["unk_id"] = idx.index(unk)
        new = {p: k for k, (p, _) in enumerate(m["vocab"])}
    else:
        voc = m["vocab"]
        new = _keep_renumbered(voc, lambda tok, i: i < n or tok in specials or tok == m.get("unk_token"))
        m["vocab"] = new
    nxt = len(new)
    for a in obj.get("added_tokens") or []:
        if a["content"] in new:
            a["id"] = new[a["content"]]
        else:
            a["id"], nxt = nxt, nxt + 1
    ids = {a["content"]: a["id"] for a in obj.get("added_tokens") or []}
    ids = {**new, **ids}

    def fix(pp):
        if not isinstance(pp, dict):
            return
        for k in ("sep", "cls"):
            if isinstance(pp.get(k), list):
                pp[k][1] = ids.get(pp[k][0], 0)
        for v in (pp.get("special_tokens") or {}).values():
            v["ids"] = [ids.get(tok, 0) for tok in v["tokens"]]
        for sub in pp.get("processors") or []:
            fix(sub)

    fix(obj.get("post_processor"))
    return obj


def shrink_tekken(obj: dict, n: int = 300) -> dict:
    """A tekken file cut to its 256 byte ranks and the next `n`."""
    cfg = obj["config"]
    obj["vocab"] = obj["vocab"][:256 + n]
    cfg["num_vocab_tokens"] = len(obj["vocab"])
    cfg["default_vocab_size"] = int(cfg["default_num_special_tokens"]) + len(obj["vocab"])
    return obj


# ------------------------------------------------------------------------------------------ mutations
_HDR = struct.Struct("<8sIIIIQII16s32s40s")
_ENT = struct.Struct("<32s8sQQQ")
_DT = {"|u1": "B", "|i1": "b", "<u2": "H", "<i2": "h", "<u4": "I", "<i4": "i", "<u8": "Q", "<i8": "q"}


def _table(data: bytes) -> list[list]:
    nsec = _HDR.unpack_from(data, 0)[4]
    ents = []
    for i in range(nsec):
        name, dt, off, nb, cnt = _ENT.unpack_from(data, 128 + 64 * i)
        ents.append([name.rstrip(b"\0").decode(), dt.rstrip(b"\0").decode(), off, nb, cnt])
    return ents


def reseal(data: bytes) -> bytes:
    b = bytearray(data)
    f = list(_HDR.unpack_from(b, 0))
    f[6] = zlib.crc32(memoryview(b)[128:])
    f[7] = 0
    f[7] = zlib.crc32(_HDR.pack(*f))
    b[:128] = _HDR.pack(*f)
    return bytes(b)


def _interesting(rng: random.Random, fmt: str, cur: int, count: int, others: list[int]) -> int:
    bits = struct.calcsize(fmt) * 8
    signed = fmt.islower()
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    cands = [0, 1, 2, hi, hi - 1, lo, cur + 1, cur - 1, cur * 2, cur ^ (1 << rng.randrange(bits)), count, count - 1,
             count + 1, 1 << 31, (1 << 31) - 1, 0xFFFFFFFF, 0xFFFFFFFE, 10**8, 10**9, rng.randrange(lo, hi + 1),
             cur + (rng.randrange(-8, 9) << rng.randrange(0, 10)), cur + (rng.randrange(-8, 9) << rng.randrange(0, 10))]
    cands += others
    v = rng.choice(cands)
    return min(max(v, lo), hi)


def _mut_meta(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    from fstok import artifact as A

    art = A.parse_artifact(data)
    meta = json.loads(art.raw("meta"))
    holder, key = meta, None
    path = "meta"
    for _ in range(3):
        if isinstance(holder, dict) and holder:
            key = rng.choice(sorted(holder))
        elif isinstance(holder, list) and holder:
            key = rng.randrange(len(holder))
        else:
            break
        path += f".{key}"
        if isinstance(holder[key], (dict, list)) and holder[key] and rng.random() < 0.5:
            holder = holder[key]
            continue
        break
    if key is None:
        return data, "meta (empty)"
    odd = [None, -5, 0, 1, 10**9, 2**64, -1, "100", "", "x" * 40, [], {}, [1], {"a": 1}, True, 1.5, float("nan")]
    if isinstance(holder, dict) and rng.random() < 0.25:
        del holder[key]
        what = f"{path} deleted"
    else:
        v = rng.choice(odd)
        holder[key] = v
        what = f"{path} = {v!r}"
    secs = {n: art.array(n) for n in art.sections if n != "meta"}
    new = A.write_artifact(None, art.kind, meta, secs, art.unicode_version, art.source_hash)
    return new, what


def make_case(bases: dict[str, bytes], seed: int, i: int) -> tuple[str, str, str, bytes]:
    """(base, mutation, description, bytes) of case i."""
    rng = random.Random(f"{seed}:{i}")
    names = sorted(bases)
    base = rng.choices(names, weights=[BASES[b] for b in names])[0]
    kind = rng.choices(MUTATIONS, weights=WEIGHTS)[0]
    data = bases[base]
    ents = _table(data)
    if kind == "flip":
        b = bytearray(data)
        ks = []
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(b))
            b[k] ^= rng.randrange(1, 256)
            ks.append(k)
        return base, kind, f"bytes {ks}", bytes(b)
    if kind == "sflip":
        e = rng.choice([e for e in ents if e[3]])
        b = bytearray(data)
        ks = []
        for _ in range(rng.randint(1, 3)):
            k = e[2] + rng.randrange(e[3])
            b[k] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
            ks.append(k - e[2])
        return base, kind, f"{e[0]} bytes {ks}", reseal(b)
    if kind == "elem":
        cand = [e for e in ents if e[0] != "meta" and e[0].rfind("source") < 0 and e[4]] or ents
        e = rng.choice(cand)
        fmt = "<" + _DT[e[1]]
        size = struct.calcsize(fmt)
        n = e[4]
        r = rng.random()
        j = 0 if r < 0.15 else n - 1 if r < 0.3 else rng.randrange(n)
        cur = struct.unpack_from(fmt, data, e[2] + j * size)[0]
        others = [struct.unpack_from(fmt, data, e[2] + rng.randrange(n) * size)[0] for _ in range(3)]
        v = _interesting(rng, fmt, cur, n, others)
        b = bytearray(data)
        struct.pack_into(fmt, b, e[2] + j * size, v)
        return base, kind, f"{e[0]}[{j}] {cur} -> {v}", reseal(b)
    if kind == "meta":
        new, what = _mut_meta(rng, data)
        return base, kind, what, new
    if kind == "trunc":
        cut = rng.choice([rng.randrange(len(data)), rng.randrange(128 + 64 * len(ents)), len(data) - rng.randint(1, 64)])
        cut = max(0, cut)
        b = bytearray(data[:cut])
        if len(b) >= 128 and rng.random() < 0.5:
            f = list(_HDR.unpack_from(b, 0))
            f[5] = len(b)
            b[:128] = _HDR.pack(*f)
            return base, kind, f"cut at {cut}, size patched", reseal(b)
        return base, kind, f"cut at {cut}", bytes(b)
    # header / section table
    b = bytearray(data)
    f = list(_HDR.unpack_from(b, 0))
    if rng.random() < 0.35:
        field = rng.choice([1, 2, 2, 2, 3, 4, 5])
        old = f[field]
        f[field] = rng.choice([0, 1, 2, 3, 4, 99, old + 1, old - 1 if old else 0, 2**32 - 1]) if field != 5 else \
            rng.choice([0, old + 64, old - 1, 2**63])
        b[:128] = _HDR.pack(*f)
        return base, kind, f"header field {field} {old} -> {f[field]}", reseal(b)
    k = rng.randrange(len(ents))
    e = list(ents[k])
    field = rng.choice(["name", "dtype", "offset", "nbytes", "count", "swap"])
    if field == "name":
        e[0] = rng.choice([x[0] for x in ents] + ["", "x", "meta", e[0] + "x", e[0][:-1]])
    elif field == "dtype":
        e[1] = rng.choice(list(_DT) + ["<f8", "xx"])
    elif field == "offset":
        e[2] = max(0, e[2] + rng.choice([-64, 64, -128, 128, 1, 2**40]))
    elif field == "nbytes":
        e[3] = max(0, e[3] + rng.choice([-1, 1, -64, 64, -e[3], 2**40]))
    elif field == "count":
        e[4] = max(0, e[4] + rng.choice([-1, 1, 2**40, -e[4]]))
    else:
        o = ents[rng.randrange(len(ents))]
        e[2], e[3], e[4], e[1] = o[2], o[3], o[4], o[1]
    try:
        struct.pack_into("<32s8sQQQ", b, 128 + 64 * k, e[0].encode(), e[1].encode(), e[2], e[3], e[4])
    except struct.error:
        pass
    return base, kind, f"section {ents[k][0]} {field} -> {e}", reseal(b)


# ---------------------------------------------------------------------------------------------- worker
def _use(tok) -> None:
    from fstok.bpe import BPETokenizer
    from fstok.pretokenize import CompiledPattern
    from fstok.wordpiece import WordPieceTokenizer

    if isinstance(tok, CompiledPattern):
        for t in TEXTS:
            tok.spans(t)
            tok.byte_spans(t)
            tok.count(t)
        return
    if isinstance(tok, BPETokenizer):
        for t in TEXTS:
            ids = tok.encode(t, allowed_special="all")
            tok.decode(ids)
            tok.encode_ordinary(t)
            tok.count(t)
            tok.encode_with_offsets(t)
            if tok.post_processor is not None:  # a tokenizer.json's: its template and special tokens
                tok.encode(t, add_special_tokens=True, allowed_special="all")
        tok.encode_batch(TEXTS * 3, num_threads=2, allowed_special="all")
        tok.encode(" ".join(TEXTS) * 20, num_threads=2, allowed_special="all")
        return
    if isinstance(tok, WordPieceTokenizer):
        for t in TEXTS:
            ids = tok.encode(t)
            tok.decode(ids)
            tok.encode_with_offsets(t)
        tok.encode_batch(TEXTS * 3, num_threads=2)
        tok.encode(" ".join(TEXTS) * 20, num_threads=2)
        return
    for t in TEXTS:  # any other kind (SentencePiece, tokenizer.json pipelines, tekken): the common API
        for special in (False, True):
            ids = tok.encode(t, add_special_tokens=special)
            tok.decode(ids)
            tok.decode(ids, skip_special_tokens=not special)
            if hasattr(tok, "encode_with_offsets"):
                tok.encode_with_offsets(t, add_special_tokens=special)
    if hasattr(tok, "encode_batch"):
        tok.encode_batch(TEXTS * 3)
        tok.encode_batch(TEXTS * 3, add_special_tokens=True)


def _names_section(msg: str, data: bytes, base: bytes) -> bool:
    low = msg.lower()
    if any(w in low for w in HEADER_WORDS):
        return True
    names = set()
    for d in (data, base):
        try:
            names.update(e[0] for e in _table(d) if e[0])
        except Exception:
            pass
    return any(n in msg for n in names)


def worker(paths: dict[str, str], seed: int) -> None:
    import fstok

    bases = {k: open(p, "rb").read() for k, p in paths.items()}
    out = sys.stdout
    for line in sys.stdin:
        i = int(line)
        base, kind, desc, data = make_case(bases, seed, i)
        res = {"i": i, "base": base, "mut": kind, "desc": desc}
        try:
            tok = fstok.loads(data)
        except fstok.ArtifactError as e:
            res["outcome"] = "rejected" if _names_section(str(e), data, bases[base]) else "unnamed"
            res["msg"] = str(e)[:300]
        except Exception as e:  # noqa: BLE001 - any other type is the finding
            res["outcome"] = "bad-exception"
            res["msg"] = f"{type(e).__name__}: {str(e)[:300]}"
        else:
            try:
                _use(tok)
                res["outcome"] = "loaded"
            except fstok.ArtifactError as e:
                # a section read on first use (a pipeline's tokenizer.json) may fail then, naming it
                res["outcome"] = "rejected-late" if _names_section(str(e), data, bases[base]) else "unnamed"
                res["msg"] = str(e)[:300]
            except Exception as e:  # noqa: BLE001
                res["outcome"] = "use-error"
                res["msg"] = f"{type(e).__name__}: {str(e)[:300]}"
        out.write(json.dumps(res) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------------- parent
class _Proc:
    def __init__(self, paths: dict[str, str], seed: int):
        env = dict(os.environ, PYTHONFAULTHANDLER="0")
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(paths), str(seed)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                  text=True, bufsize=1)
        self.case: int | None = None
        self.t0 = 0.0

    def send(self, i: int) -> None:
        self.case, self.t0 = i, time.monotonic()
        self.p.stdin.write(f"{i}\n")
        self.p.stdin.flush()

    def kill(self) -> None:
        try:
            self.p.kill()
        except OSError:
            pass
        self.p.wait()


def run(n: int = 10000, seed: int = 0, workers: int = 2, timeout: float = 10.0, start: int = 0,
        base_dir: str | None = None, progress: bool = False, only: list | None = None) -> dict:
    """Run cases start..start+n (on the bases named in `only`, default every base); returns {"counts": {...},
    "failures": [...], "seconds": s}."""
    if base_dir is None:  # one folder per build of fstok: bases from an older layout would all be rejected
        from fstok._compile_cache import _code_fingerprint

        base_dir = os.path.join(tempfile.gettempdir(), f"fstok-fuzz-bases-{os.getuid()}-{_code_fingerprint()[:12]}")
    paths = build_bases(base_dir)
    if only:
        paths = {k: v for k, v in paths.items() if k in only}
    todo = list(range(start, start + n))[::-1]
    procs = [_Proc(paths, seed) for _ in range(max(1, workers))]
    counts: dict[str, int] = {}
    failures: list[dict] = []
    t_start = time.monotonic()
    done = 0
    bases = None

    def fail(i: int, outcome: str, msg: str) -> None:
        nonlocal bases
        if bases is None:
            bases = {k: open(p, "rb").read() for k, p in paths.items()}
        base, kind, desc, _ = make_case(bases, seed, i)
        failures.append({"i": i, "base": base, "mut": kind, "desc": desc, "outcome": outcome, "msg": msg})
        counts[outcome] = counts.get(outcome, 0) + 1

    for pr in procs:
        if todo:
            pr.send(todo.pop())
    while any(pr.case is not None for pr in procs):
        live = {pr.p.stdout.fileno(): pr for pr in procs if pr.case is not None}
        ready, _, _ = select.select(list(live), [], [], 0.5)
        now = time.monotonic()
        for fd, pr in list(live.items()):
            restart = False
            if fd in ready:
                line = pr.p.stdout.readline()
                if not line:  # the worker died on this case
                    rc = pr.p.wait()
                    fail(pr.case, "crash", f"worker exit status {rc}")
                    restart = True
                else:
                    r = json.loads(line)
                    counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
                    if r["outcome"] not in OK_OUTCOMES:
                        failures.append(r)
            elif now - pr.t0 > timeout:
                fail(pr.case, "hang", f"no answer in {timeout} s")
                pr.kill()
                restart = True
            else:
                continue
            done += 1
            if progress and done % 500 == 0:
                print(f"{done}/{n} {counts} {time.monotonic() - t_start:.0f}s", file=sys.stderr, flush=True)
            if restart:
                pr.kill()
                idx = procs.index(pr)
                procs[idx] = pr = _Proc(paths, seed)
            pr.case = None
            if todo:
                pr.send(todo.pop())
    for pr in procs:
        pr.p.stdin.close()
        pr.kill()
    return {"counts": counts, "failures": failures, "seconds": round(time.monotonic() - t_start, 1), "n": n,
            "seed": seed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--dir", default=None, help="where the base artifacts are built")
    ap.add_argument("--json", default=None, help="write the summary and every failure here")
    ap.add_argument("--only", nargs="*", default=None, help="only these bases (e.g. json_minilm_ws json_e5_digits)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(json.loads(a.worker[0]), int(a.worker[1]))
        return 0
    res = run(a.n, a.seed, a.workers, a.timeout, a.start, a.dir, progress=True, only=a.only)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    bad = sum(v for k, v in res["counts"].items() if k not in OK_OUTCOMES)
    print(json.dumps({k: v for k, v in res.items() if k != "failures"}))
    for r in res["failures"][:40]:
        print(f"  case {r['i']} {r['base']} {r['mut']} {r['desc'][:80]}: {r['outcome']} {r.get('msg', '')[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
