"""HF post-processors, read from a tokenizer.json `post_processor` object.

    pp = PostProcessor.from_json(obj["post_processor"])     # None when the file has none
    enc = post_process(pp, Encoding.from_tokens(ids, tokens, offsets, words), pair_enc, add_special_tokens=True)
    num_special_tokens_to_add(pp, is_pair=True)

Supported: TemplateProcessing, BertProcessing, RobertaProcessing (with its trim_offsets / add_prefix_space
offset trimming), ByteLevel (trim_offsets) and Sequence of these. The results (ids, type_ids, tokens,
offsets, word ids, special-tokens mask, attention mask, sequence ids, overflowing windows) are those of HF
`tokenizers`: each processor is a port of its `process_encodings`, and `post_process` is HF's
`PostProcessor::process` (sequence ids and type ids set first, the pieces merged after). Unknown processor
types, and templates naming special tokens they do not define, raise ValueError when read.
"""
from __future__ import annotations

from typing import Any, Optional

from .hf_encoding import Encoding

__all__ = ["PostProcessor", "TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevelProcessing",
           "SequenceProcessing", "post_process", "num_special_tokens_to_add"]

# Rust's char::is_whitespace (the Unicode White_Space property); str.isspace also accepts U+001C..U+001F.
_WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                         "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACE_CHARS = _WHITE_SPACE | {"\u0120"}  # byte-level 'Ġ' is the byte 0x20


_RUNS: dict[str, tuple[int, int]] = {}


def space_run(tok: str) -> tuple[int, int]:
    """(leading, trailing) characters of `tok` that the byte-level offset trimming treats as spaces."""
    r = _RUNS.get(tok)
    if r is None:
        r = _space_run(tok)
        if len(_RUNS) < 1 << 18:  # token strings repeat: a bounded memo
            _RUNS[tok] = r
    return r


def _space_run(tok: str) -> tuple[int, int]:
    lead = 0
    for c in tok:
        if c not in _SPACE_CHARS:
            break
        lead += 1
    trail = 0
    for c in reversed(tok):
        if c not in _SPACE_CHARS:
            break
        trail += 1
    return lead, trail


def trim_spec(processor) -> Any:
    """How `processor` changes the model's offsets: None (it keeps them), the add_prefix_space of its one
    byte-level offset trimming (True / False), or "many" (more than one trimming step)."""
    if processor is None:
        return None
    if isinstance(processor, SequenceProcessing):
        specs = [trim_spec(p) for p in processor.processors]
        at = [k for k, s in enumerate(specs) if s is not None]
        if not at:
            return None
        # the trimming sees each sequence's own tokens only when it comes first (later, a token a processor
        # put before the sequence would be its first)
        return specs[0] if at == [0] else "many"
    if isinstance(processor, (ByteLevelProcessing, RobertaProcessing)) and processor.trim_offsets:
        return processor.add_prefix_space
    return None


def _trim_offsets(enc: Encoding, add_prefix_space: bool) -> None:
    """HF's byte-level offset trimming: leading/trailing spaces of a token are left out of its offsets."""
    offs = enc._offsets
    for i, tok in enumerate(enc._tokens):
        if not tok or (tok[0] not in _SPACE_CHARS and tok[-1] not in _SPACE_CHARS):
            continue
        lead, trail = space_run(tok)
        a, b = offs[i]
        if lead:
            # a single leading space on the first token is the one add_prefix_space put there: keep it
            if (i == 0 or a == 0) and add_prefix_space and lead == 1:
                lead = 0
            a = min(a + lead, b)
        if trail and b >= trail:
            b = max(b - trail, a)
        offs[i] = (a, b)


def trim_first(tok: str, a: int, b: int, add_prefix_space: bool) -> tuple[int, int]:
    """The offsets (a, b) of `tok` trimmed as `_trim_offsets` trims the first token of an encoding."""
    if not tok or (tok[0] not in _SPACE_CHARS and tok[-1] not in _SPACE_CHARS):
        return a, b
    lead, trail = space_run(tok)
    if lead and not (add_prefix_space and lead == 1):
        a = min(a + lead, b)
    if trail and b >= trail:
        b = max(b - trail, a)
    return a, b


