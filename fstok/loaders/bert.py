"""Readers for WordPiece sources: BERT vocab.txt and HF tokenizer.json with a WordPiece model.

Both produce a `WordPieceSource` holding the vocabulary and the options of HF's
BertNormalizer / BertPreTokenizer / WordPiece / BertProcessing, with HF's defaults.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Optional

DEFAULT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class WordPieceSource:
    tokens: list[str]  # id -> token (a duplicated line keeps its id but the later id wins in token_to_id)
    token_to_id: dict[str, int]
    lowercase: bool = True
    strip_accents: Optional[bool] = None  # None: follow lowercase (HF BertNormalizer)
    handle_chinese_chars: bool = True
    clean_text: bool = True
    unk_token: str = "[UNK]"
    continuing_subword_prefix: str = "##"
    max_input_chars_per_word: int = 100
    special_tokens: list[str] = field(default_factory=list)
    cls_token: Optional[str] = "[CLS]"
    sep_token: Optional[str] = "[SEP]"
    decoder_prefix: str = "##"
    decoder_cleanup: bool = True
    source_bytes: bytes = b""
    source_name: str = ""

    @property
    def strip(self) -> bool:
        return self.lowercase if self.strip_accents is None else bool(self.strip_accents)


def _rust_trim_end(s: str) -> str:
    # Rust's str::trim_end strips Unicode White_Space; Python's rstrip() also strips a few
    # separators (U+001C..U+001F) that are not White_Space, so use an explicit set.
    ws = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
    return s.rstrip(ws)


AS_VOCAB = "taken for a BERT vocab.txt (one token per line) because it is not a .json, .tiktoken or .model file"


def read_vocab_txt(path: str, **options) -> WordPieceSource:
    if not os.path.exists(path):
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not a regular file (a directory, device or pipe), so not a tokenizer source")
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(b"FSTOKART"):
        raise ValueError(f"{path}: a compiled fstok artifact, not a source to compile; load it with fstok.load()")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: {AS_VOCAB}, but it is not valid UTF-8 text (byte {e.start})") from None
    if text.lstrip().startswith("{"):
        raise ValueError(f"{path}: looks like JSON, not a vocab.txt (one token per line); pass a tokenizer.json or vocab.txt")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens = [_rust_trim_end(l) for l in lines]
    if not tokens:
        raise ValueError(f"{path}: empty vocabulary")
    t2i: dict[str, int] = {}
    for i, t in enumerate(tokens):
        t2i[t] = i
    known = {
        "lowercase", "strip_accents", "handle_chinese_chars", "clean_text", "unk_token",
        "continuing_subword_prefix", "max_input_chars_per_word", "special_tokens",
        "cls_token", "sep_token", "wordpieces_prefix",
    }
    bad = set(options) - known
    if bad:
        raise TypeError(f"unknown WordPiece option(s): {', '.join(sorted(bad))}")
    if "wordpieces_prefix" in options:
        options["continuing_subword_prefix"] = options.pop("wordpieces_prefix")
    src = WordPieceSource(tokens=tokens, token_to_id=t2i, source_bytes=raw, source_name=os.path.basename(path))
    for k, v in options.items():
        setattr(src, k, v)
    try:
        _check_types(src)
    except ValueError as e:
        if "unk token" in str(e):
            raise ValueError(f"{path}: {AS_VOCAB}, but {e}") from None
        raise
    if src.special_tokens == []:
        # BertWordPieceTokenizer registers these as special (added) tokens when present
        src.special_tokens = [t for t in DEFAULT_SPECIALS if t in t2i]
    src.decoder_prefix = src.continuing_subword_prefix
    for name in ("cls_token", "sep_token"):
        tok = getattr(src, name)
        if tok is not None and tok not in t2i:
            setattr(src, name, None)
    return src


def _check_types(src: WordPieceSource) -> None:
    for name in ("lowercase", "handle_chinese_chars", "clean_text"):
        if not isinstance(getattr(src, name), bool):
            raise TypeError(f"{name} must be a bool, got {type(getattr(src, name)).__name__}")
    if src.strip_accents is not None and not isinstance(src.strip_accents, bool):
        raise TypeError("strip_accents must be None or a bool")
    for name in ("unk_token", "continuing_subword_prefix"):
        if not isinstance(getattr(src, name), str):
            raise TypeError(f"{name} must be a str")
    m = src.max_input_chars_per_word
    if not isinstance(m, int) or isinstance(m, bool):
        raise TypeError(f"max_input_chars_per_word must be an int, got {m!r}")
    if m < 1 or m > 0xFFFFFFFE:
        raise ValueError(f"max_input_chars_per_word must be a positive int, got {m!r}")
    if src.unk_token not in src.token_to_id:
        raise ValueError(f"the unk token {src.unk_token!r} is not in the vocabulary")


def read_tokenizer_json(path: str) -> WordPieceSource:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    model = obj.get("model") if isinstance(obj, dict) else None
    if not isinstance(model, dict):
        raise ValueError(f"{path}: not a tokenizer.json (no 'model' object)")
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise ValueError(f"{path}: {key} must be an object with a \"type\", got {obj[key]!r}"[:300])
    if not isinstance(obj.get("added_tokens") or [], list) or not all(isinstance(a, dict) for a in obj.get("added_tokens") or []):
        raise ValueError(f"{path}: added_tokens must be a list of objects")
    if model.get("type") != "WordPiece":
        raise ValueError(f"{path}: model type {model.get('type')!r} is not WordPiece")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{path}: WordPiece model has no vocab")
    from .bpe_source import check_id_bound

    check_id_bound(path, list(vocab.items()), len(vocab))  # before the id-indexed list is allocated
    n = max(vocab.values()) + 1
    tokens = [""] * n
    for t, i in vocab.items():
        tokens[i] = t
    src = WordPieceSource(tokens=tokens, token_to_id=dict(vocab), source_bytes=raw, source_name=os.path.basename(path))
    src.unk_token = model.get("unk_token", "[UNK]")
    src.continuing_subword_prefix = model.get("continuing_subword_prefix", "##")
    src.max_input_chars_per_word = model.get("max_input_chars_per_word", 100)  # an int, as HF requires
    norm = obj.get("normalizer")
    if norm is None:
        src.lowercase, src.strip_accents, src.handle_chinese_chars, src.clean_text = False, False, False, False
    elif norm.get("type") == "BertNormalizer":
        src.clean_text = bool(norm.get("clean_text", True))
        src.handle_chinese_chars = bool(norm.get("handle_chinese_chars", True))
        src.lowercase = bool(norm.get("lowercase", True))
        sa = norm.get("strip_accents")
        src.strip_accents = None if sa is None else bool(sa)
    else:
        raise ValueError(f"{path}: unsupported normalizer {norm.get('type')!r} (fstok supports BertNormalizer or none)")
    pre = obj.get("pre_tokenizer")
    if pre is None or pre.get("type") != "BertPreTokenizer":
        kind = None if pre is None else pre.get("type")
        raise ValueError(f"{path}: unsupported pre_tokenizer {kind!r} (fstok supports BertPreTokenizer)")
    post = obj.get("post_processor")
    src.cls_token = src.sep_token = None
    if post is not None:
        if post.get("type") == "BertProcessing":
            src.cls_token, src.sep_token = post["cls"][0], post["sep"][0]
        elif post.get("type") == "TemplateProcessing":
            single = post.get("single", [])
            pieces = [p.get("SpecialToken", {}).get("id") for p in single if "SpecialToken" in p]
            seq_pos = [i for i, p in enumerate(single) if "Sequence" in p]
            if len(pieces) != 2 or seq_pos != [1]:
                raise ValueError(f"{path}: unsupported TemplateProcessing (fstok supports '$CLS $A $SEP')")
            src.cls_token, src.sep_token = pieces
        else:
            raise ValueError(f"{path}: unsupported post_processor {post.get('type')!r}")
        # the compiled tokenizer adds the vocabulary's ids of the two tokens: a processor that names other ids
        # (HF adds the processor's own) is left to the stage-by-stage pipeline
        if post.get("type") == "BertProcessing":
            given = {post["cls"][0]: [post["cls"][1]], post["sep"][0]: [post["sep"][1]]}
        else:
            st = post.get("special_tokens") or {}
            given = {k: (st.get(k) or {}).get("ids") if (st.get(k) or {}).get("tokens") == [k] else None
                     for k in (src.cls_token, src.sep_token)}
        for tok, ids in given.items():
            if ids != [src.token_to_id.get(tok)]:
                raise ValueError(f"{path}: post_processor gives {tok!r} the ids {ids}, not its vocabulary id "
                                 f"{src.token_to_id.get(tok)} (fstok.compile's WordPiece tokenizer adds the vocabulary's)")
    added = obj.get("added_tokens") or []
    specials = []
    for a in added:
        c = a.get("content")
        if c not in src.token_to_id or src.token_to_id[c] != a.get("id"):
            raise ValueError(f"{path}: added token {c!r} is not in the WordPiece vocab with the same id, which "
                             "fstok.compile's WordPiece tokenizer does not support (fstok.Tokenizer.from_file, the "
                             "HF face, matches it as HF does)")
        # the compiled tokenizer matches a special token's content in the raw text, as HF matches a special,
        # unnormalized token without the matching flags; anything else HF matches differently
        flags = [f"{k}=true" for k in ("lstrip", "rstrip", "single_word") if a.get(k)]
        if a.get("normalized") and obj.get("normalizer") is not None:
            flags.append("normalized=true")
        if not a.get("special"):
            flags.append("special=false")
        if flags:
            raise ValueError(f"{path}: added token {c!r} with {', '.join(flags)} is not supported by fstok.compile's "
                             "WordPiece tokenizer (fstok.Tokenizer.from_file, the HF face, matches it as HF does)")
        specials.append(c)
    src.special_tokens = specials
    dec = obj.get("decoder")
    if dec is not None and dec.get("type") == "WordPiece":
        src.decoder_prefix = dec.get("prefix", "##")
        src.decoder_cleanup = bool(dec.get("cleanup", True))
    else:
        src.decoder_prefix = src.continuing_subword_prefix
    try:
        _check_types(src)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{path}: {e}") from None
    return src
