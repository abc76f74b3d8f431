"""Checks of a SentencePiece-family artifact that `fstok.spm` runs before its own table checks: every
meta field it reads typed and in range, and the piece strings valid UTF-8 cut at character
boundaries (they are decoded lazily, by `id_to_token` and `decode`, so a bad byte would otherwise
surface long after loading).  Errors name the meta field or the section and element."""
from __future__ import annotations

import numpy as np

from .validate import Meta, error


def check(art, where: str) -> None:
    m = Meta(art.meta, where)
    n = m.int("n_pieces", 1, 2**31 - 1)
    m.int("flags", 0, 2**31 - 1)
    m.int("unk_id", 0, n - 1)
    for key in ("bos_id", "eos_id", "pad_id"):
        m.int(key, -1, n - 1, default=-1)
    check_scores(m)
    m.str("unk_surface", default=" \u2047 ")
    m.str("model_type", default="")
    if "pieces" not in art.sections or "piece_off" not in art.sections:
        return  # the loader names the missing section
    blob = art.array("pieces")
    po = art.array("piece_off")
    if art.sections["pieces"].dtype != "|u1" or not len(po) or int(po[-1]) != len(blob):
        return  # the loader's own offset checks report it
    if art.sections["piece_off"].dtype == "<u4":
        from .runtime import _spm

        # one native pass: offsets in order, the blob well-formed UTF-8, no offset inside a character
        bad = _spm.check_pieces(blob, po)
        if bad is not None:
            what, i = bad
            if what == "order":
                raise error(where, "piece_off", "piece offsets are inconsistent")
            if what == "utf8":
                raise error(where, f"pieces[{i}]", "the piece strings are not valid UTF-8")
            raise error(where, "piece_off", f"offset {i} cuts a UTF-8 character")
        return
    check_pieces_py(blob, po, where)


def check_scores(m: Meta) -> None:
    """meta.min_score / max_score: hexadecimal floats (float.hex), as the loaders read them."""
    for key in ("min_score", "max_score"):
        v = m.str(key)
        try:
            float.fromhex(v)
        except ValueError:
            raise m.fail(key, f"{v!r} is not a hexadecimal float") from None


def check_pieces_py(blob, po, where: str) -> None:
    """The pure-Python form of the native piece check (its oracle in the tests)."""
    if int(po[0]) != 0 or np.any(np.diff(po.astype(np.int64)) < 0):
        raise error(where, "piece_off", "piece offsets are inconsistent")
    try:
        bytes(blob).decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(where, f"pieces[{e.start}]", "the piece strings are not valid UTF-8") from None
    inner = po[(po > 0) & (po < len(blob))].astype(np.int64)
    cont = (blob[inner] & 0xC0) == 0x80
    if cont.any():
        k = int(np.flatnonzero(cont)[0])
        raise error(where, "piece_off", f"offset {int(inner[k])} cuts a UTF-8 character")