def _trim_all(encodings, add_prefix_space: bool) -> None:
    """_trim_offsets on each encoding and each of its overflowing parts."""
    for e in encodings:
        _trim_offsets(e, add_prefix_space)
        for o in e._overflowing:
            _trim_offsets(o, add_prefix_space)


def _wrap(enc: Encoding, before: list[tuple[str, int]], after: list[tuple[str, int]], type_ids: list[int],
          seq_id: int) -> Encoding:
    """enc with special tokens around it (Bert/Roberta style): the sequence range excludes them."""
    nb, na = len(before), len(after)
    ids = [i for _, i in before] + enc._ids + [i for _, i in after]
    n = len(ids)
    return Encoding._raw(ids, type_ids, [t for t, _ in before] + enc._tokens + [t for t, _ in after],
                         [None] * nb + enc._words + [None] * na, [(0, 0)] * nb + enc._offsets + [(0, 0)] * na,
                         [1] * nb + [0] * len(enc._ids) + [1] * na, [1] * n, [], {seq_id: (nb, n - na)})


class PostProcessor:
    """Base: `process` is HF's default `PostProcessor::process`; subclasses define `process_encodings`."""

    type_name = ""

    def added_tokens(self, is_pair: bool) -> int:
        raise NotImplementedError

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        raise NotImplementedError

    def to_json(self) -> dict:
        raise NotImplementedError

    def process(self, enc: Encoding, pair: Optional[Encoding] = None, add_special_tokens: bool = True) -> Encoding:
        """The merged encoding of `enc` (and `pair`) with this processor's special tokens. Consumes its inputs."""
        encs = [enc] if pair is None else [enc, pair]
        for i, e in enumerate(encs):
            e.set_sequence_id(i)
            for o in e._overflowing:
                o.set_sequence_id(i)
            e._type_ids = [i] * len(e._ids)
        out = Encoding()
        for e in self.process_encodings(encs, add_special_tokens):
            out.merge_with(e, False)
        return out

    @staticmethod
    def from_json(obj: Any) -> Optional["PostProcessor"]:
        """The processor a tokenizer.json `post_processor` value describes (None for null)."""
        if obj is None:
            return None
        if not isinstance(obj, dict) or "type" not in obj:
            raise ValueError(f"post_processor: expected an object with a 'type', got {obj!r:.80}")
        t = obj["type"]
        cls = _TYPES.get(t)
        if cls is None:
            raise ValueError(f"post_processor type {t!r} is not supported (supported: {', '.join(sorted(_TYPES))})")
        return cls._from_json(obj)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"


def _pair(v: Any, what: str) -> tuple[str, int]:
    if not (isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)):
        raise ValueError(f"{what}: expected [token, id], got {v!r}")
    return (v[0], int(v[1]))


class BertProcessing(PostProcessor):
    """`[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, type ids 0 for A (and its specials), 1 for B and its [SEP]."""

    type_name = "BertProcessing"

    def __init__(self, sep: tuple[str, int] = ("[SEP]", 102), cls: tuple[str, int] = ("[CLS]", 101)):
        self.sep, self.cls = _pair(sep, "BertProcessing sep"), _pair(cls, "BertProcessing cls")

    @classmethod
    def _from_json(cls, obj: dict) -> "BertProcessing":
        return cls(obj["sep"], obj["cls"])

    def to_json(self) -> dict:
        return {"type": self.type_name, "sep": list(self.sep), "cls": list(self.cls)}

    def added_tokens(self, is_pair: bool) -> int:
        return 3 if is_pair else 2

    def process_encodings(self, encodings, add_special_tokens):
        if not add_special_tokens:
            return encodings
        out = []
        for i, e in enumerate(encodings):
            parts = [e] + e._overflowing
            if i == 0:
                wrapped = [_wrap(p, [self.cls], [self.sep], [0] + p._type_ids + [0], 0) for p in parts]
            else:
                wrapped = [_wrap(p, [], [self.sep], p._type_ids + [1], 1) for p in parts]
            wrapped[0]._overflowing = wrapped[1:]
            out.append(wrapped[0])
        return out


