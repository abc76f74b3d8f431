"""Writers for trained vocabularies: tiktoken files and HF tokenizer.json (byte-level BPE).

tiktoken: one line per mergeable token, ``base64(token_bytes) rank``, ranks 0..255 are the single
bytes in byte order, then the merges in training order.  Special tokens are not part of the format
(as for OpenAI's files); their ids follow the last merge.

tokenizer.json: a byte-level BPE that HF `tokenizers` loads and that encodes exactly like the
trained tokenizer:
    pre_tokenizer  Sequence[Split(regex, Isolated), ByteLevel(add_prefix_space=False, use_regex=False)]
    model          BPE, vocab in HF's byte-to-unicode alphabet, merges as [left, right] pairs in
                   rank order, ignore_merges=True (a pre-token that is a whole token maps to it
                   directly, as in tiktoken)
    decoder        ByteLevel
    added_tokens   the special tokens (special=True, normalized=False)
"""
from __future__ import annotations

import base64
import json
import os
import re
from typing import Mapping, Sequence


from ..bytelevel_table import bytes_to_unicode  # noqa: E402  (GPT-2 byte <-> char table)

_B2U = bytes_to_unicode()


def byte_level(b: bytes) -> str:
    return "".join(_B2U[x] for x in b)


def tiktoken_text(vocab: Sequence[bytes]) -> str:
    """The .tiktoken file contents for token id -> bytes (ids are the ranks)."""
    return "".join(f"{base64.b64encode(tok).decode('ascii')} {rank}\n" for rank, tok in enumerate(vocab))


def write_tiktoken(path: str | os.PathLike, vocab: Sequence[bytes]) -> None:
    _atomic_write(path, tiktoken_text(vocab).encode("ascii"))


_POSSESSIVE_INTERVAL = re.compile(r"(\\[pP]\{[^}]*\}|\\[pP][A-Za-z]|\[(?:\\.|[^\]\\])*\]|\\.|[^\\()\[\]{}|])\{(\d+(?:,\d*)?)\}\+")


def hf_pattern(pattern: str) -> str:
    """The pre-tokenization regex rewritten for HF tokenizers' Oniguruma engine.

    tiktoken's patterns use possessive counted repetition (``\\p{N}{1,3}+``).  In Oniguruma's Ruby
    syntax ``X{n,m}+`` is *not* possessive but a repeated interval (``(?:X{n,m})+``, so all digits
    would form one pre-token); the exact equivalent is the atomic group ``(?>X{n,m})``.
    """
    out = _POSSESSIVE_INTERVAL.sub(lambda m: f"(?>{m.group(1)}{{{m.group(2)}}})", pattern)
    if re.search(r"\)\{\d+(?:,\d*)?\}\+", out):
        raise ValueError("cannot translate a possessive counted repetition of a group for HF tokenizers")
    return _end_of_text(out)


def _end_of_text(pattern: str) -> str:
    """``$`` outside a character class rewritten as ``\\z``.

    In tiktoken's (Rust `regex`, not multi-line) syntax ``$`` matches only at the end of the text; in
    Oniguruma's Ruby syntax it also matches before every newline.  ``\\z`` means the end of the text in
    both, so the exported file keeps the trained tokenizer's pre-tokenization on text with newlines."""
    out, i, depth = [], 0, 0  # depth: nesting of character classes ([a[b]] nests in Rust's syntax)
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a ']' first in a class is a literal
                out.append("]")
                i += 1
            depth += 1
            continue
        if c == "]" and depth:
            depth -= 1
        elif c == "$" and not depth:
            c = "\\z"
        out.append(c)
        i += 1
    return "".join(out)


def tokenizer_json_obj(
    vocab: Sequence[bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Mapping[str, int],
    pattern: str,
) -> dict:
    model_vocab = {byte_level(tok): i for i, tok in enumerate(vocab)}
    if len(model_vocab) != len(vocab):
        raise ValueError("vocabulary has duplicate tokens")
    added = [
        {
            "id": i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": hf_pattern(pattern)}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": model_vocab,
            "merges": [[byte_level(a), byte_level(b)] for a, b in merges],
        },
    }


def write_tokenizer_json(path, vocab, merges, special_tokens, pattern) -> None:
    obj = tokenizer_json_obj(vocab, merges, special_tokens, pattern)
    _atomic_write(path, json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"))


def _atomic_write(path, data: bytes) -> None:
    p = os.fspath(path)
    tmp = f"{p}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, p)
