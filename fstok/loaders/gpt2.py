"""Reader for the original GPT-2 files: `vocab.json` (= OpenAI `encoder.json`) + `merges.txt` (= `vocab.bpe`)."""
from __future__ import annotations

import json
import os

from .bpe_source import R50K_PATTERN, BPESource, PreTokStage, bytelevel_to_bytes


def load_gpt2(vocab_json_path: str | os.PathLike, merges_path: str | os.PathLike | None = None, name: str = "gpt2") -> BPESource:
    vp = os.fspath(vocab_json_path)
    mp = os.fspath(merges_path) if merges_path is not None else os.path.join(os.path.dirname(vp), "merges.txt")
    if not os.path.exists(mp):
        alt = os.path.join(os.path.dirname(vp), "vocab.bpe")
        if merges_path is None and os.path.exists(alt):
            mp = alt
        else:
            raise FileNotFoundError(f"{vp}: GPT-2 vocab.json needs merges.txt next to it (looked for {mp})")
    with open(vp, "rb") as f:
        try:
            vocab = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{vp}: not valid JSON ({e})") from None
    if not isinstance(vocab, dict):
        raise ValueError(f"{vp}: expected a JSON object token -> id")
    tokens: dict[bytes, int] = {}
    specials: dict[str, int] = {}
    str_to_bytes: dict[str, bytes] = {}
    for s, i in vocab.items():
        if not isinstance(i, int) or i < 0:
            raise ValueError(f"{vp}: entry {s!r} has invalid id {i!r}")
        b = bytelevel_to_bytes(s)
        if b is None:
            specials[s] = i  # <|endoftext|>
            continue
        tokens[b] = i
        str_to_bytes[s] = b
    merges: list[tuple[bytes, bytes]] = []
    with open(mp, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line or line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{mp}:{lineno}: expected 'a b', got {line[:80]!r}")
        a, b = parts
        if a not in str_to_bytes or b not in str_to_bytes:
            raise ValueError(f"{mp}:{lineno}: merge {line!r} uses a token missing from {vp}")
        if str_to_bytes[a] + str_to_bytes[b] not in tokens:
            raise ValueError(f"{mp}:{lineno}: merge {line!r}: the merged token is missing from {vp}")
        merges.append((str_to_bytes[a], str_to_bytes[b]))
    if not merges:
        raise ValueError(f"{mp}: no merges (an empty merges.txt): a GPT-2 BPE needs the merge list that goes with {vp}")
    # vocab.json also lists <|endoftext|>, which is ASCII (so byte-level mappable) but is neither a
    # single byte nor the result of a merge: such entries are special tokens, as in tiktoken's gpt2
    produced = {a + b for a, b in merges}
    for b, i in list(tokens.items()):
        if len(b) > 1 and b not in produced:
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{vp}: token {b!r} (id {i}) is neither one byte nor made by a merge of {mp}, and is "
                                 "not text a special token could be") from None
            del tokens[b]
            specials[b.decode("utf-8", "surrogateescape")] = i
    src = BPESource(
        name=name,
        tokens=tokens,
        stages=[PreTokStage(R50K_PATTERN, keep_gaps=False)],
        special_tokens=specials,
        merges=merges,
        source_files=[vp, mp],
        semantics="tiktoken",
    )
    src.check()
    return src
