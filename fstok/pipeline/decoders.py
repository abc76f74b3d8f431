"""HF tokenizer.json decoders, exact: token strings -> text.

    dec = decoders.from_config(obj["decoder"], where="tokenizer.json")    # None for no decoder
    text = decode_tokens(dec, ["Hello", "Ġworld"])                          # HF: no decoder -> " ".join

Each decoder maps a list of token strings to a list of strings (HF `decode_chain`); the text is their
concatenation.  Components (HF `tokenizers` 0.23.3, `decoders/*.rs`):
  ByteLevel        GPT-2 byte characters -> bytes -> UTF-8 (invalid sequences -> U+FFFD); a token with a
                   character outside the byte alphabet is kept as its own UTF-8
  WordPiece        prefix ("##") glued to the previous token, others get a leading space; cleanup
  BPEDecoder       suffix ("</w>") -> " " (nothing after the last token)
  ByteFallback     runs of "<0xXX>" tokens -> their bytes as UTF-8, or one U+FFFD per byte if invalid
  Fuse             all tokens -> one string
  Strip            drops up to `start` leading / `stop` trailing `content` characters of each token
  Replace          String or Regex pattern -> content, in each token
  CTC              dedup, pad token removed, word delimiter -> " " (with cleanup)
  Metaspace        replacement char -> " ", except at the start of the first token unless prepend_scheme never
  Sequence         in order
"""
from __future__ import annotations

import re
from typing import Any, Optional

from . import UnsupportedComponent
from .patterns import Matcher


class Decoder:
    def decode_chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def decode(self, tokens: list[str]) -> str:
        return "".join(self.decode_chain(list(tokens)))


def decode_tokens(dec: Optional[Decoder], tokens: list[str]) -> str:
    """HF `Tokenizer::decode` after the ids became token strings."""
    if dec is None:
        return " ".join(tokens)
    return dec.decode(tokens)


class ByteLevel(Decoder):
    def __init__(self):
        from ..bytelevel_table import CHAR_TO_BYTE

        self.c2b = CHAR_TO_BYTE

    def decode_chain(self, tokens: list[str]) -> list[str]:
        c2b = self.c2b
        buf = bytearray()
        for t in tokens:
            try:
                buf += bytes([c2b[c] for c in t])
            except KeyError:
                buf += t.encode("utf-8", "surrogatepass")
        return [buf.decode("utf-8", "replace")]


def wordpiece_cleanup(s: str) -> str:
    return (s.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",").replace(" ' ", "'")
            .replace(" n't", "n't").replace(" 'm", "'m").replace(" do not", " don't").replace(" 's", "'s")
            .replace(" 've", "'ve").replace(" 're", "'re"))


class WordPiece(Decoder):
    def __init__(self, prefix: str, cleanup: bool):
        self.prefix, self.cleanup = prefix, cleanup

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, t in enumerate(tokens):
            if i:
                t = t[len(self.prefix):] if t.startswith(self.prefix) else " " + t
            if self.cleanup:
                t = wordpiece_cleanup(t)
            out.append(t)
        return out


class BPEDecoder(Decoder):
    def __init__(self, suffix: str):
        self.suffix = suffix

    def decode_chain(self, tokens: list[str]) -> list[str]:
        n = len(tokens) - 1
        if not self.suffix:
            return list(tokens)
        return [t.replace(self.suffix, "" if i == n else " ") for i, t in enumerate(tokens)]


# HF reads a 6-byte token "<0x..>" with Rust's u8::from_str_radix(token[3..5], 16), which also takes "+A"
_BYTE_TOKEN = re.compile(r"<0x(\+[0-9A-Fa-f]|[0-9A-Fa-f]{2})>")


