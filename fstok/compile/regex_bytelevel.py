"""A regex over GPT-2 byte characters as a DFA over raw bytes.

HF pre-tokenizers that come after `ByteLevel` in a `Sequence` (Falcon's `Digits` and `Split`) see every
UTF-8 byte of the text as one "byte character" (GPT-2's table: printable bytes are themselves, the others
U+0100..U+0143).  Their regex is compiled as usual, over code points, to a UTF-8 byte DFA; this module
re-reads that DFA one raw byte at a time: raw byte b steps through the UTF-8 bytes of its byte character.
The result matches raw text exactly where the original matches its byte-character image, so such a stage
runs on the original bytes in the same split pipeline as the stages before ByteLevel (its pieces may end
inside a multi-byte character, as HF's do).

Lookahead accepts (`(?!\\S)`: the character read to test it is given back) become a give-back of one raw
byte.  A DFA whose accept codes do not fit that reading (an accept inside a byte character's UTF-8, a
give-back longer than the character just read) raises RegexUnsupported: never a different result.
"""
from __future__ import annotations

import numpy as np

from ..bytelevel_table import BYTE_TO_CHAR
from .regex_dfa import ByteDFA, minimize
from .regex_parse import RegexUnsupported


class NeverMatches(RegexUnsupported):
    """The pattern matches nothing over byte characters (a Split stage that never splits)."""


def gpt2_byte_chars() -> list[str]:
    """GPT-2's byte -> character table, indexed by byte."""
    return [BYTE_TO_CHAR[b] for b in range(256)]


def _byte_chars() -> list[bytes]:
    return [c.encode("utf-8") for c in gpt2_byte_chars()]


def bytelevel_dfa(bd: ByteDFA) -> ByteDFA:
    """The raw-byte DFA of `bd` read over GPT-2 byte characters (minimized, byte classes recomputed)."""
    T = bd.trans.astype(np.int64)  # [n, n_classes], last class = EOI
    C = bd.classes.astype(np.int64)
    acc = bd.accept.astype(np.int64)
    n = T.shape[0]
    eoi = T.shape[1] - 1
    out = np.zeros((n, 257), dtype=np.int64)
    gb_len = np.zeros(n, dtype=np.int64)  # the character length each give-back state was reached with
    for b, u in enumerate(_byte_chars()):
        col = T[:, C[u[0]]]
        for x in u[1:]:
            if (acc[col] != 0).any():
                raise RegexUnsupported("byte-level stage: a match would end inside a byte character")
            col = T[col, C[x]]
        a = acc[col]
        gb = a > 1
        if gb.any():
            g = a[gb] - 1
            if (g != len(u)).any():
                raise RegexUnsupported("byte-level stage: a lookahead gives back more than one byte character")
            prev = gb_len[col[gb]]
            if ((prev != 0) & (prev != len(u))).any():
                raise RegexUnsupported("byte-level stage: one state gives back characters of two lengths")
            gb_len[col[gb]] = len(u)
        out[:, b] = col
    out[:, 256] = T[:, eoi]
    if (acc[T[:, eoi]] > 1).any():
        raise RegexUnsupported("byte-level stage: a give-back at the end of the text")
    new_acc = np.where(acc > 1, 2, acc)  # a byte character given back is one raw byte
    out[0, :] = 0
    seen = np.zeros(n, dtype=bool)
    seen[int(bd.start)] = True
    frontier = np.array([int(bd.start)])
    while frontier.size:
        nxt = np.unique(out[frontier].reshape(-1))
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    if not (new_acc[seen] > 0).any():
        raise NeverMatches("byte-level stage: the pattern matches no text of byte characters")
    return minimize(out.astype(np.uint32), new_acc.astype(np.uint8), int(bd.start))
