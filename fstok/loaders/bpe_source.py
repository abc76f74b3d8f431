"""The common in-memory form of a byte-level BPE source, whatever file it was read from.

Two merge semantics exist and both are kept exactly:

* ``merges is None`` — tiktoken ("rank") semantics: two adjacent parts merge when their
  concatenation is a token, with priority = that token's rank (= its id), and a whole pre-token
  that is a token is emitted as that token directly (tiktoken's `encoder.get(piece)` fast path).
* ``merges`` given — HF / GPT-2 semantics: only the listed pairs merge, priority = the pair's index
  (for a pair listed twice the last index wins, as in HF's merge map), result = vocab[a + b]; with
  ``ignore_merges`` a whole pre-token found in the vocabulary is emitted directly (Llama-3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# tiktoken's split patterns (tiktoken_ext/openai_public.py) and the GPT-2 one HF's ByteLevel uses.
# tiktoken's patterns: one definition, in fstok.pretokenize (the regex compiler's home)
from ..pretokenize import CL100K_PAT as CL100K_PATTERN  # noqa: E402
from ..pretokenize import O200K_PAT as O200K_PATTERN  # noqa: E402
from ..pretokenize import R50K_PAT as R50K_PATTERN  # noqa: E402

from ..pretokenize import HF_BYTELEVEL_PAT as GPT2_HF_PATTERN  # noqa: E402  (HF ByteLevel's split regex)

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# name -> (pattern, special tokens) exactly as tiktoken defines them
OPENAI_ENCODINGS: dict[str, tuple[str, dict[str, int]]] = {
    "r50k_base": (R50K_PATTERN, {ENDOFTEXT: 50256}),
    "p50k_base": (R50K_PATTERN, {ENDOFTEXT: 50256}),
    "p50k_edit": (R50K_PATTERN, {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283}),
    "cl100k_base": (
        CL100K_PATTERN,
        {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
    ),
    "o200k_base": (O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}),
    # gpt2: r50k_base's ranks (tiktoken reads them from GPT-2's vocab.bpe / encoder.json), pattern and specials
    "gpt2": (R50K_PATTERN, {ENDOFTEXT: 50256}),
    # o200k_harmony: o200k_base's ranks and pattern with the harmony chat format's special tokens
    "o200k_harmony": (
        O200K_PATTERN,
        {
            ENDOFTEXT: 199999, ENDOFPROMPT: 200018, "<|startoftext|>": 199998,
            "<|reserved_200000|>": 200000, "<|reserved_200001|>": 200001, "<|return|>": 200002,
            "<|constrain|>": 200003, "<|reserved_200004|>": 200004, "<|channel|>": 200005, "<|start|>": 200006,
            "<|end|>": 200007, "<|message|>": 200008, "<|reserved_200009|>": 200009, "<|reserved_200010|>": 200010,
            "<|reserved_200011|>": 200011, "<|call|>": 200012,
            **{f"<|reserved_{i}|>": i for i in range(200013, 201088)},
        },
    ),
}


from ..bytelevel_table import BYTE_TO_CHAR, CHAR_TO_BYTE, bytes_to_unicode  # noqa: E402,F401  (re-exported)


# str.translate to Latin-1 and one encode instead of a generator per entry (vocabularies have 10^5 entries):
# table characters map to the Latin-1 character of their byte; Latin-1 characters outside the table map to
# U+FFFF so that the encode fails (characters above U+00FF that are not in the table fail it as they are)
_TO_LATIN1 = {ord(c): chr(b) for c, b in CHAR_TO_BYTE.items()}
_TO_LATIN1.update({cp: "\uffff" for cp in range(256) if chr(cp) not in CHAR_TO_BYTE})


def bytelevel_to_bytes(s: str) -> bytes | None:
    """Map a byte-level vocabulary string back to bytes; None if it has a character outside the table."""
    try:
        return s.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return None


#: ids may leave gaps (reserved ranges), but the tables are indexed by id: an id this far past the number of
#: entries would allocate memory for nothing, so it is refused before anything is allocated
ID_GAP_ALLOWANCE = 1 << 20


def check_id_bound(where: str, items: list, n_entries: int) -> None:
    """Refuse a non-int / negative id, or an id beyond 2 * entries + 2^20, naming the token."""
    limit = 2 * n_entries + ID_GAP_ALLOWANCE
    for tok, i in items:
        if type(i) is not int:
            raise ValueError(f"{where}: token {tok!r} has id {i!r}, which is not an integer"[:300])
        if i < 0 or i > limit:
            raise ValueError(f"{where}: token {tok!r} has id {i}, outside [0, {limit}]: the file has {n_entries} "
                             f"tokens, and ids more than {ID_GAP_ALLOWANCE} past twice that many are refused "
                             "(they would size the id-indexed tables)"[:400])


@dataclass
class PreTokStage:
    """One regex split stage. keep_gaps=False: tiktoken find_iter (text between matches is dropped);
    keep_gaps=True: HF Split(behavior=Isolated) (text between matches becomes pieces too)."""

    pattern: str
    keep_gaps: bool
    dialect: str = "rust-regex"  # the regex engine the pattern was written for: "rust-regex" (tiktoken) or "oniguruma" (HF)

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "keep_gaps": self.keep_gaps, "dialect": self.dialect}


@dataclass
class AddedToken:
    content: str
    id: int
    special: bool  # True: controlled by allowed_special/disallowed_special; False: always split out (HF)
    normalized: bool = False


@dataclass
class BPESource:
    name: str
    tokens: dict[bytes, int]  # mergeable tokens: bytes -> id
    stages: list[PreTokStage]
    special_tokens: dict[str, int] = field(default_factory=dict)
    merges: list[tuple[bytes, bytes]] | None = None
    ignore_merges: bool = False
    added_tokens: list[AddedToken] = field(default_factory=list)  # HF non-special added tokens
    normalizer: str | None = None  # None or "NFKC"
    add_prefix_space: bool = False
    extra_decode: dict[int, bytes] = field(default_factory=dict)  # ids decodable but not BPE-reachable
    explicit_n_vocab: int | None = None
    source_files: list[str] = field(default_factory=list)
    semantics: str = "tiktoken"  # "tiktoken" or "hf": how special/added tokens are matched
    post_processor: Any = None  # a tokenizer.json's post_processor object (what add_special_tokens=True applies)

    def check(self) -> None:
        where = ", ".join(self.source_files) or self.name
        if not self.tokens:
            raise ValueError(f"{where}: the vocabulary is empty")
        n_entries = len(self.tokens) + len(self.special_tokens) + len(self.added_tokens) + len(self.extra_decode)
        check_id_bound(where, [(b, i) for b, i in self.tokens.items()] + list(self.special_tokens.items())
                       + [(a.content, a.id) for a in self.added_tokens] + [(b, i) for i, b in self.extra_decode.items()], n_entries)
        ids = set()
        for b, i in self.tokens.items():
            if not isinstance(b, (bytes, bytearray)) or not b:
                raise ValueError(f"{where}: token {b!r} is not a non-empty bytes value")
            if not isinstance(i, int) or i < 0 or i >= 2**31:
                raise ValueError(f"{where}: token {b!r} has invalid id {i!r}")
            if i in ids:
                raise ValueError(f"{where}: id {i} is used by two tokens")
            ids.add(i)
        missing = [x for x in range(256) if bytes([x]) not in self.tokens]
        if missing:
            raise ValueError(
                f"{where}: byte-level BPE needs a token for every single byte; missing {len(missing)} "
                f"(first: {bytes([missing[0]])!r})"
            )
        for s, i in list(self.special_tokens.items()) + [(a.content, a.id) for a in self.added_tokens]:
            if not isinstance(s, str) or not s:
                raise ValueError(f"{where}: special token {s!r} must be a non-empty str")
            if not isinstance(i, int) or i < 0 or i >= 2**31:
                raise ValueError(f"{where}: special token {s!r} has invalid id {i!r}")
            if i in ids and self.semantics == "tiktoken":
                raise ValueError(f"{where}: special token {s!r} reuses the id {i} of a mergeable token")
        if not self.stages and self.semantics == "tiktoken":
            raise ValueError(f"{where}: no pre-tokenizer pattern")
        if self.normalizer not in (None, "NFKC", "NFC"):
            raise ValueError(f"{where}: normalizer {self.normalizer!r} is not supported")
