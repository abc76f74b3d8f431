"""HF tokenizer.json decoders (token strings -> text), ported from `tokenizers` decoder by decoder.

Supported: WordPiece, ByteLevel, Metaspace, BPEDecoder, ByteFallback, Fuse, Strip, Replace (string pattern) and
Sequence of these; no decoder joins the tokens with spaces, as HF does. Any other decoder is refused when the
tokenizer is loaded (`check_decoder`), never decoded differently.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["check_decoder", "decode_tokens"]

_SUPPORTED = ("WordPiece", "ByteLevel", "Metaspace", "BPEDecoder", "ByteFallback", "Fuse", "Strip", "Replace", "Sequence")


def check_decoder(dec: Optional[dict], source: str = "tokenizer.json") -> None:
    if dec is None:
        return
    t = dec.get("type")
    if t not in _SUPPORTED:
        raise NotImplementedError(f"{source}: decoder {t!r} is not supported (supported: {', '.join(_SUPPORTED)})")
    if t == "Sequence":
        for d in dec.get("decoders") or []:
            check_decoder(d, source)
    if t == "Replace" and "String" not in (dec.get("pattern") or {}):
        raise NotImplementedError(f"{source}: Replace decoder with a regex pattern is not supported")


def _cleanup(s: str) -> str:
    return (s.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",").replace(" ' ", "'")
            .replace(" n't", "n't").replace(" 'm", "'m").replace(" do not", " don't").replace(" 's", "'s")
            .replace(" 've", "'ve").replace(" 're", "'re"))


def _chain(dec: dict, toks: list[str]) -> list[str]:
    t = dec["type"]
    if t == "WordPiece":
        prefix, cleanup = dec.get("prefix", "##"), dec.get("cleanup", True)
        out = []
        for i, tok in enumerate(toks):
            if i != 0:
                tok = tok[len(prefix):] if tok.startswith(prefix) else " " + tok
            out.append(_cleanup(tok) if cleanup else tok)
        return out
    if t == "ByteLevel":
        from .loaders.bpe_source import CHAR_TO_BYTE as cb  # GPT-2's byte <-> character table

        buf = bytearray()
        for tok in toks:
            try:
                buf.extend(cb[c] for c in tok)
            except KeyError:
                buf.extend(tok.encode("utf-8"))
        return [buf.decode("utf-8", "replace")]
    if t == "Metaspace":
        rep = dec.get("replacement", "\u2581")
        never = dec.get("prepend_scheme", "always") == "never" or dec.get("add_prefix_space") is False
        out = []
        for i, tok in enumerate(toks):
            if i == 0 and not never:
                out.append(tok.replace(rep, ""))
            else:
                out.append(tok.replace(rep, " "))
        return out
    if t == "BPEDecoder":
        suffix = dec.get("suffix", "</w>")
        return [tok.replace(suffix, "" if i == len(toks) - 1 else " ") for i, tok in enumerate(toks)]
    if t == "ByteFallback":
        out, pending = [], bytearray()

        def flush():
            try:
                out.append(bytes(pending).decode("utf-8"))
            except UnicodeDecodeError:
                out.extend(["\ufffd"] * len(pending))
            pending.clear()

        for tok in toks:
            b = None
            if len(tok.encode("utf-8")) == 6 and tok.startswith("<0x") and tok.endswith(">"):
                try:
                    b = int(tok[3:5], 16)
                except ValueError:
                    b = None
            if b is not None:
                pending.append(b)
            else:
                if pending:
                    flush()
                out.append(tok)
        if pending:
            flush()
        return out
    if t == "Fuse":
        return ["".join(toks)]
    if t == "Strip":
        content, start, stop = dec.get("content", " "), dec.get("start", 0), dec.get("stop", 0)
        out = []
        for tok in toks:
            a = 0
            for i in range(min(start, len(tok))):
                if tok[i] == content:
                    a = i + 1
                else:
                    break
            b = len(tok)
            for i in range(min(stop, len(tok))):
                if tok[len(tok) - i - 1] == content:
                    b = len(tok) - i - 1
                else:
                    break
            out.append(tok[a:b])
        return out
    if t == "Replace":
        pat, content = dec["pattern"]["String"], dec.get("content", "")
        return [tok.replace(pat, content) if pat else tok for tok in toks]
    if t == "Sequence":
        for d in dec.get("decoders") or []:
            toks = _chain(d, toks)
        return toks
    raise NotImplementedError(f"decoder {t!r} is not supported")


def decode_tokens(dec: Optional[dict[str, Any]], toks: list[str]) -> str:
    """HF's `Decoder::decode`: the decoder's chain over the token strings, joined."""
    if dec is None:
        return " ".join(toks)
    if not toks:
        return ""
    return "".join(_chain(dec, toks))


class DecodeStream:
    """HF `tokenizers.decoders.DecodeStream` for `fstok.Tokenizer`: `step(tokenizer, id or [ids])` returns the
    next chunk of text, or None while the ids so far end inside a character (decode ends with U+FFFD).

        stream = DecodeStream(skip_special_tokens=False)      # or DecodeStream(prompt_ids) to start after them
        for tid in generated:
            chunk = stream.step(tok, tid)

    The algorithm is HF's: decode the ids kept since the last emitted prefix, emit what extends the prefix.
    """

    __slots__ = ("skip_special_tokens", "_ids", "_prefix", "_prefix_index")

    def __init__(self, ids: Optional[list] = None, skip_special_tokens: bool = False):
        self.skip_special_tokens = bool(skip_special_tokens)
        self._ids = [_stream_id(i) for i in (ids or [])]
        self._prefix = ""
        self._prefix_index = 0

    def __copy__(self) -> "DecodeStream":
        c = DecodeStream(None, self.skip_special_tokens)
        c._ids, c._prefix, c._prefix_index = list(self._ids), self._prefix, self._prefix_index
        return c

    def __deepcopy__(self, memo) -> "DecodeStream":
        return self.__copy__()

    def step(self, tokenizer: Any, id: Any) -> Optional[str]:  # noqa: A002 - HF's parameter name
        if isinstance(id, (list, tuple)):
            new = [_stream_id(i) for i in id]
        else:
            new = [_stream_id(id)]
        skip = self.skip_special_tokens
        ids = self._ids
        if not self._prefix and ids:
            p = tokenizer.decode(ids, skip_special_tokens=skip)
            if not p.endswith("\ufffd"):
                self._prefix, self._prefix_index = p, len(ids)
        ids.extend(new)
        string = tokenizer.decode(ids, skip_special_tokens=skip)
        # HF compares lengths in UTF-8 bytes
        if len(string.encode("utf-8")) > len(self._prefix.encode("utf-8")) and not string.endswith("\ufffd"):
            if not string.startswith(self._prefix):
                raise ValueError(f"Invalid prefix encountered while decoding stream. Token ID: {ids[-1]}, "
                                 f"Expected prefix: '{self._prefix}', Actual string: '{string}'")
            new_text = string[len(self._prefix):]
            new_prefix_index = len(ids) - self._prefix_index
            self._ids = ids[self._prefix_index:]
            self._prefix = tokenizer.decode(self._ids, skip_special_tokens=skip)
            self._prefix_index = new_prefix_index
            return new_text
        return None

    def __repr__(self) -> str:
        return (f"DecodeStream(ids={self._ids!r}, prefix={self._prefix!r}, prefix_index={self._prefix_index}, "
                f"skip_special_tokens={self.skip_special_tokens})")


def _stream_id(x: Any) -> int:
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise TypeError("StreamInput must be either an integer or a list of integers")
    v = x.__index__()
    if not 0 <= v < 2 ** 32:
        raise OverflowError(f"token id {v} is outside u32")
    return v