class RobertaProcessing(PostProcessor):
    """`<s> A </s>` and `<s> A </s> </s> B </s>`, every type id 0; optional byte-level offset trimming."""

    type_name = "RobertaProcessing"

    def __init__(self, sep: tuple[str, int] = ("</s>", 2), cls: tuple[str, int] = ("<s>", 0),
                 trim_offsets: bool = True, add_prefix_space: bool = True):
        self.sep, self.cls = _pair(sep, "RobertaProcessing sep"), _pair(cls, "RobertaProcessing cls")
        self.trim_offsets, self.add_prefix_space = bool(trim_offsets), bool(add_prefix_space)

    @classmethod
    def _from_json(cls, obj: dict) -> "RobertaProcessing":
        return cls(obj["sep"], obj["cls"], obj.get("trim_offsets", True), obj.get("add_prefix_space", True))

    def to_json(self) -> dict:
        return {"type": self.type_name, "sep": list(self.sep), "cls": list(self.cls),
                "trim_offsets": self.trim_offsets, "add_prefix_space": self.add_prefix_space}

    def added_tokens(self, is_pair: bool) -> int:
        return 4 if is_pair else 2

    def process_encodings(self, encodings, add_special_tokens):
        if self.trim_offsets:
            _trim_all(encodings, self.add_prefix_space)
        for e in encodings:
            e._type_ids = [0] * len(e._ids)
        if not add_special_tokens:
            return encodings
        out = []
        for i, e in enumerate(encodings):
            first = self.cls if i == 0 else self.sep
            parts = [e] + e._overflowing
            wrapped = [_wrap(p, [first], [self.sep], [0] * (len(p._ids) + 2), 0 if i == 0 else 1) for p in parts]
            wrapped[0]._overflowing = wrapped[1:]
            out.append(wrapped[0])
        return out


class ByteLevelProcessing(PostProcessor):
    """The ByteLevel post-processor: trims spaces out of offsets (when trim_offsets), adds no tokens."""

    type_name = "ByteLevel"

    def __init__(self, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True):
        self.add_prefix_space, self.trim_offsets, self.use_regex = bool(add_prefix_space), bool(trim_offsets), bool(use_regex)

    @classmethod
    def _from_json(cls, obj: dict) -> "ByteLevelProcessing":
        return cls(obj.get("add_prefix_space", True), obj.get("trim_offsets", True), obj.get("use_regex", True))

    def to_json(self) -> dict:
        return {"type": self.type_name, "add_prefix_space": self.add_prefix_space,
                "trim_offsets": self.trim_offsets, "use_regex": self.use_regex}

    def added_tokens(self, is_pair: bool) -> int:
        return 0

    def process_encodings(self, encodings, add_special_tokens):
        if self.trim_offsets:
            _trim_all(encodings, self.add_prefix_space)
        for i, e in enumerate(encodings):
            e.set_sequence_id(i)
        return encodings