class ByteFallback(Decoder):
    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        pend = bytearray()

        def flush():
            if pend:
                try:
                    out.append(bytes(pend).decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend(["\ufffd"] * len(pend))
                pend.clear()

        for t in tokens:
            m = _BYTE_TOKEN.fullmatch(t) if len(t) == 6 else None
            if m:
                pend.append(int(m.group(1), 16))
            else:
                flush()
                out.append(t)
        flush()
        return out


class Fuse(Decoder):
    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


class Strip(Decoder):
    def __init__(self, content: str, start: int, stop: int):
        self.content, self.start, self.stop = content, start, stop

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        c = self.content
        for t in tokens:
            n = len(t)
            a = 0
            for i in range(min(self.start, n)):
                if t[i] == c:
                    a = i + 1
                else:
                    break
            b = n
            for i in range(min(self.stop, n)):
                j = n - i - 1
                if t[j] == c:
                    b = j
                else:
                    break
            out.append(t[a:b] if a < b else "")
        return out


class Replace(Decoder):
    def __init__(self, pattern: Any, content: str, where: str):
        self.matcher = Matcher(pattern, f"{where}: Replace decoder")
        self.content = content

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for t in tokens:
            parts = []
            for (s, e), m in self.matcher.find_matches(t):
                parts.append(self.content if m else t[s:e])
            out.append("".join(parts))
        return out


class CTC(Decoder):
    def __init__(self, pad_token: str, word_delimiter_token: str, cleanup: bool):
        self.pad, self.delim, self.cleanup = pad_token, word_delimiter_token, cleanup

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        prev = object()
        for t in tokens:
            if t == prev:
                continue
            prev = t
            r = t.replace(self.pad, "") if self.pad else t
            if self.cleanup:
                r = wordpiece_cleanup(r).replace(self.delim, " ") if self.delim else wordpiece_cleanup(r)
            if r:
                out.append(r)
        return out


class Metaspace(Decoder):
    def __init__(self, replacement: str, prepend_scheme: str):
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        r = self.replacement
        for i, t in enumerate(tokens):
            if i == 0 and self.prepend_scheme != "never":
                out.append(t.replace(r, ""))
            else:
                out.append(t.replace(r, " "))
        return out


class Sequence(Decoder):
    def __init__(self, items: list[Decoder]):
        self.items = items

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for d in self.items:
            tokens = d.decode_chain(tokens)
        return tokens


def metaspace_prepend_scheme(cfg: dict) -> str:
    """HF Metaspace's prepend_scheme, including the older `add_prefix_space` spelling."""
    ps = cfg.get("prepend_scheme")
    if ps is None:
        return "always" if cfg.get("add_prefix_space", True) else "never"
    if ps not in ("always", "never", "first"):
        raise UnsupportedComponent(f"Metaspace prepend_scheme {ps!r} is not one of always, never, first")
    return ps


def from_config(cfg: Any, where: str = "tokenizer.json") -> Optional[Decoder]:
    if cfg is None:
        return None
    if not isinstance(cfg, dict):
        raise UnsupportedComponent(f"{where}: decoder {cfg!r} is not an object")
    t = cfg.get("type")
    if t == "Sequence":
        return Sequence([d for d in (from_config(c, where) for c in cfg.get("decoders") or []) if d is not None])
    if t == "ByteLevel":
        return ByteLevel()
    if t == "WordPiece":
        return WordPiece(str(cfg.get("prefix", "##")), bool(cfg.get("cleanup", True)))
    if t == "BPEDecoder":
        return BPEDecoder(str(cfg.get("suffix", "</w>")))
    if t == "ByteFallback":
        return ByteFallback()
    if t == "Fuse":
        return Fuse()
    if t == "Strip":
        c = cfg.get("content")
        if not isinstance(c, str) or len(c) != 1:
            raise UnsupportedComponent(f"{where}: Strip decoder content {c!r} is not one character")
        return Strip(c, int(cfg.get("start", 0)), int(cfg.get("stop", 0)))
    if t == "Replace":
        c = cfg.get("content")
        if not isinstance(c, str):
            raise UnsupportedComponent(f"{where}: Replace decoder without a string content")
        return Replace(cfg.get("pattern"), c, where)
    if t == "CTC":
        return CTC(str(cfg.get("pad_token", "<pad>")), str(cfg.get("word_delimiter_token", "|")),
                   bool(cfg.get("cleanup", True)))
    if t == "Metaspace":
        r = cfg.get("replacement", "\u2581")
        if not isinstance(r, str) or len(r) != 1:
            raise UnsupportedComponent(f"{where}: Metaspace replacement {r!r} is not one character")
        return Metaspace(r, metaspace_prepend_scheme(cfg))
    raise UnsupportedComponent(f"{where}: decoder {t!r} is not supported by fstok's tokenizer.json pipeline "
                               "(supported: ByteLevel, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, "
                               "CTC, Metaspace, Sequence)")
