"""GPT-2's reversible byte <-> printable character table, the alphabet of byte-level BPE vocabularies (HF
`ByteLevel`): printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100..U+0143 in order.
A module of its own, importing nothing, so that the loaders, the regex compiler and the decoders share it."""
from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """byte -> its character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
