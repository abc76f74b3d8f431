"""Which texts the compiled tables of a pipeline may encode: the byte guard.

A byte-level vocabulary without some single bytes (GPT-NeoX style) drops such a byte before merging (HF);
the tables hold stand-in tokens for those bytes instead, so a text holding a character whose UTF-8 has one
of them is encoded by the stages.  Both the tokenizer and its artifact loader build the guard here.
"""
from __future__ import annotations


def missing_byte_ranges(missing: list[int]) -> list[list[int]]:
    """The code point ranges whose UTF-8 holds one of these bytes (a continuation byte: all of non-ASCII)."""
    out = []
    for b in missing:
        if b < 0x80:
            out.append([b, b])
        elif b < 0xC0:
            out.append([0x80, 0x10FFFF])
        elif 0xC2 <= b <= 0xDF:
            out.append([(b - 0xC0) << 6, ((b - 0xC0) << 6) + 0x3F])
        elif 0xE0 <= b <= 0xEF:
            out.append([(b - 0xE0) << 12, ((b - 0xE0) << 12) + 0xFFF])
        elif 0xF0 <= b <= 0xF4:
            out.append([(b - 0xF0) << 18, min(((b - 0xF0) << 18) + 0x3FFFF, 0x10FFFF)])
        # 0xC0, 0xC1, 0xF5..0xFF never occur in UTF-8
    return out


def byte_guard(ranges: list[list[int]]):
    """A compiled search for any character in these ranges (None for none)."""
    import re

    if not ranges:
        return None
    cls = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return re.compile(f"[{cls}]")