def _piece(p: Any, what: str) -> tuple[str, Any, int]:
    """('seq', 0|1, type_id) or ('tok', name, type_id), from the JSON object form or the `$A:1` string form."""
    if isinstance(p, dict) and len(p) == 1:
        (kind, body), = p.items()
        if kind == "Sequence" and isinstance(body, dict) and body.get("id") in ("A", "B"):
            return ("seq", 0 if body["id"] == "A" else 1, int(body.get("type_id", 0)))
        if kind == "SpecialToken" and isinstance(body, dict) and isinstance(body.get("id"), str):
            return ("tok", body["id"], int(body.get("type_id", 0)))
    if isinstance(p, str):
        parts = p.split(":")
        if len(parts) in (1, 2):
            type_id = 0
            if len(parts) == 2:
                if not parts[1].isdigit():
                    raise ValueError(f"{what}: cannot read template piece {p!r}")
                type_id = int(parts[1])
            name = parts[0]
            if name.startswith("$"):
                rest = name[1:]
                if rest in ("", "A", "a"):
                    return ("seq", 0, type_id if len(parts) == 2 else 0)
                if rest in ("B", "b"):
                    return ("seq", 1, type_id if len(parts) == 2 else 0)
                if rest.isdigit():
                    return ("seq", 0, int(rest) if len(parts) == 1 else type_id)
                raise ValueError(f"{what}: cannot read template piece {p!r}")
            return ("tok", name, type_id)
    raise ValueError(f"{what}: cannot read template piece {p!r}")


def _template(v: Any, what: str) -> list[tuple[str, Any, int]]:
    if isinstance(v, str):
        v = v.split()
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{what}: expected a list of pieces, got {v!r:.80}")
    return [_piece(p, what) for p in v]


class TemplateProcessing(PostProcessor):
    """Templates of special tokens around sequences A and B, each piece with its own type id."""

    type_name = "TemplateProcessing"

    def __init__(self, single: Any = "$0", pair: Any = "$A:0 $B:1", special_tokens: Any = None):
        self.single = _template(single, "TemplateProcessing single")
        self.pair = _template(pair, "TemplateProcessing pair")
        toks: dict[str, tuple[list[int], list[str]]] = {}
        items = special_tokens.items() if isinstance(special_tokens, dict) else (special_tokens or [])
        for item in items:
            if isinstance(special_tokens, dict):
                key, body = item
                ids, tokens = body.get("ids"), body.get("tokens")
                if body.get("id", key) != key:
                    raise ValueError(f"TemplateProcessing special token {key!r}: its id is {body.get('id')!r}")
            else:  # ("[CLS]", 101) / (101, "[CLS]") as the Python constructor accepts
                a, b = item
                key, ids, tokens = (a, [b], [a]) if isinstance(a, str) else (b, [a], [b])
            if not isinstance(ids, list) or not isinstance(tokens, list) or len(ids) != len(tokens):
                raise ValueError(f"TemplateProcessing special token {key!r}: ids and tokens must be lists of one length")
            toks[key] = ([int(i) for i in ids], [str(t) for t in tokens])
        self.special_tokens = toks
        for name, tmpl in (("single", self.single), ("pair", self.pair)):
            for kind, pid, _ in tmpl:
                if kind == "tok" and pid not in toks:
                    raise ValueError(f"TemplateProcessing {name} template uses special token {pid!r}, "
                                     "which its special_tokens do not define")

    @classmethod
    def _from_json(cls, obj: dict) -> "TemplateProcessing":
        return cls(obj.get("single", "$0"), obj.get("pair", "$A:0 $B:1"), obj.get("special_tokens", {}))

    def to_json(self) -> dict:
        def pieces(t):
            return [{"Sequence": {"id": "AB"[pid], "type_id": ty}} if k == "seq"
                    else {"SpecialToken": {"id": pid, "type_id": ty}} for k, pid, ty in t]
        return {"type": self.type_name, "single": pieces(self.single), "pair": pieces(self.pair),
                "special_tokens": {k: {"id": k, "ids": ids, "tokens": tokens}
                                   for k, (ids, tokens) in self.special_tokens.items()}}

    def added_tokens(self, is_pair: bool) -> int:
        return sum(len(self.special_tokens[pid][0]) for k, pid, _ in (self.pair if is_pair else self.single)
                   if k == "tok")

    def process_encodings(self, encodings, add_special_tokens):
        if len(encodings) == 2:
            tmpl = self.pair
        elif len(encodings) == 1:
            tmpl = self.single
        else:
            raise ValueError(f"TemplateProcessing: {len(encodings)} encodings to process (1 or 2 expected)")
        out = []
        for k, (kind, pid, type_id) in enumerate(tmpl):
            if kind == "seq":
                e = encodings[pid]
                e._type_ids = [type_id] * len(e._ids)
                e.set_sequence_id(pid)
                # a copy only where the template uses this sequence again later (the caller's input is consumed)
                again = any(k2 == "seq" and p2 == pid for k2, p2, _ in tmpl[k + 1:])
                out.append(e.copy() if again else e)
            elif add_special_tokens:
                ids, tokens = self.special_tokens[pid]
                n = len(ids)
                out.append(Encoding._raw(ids[:], [type_id] * n, tokens[:], [None] * n, [(0, 0)] * n, [1] * n,
                                         [1] * n, [], {}))
        return out


