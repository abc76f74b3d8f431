"""Reader for tiktoken rank files (`*.tiktoken`, Llama-3/4 `tokenizer.model`): `base64(token) SP rank` lines."""
from __future__ import annotations

import base64
import binascii
import os

from .bpe_source import OPENAI_ENCODINGS, BPESource, PreTokStage


def read_tiktoken_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    p = os.fspath(path)
    with open(p, "rb") as f:
        data = f.read()
    what = "taken for a tiktoken rank file ('base64-token rank' lines)"
    if data.startswith(b"FSTOKART"):
        raise ValueError(f"{p}: a compiled fstok artifact, not a source to compile; load it with fstok.load()")
    if data[:1] == b"\n" and any(c < 9 for c in data[:64]):  # protobuf: field 1 (pieces), binary lengths
        raise ValueError(f"{p}: {what}, but it is a SentencePiece model (protobuf), which fstok does not compile; "
                         "only tiktoken-format tokenizer.model files (Llama 3/4) are")
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{p}:{lineno}: {what}, but the line is {line[:80]!r}")
        try:
            tok = base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{p}:{lineno}: token {parts[0][:40]!r} is not valid base64") from None
        try:
            rank = int(parts[1])
        except ValueError:
            raise ValueError(f"{p}:{lineno}: rank {parts[1][:20]!r} is not an integer") from None
        if not tok:
            raise ValueError(f"{p}:{lineno}: empty token")
        if tok in ranks:
            raise ValueError(f"{p}:{lineno}: token {tok!r} appears twice")
        ranks[tok] = rank
    if not ranks:
        raise ValueError(f"{p}: no tokens (is this a tiktoken rank file?)")
    return ranks


def _resolve_named_pattern(pattern: str) -> str:
    """pattern="qwen2" / "cl100k_base" / ... means that named pre-tokenizer, not the literal regex
    `qwen2` (which would match almost nothing and silently drop the rest of every text)."""
    from ..pretokenize import NAMED_PATTERNS

    spec = NAMED_PATTERNS.get(pattern)
    if spec is None:
        return pattern
    if spec.mode != "find" or len(spec.levels) != 1 or spec.levels[0][1] != "rust-regex":
        raise ValueError(f"pattern {pattern!r} names an HF pre-tokenizer; a .tiktoken file needs a "
                         f"tiktoken-style pattern (e.g. {', '.join(k for k, v in NAMED_PATTERNS.items() if v.mode == 'find')})")
    return spec.levels[0][0]


def load_tiktoken(
    path: str | os.PathLike,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    name: str | None = None,
) -> BPESource:
    """A `.tiktoken` file. `pattern` is required unless `name` is one of tiktoken's OpenAI encodings
    (then its pattern and special tokens are the defaults)."""
    p = os.fspath(path)
    ranks = read_tiktoken_ranks(p)  # first: a file that is not a rank file is reported as such
    if name is None:
        base = os.path.basename(p)
        name = base[: -len(".tiktoken")] if base.endswith(".tiktoken") else os.path.splitext(base)[0]
    if name in OPENAI_ENCODINGS:
        dpat, dspec = OPENAI_ENCODINGS[name]
        pattern = dpat if pattern is None else pattern
        special_tokens = dict(dspec) if special_tokens is None else special_tokens
    if pattern is None:
        raise ValueError(
            f"{p}: a .tiktoken file has no split pattern; pass pattern=... (the pre-tokenizer regex), "
            f"or name= one of {', '.join(OPENAI_ENCODINGS)}"
        )
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    pattern = _resolve_named_pattern(pattern)
    if special_tokens is not None and not (isinstance(special_tokens, dict) and all(
            isinstance(k, str) and type(v) is int for k, v in special_tokens.items())):
        raise TypeError(f"special_tokens must be a dict {{token str: id int}}, e.g. {{'<|endoftext|>': 50256}}; "
                        f"got {special_tokens!r}"[:300])
    special_tokens = dict(special_tokens or {})
    src = BPESource(
        name=name,
        tokens=ranks,
        stages=[PreTokStage(pattern, keep_gaps=False)],
        special_tokens=special_tokens,
        merges=None,
        source_files=[p],
        semantics="tiktoken",
    )
    src.check()
    return src
