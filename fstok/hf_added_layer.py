"""Tokens added to a loaded `fstok.Tokenizer` (`add_tokens` / `add_special_tokens`) matched by the face in
front of its compiled core, so that adding one costs building a literal set (`fstok.literals`), not a
compile of the whole tokenizer.

HF splits a text on its added tokens before anything else runs: each match becomes one token (and one
word), and the normalizer, pre-tokenizer and model run on each stretch between matches on its own.  The
layer does the same with the compiled core: it finds the new tokens leftmost-longest (HF's Aho-Corasick
LeftmostLongest) and gives each stretch to the core, shifting its offsets and word ids.  That equals HF's one
pass over all the added tokens (the core's own and the new ones) exactly when no occurrence of a new token
can overlap one of the core's added tokens, so `layerable` asks that no new token contain, lie inside,
or start with the end of (or end with the start of) any added token the core already has.  Other cases
(lstrip / rstrip / single_word, a normalized token under a normalizer, which HF matches in the normalized
text, a core whose pre-tokenizer treats the text's first stretch apart: Metaspace prepend_scheme "first")
are compiled into a new core instead.  The oracle is that compiled core (tests/test_hf_added_layer.py).
"""
from __future__ import annotations

import json
from typing import Optional

import numpy as np

from .literals import LiteralSet

__all__ = ["AddedLayer", "layerable"]


def _overlaps(a: str, b: str) -> bool:
    """Whether an occurrence of a and one of b can share a character."""
    if a in b or b in a:
        return True
    for k in range(1, min(len(a), len(b))):
        if a.endswith(b[:k]) or b.endswith(a[:k]):
            return True
    return False


def layerable(obj: dict, core_added: list[dict], new: list[dict]) -> bool:
    """Whether the tokens `new` (tokenizer.json added_tokens entries, none of them known yet) can be
    matched by a layer in front of a core compiled with `core_added` for the tokenizer.json `obj`."""
    has_norm = obj.get("normalizer") is not None
    pre = json.dumps(obj.get("pre_tokenizer"))
    if '"first"' in pre:  # Metaspace(prepend_scheme="first"): the core would take each stretch as the text's first
        return False
    for e in new:
        c = e.get("content")
        if not c or e.get("lstrip") or e.get("rstrip") or e.get("single_word"):
            return False
        if has_norm and e.get("normalized", not e.get("special", False)):
            return False  # HF matches it in the normalized text
        for a in core_added:
            if a.get("content") and _overlaps(c, a["content"]):
                return False
    return True


class AddedLayer:
    """A face core (`fstok.hf_tokenizer._Core`'s protocol) with `tokens` (content -> id) matched before
    `base`."""

    def __init__(self, base, tokens: dict[str, int], id_to_token):
        self.base = base
        self.tokens = dict(tokens)
        self.id_to_token = id_to_token
        self.matcher = LiteralSet(self.tokens)  # leftmost-longest, as HF's added-token matcher

    @property
    def trims(self) -> bool:
        return getattr(self.base, "trims", False)

    def _tokens_of(self, r) -> list[str]:
        if len(r) > 3:
            return list(r[3])
        i2t = self.id_to_token
        return [i2t[i] for i in r[0]]

    def model_encode(self, text, **kw):
        if not isinstance(text, str) or self.matcher.search(text) is None:
            return self.base.model_encode(text, **kw)
        ids: list[int] = []
        offs: list = []
        words: list = []
        toks: list[str] = []
        w = pos = 0

        def stretch(a: int, b: int) -> None:
            nonlocal w
            if b <= a:
                return
            r = self.base.model_encode(text[a:b])
            ids.extend(r[0])
            offs.extend((s + a, e + a) for s, e in r[1])
            words.extend(None if x is None else x + w for x in r[2])
            toks.extend(self._tokens_of(r))
            known = [x for x in r[2] if x is not None]
            w += max(known) + 1 if known else 0

        for a, b in self.matcher.finditer(text):
            stretch(pos, a)
            c = text[a:b]
            ids.append(self.tokens[c])
            offs.append((a, b))
            words.append(w)
            toks.append(c)
            w += 1
            pos = b
        stretch(pos, len(text))
        return ids, offs, words, toks

    def _holding(self, texts) -> list[int]:
        m = self.matcher
        return [k for k, t in enumerate(texts) if not isinstance(t, str) or m.search(t) is not None]

    def model_batch(self, texts, num_threads, **kw):
        hold = set(self._holding(texts))
        if not hold:
            return self.base.model_batch(texts, num_threads, **kw)
        rest = [k for k in range(len(texts)) if k not in hold]
        out: list = [None] * len(texts)
        if rest:
            for k, r in zip(rest, self.base.model_batch([texts[k] for k in rest], num_threads, **kw)):
                out[k] = r
        for k in hold:
            out[k] = self.model_encode(texts[k])
        return out

    def ids_batch(self, texts, num_threads):
        hold = set(self._holding(texts))
        if not hold:
            return self.base.ids_batch(texts, num_threads)
        res = [np.asarray(self.model_encode(t)[0], dtype=np.uint32) for t in texts]
        lens = np.fromiter((len(r) for r in res), dtype=np.int64, count=len(res))
        return (np.concatenate(res) if res else np.zeros(0, np.uint32)), lens

    def offsets_batch(self, texts, num_threads):
        if not self._holding(texts):
            return self.base.offsets_batch(texts, num_threads)
        rows = [self.model_encode(t) for t in texts]
        lens = np.fromiter((len(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        n = int(lens.sum())
        ids = np.fromiter((i for r in rows for i in r[0]), dtype=np.uint32, count=n)
        offs = np.fromiter((x for r in rows for o in r[1] for x in o), dtype=np.int64, count=2 * n).reshape(-1, 2)
        return ids, lens, offs


def layer_tokens(layer: Optional[AddedLayer]) -> dict[str, int]:
    return dict(layer.tokens) if layer is not None else {}
