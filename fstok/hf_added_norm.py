"""Added tokens matched after the normalizer (`"normalized": true`) for the WordPiece face of `fstok.Tokenizer`.

HF's AddedVocabulary matches in two passes: the tokens with normalized=false in the raw text, then, in each
stretch between those matches, the others in the *normalized* text, each token by its content passed through
the normalizer.  A match's offsets are the original characters its normalized characters came from; its
token string is the normalized text it covers.  The stretches between matches are pre-tokenized and encoded
from their normalized text.

Here the normalizer runs in Python with HF's alignment (`normalizer(text)` -> normalized text and, per
normalized character, the original character span it came from); the matches are found in the normalized
text with HF's rules (`fstok.hf_spm.find_added`), and the compiled core encodes the *original* text of each
stretch between them (it normalizes it itself).  That equals HF's result where the stretch's original text
normalizes to exactly the stretch; where a match boundary falls inside one original character's normalized
form (a character that normalizes to several characters, only part of which a token matches) it does not,
and `NotImplementedError` names the token: never a silently different result.  Spaces are the exception:
the WordPiece face's pre-tokenizer (BertPreTokenizer) drops them, so a stretch that holds only part of the
spaces of a character's normalized form (the padding BertNormalizer puts around a CJK character, taken by an
lstrip / rstrip token) encodes as its whole characters do.

`BertNormalizer` follows HF's per-code-point facts (`fstok/data/bert_unicode.npz`, probed from HF tokenizers
itself); the other normalizers come from `fstok.pipeline.normalizers` (their alignment bookkeeping).
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["aligned_normalizer", "split_normalized"]

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "bert_unicode.npz")


@functools.lru_cache(maxsize=1)
def _bert_facts() -> dict:
    z = np.load(_DATA)

    def unpack(name: str) -> dict[int, str]:
        keys, offs, vals = z[f"{name}_keys"], z[f"{name}_offs"], z[f"{name}_vals"]
        chars = "".join(map(chr, vals.tolist()))
        o = offs.tolist()
        return {int(k): chars[o[i]:o[i + 1]] for i, k in enumerate(keys.tolist())}

    return {"clean": z["clean"], "cjk": z["cjk"], "ccc": z["ccc"], "mn": z["mn"], "lower": unpack("lower"),
            "nfd": unpack("nfd")}


class BertNorm:
    """HF's BertNormalizer (clean_text -> CJK padding -> NFD and drop Mn -> lowercase), every step a map of
    one original character to a string whose characters all align to that character."""

    def __init__(self, cfg: dict):
        self.clean_text = bool(cfg.get("clean_text", True))
        self.chinese = bool(cfg.get("handle_chinese_chars", True))
        self.lowercase = bool(cfg.get("lowercase", True))
        sa = cfg.get("strip_accents")
        self.strip = self.lowercase if sa is None else bool(sa)
        self._memo: dict[str, str] = {}

    def char(self, ch: str) -> tuple[str, tuple]:
        """(normalized form of one character, (canonical combining class, kept) of each of its NFD
        characters, dropped ones included, where a class is not 0: what NFD's canonical reordering looks at)."""
        hit = self._memo.get(ch)
        if hit is not None:
            return hit
        f = _bert_facts()
        cp = ord(ch)
        marks: tuple = ()
        if self.clean_text and f["clean"][cp]:
            out = "" if f["clean"][cp] == 1 else " "
        else:
            s = f["nfd"].get(cp, ch) if self.strip else ch
            kept = []
            for d in s:
                if self.strip and f["mn"][ord(d)]:
                    continue
                kept.append(f["lower"].get(ord(d), d) if self.lowercase else d)
            out = "".join(kept)
            if self.strip:
                cc = tuple((int(f["ccc"][ord(d)]), not f["mn"][ord(d)]) for d in s)
                if any(c for c, _ in cc):
                    marks = cc
            if self.chinese and f["cjk"][cp]:
                out = " " + out + " "
        hit = self._memo[ch] = (out, marks)
        return hit

    def __call__(self, text: str) -> tuple[str, list[int], list[int]]:
        parts: list[str] = []
        starts: list[int] = []
        run_owners: set = set()
        last = 0
        moved = kept = False
        for k, ch in enumerate(text):
            s, marks = self.char(ch)
            if self.strip and s != "" or marks:
                # NFD reorders each run of non-starters by combining class; a run that is out of order, spans
                # two original characters and keeps a mark could move that mark away from the character it
                # aligns to (dropped marks vanish wherever they go)
                for c, keep in (marks or ((0, True),)):
                    if c == 0:
                        if moved and kept and len(run_owners) > 1:
                            raise NotImplementedError(
                                f"canonical reordering across characters near {text[max(k - 2, 0):k + 1]!r}")
                        run_owners, last, moved, kept = set(), 0, False, False
                    else:
                        moved |= c < last
                        kept |= keep
                        last = c
                        run_owners.add(k)
            if s:
                parts.append(s)
                starts.extend([k] * len(s))
        if moved and kept and len(run_owners) > 1:
            raise NotImplementedError(f"canonical reordering across characters near {text[-3:]!r}")
        return "".join(parts), starts, [k + 1 for k in starts]


def aligned_normalizer(cfg: Any, where: str) -> Callable[[str], tuple[str, list[int], list[int]]]:
    """text -> (normalized text, original start per normalized character, original end per character)."""
    if isinstance(cfg, dict) and cfg.get("type") == "BertNormalizer":
        return BertNorm(cfg)
    from .pipeline.normalizers import from_config
    from .pipeline.normalized import Piece

    norm = from_config(cfg, where)  # raises UnsupportedComponent naming what the pipeline does not model

    def run(text: str):
        if norm is None:
            return text, list(range(len(text))), list(range(1, len(text) + 1))
        p = norm.normalize(Piece.original(text, 0, len(text)))
        return p.text, list(p.starts), list(p.ends)

    return run


def split_normalized(text: str, normalize, rx, forms: dict[str, int], entries: dict[int, dict],
                     source: str) -> list[tuple[Optional[int], int, int, str]]:
    """HF's second matching pass over one stretch `text` (no raw matches in it): (id or None, original start,
    original end, normalized text) per piece in order; a None piece is a stretch for the model, its text the
    original one (the compiled core normalizes it)."""
    from .hf_spm import find_added

    ntext, starts, ends = normalize(text)
    if rx is None or not ntext:
        return [(None, 0, len(text), text)] if ntext else []
    out: list[tuple[Optional[int], int, int, str]] = []
    for tid, a, b in find_added(ntext, rx, forms, entries):
        if b <= a:
            continue
        oa, ob = starts[a], ends[b - 1]
        if tid is not None:
            out.append((tid, oa, ob, ntext[a:b]))
            continue
        piece = text[oa:ob]
        want, got = ntext[a:b], normalize(piece)[0]
        if got != want and got.strip(" ") == want.strip(" "):
            # the stretch holds whole characters but only part of the spaces one of them normalizes to (the
            # padding around a CJK character, a space an lstrip / rstrip token took): BertPreTokenizer drops
            # spaces, so the original characters encode to what the stretch does
            got = want
        if got != want and not want.strip(" "):
            continue  # only spaces of a character a neighbouring match took: no tokens, as in HF
        if got != want:
            near = next((t for t in out if t[0] is not None), None)
            raise NotImplementedError(
                f"{source}: an added token matched after the normalizer{' (' + repr(near[3]) + ')' if near else ''} "
                f"splits the normalized form of one character of the text ({text[max(oa - 1, 0):ob + 1]!r}); "
                "fstok cannot encode the rest of that character as HF does")
        out.append((None, oa, ob, piece))
    return out