class SequenceProcessing(PostProcessor):
    """Processors applied in order to the list of encodings (HF `processors.Sequence`)."""

    type_name = "Sequence"

    def __init__(self, processors: list[PostProcessor]):
        self.processors = list(processors)

    @classmethod
    def _from_json(cls, obj: dict) -> "SequenceProcessing":
        procs = obj.get("processors")
        if not isinstance(procs, list):
            raise ValueError("post_processor Sequence: 'processors' must be a list")
        return cls([PostProcessor.from_json(p) for p in procs])

    def to_json(self) -> dict:
        return {"type": self.type_name, "processors": [p.to_json() for p in self.processors]}

    def added_tokens(self, is_pair: bool) -> int:
        return sum(p.added_tokens(is_pair) for p in self.processors)

    def process_encodings(self, encodings, add_special_tokens):
        for p in self.processors:
            encodings = p.process_encodings(encodings, add_special_tokens)
        return encodings


_TYPES = {c.type_name: c for c in (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevelProcessing,
                                   SequenceProcessing)}


def post_process(processor: Optional[PostProcessor], enc: Encoding, pair: Optional[Encoding] = None,
                 add_special_tokens: bool = True) -> Encoding:
    """The tokenizer's post-processing step (without truncation and padding). Consumes its inputs."""
    if processor is not None:
        return processor.process(enc, pair, add_special_tokens)
    if pair is None:
        return enc
    out = Encoding()
    for i, e in enumerate((enc, pair)):
        e.set_sequence_id(i)
        out.merge_with(e, False)
    return out


def num_special_tokens_to_add(processor: Optional[PostProcessor], is_pair: bool) -> int:
    return 0 if processor is None else processor.added_tokens(is_pair)


def finish(processor: Optional[PostProcessor], enc: Encoding, pair: Optional[Encoding] = None,
           add_special_tokens: bool = True, truncation: Optional[dict] = None,
           padding: Optional[dict] = None) -> Encoding:
    """HF's `post_process`: truncate (leaving room for the special tokens), post-process, pad.

    `enc` / `pair` are the model's encodings of each sequence (`Encoding.from_tokens`, with type_id=1 for the
    pair). `truncation`: {max_length, stride, strategy, direction} as `Tokenizer.truncation` reports it;
    `padding`: {length (None: this encoding's own length), pad_to_multiple_of, direction, pad_id, pad_type_id,
    pad_token} as `Tokenizer.padding` reports it.
    """
    from .hf_encoding import pad_encodings, truncate_encodings

    if truncation is not None:
        max_length = truncation["max_length"]
        n_added = num_special_tokens_to_add(processor, pair is not None)
        if add_special_tokens and n_added > 0:
            # HF subtracts in unsigned arithmetic; a max_length below the specials cannot be configured there
            max_length = max(max_length - n_added, 0)
        truncate_encodings(enc, pair, max_length, truncation.get("stride", 0),
                           truncation.get("strategy", "longest_first"), truncation.get("direction", "right"))
    out = post_process(processor, enc, pair, add_special_tokens)
    if padding is not None:
        pad_encodings([out], padding.get("length"), padding.get("pad_to_multiple_of"), padding.get("direction", "right"),
                      padding.get("pad_id", 0), padding.get("pad_type_id", 0), padding.get("pad_token", "[PAD]"))
    return out
