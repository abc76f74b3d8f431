"""Decoding for the HF face (`fstok.Tokenizer`): token strings -> text through the tokenizer.json's decoder, and
HF's `DecodeStream`.  The decoders themselves live in `fstok.pipeline.decoders` (one implementation for every
tokenizer family); a decoder fstok does not implement is refused when the tokenizer is loaded, never decoded
differently.
"""
from __future__ import annotations

from typing import Any, Optional, Union

__all__ = ["check_decoder", "decode_tokens"]

from .pipeline import UnsupportedComponent
from .pipeline.decoders import Decoder, from_config
from .pipeline.decoders import decode_tokens as _decode_built


def check_decoder(dec: Optional[dict], source: str = "tokenizer.json") -> Optional[Decoder]:
    """The tokenizer.json `decoder` object built (None: the file has none).  A decoder or option fstok does not
    implement is refused here, when the tokenizer is loaded: never decoded differently later."""
    try:
        return from_config(dec, source)
    except UnsupportedComponent as e:
        raise NotImplementedError(str(e)) from None


def decode_tokens(dec: Union[Decoder, dict[str, Any], None], toks: list[str]) -> str:
    """HF's `Decoder::decode`: the decoder's chain over the token strings, joined (no decoder: joined by spaces)."""
    if isinstance(dec, dict):
        dec = check_decoder(dec)
    return _decode_built(dec, list(toks))


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
