"""`fstok.Tokenizer`: the API of HF `tokenizers.Tokenizer` over fstok's compiled core.

    tok = fstok.Tokenizer.from_file("tokenizer.json")          # or from_str(json), from_pretrained(dir or repo id)
    enc = tok.encode("question", "context")                    # Encoding: ids, type_ids, offsets, word_ids, ...
    tok.enable_truncation(128, stride=32); tok.enable_padding()
    batch = tok.encode_batch_numpy(texts)                      # {"input_ids", "attention_mask", "token_type_ids"}

The tokenizer.json is read once: its model, normalizer and pre-tokenizer are compiled by `fstok.compile`
(the artifact is cached by the content hash of those parts), while the post-processor, truncation, padding,
added tokens and decoder are applied here with HF's semantics (`fstok.postprocess`, `fstok.hf_encoding`,
`fstok.hf_decode`). A compiled core plugs in through `_Core`: anything that gives, per text, the token ids,
their character offsets and their pre-tokenizer word indices.
"""
from __future__ import annotations

import bisect
import copy
import functools
import glob
import hashlib
import json
import os
import re
import tempfile
import unicodedata
from array import array
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import hf_batch as _hf_batch
from .hf_batch import Assembler, batch_threads, gc_paused
from .hf_encoding import Encoding, pad_encodings, untrack
from .hf_words import _hfalign_mod, char_offsets
from .literals import LiteralSet
from .pipeline.added import hf_added_ids
from .postprocess import PostProcessor, _trim_offsets, finish, num_special_tokens_to_add, trim_spec

__all__ = ["Tokenizer", "AddedToken"]

_STRATEGIES = {"LongestFirst": "longest_first", "OnlyFirst": "only_first", "OnlySecond": "only_second"}
_STRATEGIES_JSON = {v: k for k, v in _STRATEGIES.items()}
_DIRECTIONS = {"Right": "right", "Left": "left"}
_DIRECTIONS_JSON = {v: k for k, v in _DIRECTIONS.items()}
# the parts of a tokenizer.json that the compiled core depends on (the rest is applied by this module)
_CORE_KEYS = ("model", "normalizer", "pre_tokenizer", "added_tokens")


def _cache_dir() -> str:
    from .registry import cache_dir

    return cache_dir()


class AddedToken:
    """HF `tokenizers.AddedToken`: a literal the tokenizer matches before its model (`normalized` defaults to
    `not special`, as in HF, until it is set)."""

    __slots__ = ("content", "single_word", "lstrip", "rstrip", "_normalized", "special")

    def __init__(self, content: Optional[str] = None, single_word: bool = False, lstrip: bool = False,
                 rstrip: bool = False, normalized: Optional[bool] = None, special: bool = False):
        if content is not None and not isinstance(content, str):
            raise TypeError(f"AddedToken content must be a str, got {type(content).__name__}")
        self.content = content or ""
        self.single_word, self.lstrip, self.rstrip = bool(single_word), bool(lstrip), bool(rstrip)
        self._normalized = None if normalized is None else bool(normalized)
        self.special = bool(special)

    @property
    def normalized(self) -> bool:
        return (not self.special) if self._normalized is None else self._normalized

    @normalized.setter
    def normalized(self, value: bool) -> None:
        self._normalized = bool(value)

    def _key(self) -> tuple:
        return (self.content, self.single_word, self.lstrip, self.rstrip, self.normalized, self.special)

    def __eq__(self, other) -> bool:
        try:
            return self._key() == (other.content, other.single_word, other.lstrip, other.rstrip, other.normalized,
                                   other.special)
        except AttributeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.content

    def __repr__(self) -> str:
        b = lambda v: "True" if v else "False"  # noqa: E731
        return (f'AddedToken("{self.content}", rstrip={b(self.rstrip)}, lstrip={b(self.lstrip)}, '
                f"single_word={b(self.single_word)}, normalized={b(self.normalized)}, special={b(self.special)})")

    def __getstate__(self) -> dict:
        return {"content": self.content, "single_word": self.single_word, "lstrip": self.lstrip,
                "rstrip": self.rstrip, "normalized": self.normalized, "special": self.special}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    @classmethod
    def _from_json(cls, a: dict) -> "AddedToken":
        return cls(a["content"], single_word=a.get("single_word", False), lstrip=a.get("lstrip", False),
                   rstrip=a.get("rstrip", False), normalized=a.get("normalized", not a.get("special", False)),
                   special=a.get("special", False))


def _as_added(tok: Any, special: bool) -> Optional[dict]:
    """The tokenizer.json entry (without id) for a str or an AddedToken-like object given to add_tokens /
    add_special_tokens (HF marks an AddedToken special in add_special_tokens, on the object itself)."""
    if isinstance(tok, str):
        return {"content": tok, "single_word": False, "lstrip": False, "rstrip": False, "normalized": not special,
                "special": special}
    if not all(hasattr(tok, k) for k in ("content", "single_word", "lstrip", "rstrip", "normalized", "special")):
        raise TypeError(f"Input must be a List[Union[str, AddedToken]], got {type(tok).__name__}")
    if special:
        try:
            tok.special = True
        except AttributeError:
            pass
    return {"content": tok.content, "single_word": bool(tok.single_word), "lstrip": bool(tok.lstrip),
            "rstrip": bool(tok.rstrip), "normalized": bool(tok.normalized), "special": bool(special or tok.special)}


def _normalized_added_forms(obj: dict, source: str) -> dict[int, str]:
    """{id: normalized content} of the normalized added tokens the normalizer changes: HF decodes those
    through the decoder in that form (so a byte-level decoder gives the original text back)."""
    norm_cfg = obj.get("normalizer")
    todo = [a for a in obj.get("added_tokens") or [] if a.get("normalized", not a.get("special")) and a["content"]]
    if not norm_cfg or not todo:
        return {}
    if isinstance(norm_cfg, dict) and norm_cfg.get("type") == "BertNormalizer":
        from .hf_added_norm import BertNorm

        bn = BertNorm(norm_cfg)
        forms = {}
        for a in todo:
            try:
                n = bn(a["content"])[0]
            except NotImplementedError:
                continue
            if n != a["content"]:
                forms[int(a["id"])] = n
        return forms
    from .pipeline import UnsupportedComponent
    from .pipeline.normalizers import from_config

    try:
        norm = from_config(norm_cfg, source)
    except UnsupportedComponent:
        # normalizers the pipeline does not model (BertNormalizer, Precompiled): the content is decoded as is
        return {}
    if norm is None:  # an empty Sequence
        return {}
    out = {}
    for a in todo:
        n = norm.normalize_str(a["content"])
        if n != a["content"]:
            out[int(a["id"])] = n
    return out


# ---------------------------------------------------------------------------------------------- cores
class _Core:
    """What the face needs from a compiled tokenizer (one subclass per kind)."""

    def model_encode(self, text: str) -> tuple:
        """(ids, character offsets into `text`, word index per token[, token strings]) before any
        post-processing; the token strings are given where they are not the vocabulary's (Unigram's unknown
        pieces keep their text)."""
        raise NotImplementedError

    def ids_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        """(all ids as one uint32 array, int64 count per text), without Python objects per token."""
        raise NotImplementedError

    def model_batch(self, texts: list[str], num_threads: int) -> list[tuple]:
        """model_encode of every text; cores with a native batch path override it."""
        return [self.model_encode(t) for t in texts]

    def offsets_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ids_batch plus the (N, 2) character offsets of every token."""
        ids: list[int] = []
        offs: list = []
        lens = np.empty(len(texts), dtype=np.int64)
        for k, t in enumerate(texts):
            r = self.model_encode(t)
            ids.extend(r[0])
            offs.extend(r[1])
            lens[k] = len(r[0])
        return (np.asarray(ids, dtype=np.uint32), lens,
                np.asarray(offs, dtype=np.int64).reshape(-1, 2))


def _wordpiece_face_added(obj: dict, source: str) -> Optional[list[dict]]:
    """The added tokens of a WordPiece tokenizer.json that this face matches itself (all of them), or None
    when the compiled core's own matching is HF's: every added token special, in the vocabulary with its id,
    matched in the raw text, with no single_word / lstrip / rstrip.  Otherwise (a token outside the vocabulary takes its id from its
    added_tokens entry, as HF gives it) the face splits the text at the added tokens with HF's rules and the
    core encodes the text between them; tokens matched after the normalizer (normalized: true) are found in
    the normalized text (`fstok.hf_added_norm`)."""
    added = obj.get("added_tokens") or []
    vocab = obj["model"].get("vocab") or {}
    if all(a.get("special") and vocab.get(a.get("content")) == a.get("id") and not a.get("single_word")
           and not a.get("lstrip") and not a.get("rstrip")
           and not (a.get("normalized", False) and obj.get("normalizer") is not None) for a in added):
        return None
    hf_ids = hf_added_ids([a["content"] for a in added], vocab)
    added = [dict(a, id=hf_ids.get(a["content"], int(a["id"]))) for a in added]  # HF ignores the file's ids
    ids = [int(a["id"]) for a in added]
    for a in added:
        i = vocab.get(a["content"])
        if (i is not None and i != int(a["id"])) or (i is None and a["id"] in set(vocab.values())):
            raise NotImplementedError(f"{source}: added token {a['content']!r} has id {a['id']}, which the "
                                      "WordPiece vocabulary gives to another token")
    if len(set(ids)) != len(ids):
        raise NotImplementedError(f"{source}: two added tokens share an id")
    return added


def _wordpiece_core_added(obj: dict, face_added: list[dict]) -> list[dict]:
    """The added tokens the compiled core of a WordPiece face holds (the special tokens of the vocabulary,
    as matched in the raw text: the core is never asked to match them, the face does)."""
    vocab = obj["model"].get("vocab") or {}
    return [dict(a, normalized=False, lstrip=False, rstrip=False, single_word=False)
            for a in face_added if a.get("special") and vocab.get(a["content"]) == a["id"]]


class _WordPieceCore(_Core):
    def __init__(self, tok, added: dict[str, int], id_to_token: list[Optional[str]],
                 face_added: Optional[list[dict]] = None, normalizer: Any = None, source: str = "tokenizer.json"):
        self.tok = tok
        self.allowed = [c for c in added if c in tok.special_tokens]
        self.face = None
        self.nface = None  # the tokens matched after the normalizer: (regex, forms, entries)
        self.literals = list(self.allowed)
        self.source = source
        if face_added:
            from .hf_spm import added_matcher

            entries = {int(a["id"]): a for a in face_added}
            forms: dict[str, int] = {}
            nforms: dict[str, int] = {}
            for i, a in sorted(entries.items(), key=lambda kv: (not kv[1].get("special"), kv[0])):
                if not a["content"]:
                    continue
                if normalizer is not None and a.get("normalized", not a.get("special")):
                    if self.nface is None:
                        from .hf_added_norm import aligned_normalizer

                        self.norm = aligned_normalizer(normalizer, source)
                        self.nface = ()
                    form = self.norm(a["content"])[0]  # HF matches a normalized token by its normalized content
                    if form:
                        nforms.setdefault(form, i)
                else:
                    forms.setdefault(a["content"], i)
            self.face = (added_matcher(list(forms)), forms, entries)
            if self.nface is not None:
                self.nface = (added_matcher(list(nforms)), nforms, entries)
            self.allowed = []  # the core matches nothing itself
            self.literals = list(forms)
            self.i2t = id_to_token
        prefix = tok.continuing_subword_prefix
        if not prefix:
            raise NotImplementedError("WordPiece without a continuing_subword_prefix: word ids cannot be derived")
        # a token continues the word before it iff its vocabulary string carries the prefix (the first
        # piece of a BERT word never starts with '#', which BertPreTokenizer splits off as punctuation)
        cont = np.zeros(len(id_to_token), dtype=bool)
        for i, t in enumerate(id_to_token):
            if t is not None and t.startswith(prefix) and t not in added:
                cont[i] = True
        self.cont = cont

    def _plain(self, text):
        ids, offs = self.tok.encode_with_offsets(text, allowed_special=self.allowed)
        if not ids:
            return [], [], []
        starts = ~self.cont[np.asarray(ids, dtype=np.int64)]
        words = (np.cumsum(starts) - 1).tolist()
        return ids, offs, words

    def model_encode(self, text):
        if self.face is None:
            return self._plain(text)
        from .hf_spm import append_added, find_added

        ids: list[int] = []
        offs: list[tuple[int, int]] = []
        words: list[int] = []
        toks: list[str] = []
        out = (ids, offs, words, toks)
        i2t = self.i2t
        w = 0
        for tid, a, b in find_added(text, *self.face):
            if tid is not None:  # HF names the match by the text it covers (lstrip / rstrip included)
                w = append_added(out, tid, a, b, w, text[a:b])
                continue
            if self.nface is not None:  # HF's second pass: the normalized tokens in the normalized stretch
                from .hf_added_norm import split_normalized

                parts = [(t2, a + x, a + y, s2) for t2, x, y, s2 in
                         split_normalized(text[a:b], self.norm, *self.nface, self.source)]
            else:
                parts = [(None, a, b, None)]
            for t2, x, y, s2 in parts:
                if t2 is not None:  # named by its normalized text, with the original span it came from
                    w = append_added(out, t2, x, y, w, s2)
                    continue
                i2, o2, w2 = self._plain(text[x:y])
                ids += i2
                offs += [(p + x, q + x) for p, q in o2]
                words += [v + w for v in w2]
                toks += [i2t[i] for i in i2]
                if w2:
                    w += w2[-1] + 1
        return ids, offs, words, toks

    def _holding(self, texts: list[str]) -> list[int]:
        """Indices of the texts that may hold an added token (all of them where a token is matched after the
        normalizer: its text in the input need not be its content)."""
        if self.nface is not None:
            return list(range(len(texts)))
        return _texts_holding(texts, self.literals) if self.literals else []

    def _special_text(self, text: str, offsets: bool):
        """(ids, offsets or None) of a text holding added-token text."""
        if self.face is not None:
            r = self.model_encode(text)
            return r[0], (r[1] if offsets else None)
        if offsets:
            return self.tok.encode_with_offsets(text, allowed_special=self.allowed)
        return self.tok.encode(text, allowed_special=self.allowed), None

    def model_batch(self, texts, num_threads):
        if self.face is not None:  # texts holding added-token text: the face's split (its token strings)
            special = self._holding(texts)
            if special:
                sp = set(special)
                clean = [i for i in range(len(texts)) if i not in sp]
                out: list = [None] * len(texts)
                for i, r in zip(clean, self.model_batch([texts[i] for i in clean], num_threads) if clean else []):
                    out[i] = r
                for i in special:
                    out[i] = self.model_encode(texts[i])
                return out
        ids, lens, offs = self.offsets_batch(texts, num_threads)
        if not len(ids):
            return [([], [], []) for _ in texts]
        first = np.zeros(len(ids), dtype=bool)
        ends = np.cumsum(lens)
        first[(ends - lens)[lens > 0]] = True
        # a word starts at each token without the continuing prefix, and at each text's first token
        start = ~self.cont[ids.astype(np.int64)] | first
        w = np.cumsum(start) - 1
        w -= np.repeat(w[(ends - lens)[lens > 0]], lens[lens > 0])
        return _rows(ids, offs, w, lens)

    def offsets_batch(self, texts, num_threads):
        special = self._holding(texts)
        # one C batch: per text a bytes object of ids and one of offsets, nothing per token; texts holding
        # special-token text are split at it (in Python) and spliced in
        if special:
            sp = set(special)
            clean = [i for i in range(len(texts)) if i not in sp]
            got = self.tok._model.encode_batch([texts[i] for i in clean], num_threads, 3)
            res: list = [None] * len(texts)
            for i, r in zip(clean, got):
                res[i] = r
            for i in special:
                ids, offs = self._special_text(texts[i], True)
                res[i] = (np.asarray(ids, dtype=np.uint32).tobytes(),
                          np.asarray(offs, dtype=np.uint32).reshape(-1, 2).tobytes())
        else:
            res = self.tok._model.encode_batch(texts, num_threads, 3)
        ids = np.frombuffer(b"".join([r[0] for r in res]), dtype=np.uint32)
        lens = np.fromiter((len(r[0]) >> 2 for r in res), dtype=np.int64, count=len(res))
        offs = np.frombuffer(b"".join([r[1] for r in res]), dtype=np.uint32).reshape(-1, 2).astype(np.int64)
        return ids, lens, offs

    def ids_batch(self, texts, num_threads):
        special = self._holding(texts)
        if not special:
            ids, lens = self.tok._model.encode_batch(texts, num_threads, 4)
            return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(lens, dtype=np.int64)
        # texts holding special-token text are split at it in Python; the rest stay one C batch
        sp = set(special)
        clean = [i for i in range(len(texts)) if i not in sp]
        ids_c, lens_c = self.tok._model.encode_batch([texts[i] for i in clean], num_threads, 4)
        flat_c, lens_c = np.frombuffer(ids_c, dtype=np.uint32), np.frombuffer(lens_c, dtype=np.int64)
        rows = {i: np.asarray(self._special_text(texts[i], False)[0], dtype=np.uint32) for i in special}
        lens = np.zeros(len(texts), dtype=np.int64)
        lens[clean] = lens_c
        for i, r in rows.items():
            lens[i] = len(r)
        start = np.cumsum(lens) - lens
        flat = np.empty(int(lens.sum()), dtype=np.uint32)
        start_c = np.cumsum(lens_c) - lens_c
        flat[np.repeat(start[clean] - start_c, lens_c) + np.arange(len(flat_c))] = flat_c
        for i, r in rows.items():
            flat[start[i]:start[i] + len(r)] = r
        return flat, lens


class _BPECore(_Core):
    def __init__(self, tok, added: dict[str, int], id_to_token):
        self.tok = tok
        self.norm = None
        if tok._normalizer:
            # offsets through the Unicode normalizer: HF's alignment bookkeeping (fstok.pipeline.normalizers)
            from .pipeline.normalizers import from_config

            self.norm = from_config({"type": tok._normalizer}, "tokenizer.json")
        self.allowed = frozenset(tok.special_tokens)
        self.i2t = id_to_token
        off = np.asarray(tok._dec_off, dtype=np.int64)
        self.tok_len = off[1:] - off[:-1]  # bytes of each token
        top = max(added.values(), default=-1) + 1
        if top > len(self.tok_len):  # tokens added after compiling (`BPETokenizer.with_added_tokens`)
            self.tok_len = np.concatenate([self.tok_len, np.zeros(top - len(self.tok_len), dtype=np.int64)])
        for c, i in added.items():
            if i < len(self.tok_len):
                self.tok_len[i] = len(c.encode("utf-8"))
        for form, i in tok._added_norm.items():  # matched by its normalized content, in the normalized text
            if i < len(self.tok_len):
                self.tok_len[i] = len(form.encode("utf-8"))

    def _pieces(self, used: str, text: Optional[str] = None) -> list[tuple[int, int, bool]]:
        """(start, end, is_added_token) character spans of the pre-tokenizer words of the encoded text `used`,
        which `text` became (added tokens split out, the rest normalized, prefix spaces inserted).  The raw
        added tokens are those of `text` (HF matches them before normalizing: a normalized stretch that
        spells one is no match)."""
        tok = self.tok
        raw = dict(tok._added_raw)
        raw.update(tok._special_tokens)
        out: list[tuple[int, int, bool]] = []
        pattern = tok._pattern if tok._native else None
        pos = 0
        segs = None
        if text is not None and text != used:
            segs = []
            for seg, tid in tok._split_literals(text, raw):
                if tid is None:
                    seg = self._normalize_piece(seg, 0, len(seg)).text if self.norm is not None else seg
                    if tok._add_prefix_space:  # the spaces _plan_hf puts in front of each stretch
                        seg = "".join(sub if t2 is not None or sub.startswith(" ") else " " + sub
                                      for sub, t2 in tok._split_literals(seg, tok._added_norm))
                segs.append((seg, tid))
            if "".join(x for x, _ in segs) != used:
                segs = None
        for seg, tid in segs if segs is not None else tok._split_literals(used, raw):
            if tid is not None:
                out.append((pos, pos + len(seg), True))
            else:
                for sub, tid2 in tok._split_literals(seg, tok._added_norm):
                    if tid2 is not None:
                        out.append((pos, pos + len(sub), True))
                    else:
                        if pattern is not None:  # the compiled pre-tokenizer's C spanner
                            out.extend((pos + a, pos + b, False) for a, b in pattern.spans(sub) if b > a)
                        else:
                            spans: list[int] = []
                            tok._spanner.char_spans(sub, pos, spans)
                            out.extend((spans[k], spans[k + 1], False) for k in range(0, len(spans), 2))
                    pos += len(sub)
                continue
            pos += len(seg)
        return out

    def _map_normalized(self, used: str, text: str, cs: np.ndarray, ce: np.ndarray):
        """Offsets in `used` (added tokens split out, the rest normalized, prefix spaces inserted) mapped to
        `text` with the original span of every normalized character, as HF's NormalizedString keeps it."""
        from .pipeline.normalized import Piece

        tok = self.tok
        raw = dict(tok._added_raw)
        raw.update(tok._special_tokens)
        a: list[int] = []
        b: list[int] = []
        pos = 0
        for seg, tid in tok._split_literals(text, raw):
            if tid is not None:
                a.extend(range(pos, pos + len(seg)))
                b.extend(range(pos + 1, pos + len(seg) + 1))
            else:
                p = self._normalize_piece(text, pos, pos + len(seg))
                k = 0
                for sub, tid2 in tok._split_literals(p.text, tok._added_norm):
                    if tid2 is None and tok._add_prefix_space and not sub.startswith(" "):
                        first = (p.starts[k], p.ends[k]) if k < len(p.text) else (p.base, p.base)
                        a.append(first[0])
                        b.append(first[1])
                    a.extend(p.starts[k:k + len(sub)])
                    b.extend(p.ends[k:k + len(sub)])
                    k += len(sub)
            pos += len(seg)
        if len(a) != len(used):
            raise ValueError(f"{tok._normalizer} of this text differs between Python's unicodedata (which the "
                             "encoder uses) and HF's tables (which the offsets follow): its offsets cannot be mapped")
        if not a:
            return cs, ce
        A = np.asarray(a, dtype=np.int64)
        B = np.asarray(b, dtype=np.int64)
        return A[np.clip(cs, 0, len(a) - 1)], B[np.clip(ce - 1, 0, len(a) - 1)]

    def _normalize_piece(self, text: str, a: int, b: int):
        """self.norm of text[a:b] with HF's alignments, the Python normalizer run only on the stretches that
        can change: NFC / NFKC act on each stretch between two inert starters on its own (an ASCII character
        or a CJK unified ideograph: unchanged, never composed with what precedes it, and a stop to canonical
        reordering), so the stretches of other characters (each with the inert character before it, which
        may compose with them) are normalized alone and the rest keeps every character in place."""
        from .pipeline.normalized import Piece

        whole = Piece.original(text, a, b)
        if getattr(self.norm, "form", None) not in ("NFC", "NFKC"):
            return self.norm.normalize(whole)
        form = self.norm.form
        opaque = self.tok._hf_opaque()
        t2 = self._one_to_one(text[a:b], form, opaque)
        if t2 is not None:  # the whole text at once (a CJK text with fullwidth punctuation, say)
            return Piece(t2, whole.starts, whole.ends, a)
        out: list[str] = []
        st: list[int] = []
        en: list[int] = []
        pos = a
        for m in _LIVE.finditer(text, a, b):
            s0 = m.start() - 1 if m.start() > a else a
            seg = text[s0:m.end()]
            if unicodedata.is_normalized(form, seg) and not opaque(seg):
                continue  # HF's normalizer yields each character with change 0 (`Unicode.normalize`)
            t2 = self._one_to_one(seg, form, opaque)
            if t2 is not None:
                out.append(text[pos:s0])
                out.append(t2)
                st.extend(range(pos, m.end()))
                en.extend(range(pos + 1, m.end() + 1))
                pos = m.end()
                continue
            q = self.norm.normalize(Piece.original(text, s0, m.end()))
            if q.text == text[s0:m.end()] and list(q.starts) == list(range(s0, m.end())) and \
                    list(q.ends) == list(range(s0 + 1, m.end() + 1)):
                continue  # unchanged: stays in the identity stretch
            out.append(text[pos:s0])
            st.extend(range(pos, s0))
            en.extend(range(pos + 1, s0 + 1))
            out.append(q.text)
            st.extend(q.starts)
            en.extend(q.ends)
            pos = m.end()
        if pos == a:
            return whole
        out.append(text[pos:b])
        st.extend(range(pos, b))
        en.extend(range(pos + 1, b + 1))
        return Piece("".join(out), st, en, a)

    def _one_to_one(self, seg: str, form: str, opaque) -> Optional[str]:
        """The normalized form of `seg` where each character becomes one character in its place (a
        compatibility singleton such as a fullwidth comma, and no composition), else None.  A character whose
        full decomposition is one character d reads as d; if the text so read is in the normal form, it is
        the normalized text (both decompose alike), and HF's normalizer yields each character with change 0."""
        st = self.__dict__.get("_o2o")
        if st is None:
            st = self._o2o = ({}, set(), set())  # (code point -> its one-character form, chars seen, chars not so)
        rep, seen, bad = st
        new = None if seen.issuperset(seg) else set(seg) - seen  # (no set built for a text of known characters)
        if new:
            dform = "NFKD" if form == "NFKC" else "NFD"
            for c in new:
                d = unicodedata.normalize(dform, c)
                if len(d) != 1 or opaque(c) or opaque(d):
                    bad.add(c)
                elif d != c:
                    rep[ord(c)] = d
                seen.add(c)
        if not bad.isdisjoint(seg):
            return None
        t = seg.translate(rep)
        return t if unicodedata.is_normalized(form, t) else None

    def _native_row(self, text: str, ids: list, starts: bytes, trim=None, align: Optional[bytes] = None,
                    checked: bool = False):
        """(ids, offsets, word ids) by one C call (`fstok.runtime._hfalign.rows` over the compiled
        pre-tokenizer's byte spans) for a text that was encoded as it is (`text` is the text the core encoded:
        one the normalizer leaves unchanged keeps each character in its place) and holds no added-token text
        (each would need the splits of `_pieces`; `checked`: the caller found none); None otherwise."""
        tok = self.tok
        pat = tok._pattern if tok._native else None
        if pat is None or pat.spanner is None:
            return None
        if not checked:
            lits = self._literals()
            if lits and lits.search(text) is not None:
                return None
        _hfalign = _hfalign_mod()

        data = text.encode("utf-8")
        if align is None:
            align = np.arange(len(data), dtype=np.int32).tobytes() if len(data) == len(text) else _hfalign.chars(data)
        tt = None if trim is None else self._trim_table()
        args = (align, array("I", ids).tobytes(), self.tok_len, None,
                pat.spanner.byte_spans(data), starts, -1, 1 if pat.mode == "find" else 2)
        got = _hfalign.rows(*args) if tt is None else _hfalign.rows(*args, tt, trim)
        if got is None:
            return None
        if tt is None:
            return ids, got[0], got[1]
        i2t = self.i2t
        return ids, got[0], got[1], [i2t[i] for i in ids], got[2]

    def _trim_table(self) -> Optional[bytes]:
        """`_space_counts` as interleaved uint8 (leading, trailing) pairs by id, for `_hfalign.rows`; None
        where a token has more spaces than a byte counts (the face then trims in Python)."""
        tt = self.__dict__.get("_trim_tab", False)
        if tt is False:
            lead, trail = self._space_counts()
            n = len(self.tok_len)
            lead, trail = lead[:n], trail[:n]
            ok = not n or max(int(lead.max()), int(trail.max())) < 256
            tt = self._trim_tab = np.stack([lead, trail], axis=1).astype(np.uint8).tobytes() if ok else None
        return tt

    def _normalized_row(self, text: str):
        """(ids, offsets, word ids) of a text the normalizer changes, holding no added-token text, without a
        prefix space: the normalized text (with HF's alignment, `_normalize_piece`) is encoded by the C path
        and numbered by `_native_row`, whose offsets in it are mapped back through the alignment.  None where
        that does not apply."""
        tok = self.tok
        if self.norm is None or tok._add_prefix_space or not tok._native or not isinstance(text, str):
            return None
        lits = self._literals()
        if lits and lits.search(text) is not None:
            return None
        p = self._normalize_piece(text, 0, len(text))
        used = p.text
        # (a text read through one-character decompositions, `_one_to_one`, is in the form by construction)
        if (lits and lits.search(used) is not None) or (
                not isinstance(p.starts, range) and used != tok._hf_normalize(text)):
            return None
        sp1, sp2 = tok._matchers(self.allowed)
        try:
            ids, starts = tok._model.encode(used, sp1, 3, sp2, 1)
        except UnicodeEncodeError:
            return None
        if not ids:
            return [], [], []
        if isinstance(p.starts, range) and isinstance(p.ends, range):
            # each character in its place (a one-character form each): the offsets in `used` are those in text
            return self._native_row(used, ids, starts, checked=True)
        if isinstance(p.starts, range):
            st = np.arange(len(text), dtype=np.int32)
        else:
            st = np.asarray(p.starts, dtype=np.int32)
        if not isinstance(p.ends, range) and not np.array_equal(np.asarray(p.ends, dtype=np.int32), st + 1):
            r = self._native_row(used, ids, starts, checked=True)
            return None if r is None else (ids, [(p.starts[a], p.ends[b - 1]) for a, b in r[1]], r[2])
        # each normalized character came from one original character: the alignment of each byte of the
        # normalized text is that character's offset
        _hfalign = _hfalign_mod()

        data = used.encode("utf-8")
        ci = np.frombuffer(_hfalign.chars(data), dtype=np.int32) if len(data) != len(used) else slice(None)
        return self._native_row(used, ids, starts, align=st[ci].tobytes(), checked=True)

    def _literals(self) -> LiteralSet:
        lits = self.__dict__.get("_lits")
        if lits is None:
            tok = self.tok
            lits = self._lits = LiteralSet(set(tok._added_raw) | set(tok._special_tokens) | set(tok._added_norm))
        return lits

    def model_encode(self, text, trim=None):
        tok = self.tok
        if self.norm is not None and tok._text_needs_python(text):
            r = self._normalized_row(text)
            if r is not None:
                return r
        (ids, starts), used = tok._run(text, self.allowed, 3)
        if not ids:
            return [], [], []
        if used == text:
            r = self._native_row(text, ids, starts, trim)
            if r is not None:
                return r
        bs = np.frombuffer(starts, dtype=np.uint32).astype(np.int64)
        be = bs + self.tok_len[np.asarray(ids, dtype=np.int64)]
        d = np.frombuffer(used.encode("utf-8"), dtype=np.uint8)
        cum = np.zeros(len(d) + 1, dtype=np.int64)
        np.cumsum((d & 0xC0) != 0x80, out=cum[1:])
        cs = cum[np.minimum(bs + 1, len(d))] - 1  # the character holding the token's first byte
        ce = cum[np.minimum(be, len(d))]          # one past the character holding its last byte
        if self.norm is not None:
            cs, ce = self._map_normalized(used, text, cs, ce)
        elif used != text:
            cs, ce = _map_inserted_spaces(used, text, cs, ce)
        pieces = self._pieces(used, text)
        pstarts = np.fromiter((p[0] for p in pieces), dtype=np.int64, count=len(pieces))
        words = (np.searchsorted(pstarts, cum[np.minimum(bs + 1, len(d))] - 1, side="right") - 1).tolist()
        return ids, list(zip(cs.tolist(), ce.tolist())), words

    trims = True  # model_batch(trim=...) gives each row its trimmed offsets (`fstok.hf_words.trim_offsets`)
    fresh_rows = True  # model_encode / model_batch build new lists for every row (no cache hands one out twice)

    def model_batch(self, texts, num_threads, trim=None):
        """model_encode of many texts with no per-token Python work: the ids come from one threaded C call; a
        token's byte span is the running sum of its tokens' byte lengths (the tokens of a text spell its UTF-8
        exactly); word ids come from the compiled pre-tokenizer's C spanner.  Texts the C path does not take
        as they are (added-token text, text the normalizer changes, prefix spaces, lone surrogates) take
        model_encode."""
        tok = self.tok
        spanner = tok._pattern.spanner if (tok._native and tok._pattern is not None) else None
        if spanner is None or len(texts) < 8:
            return [self.model_encode(t) for t in texts]
        literals = set(tok._added_raw) | set(tok._added_norm) | set(tok._special_tokens)
        slow = set(_texts_holding(texts, literals)) if literals else set()
        if tok._python_text_path():
            slow.update(i for i, t in enumerate(texts) if tok._text_needs_python(t))
        fast = [i for i in range(len(texts)) if i not in slow]
        sub = [texts[i] for i in fast]
        # every text's ids in one uint32 buffer with int64 starts (no Python int per token); a text the C
        # path does not take as it is (lone surrogates) has no ids there and takes model_encode
        from .hf_words import batch_ids

        flat, lens, keep = batch_ids(tok._model, sub, num_threads)
        if len(keep) != len(sub):
            sub = [sub[k] for k in keep]
        out: list = [None] * len(texts)
        if keep:
            out_idx = [fast[k] for k in keep]
            blob = "".join(sub).encode("utf-8")
            d = np.frombuffer(blob, dtype=np.uint8)
            cum = np.zeros(len(d) + 1, dtype=np.int64)
            np.cumsum((d & 0xC0) != 0x80, out=cum[1:])
            tl = self.tok_len[flat]
            be = np.cumsum(tl)
            bs = be - tl
            cs = cum[np.minimum(bs + 1, len(d))] - 1
            ce = cum[np.minimum(be, len(d))]
            # per text: its first character and byte in the joined batch
            nbytes = np.fromiter((len(t.encode("utf-8")) if not t.isascii() else len(t) for t in sub),
                                 dtype=np.int64, count=len(sub))
            byte0 = np.cumsum(nbytes) - nbytes
            char0 = cum[byte0]
            rep_c = np.repeat(char0, lens)
            cs -= rep_c
            ce -= rep_c
            # word ids: the index of the pre-token holding each token's first byte
            sp = [np.frombuffer(spanner.byte_spans(t), dtype=np.uint64) for t in sub]
            find = tok._pattern.mode == "find"
            pstarts = [(a[0::2] if find else np.concatenate(([0], a[:-1])) if a.size else a).astype(np.int64)
                       for a in sp]
            np_ = np.fromiter((len(a) for a in pstarts), dtype=np.int64, count=len(pstarts))
            gstarts = np.concatenate(pstarts) + np.repeat(byte0, np_) if np_.sum() else np.zeros(0, np.int64)
            w = np.searchsorted(gstarts, bs, side="right") - 1 - np.repeat(np.cumsum(np_) - np_, lens)
            offs = np.stack([cs, ce], axis=1)
            rows = _rows(flat, offs, w, lens)
            if trim is not None:  # the processor's byte-level offset trimming over the whole batch
                from .hf_words import trim_offsets

                ids64 = flat.astype(np.int64)
                first = np.zeros(len(ids64), dtype=bool)
                first[(np.cumsum(lens) - lens)[lens > 0]] = True
                ta, tb = trim_offsets(ids64, cs, ce, first, *self._space_counts(), trim)
                tl = list(zip(ta.tolist(), tb.tolist()))
                i2t = self.i2t
                a = 0
                for k, (r, n) in enumerate(zip(rows, lens.tolist())):
                    rows[k] = r + ([i2t[i] for i in r[0]], tl[a:a + n])
                    a += n
            for i, row in zip(out_idx, rows):
                out[i] = row
        for i, t in enumerate(texts):
            if out[i] is None:
                out[i] = self.model_encode(t)
        return out

    def _space_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(leading, trailing) space characters of every token string by id (the byte-level trimming's view)."""
        sc = self.__dict__.get("_spaces")
        if sc is None:
            from .postprocess import space_run

            n = max(len(self.i2t), len(self.tok_len))
            lead = np.zeros(n, dtype=np.int64)
            trail = np.zeros(n, dtype=np.int64)
            for i, t in enumerate(self.i2t):
                if t:
                    lead[i], trail[i] = space_run(t)
            sc = self._spaces = (lead, trail)
        return sc

    def ids_batch(self, texts, num_threads):
        res = [np.asarray(r, dtype=np.uint32) for r in
               self.tok.encode_batch(texts, num_threads=num_threads, allowed_special="all", disallowed_special=())]
        lens = np.fromiter((len(r) for r in res), dtype=np.int64, count=len(res))
        return (np.concatenate(res) if res else np.zeros(0, np.uint32)), lens


#: runs of characters an NFC / NFKC can change or compose (all but ASCII and CJK unified ideographs)
_LIVE = re.compile("[^\x00-\x7f\u3400-\u4dbf\u4e00-\u9fff]+")


def _rows(ids: np.ndarray, offs: np.ndarray, words: np.ndarray, lens: np.ndarray) -> list[tuple]:
    """Per-text (ids, offsets, words) lists from flat batch arrays."""
    il, sl, el, wl = ids.tolist(), offs[:, 0].tolist(), offs[:, 1].tolist(), words.tolist()
    ol = list(zip(sl, el))
    out, a = [], 0
    for n in lens.tolist():
        b = a + n
        out.append((il[a:b], ol[a:b], wl[a:b]))
        a = b
    return out


def _texts_holding(texts: list[str], literals) -> list[int]:
    """Indices of the texts that contain one of `literals`: one search over the joined batch."""
    sep = "\x00"
    if any(sep in lit for lit in literals):
        return [i for i, t in enumerate(texts) if any(lit in t for lit in literals)]
    joined = sep.join(texts)
    hits = [a for a, _ in _literal_set(frozenset(literals)).finditer(joined)]
    if not hits:
        return []
    ends = np.cumsum(np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts)))
    return sorted(set(np.searchsorted(ends, np.asarray(hits), side="right").tolist()))


@functools.lru_cache(maxsize=16)
def _literal_set(literals: frozenset) -> LiteralSet:
    return LiteralSet(literals)


def _map_inserted_spaces(used: str, text: str, cs: np.ndarray, ce: np.ndarray):
    """Offsets in `used` (the text with prefix spaces inserted) mapped to `text`: an inserted space takes the
    span of the character it precedes, as HF's `prepend` aligns it."""
    a = np.empty(len(used), dtype=np.int64)
    b = np.empty(len(used), dtype=np.int64)
    j = 0
    for i, c in enumerate(used):
        if j < len(text) and text[j] == c:
            a[i], b[i] = j, j + 1
            j += 1
        else:
            a[i], b[i] = j, min(j + 1, len(text))
    if len(used) == 0:
        return cs, ce
    return a[np.clip(cs, 0, len(used) - 1)], b[np.clip(ce - 1, 0, len(used) - 1)]


def _core_obj(obj: dict) -> dict:
    """The parts of a tokenizer.json that the compiled core is made of (what `_compile_core` compiles)."""
    core_obj = {k: obj.get(k) for k in _CORE_KEYS}
    core_obj.update({"version": obj.get("version", "1.0"), "truncation": None, "padding": None,
                     "post_processor": None, "decoder": obj.get("decoder")})
    return core_obj


def _hand_parsed(tok, obj: dict) -> None:
    """A stage-by-stage pipeline loaded from its artifact parses its tokenizer.json section on first need
    (the added tokens, the token strings): it gets the face's parsed object of the same parts instead, so
    that the file is parsed once.  The lists the face edits in place are copied."""
    if type(tok).__name__ != "PipelineTokenizer":
        return
    own = tok.__dict__.get("_obj")
    if own is None or isinstance(own, dict):
        return
    core = _core_obj(obj)
    core["added_tokens"] = [dict(a) for a in obj.get("added_tokens") or []]
    tok.__dict__["_obj"] = core


def _compile_core(obj: dict, source: str, raw: Optional[bytes] = None):
    """The compiled fstok tokenizer for the core parts of `obj`, from the artifact cache when present.

    The cache key is the hash of the core parts' canonical JSON; serializing a large vocabulary for it costs
    seconds, so the raw tokenizer.json text (when given) is mapped to that key by a small index file."""
    from . import api as _api
    from ._compile_cache import _code_fingerprint
    from ._version import __version__

    # the version and the code's fingerprint: an artifact compiled by other code is never reused
    stamp = (__version__ + _code_fingerprint()).encode()
    index = None
    if raw is not None:
        rk = hashlib.sha256(raw + b"\0" + stamp).hexdigest()[:24]
        index = os.path.join(_cache_dir(), f"hf-src-{rk}.key")
        try:
            with open(index, encoding="ascii") as f:
                known = f.read().strip()
            hit = os.path.join(_cache_dir(), f"hf-{known}.fst")
            if len(known) == 24 and os.path.exists(hit):
                tok = _api.load(hit)
                _hand_parsed(tok, obj)
                return tok
        except Exception:  # no index yet, or a damaged one: the key is computed below
            pass

    core_obj = _core_obj(obj)
    data = json.dumps(core_obj, ensure_ascii=False, sort_keys=True).encode("utf-8")
    key = hashlib.sha256(data + stamp).hexdigest()[:24]
    path = os.path.join(_cache_dir(), f"hf-{key}.fst")

    def remember() -> None:
        if index is not None:
            try:
                tmp_i = f"{index}.{os.getpid()}.tmp"
                with open(tmp_i, "w", encoding="ascii") as f:
                    f.write(key)
                os.replace(tmp_i, index)
            except OSError:  # a read-only cache still works, without the shortcut
                pass

    if os.path.exists(path):
        try:
            tok = _api.load(path)
            _hand_parsed(tok, obj)
            remember()
            return tok
        except Exception:  # a damaged or stale cache entry is rebuilt below
            pass
    os.makedirs(_cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "tokenizer.json")
        with open(p, "wb") as f:
            f.write(data)
        try:
            tok = _api.compile(p, _uncached=True)  # cached below under its own key
        except (ValueError, NotImplementedError) as e:
            raise NotImplementedError(f"{source}: fstok cannot compile this tokenizer: "
                                      f"{str(e).replace(p, 'tokenizer.json')}") from None
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        tok.save(tmp)
    except (NotImplementedError, ValueError, TypeError):
        return tok  # a kind without an artifact form (a stage-by-stage pipeline): compiled in each process
    os.replace(tmp, path)
    remember()
    tok = _api.load(path)
    _hand_parsed(tok, obj)
    return tok


def _hides(special: str, other: str) -> bool:
    """Whether a leftmost-longest match of `special` can start before or at a match of `other` and overlap
    it, so that skipping the special match (encode_special_tokens) also skips `other` there."""
    for i in range(len(special)):
        if i == 0 and len(other) >= len(special):
            continue  # at the same start the longer `other` wins (or is equal and the same token)
        k = min(len(special) - i, len(other))
        if special[i:i + k] == other[:k]:
            return True
    return False


# ---------------------------------------------------------------------------------------------- face
def _is_text(x) -> bool:
    return isinstance(x, str)


class Tokenizer:
    """HF `tokenizers.Tokenizer` semantics over a compiled fstok tokenizer."""

    def __init__(self, obj: dict, source: str = "<tokenizer.json>", _core=None, _raw: Optional[bytes] = None):
        if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
            raise ValueError(f"{source}: not a tokenizer.json (no 'model' object)")
        self._obj = obj
        self._source = source
        model = obj["model"]
        vocab = model.get("vocab")
        id_to_token: list[Optional[str]]
        if isinstance(vocab, dict):
            n = max(vocab.values(), default=-1) + 1
            id_to_token = [None] * n
            for t, i in vocab.items():
                id_to_token[i] = t
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
            id_to_token = [v[0] for v in vocab]
        else:
            raise ValueError(f"{source}: model has no vocab")
        self._model_vocab_size = len(id_to_token)
        self._model_vocab = {t: i for i, t in enumerate(id_to_token) if t is not None}
        self._added: dict[str, int] = {}
        self._special: set[str] = set()
        added_raw = obj.get("added_tokens") or []
        hf_ids = hf_added_ids([a.get("content") for a in added_raw], vocab if isinstance(vocab, dict) else
                              {t: i for i, t in enumerate(id_to_token)})
        for a in added_raw:
            c = a["content"]
            i = hf_ids.get(c, int(a["id"]))  # HF's id (the file's differs only in crafted files)
            self._added[c] = i
            if a.get("special"):
                self._special.add(c)
            if i >= len(id_to_token):
                id_to_token.extend([None] * (i + 1 - len(id_to_token)))
            id_to_token[i] = c
        self._id_to_token = id_to_token
        self._vocab = {t: i for i, t in enumerate(id_to_token) if t is not None}
        self._special_ids = {self._added[c] for c in self._special}
        # keyed by HF's id of each token (the file's id differs only in crafted files)
        file_ids = {int(a["id"]): self._added[a["content"]] for a in added_raw}
        self._decode_forms = {file_ids.get(i, i): f for i, f in _normalized_added_forms(obj, source).items()}
        self._processor = PostProcessor.from_json(obj.get("post_processor"))
        from .hf_decode import check_decoder

        self._decoder = check_decoder(obj.get("decoder"), source)  # built once; refused here if unsupported
        self._truncation: Optional[dict] = None
        self._padding: Optional[dict] = None
        tr = obj.get("truncation")
        if tr:
            self.enable_truncation(tr["max_length"], stride=tr.get("stride", 0),
                                   strategy=_STRATEGIES.get(tr.get("strategy", "LongestFirst"), "longest_first"),
                                   direction=_DIRECTIONS.get(tr.get("direction", "Right"), "right"))
        pd = obj.get("padding")
        if pd:
            strat = pd.get("strategy", "BatchLongest")
            length = strat["Fixed"] if isinstance(strat, dict) else None
            self.enable_padding(direction=_DIRECTIONS.get(pd.get("direction", "Right"), "right"),
                                pad_id=pd.get("pad_id", 0), pad_type_id=pd.get("pad_type_id", 0),
                                pad_token=pd.get("pad_token", "[PAD]"), length=length,
                                pad_to_multiple_of=pd.get("pad_to_multiple_of"))
        self._compiled, self._core = self._make_core(obj, _core, _raw, self._added)
        self._name_normalized_matches()
        self._matching_core = self._core
        self._split_core: Optional[_Core] = None
        self._encode_special_tokens = False

    def _name_normalized_matches(self) -> None:
        """A match of a normalized added token is named by the normalized text it covers (its normalized
        content), as HF names it; the byte-level core gives no token strings of its own."""
        if isinstance(self._core, _BPECore):
            i2t = self._id_to_token
            for i, form in self._decode_forms.items():
                if self._model_vocab_size <= i < len(i2t):
                    i2t[i] = form

    def _make_core(self, obj: dict, _core, _raw: Optional[bytes], added: dict[str, int]) -> tuple:
        """(compiled tokenizer, face core) of `obj`."""
        source, id_to_token, model = self._source, self._id_to_token, obj["model"]
        face_added = _wordpiece_face_added(obj, source) if model.get("type") == "WordPiece" else None
        if _core is not None:
            compiled = _core
        elif face_added is not None:  # the core without the added tokens this face matches itself
            compiled = _compile_core(dict(obj, added_tokens=_wordpiece_core_added(obj, face_added)), source)
        else:
            compiled = _compile_core(obj, source, _raw)
        kind = type(compiled).__name__
        if kind == "PipelineTokenizer" and face_added is not None and _core is None:
            # the stage-by-stage pipeline matches every added token as HF does: it gets them all
            compiled = _compile_core(obj, source, _raw)
        if kind == "WordPieceTokenizer":
            return compiled, _WordPieceCore(compiled, added, id_to_token, face_added, obj.get("normalizer"), source)
        if kind == "BPETokenizer":
            norm_specials = [(a["content"], added[a["content"]], True) for a in obj.get("added_tokens") or []
                             if a.get("special") and a.get("normalized") and a.get("content") in added]
            if norm_specials and getattr(compiled, "_semantics", None) == "hf" and compiled._normalizer:
                # special tokens that HF looks for in the normalized text (the compiled file matches specials
                # in the raw text): moved to the run-time matcher of normalized added tokens
                compiled = compiled.with_added_tokens([t for t in norm_specials if t[0] in compiled._special_tokens])
            return compiled, _BPECore(compiled, added, id_to_token)
        if kind == "PipelineTokenizer":
            return compiled, _PipelineCore(compiled, model)
        if kind == "HFSentencePieceTokenizer":
            return compiled, _SpmCore(compiled)
        if hasattr(compiled, "hf_model_encode"):
            return compiled, _Duck(compiled)
        raise NotImplementedError(f"{source}: no HF face for compiled tokenizers of kind {kind}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(cls, path: Union[str, os.PathLike]) -> "Tokenizer":
        path = os.fspath(path)
        with open(path, "rb") as f:
            data = f.read()
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a valid tokenizer.json ({e})") from None
        return cls(obj, path, _raw=data)

    @classmethod
    def from_str(cls, json_str: str) -> "Tokenizer":
        if not isinstance(json_str, str):
            raise TypeError(f"from_str expects a str, got {type(json_str).__name__}")
        try:
            obj = json.loads(json_str)
        except json.JSONDecodeError as e:
            raise ValueError(f"not a valid tokenizer.json ({e})") from None
        return cls(obj, "<from_str>", _raw=json_str.encode("utf-8", "surrogatepass"))

    @classmethod
    def from_buffer(cls, buffer: bytes) -> "Tokenizer":
        return cls.from_str(bytes(buffer).decode("utf-8"))

    @classmethod
    def from_pretrained(cls, identifier: str, revision: str = "main", token: Optional[str] = None,
                        cache_dir: Optional[str] = None) -> "Tokenizer":
        """A local directory holding tokenizer.json, or a repo id found in the HF hub cache (no network)."""
        return cls.from_file(find_tokenizer_json(identifier, revision, cache_dir))

    # ------------------------------------------------------------------ vocabulary
    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        if with_added_tokens:
            return dict(self._vocab)
        return dict(self._model_vocab)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return len(self._vocab) if with_added_tokens else len(self._model_vocab)

    def token_to_id(self, token: str) -> Optional[int]:
        return self._vocab.get(token)

    def id_to_token(self, id: int) -> Optional[str]:  # noqa: A002 - HF's parameter name
        if self._decode_forms and id in self._decode_forms:
            return self._decode_forms[id]  # a normalized added token: HF names it by its normalized form
        if 0 <= id < len(self._id_to_token):
            return self._id_to_token[id]
        return None

    def get_added_tokens_decoder(self) -> dict[int, AddedToken]:
        return {int(a["id"]): AddedToken._from_json(a) for a in self._obj.get("added_tokens") or []}

    def add_tokens(self, tokens: Sequence) -> int:
        """Add literals (str or AddedToken) matched before the model; returns how many were new. New tokens
        that cannot overlap the tokenizer's own added tokens are matched in front of its compiled core
        (`fstok.hf_added_layer`); a byte-level BPE core and a SentencePiece-family core take the others
        (normalized ones under a normalizer included) into their run-time matchers; otherwise the core is
        compiled again (from the artifact cache when this set was compiled before)."""
        return self._add(tokens, False)

    def add_special_tokens(self, tokens: Sequence) -> int:
        """Add special tokens (skipped by decode with skip_special_tokens=True; never normalized unless the
        AddedToken says so); returns how many were new."""
        return self._add(tokens, True)

    def _add(self, tokens: Sequence, special: bool) -> int:
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, (list, tuple)):
            raise TypeError("Input must be a List[Union[str, AddedToken]]")
        entries = [_as_added(t, special) for t in tokens]
        obj = self._state()
        added = [dict(a) for a in obj.get("added_tokens") or []]
        by_content = {a["content"]: a for a in added}
        ids = [int(a["id"]) for a in added]
        n_model = self._model_vocab_size
        # HF's next id: past the largest added id when that is beyond the model's vocabulary
        nxt = n_model if not ids else (max(ids) + 1 if max(ids) >= n_model or n_model == 0 else n_model)
        count = 0
        fresh: list[dict] = []  # the entries of contents not added before
        for e in entries:
            if not e["content"]:
                continue
            old = by_content.get(e["content"])
            if old is not None and all(old.get(k) == v for k, v in e.items()):
                continue
            count += 1
            if old is not None:
                tid = int(old["id"])
            elif e["content"] in self._model_vocab:
                tid = self._model_vocab[e["content"]]
            else:
                tid, nxt = nxt, nxt + 1
            e = {"id": tid, **e}
            if old is not None:
                added[added.index(old)] = e
                fresh = [f for f in fresh if f is None or f["content"] != e["content"]] + [None]  # a changed token: compiled
            else:
                added.append(e)
                fresh.append(e)
            by_content[e["content"]] = e
        if count:
            obj["added_tokens"] = added
            mode = self._encode_special_tokens
            layer = None if mode else self._layer_after(added, fresh)
            spm = None if mode or layer is not None else self._spm_with(added)
            bpe = None if mode or layer is not None or spm is not None else self._bpe_with(fresh)
            if layer is not None:
                self._extend(obj, layer)
            elif spm is not None:
                self._extend(obj, (spm, {e["content"]: 0 for e in added}), replace=True)
            elif bpe is not None:
                self._extend(obj, (bpe, {e["content"]: 0 for e in added}), replace=True)
            else:
                self.__init__(obj, self._source, _core=self._same_wordpiece_core(obj))
                self.encode_special_tokens = mode
        return count

    def _same_wordpiece_core(self, obj: dict):
        """The compiled core of a WordPiece face when `obj` (this file with more added tokens) compiles to the
        same one (the new tokens are matched by the face), else None."""
        if not isinstance(self._matching_core, _WordPieceCore) or type(self._compiled).__name__ != "WordPieceTokenizer":
            return None
        old = _wordpiece_face_added(self._obj, self._source)
        new = _wordpiece_face_added(obj, self._source)
        # (without face-matched tokens the core was compiled with the file's added tokens as they are)
        had = list(self._obj.get("added_tokens") or []) if old is None else _wordpiece_core_added(self._obj, old)
        if new is None or had != _wordpiece_core_added(obj, new):
            return None
        return self._compiled

    def _spm_with(self, added: list[dict]):
        """The compiled SentencePiece-family core with `added` as its added tokens, without compiling
        (`HFSentencePieceTokenizer.with_added_tokens`), or None where the core is of another kind."""
        c = self._compiled
        if type(c).__name__ != "HFSentencePieceTokenizer" or not isinstance(self._matching_core, _SpmCore):
            return None
        return c.with_added_tokens(added, self._model_vocab)

    def _bpe_with(self, fresh: list):
        """The compiled byte-level BPE core with the new entries `fresh` as more added tokens, without
        compiling (`BPETokenizer.with_added_tokens`: its matchers find them, normalized ones in the normalized
        text), or None where the core is of another kind or an entry asks for what it does not do (a special
        token, lstrip / rstrip / single_word, a token changed rather than new)."""
        c = self._compiled
        if type(c).__name__ != "BPETokenizer" or type(self._matching_core) is not _BPECore or \
                getattr(c, "_semantics", None) != "hf" or not fresh or None in fresh:
            return None
        for e in fresh:
            if e.get("special") or e.get("lstrip") or e.get("rstrip") or e.get("single_word") or \
                    e["content"] in self._added or e["content"] in self._model_vocab:
                return None
        return c.with_added_tokens([(e["content"], int(e["id"]), bool(e.get("normalized", True))) for e in fresh])

    def _extend(self, obj: dict, layer: tuple, replace: bool = False) -> None:
        """The state `__init__(obj)` gives, for `obj` = this one plus new added tokens that `layer` (face
        core, {content: id}) matches in front of the current core: only the added tokens' tables change.
        With `replace`, `layer` is (compiled tokenizer, the contents it matches) that replaces the core."""
        from .hf_added_layer import AddedLayer

        self._obj = obj
        vocab = obj["model"].get("vocab")
        added_raw = obj.get("added_tokens") or []
        hf_ids = hf_added_ids([a.get("content") for a in added_raw], vocab if isinstance(vocab, dict) else
                              self._model_vocab)
        core, tokens = layer
        i2t = self._id_to_token
        for a in added_raw:
            c = a["content"]
            if c not in tokens or c in self._added:
                continue
            i = tokens[c] = hf_ids.get(c, int(a["id"]))
            self._added[c] = i
            if a.get("special"):
                self._special.add(c)
                self._special_ids.add(i)
            if i >= len(i2t):
                i2t.extend([None] * (i + 1 - len(i2t)))
            i2t[i] = c
            self._vocab[c] = i
        # keyed by HF's id of each token (the file's id differs only in crafted files)
        file_ids = {int(a["id"]): self._added[a["content"]] for a in added_raw}
        self._decode_forms = {file_ids.get(i, i): f for i, f in _normalized_added_forms(obj, self._source).items()}
        if replace and type(core).__name__ == "BPETokenizer":
            self._compiled = core
            self._core = self._matching_core = _BPECore(core, self._added, i2t)
            self._name_normalized_matches()
        elif replace:
            self._compiled = core
            self._core = self._matching_core = _SpmCore(core)
        else:
            self._core = self._matching_core = AddedLayer(core, tokens, i2t)
        self._split_core = None

    def _layer_after(self, added: list[dict], fresh: list[dict]) -> Optional[tuple]:
        """(face core, {content: id}) when the new entries `fresh` can be matched in front of the current
        core (`fstok.hf_added_layer`); None: the tokenizer is compiled again with them."""
        from .hf_added_layer import AddedLayer, layerable

        core = self._matching_core
        tokens: dict[str, int] = {}
        if isinstance(core, AddedLayer):
            core, tokens = core.base, dict(core.tokens)
        if not isinstance(core, (_PipelineCore, _BPECore, _WordPieceCore, _SpmCore)):
            return None
        if isinstance(core, _PipelineCore) and core.tok._standin_lo is not None:
            return None  # a stretch may end in a word without tokens: its words could not be counted
        if not fresh or None in fresh or any(e["content"] in tokens for e in fresh):
            return None
        fresh_contents = {e["content"] for e in fresh}
        core_added = [a for a in added if a["content"] not in tokens and a["content"] not in fresh_contents]
        if not layerable(self._obj, core_added, fresh):
            return None
        tokens.update((e["content"], int(e["id"])) for e in fresh)
        return core, tokens

    def num_special_tokens_to_add(self, is_pair: bool) -> int:
        return num_special_tokens_to_add(self._processor, bool(is_pair))

    # ------------------------------------------------------------------ settings
    def enable_truncation(self, max_length: int, stride: int = 0, strategy: str = "longest_first",
                          direction: str = "right") -> None:
        if strategy not in _STRATEGIES_JSON:
            raise ValueError(f"Unknown `strategy`: `{strategy}`. Use one of `longest_first`, `only_first`, or `only_second`")
        if direction not in _DIRECTIONS_JSON:
            raise ValueError(f"Unknown `direction`: `{direction}`. Use one of `left` or `right`.")
        n_added = self.num_special_tokens_to_add(False)
        effective = max_length - n_added
        if effective < stride:
            raise ValueError(f"tokenizer stride set to {stride}, which is greater than or equal to its effective max "
                             f"length of {effective} (= {max_length} original max length - {n_added} added special tokens), ")
        self._truncation = {"max_length": int(max_length), "stride": int(stride), "strategy": strategy,
                            "direction": direction}

    def no_truncation(self) -> None:
        self._truncation = None

    @property
    def truncation(self) -> Optional[dict]:
        return dict(self._truncation) if self._truncation is not None else None

    def enable_padding(self, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0, pad_token: str = "[PAD]",
                       length: Optional[int] = None, pad_to_multiple_of: Optional[int] = None) -> None:
        if direction not in _DIRECTIONS_JSON:
            raise ValueError(f"Unknown `direction`: `{direction}`. Use one of `left` or `right`")
        self._padding = {"length": length, "pad_to_multiple_of": pad_to_multiple_of, "pad_id": int(pad_id),
                         "pad_type_id": int(pad_type_id), "pad_token": pad_token, "direction": direction}

    def no_padding(self) -> None:
        self._padding = None

    @property
    def padding(self) -> Optional[dict]:
        return dict(self._padding) if self._padding is not None else None

    # HF's component attributes: read as their tokenizer.json objects; replacing one would change nothing in
    # the compiled core, so it is refused by name (edit the tokenizer.json and load it again)
    def _component(name: str):  # noqa: N805 - a property factory used in the class body
        def get(self):
            v = self._obj.get(name)
            return copy.deepcopy(v)

        def set_(self, value):
            raise TypeError(f"fstok.Tokenizer.{name} cannot be replaced: the tokenizer is compiled from its "
                            f"tokenizer.json (change '{name}' there and load it again)")
        return property(get, set_, doc=f"The tokenizer.json '{name}' object (read-only).")

    normalizer = _component("normalizer")
    pre_tokenizer = _component("pre_tokenizer")
    model = _component("model")
    decoder = _component("decoder")
    del _component

    @property
    def encode_special_tokens(self) -> bool:
        """False (the default): special-token text in the input is matched as the special token. True: it is
        encoded as ordinary text (HF's mode of the same name); other added tokens are still matched."""
        return self._encode_special_tokens

    @encode_special_tokens.setter
    def encode_special_tokens(self, value: bool) -> None:
        value = bool(value)
        if value and self._split_core is None:
            self._split_core = self._make_split_core()
        self._core = self._split_core if value else self._matching_core
        self._encode_special_tokens = value

    def _make_split_core(self) -> _Core:
        """The core of this tokenizer.json without its special added tokens: HF's added-token matcher skips
        a special match in this mode, which equals not having the token, unless the skipped match hides
        another added token it overlaps (both matched in the same text: raw or normalized), refused here."""
        added = self._obj.get("added_tokens") or []
        special = [a for a in added if a.get("special") and a["content"]]
        kept = [a for a in added if not a.get("special")]
        for s in special:
            for n in kept:
                if n["content"] and bool(n.get("normalized", True)) == bool(s.get("normalized", False)) \
                        and _hides(s["content"], n["content"]):
                    raise NotImplementedError(
                        f"{self._source}: encode_special_tokens=True with special token {s['content']!r} "
                        f"overlapping added token {n['content']!r} is not supported by fstok.Tokenizer")
        obj = dict(self._obj, added_tokens=kept)
        _, core = self._make_core(obj, None, None, {a["content"]: int(a["id"]) for a in kept})
        return core

    @property
    def post_processor(self) -> Optional[PostProcessor]:
        return self._processor

    @post_processor.setter
    def post_processor(self, value) -> None:
        """None, a `fstok.postprocess.PostProcessor`, its tokenizer.json object, or an HF processor object."""
        if value is None or isinstance(value, PostProcessor):
            proc, cfg = value, (None if value is None else value.to_json())
        else:
            cfg = value
            if not isinstance(cfg, dict) and hasattr(cfg, "__getstate__"):
                st = cfg.__getstate__()
                cfg = json.loads(st) if isinstance(st, (str, bytes)) else st
            if not isinstance(cfg, dict):
                raise TypeError(f"post_processor must be None, a PostProcessor or its tokenizer.json object, got "
                                f"{type(value).__name__}")
            proc = PostProcessor.from_json(cfg)
        self._processor = proc
        self._obj["post_processor"] = cfg

    # ------------------------------------------------------------------ encoding
    def _model_encoding(self, seq: Any, is_pretokenized: bool, type_id: int, what: str) -> Encoding:
        if isinstance(seq, np.ndarray):
            seq = seq.tolist()
        if is_pretokenized:
            if isinstance(seq, str) or not isinstance(seq, (list, tuple)):
                raise TypeError(f"{what}: InputSequence must be Union[List[str], Tuple[str]] with "
                                f"is_pretokenized=True, got {type(seq).__name__}")
            out = Encoding()
            for w, word in enumerate(seq):
                if not isinstance(word, str):
                    raise TypeError(f"{what}: pre-tokenized words must be str, got {type(word).__name__}")
                r = self._core.model_encode(word)
                ids, offs = r[0], r[1]
                toks = r[3] if len(r) > 3 else [self._id_to_token[i] for i in ids]
                out.merge_with(Encoding._raw(ids, [type_id] * len(ids), toks,
                                             [w] * len(ids), offs, [0] * len(ids), [1] * len(ids), [], {}), False)
            return out
        if not isinstance(seq, str):
            raise TypeError(f"{what}: TextInputSequence must be str, got {type(seq).__name__} "
                            "(pre-tokenized input needs is_pretokenized=True)")
        r = self._core.model_encode(seq)
        ids, offs, words = r[0], r[1], r[2]
        n = len(ids)
        i2t = self._id_to_token
        toks = r[3] if len(r) > 3 else [i2t[i] for i in ids]
        return Encoding._raw(ids, [type_id] * n, toks, words, offs, [0] * n, [1] * n, [], {})

    def encode(self, sequence, pair=None, is_pretokenized: bool = False, add_special_tokens: bool = True) -> Encoding:
        """Encode a text (or a pre-tokenized list of words), optionally with a pair; HF's truncation,
        post-processing and padding settings apply."""
        if not isinstance(is_pretokenized, bool) or not isinstance(add_special_tokens, bool):
            raise TypeError("encode(sequence, pair=None, is_pretokenized=False, add_special_tokens=True): "
                            "is_pretokenized and add_special_tokens must be bool")
        if not is_pretokenized and type(sequence) is str and (pair is None or type(pair) is str):
            # the batch path's per-text steps for one text: its trimmed offsets from the core, the template
            trim, trimming, kw = self._trim_plan()
            core = self._core
            ra = core.model_encode(sequence, **kw)
            rb = None if pair is None else core.model_encode(pair, **kw)
            out = self._lay([(sequence, pair)], [ra], iter(()) if rb is None else iter((rb,)), add_special_tokens,
                            trim, trimming)[0]
            p = self._padding
            if p is not None:
                pad_encodings([out], p["length"], p["pad_to_multiple_of"], p["direction"], p["pad_id"],
                              p["pad_type_id"], p["pad_token"])
        else:
            enc = self._model_encoding(sequence, is_pretokenized, 0, "sequence")
            penc = None if pair is None else self._model_encoding(pair, is_pretokenized, 1, "pair")
            out = finish(self._processor, enc, penc, add_special_tokens, self._truncation, self._padding)
        untrack((out,))
        return out

    def _split_input(self, item, is_pretokenized: bool):
        if isinstance(item, np.ndarray):
            item = item.tolist()
        if is_pretokenized:
            if isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, (list, tuple)) for x in item):
                return item[0], item[1]
            if isinstance(item, list) and len(item) == 2 and all(isinstance(x, (list, tuple)) for x in item):
                return item[0], item[1]
            return item, None
        if isinstance(item, str):
            return item, None
        if isinstance(item, (tuple, list)) and len(item) == 2:
            return item[0], item[1]
        raise TypeError(f"encode_batch: each input must be a str or a (str, str) pair, got {type(item).__name__}")

    def encode_batch(self, input: Sequence, is_pretokenized: bool = False, add_special_tokens: bool = True) -> list[Encoding]:  # noqa: A002
        if isinstance(input, str):
            raise TypeError("encode_batch expects a list of inputs, not a str")
        items = [self._split_input(x, is_pretokenized) for x in input]
        # a batch allocates a few lists per text and one tuple per offset, none of them in a cycle: the
        # cyclic collector would otherwise rescan the growing result many times over
        with gc_paused():
            if not is_pretokenized and len(items) >= 8 and isinstance(add_special_tokens, bool) and all(
                    isinstance(a, str) and (b is None or isinstance(b, str)) for a, b in items):
                out = self._encode_texts(items, add_special_tokens)
            else:
                # each encoding is padded by encode (HF pads in post_process too), then the batch to its longest
                out = [self.encode(a, b, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)
                       for a, b in items]
            p = self._padding
            if p is not None:
                pad_encodings(out, p["length"], p["pad_to_multiple_of"], p["direction"], p["pad_id"],
                              p["pad_type_id"], p["pad_token"])
            untrack(out)
        return out

    def _encode_texts(self, items: list[tuple[str, Optional[str]]], add_special_tokens: bool) -> list[Encoding]:
        """encode() of many (text, pair) items, the model step of all texts in one native batch."""
        nt = batch_threads()
        trim, trimming, kw = self._trim_plan()
        firsts = self._core.model_batch([a for a, _ in items], nt, **kw)
        pairs = [b for _, b in items if b is not None]
        seconds = iter(self._core.model_batch(pairs, nt, **kw)) if pairs else iter(())
        return self._lay(items, firsts, seconds, add_special_tokens, trim, trimming)

    def _trim_plan(self) -> tuple:
        """(add_prefix_space of the processor's one byte-level offset trimming or None, whether the rows
        get trimmed offsets, the core's keyword for them).  The cores that trim (`trims`) give each row its
        trimmed offsets too, which the template then takes."""
        trim = trim_spec(self._processor)
        if trim == "many":
            return None, False, {}
        trimming = trim is not None
        return trim, trimming, ({"trim": trim} if trimming and getattr(self._core, "trims", False) else {})

    def _assembler(self, pair: bool, add_special_tokens: bool, trimming: bool):
        """The Assembler of the current processor and truncation (kept until either changes)."""
        proc, trunc = self._processor, self._truncation
        c = self.__dict__.get("_asm_cache")
        if c is None or c[0] is not proc or c[1] != trunc:
            c = self._asm_cache = (proc, None if trunc is None else dict(trunc), {})
        key = (pair, add_special_tokens, trimming)
        a = c[2].get(key)
        if a is None:
            a = c[2][key] = Assembler(proc, pair, add_special_tokens, trunc, trimming)
        return a

    def _lay(self, items, firsts, seconds, add_special_tokens: bool, trim, trimming: bool) -> list[Encoding]:
        """The encodings of (text, pair) items from their model rows (`seconds` iterates the rows of the
        pairs): the processor's template, truncation and overflowing windows, as `finish` gives them."""
        proc, trunc, pad = self._processor, self._truncation, self._padding
        i2t = self._id_to_token

        def model(r, type_id):
            ids, offs, words = r[0], r[1], r[2]
            n = len(ids)
            toks = r[3] if len(r) > 3 else list(map(i2t.__getitem__, ids))
            return Encoding._raw(ids, [type_id] * n, toks, words, offs, [0] * n, [1] * n, [], {})

        def trimmed(r, e):
            """e with the offsets the processor's trimming gives (e itself is left for `finish`)."""
            if len(r) > 4:
                offs = r[4]
            else:
                t = Encoding._raw(e._ids, e._type_ids, e._tokens, e._words, e._offsets[:], e._special,
                                  e._attention, [], {})
                _trim_offsets(t, trim)
                offs = t._offsets
            return Encoding._raw(e._ids, e._type_ids, e._tokens, e._words, offs, e._special, e._attention, [], {})

        def rows(r, e):
            """(ids, offsets, word ids, tokens[, trimmed offsets]) of a model row and its encoding."""
            return (e._ids, e._offsets, e._words, e._tokens) + tuple(r[4:5])

        # texts that truncation leaves whole are laid into the processor's template; the batch is padded
        # by the caller (padding each first changes nothing: HF pads each to the same or a shorter length)
        asm = {False: None, True: None}
        out = []
        raw = Encoding._raw
        fresh = getattr(self._core, "fresh_rows", False)  # each row's lists are new, held by nothing else
        for (_, b), r in zip(items, firsts):
            rb = None if b is None else next(seconds)
            k = rb is not None
            if asm[k] is None:
                asm[k] = self._assembler(k, add_special_tokens, trimming)
            if not trimming and asm[k].fits(len(r[0]) + (len(rb[0]) if k else 0)):
                # the template reads ids, tokens, word ids and offsets only: no other list is built
                ea = raw(r[0], None, r[3] if len(r) > 3 else list(map(i2t.__getitem__, r[0])), r[2], r[1],
                         None, None, None, None)
                eb = None if rb is None else raw(rb[0], None, rb[3] if len(rb) > 3 else
                                                 list(map(i2t.__getitem__, rb[0])), rb[2], rb[1],
                                                 None, None, None, None)
                out.append(asm[k](ea, eb, None, fresh))
                continue
            ea = model(r, 0)
            eb = None if rb is None else model(rb, 1)
            n = len(ea._ids) + (len(eb._ids) if k else 0)
            if asm[k].fits(n):
                if trimming:
                    ea = trimmed(r, ea)
                    eb = None if eb is None else trimmed(rb, eb)
                out.append(asm[k](ea, eb))
            else:
                e = None
                if trunc is not None and (not trimming or (len(r) > 4 and (rb is None or len(rb) > 4))):
                    # the windows laid into the template at once (per window in `finish`, the oracle)
                    e = _hf_batch.overflowing(asm[k], rows(r, ea), None if rb is None else rows(rb, eb), trunc,
                                    trim if trimming else None)
                    if e is not None and pad is not None:
                        pad_encodings([e], pad["length"], pad["pad_to_multiple_of"], pad["direction"],
                                      pad["pad_id"], pad["pad_type_id"], pad["pad_token"])
                out.append(e if e is not None else finish(proc, ea, eb, add_special_tokens, trunc, pad))
        return out

    def post_process(self, encoding: Encoding, pair: Optional[Encoding] = None,
                     add_special_tokens: bool = True) -> Encoding:
        """Truncation, the post-processor and padding applied to encodings of `encode` (HF's
        `Tokenizer.post_process`); the inputs are left unchanged."""
        if not isinstance(encoding, Encoding) or (pair is not None and not isinstance(pair, Encoding)):
            raise TypeError("post_process expects fstok Encoding objects (from this tokenizer's encode)")
        return finish(self._processor, encoding.copy(), None if pair is None else pair.copy(), add_special_tokens,
                      self._truncation, self._padding)

    def encode_batch_fast(self, input: Sequence, is_pretokenized: bool = False, add_special_tokens: bool = True):  # noqa: A002
        return self.encode_batch(input, is_pretokenized, add_special_tokens)

    # asyncio forms (HF 0.23): the work runs in a worker thread, so the event loop keeps running meanwhile
    # (the compiled core releases the GIL while it encodes)
    async def async_encode(self, sequence, pair=None, is_pretokenized: bool = False,
                           add_special_tokens: bool = True) -> Encoding:
        import asyncio

        return await asyncio.to_thread(self.encode, sequence, pair, is_pretokenized, add_special_tokens)

    async def async_encode_batch(self, input: Sequence, is_pretokenized: bool = False,  # noqa: A002
                                 add_special_tokens: bool = True) -> list[Encoding]:
        import asyncio

        return await asyncio.to_thread(self.encode_batch, input, is_pretokenized, add_special_tokens)

    async def async_encode_batch_fast(self, input: Sequence, is_pretokenized: bool = False,  # noqa: A002
                                      add_special_tokens: bool = True) -> list[Encoding]:
        import asyncio

        return await asyncio.to_thread(self.encode_batch_fast, input, is_pretokenized, add_special_tokens)

    async def async_decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        import asyncio

        return await asyncio.to_thread(self.decode_batch, sequences, skip_special_tokens)

    def encode_batch_numpy(self, input: Sequence, pair: Optional[Sequence[str]] = None, add_special_tokens: bool = True,
                           num_threads: Optional[int] = None, dtype=np.int64, return_offsets_mapping: bool = False,
                           return_special_tokens_mask: bool = False) -> dict[str, np.ndarray]:
        """A padded batch as numpy arrays: input_ids, attention_mask, token_type_ids (rows as `encode_batch`
        gives them, overflowing windows dropped), and on request special_tokens_mask and offset_mapping
        (B, L, 2), built without Python objects per token."""
        from .hf_batch import encode_batch_numpy

        return encode_batch_numpy(self, input, pair, add_special_tokens, num_threads, dtype,
                                  return_offsets_mapping, return_special_tokens_mask)

    # ------------------------------------------------------------------ decoding
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        from .hf_decode import decode_tokens

        if isinstance(ids, (str, bytes)):
            raise TypeError("decode expects a sequence of token ids")
        toks = []
        for i in ids:
            if isinstance(i, bool) or not hasattr(i, "__index__"):
                raise TypeError(f"decode: token ids must be integers, got {type(i).__name__} ({i!r})")
            i = i.__index__()
            if not 0 <= i < 2 ** 32:  # HF converts to u32
                raise OverflowError(f"decode: token id {i} is outside u32" if i >= 0 else
                                    "can't convert negative int to unsigned")
            t = self._decode_forms.get(i) if self._decode_forms else None
            if t is not None:
                # HF decodes the token by its normalized form, and skips it as special only when that form
                # is the content of a special token
                if skip_special_tokens and t in self._special:
                    continue
                toks.append(t)
                continue
            t = self.id_to_token(i)
            if t is None:
                continue  # HF skips ids it does not know
            if skip_special_tokens and i in self._special_ids:
                continue
            toks.append(t)
        return decode_tokens(self._decoder, toks)

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(s, skip_special_tokens) for s in sequences]

    # ------------------------------------------------------------------ serialization
    def to_str(self, pretty: bool = False) -> str:
        return json.dumps(self._state(), ensure_ascii=False, indent=2 if pretty else None)

    def _state(self) -> dict:
        """The tokenizer.json object of the current state (nested objects shared with self._obj, which is
        never changed in place below the top level)."""
        obj = dict(self._obj)
        t = self._truncation
        obj["truncation"] = None if t is None else {"direction": _DIRECTIONS_JSON[t["direction"]],
                                                    "max_length": t["max_length"],
                                                    "strategy": _STRATEGIES_JSON[t["strategy"]], "stride": t["stride"]}
        p = self._padding
        obj["padding"] = None if p is None else {
            "strategy": "BatchLongest" if p["length"] is None else {"Fixed": p["length"]},
            "direction": _DIRECTIONS_JSON[p["direction"]], "pad_to_multiple_of": p["pad_to_multiple_of"],
            "pad_id": p["pad_id"], "pad_type_id": p["pad_type_id"], "pad_token": p["pad_token"]}
        return obj

    def save(self, path: Union[str, os.PathLike], pretty: bool = True) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_str(pretty))

    def __repr__(self) -> str:
        return f"fstok.Tokenizer({self._source!r}, model={self._obj['model'].get('type', '?')})"

    def __reduce__(self):
        return (Tokenizer.from_str, (self.to_str(),))


class _Duck(_Core):
    """A compiled tokenizer that speaks the face's protocol itself (hf_model_encode / hf_ids_batch)."""

    def __init__(self, tok):
        self.tok = tok

    def model_encode(self, text):
        return self.tok.hf_model_encode(text)

    def ids_batch(self, texts, num_threads):
        if hasattr(self.tok, "hf_ids_batch"):
            return self.tok.hf_ids_batch(texts, num_threads)
        res = [np.asarray(self.tok.hf_model_encode(t)[0], dtype=np.uint32) for t in texts]
        lens = np.fromiter((len(r) for r in res), dtype=np.int64, count=len(res))
        return (np.concatenate(res) if res else np.zeros(0, np.uint32)), lens


class _PipelineCore(_Core):
    """fstok's stage-by-stage tokenizer.json pipeline: its pre-post-processing encoding per text."""

    def __init__(self, tok, model: Optional[dict] = None):
        self.tok = tok
        model = model or {}
        # the parts of a BPE token string that are not text of its piece (CLIP's "</w>")
        self.suffix = model.get("end_of_word_suffix") or ""
        self.prefix = model.get("continuing_subword_prefix") or ""

    def _bare(self, t: str) -> str:
        if self.suffix and t.endswith(self.suffix):
            t = t[:-len(self.suffix)]
        if self.prefix and t.startswith(self.prefix):
            t = t[len(self.prefix):]
        return t

    def model_encode(self, text, trim=None):
        r = self._native_encode(text, trim)
        if r is None:
            g = self._guarded()
            r = g.row(text) if g is not None and isinstance(text, str) else None
        return r if r is not None else self.python_encode(text)

    def _guarded(self):
        """The rows of a guarded tokenizer from its compiled tables (`fstok.hf_align`), or None."""
        g = self.__dict__.get("_guard_rows", False)
        if g is False:
            from .hf_align import GuardedRows

            tok = self.tok
            ok = tok._mode == "guarded" and tok._tables is not None and tok._tables._native
            g = self._guard_rows = GuardedRows(tok) if ok else None
        return g

    def python_encode(self, text):
        """model_encode with the word ids from the pre-tokenizer run in Python (the oracle of
        `_native_encode`, and the path for texts the compiled tables do not take)."""
        tok = self.tok
        ids, toks, offs, words = tok._tokens(text)
        if tok._inner is None or tok.pre_tokenizer is None:
            return list(ids), [tuple(o) for o in offs], list(words), list(toks)
        # the compiled path numbers words per added-token split; HF numbers the pre-tokenizer's pieces:
        # each token belongs to the last piece (in order) that starts at or before the token's start
        starts: list[tuple[int, int]] = []  # (piece start in text, word index)
        ptexts: list[str] = []  # each piece's (normalized) text
        w = 0
        for piece, added in tok.added.extract_and_normalize(text):
            if added is not None:
                starts.append((piece.span()[0], w))
                ptexts.append(piece.text)
                w += 1
                continue
            for p in tok.pre_tokenizer.split([piece]):
                if p.text:
                    starts.append((p.offsets(0, len(p.text))[0], w))
                    ptexts.append(p.text)
                    w += 1
        # the token strings spell the pieces in order (byte-level BPE; a character the vocabulary lacks is
        # dropped): finding each in its piece is exact even where a piece boundary falls inside one original
        # character (pre-tokenizers after ByteLevel), which the offsets cannot tell apart
        out_words = []
        k = pos = 0
        for t in toks:
            t = self._bare(t)
            while k < len(ptexts):
                j = ptexts[k].find(t, pos) if t else -1
                if j >= 0:
                    out_words.append(k)
                    pos = j + len(t)
                    break
                k, pos = k + 1, 0
            else:
                break
        if len(out_words) == len(toks):
            return list(ids), [tuple(o) for o in offs], out_words, list(toks)
        out_words = []
        k = 0
        for a, _ in offs:
            while k + 1 < len(starts) and starts[k + 1][0] <= a:
                k += 1
            out_words.append(starts[k][1] if starts else None)
        return list(ids), [tuple(o) for o in offs], out_words, list(toks)

    def _direct(self) -> bool:
        """The compiled tables run the whole text (added tokens included): word ids come from piece
        boundaries of the compiled pre-tokenizer (`fstok.hf_words`)."""
        tok = self.tok
        return tok._mode == "direct" and tok._tables is not None and tok._tables._native

    def _words_plan(self):
        w = self.__dict__.get("_plan")
        if w is None:
            from .hf_words import WordPlan

            tok = self.tok
            w = self._plan = WordPlan(tok._tables._pattern, {t.id: t.content for t in tok.added.tokens},
                                      tok._lens, tok._token_strings())
        return w

    def _native_encode(self, text, trim=None):
        """(ids, offsets, word ids, tokens[, trimmed offsets]) from one C pass of the tables plus one C pass
        of the compiled pre-tokenizer for the piece boundaries; None where the tables do not take the text as
        it is."""
        tok = self.tok
        if not self._direct() or not isinstance(text, str) or tok._native_text(text) is None:
            return None
        (ids, starts), used = tok._tables._run(text, frozenset(), 3)
        if used != text:
            return None  # lone surrogates the C path repaired: the stages see the text as given
        if not ids:
            return [], [], [], []
        lo = tok._standin_lo
        if lo is not None and max(ids) >= lo:
            return self._standin_row(text, ids, starts)  # a byte the vocabulary lacks: HF drops it
        plan = self._words_plan()
        r = plan.row_native(text, ids, starts, trim)
        return r if r is not None else plan.row(text, ids, np.frombuffer(starts, dtype=np.uint32).astype(np.int64))

    def _pieces_of(self, data: bytes) -> Optional[list[tuple[int, int]]]:
        """The compiled pre-tokenizer's non-empty pieces of `data` as (start, end) bytes, or None."""
        pat = self._words_plan().pattern
        if pat is None:
            return [(0, len(data))] if data else []
        sp = pat.spanner
        if sp is None:
            return None
        raw = memoryview(sp.byte_spans(data)).cast("Q").tolist()
        pairs = zip(raw[0::2], raw[1::2]) if pat.mode == "find" else zip([0] + raw[:-1], raw)
        return [(a, b) for a, b in pairs if b > a]

    def _standin_ids(self, data: bytes, ids: list, starts: list, pieces: list) -> Optional[tuple[list, list, list]]:
        """(ids, first bytes, last bytes + 1) of a tables pass over `data` whose ids hold stand-ins of bytes
        the vocabulary lacks: HF's BPE drops such a byte from its word before merging, so each piece holding
        one is encoded again, those bytes left out, by the tables' model (`encode_spans`: each span one word).
        HF's word places its symbols by their lengths from the piece's start, the dropped bytes not counted:
        a new token at byte k of the shortened piece spans the piece's bytes from k on, as in HF.  None where
        the tokens do not fall inside the pieces."""
        tok = self.tok
        lo = tok._standin_lo
        lens = tok._lens
        n = len(ids)
        # the tokens of each piece (tokens never cross a piece: the tables encode piece by piece)
        owner, k = [], 0
        for i in range(n):
            b = starts[i]
            while k < len(pieces) and pieces[k][1] <= b:
                k += 1
            if k == len(pieces) or b < pieces[k][0]:
                return None
            owner.append(k)
        bad = sorted({owner[i] for i in range(n) if ids[i] >= lo})
        drop = {starts[i] for i in range(n) if ids[i] >= lo}
        buf = bytearray()
        shift: list[int] = []  # each byte of buf: its piece's first byte in data less its piece's first in buf
        spans: list[int] = []
        for k in bad:
            a, b = pieces[k]
            s0 = len(buf)
            buf += bytes(data[j] for j in range(a, b) if j not in drop)
            shift += [a - s0] * (len(buf) - s0)
            if len(buf) > s0:
                spans += (s0, len(buf), 0xFFFFFFFF)
        new_ids, new_st = [], []
        if spans:
            got, st_b = tok._tables._model.encode_spans(bytes(buf), np.asarray(spans, dtype=np.uint32).tobytes(), 3)
            new_ids, new_st = list(got), np.frombuffer(st_b, dtype=np.uint32).tolist()
        # the new tokens in order, each piece's in place of its old ones
        out_i, out_s, out_e = [], [], []
        q = 0
        bad_set = set(bad)
        for i in range(n):
            if owner[i] not in bad_set:
                out_i.append(ids[i])
                out_s.append(starts[i])
                out_e.append(starts[i] + int(lens[ids[i]]))
                continue
            if i + 1 < n and owner[i + 1] == owner[i]:
                continue  # the piece's new tokens go in at its last old token
            end = pieces[owner[i]][1]
            while q < len(new_ids) and new_st[q] + shift[new_st[q]] < end:
                b0 = new_st[q] + shift[new_st[q]]
                out_i.append(new_ids[q])
                out_s.append(b0)
                out_e.append(b0 + int(lens[new_ids[q]]))
                q += 1
        return out_i, out_s, out_e

    def _standin_row(self, text: str, ids: list, starts: bytes):
        """(ids, offsets, word ids, tokens) of a text whose tables pass holds stand-ins (`_standin_ids`);
        None where the stages must run (an added token in the text)."""
        plan = self._words_plan()
        if plan.added and not frozenset(plan.added).isdisjoint(ids):
            return None
        data = text.encode("utf-8")
        pieces = self._pieces_of(data)
        if pieces is None:
            return None
        got = self._standin_ids(data, ids, np.frombuffer(starts, dtype=np.uint32).tolist(), pieces)
        if got is None:
            return None
        new_ids, bs, be = got
        pstarts = [a for a, _ in pieces]
        words = [bisect.bisect_right(pstarts, b) - 1 for b in bs]
        return new_ids, char_offsets(data, text, bs, be), words, list(map(plan.tok_of, new_ids))

    trims = True  # model_batch(trim=...) gives each row its trimmed offsets (`fstok.hf_words.trim_offsets`)

    def model_batch(self, texts, num_threads, trim=None):
        if not self._direct() or len(texts) < 8:
            return [self.model_encode(t) for t in texts]
        tok = self.tok
        tb = tok._tables
        literals = set(tok._guards) | {t.content for t in tok.added.tokens if t.content}
        slow = set(_texts_holding(texts, literals)) if literals else set()
        if tb._python_text_path():
            slow.update(i for i, t in enumerate(texts) if tb._text_needs_python(t))
        fast = [i for i in range(len(texts)) if i not in slow]
        out: list = [None] * len(texts)
        if fast:
            rows = self._words_plan().batch(tb._model, [texts[i] for i in fast], num_threads, tok._standin_lo, trim)
            for i, r in zip(fast, rows):
                out[i] = r
        return [r if r is not None else self.model_encode(t) for r, t in zip(out, texts)]

    def ids_batch(self, texts, num_threads):
        got = self._ids_batch_native(texts, num_threads)
        if got is not None:
            return got
        res = [np.asarray(self.tok._ids(t), dtype=np.uint32) for t in texts]
        lens = np.fromiter((len(r) for r in res), dtype=np.int64, count=len(res))
        return (np.concatenate(res) if res else np.zeros(0, np.uint32)), lens

    def _ids_batch_native(self, texts, num_threads):
        """ids_batch by one threaded C call of the tables ("direct" mode: what `_ids` gives each text, as
        uint32 arrays without a Python int per token); the texts `_ids` leaves to the stages (lone surrogates,
        a byte the vocabulary lacks, an lstrip / rstrip / single_word added token) are redone by `_ids`.
        None where the mode is not "direct"."""
        tok = self.tok
        tb = tok._tables
        if not texts or not self._direct() or tb._python_text_path() or not all(isinstance(t, str) for t in texts):
            return None
        sp1, sp2 = tb._matchers(frozenset())
        (flat_b, starts_b), missing = tb._model.encode_batch(texts, sp1, tb._threads(num_threads, len(texts)), 1,
                                                             sp2, True)
        flat = np.frombuffer(flat_b, dtype=np.uint32)
        starts = np.frombuffer(starts_b, dtype=np.int64)
        lens = np.diff(starts)
        redo = set(missing)
        lo = tok._standin_lo
        if lo is not None and len(flat) and int(flat.max()) >= lo:
            owner = np.repeat(np.arange(len(texts)), lens)
            redo.update(np.unique(owner[flat >= lo]).tolist())
        if tok._guards:
            redo.update(i for i, t in enumerate(texts) if any(g in t for g in tok._guards))
        if not redo:
            return flat, lens
        parts = [flat[starts[i]:starts[i + 1]] for i in range(len(texts))]
        for i in redo:
            r = self._native_encode(texts[i]) if i not in missing else None
            parts[i] = np.asarray(r[0] if r is not None else tok._ids(texts[i]), dtype=np.uint32)
        lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        return np.concatenate(parts), lens


class _SpmCore(_Core):
    """fstok's Unigram / SentencePiece-style BPE tokenizer.json runtime (`fstok.hf_spm`): the stages it runs,
    walked here to number the words as HF does (one per added token and per pre-tokenizer piece, in order)."""

    def __init__(self, tok):
        self.tok = tok

    def model_encode(self, text):
        return self.tok.hf_lists_batch([text])[0]

    def model_batch(self, texts, num_threads):
        return self.tok.hf_lists_batch(texts)

    def offsets_batch(self, texts, num_threads):
        rows = self.tok.hf_lists_batch(texts)
        lens = np.fromiter((len(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        n = int(lens.sum())
        ids = np.fromiter((i for r in rows for i in r[0]), dtype=np.uint32, count=n)
        offs = np.fromiter((x for r in rows for o in r[1] for x in o), dtype=np.int64, count=2 * n).reshape(-1, 2)
        return ids, lens, offs

    def ids_batch(self, texts, num_threads):
        res = [np.asarray(self.tok.encode(t), dtype=np.uint32) for t in texts]
        lens = np.fromiter((len(r) for r in res), dtype=np.int64, count=len(res))
        return (np.concatenate(res) if res else np.zeros(0, np.uint32)), lens


def find_tokenizer_json(identifier: str, revision: str = "main", cache_dir: Optional[str] = None) -> str:
    """tokenizer.json of a local directory (or file), or of a repo id in the HF hub cache layout."""
    if not isinstance(identifier, (str, os.PathLike)):
        raise TypeError(f"from_pretrained expects a directory or a repo id, got {type(identifier).__name__}")
    identifier = os.fspath(identifier)
    if os.path.isfile(identifier):
        return identifier
    if os.path.isdir(identifier):
        p = os.path.join(identifier, "tokenizer.json")
        if os.path.isfile(p):
            return p
        raise FileNotFoundError(f"{identifier}: directory has no tokenizer.json")
    roots = [cache_dir] if cache_dir else []
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        roots.append(env)
    hf_home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    roots.append(os.path.join(hf_home, "hub"))
    repo = "models--" + identifier.replace("/", "--")
    for root in roots:
        base = os.path.join(root, repo)
        if not os.path.isdir(base):
            continue
        ref = os.path.join(base, "refs", revision)
        snap = None
        if os.path.isfile(ref):
            with open(ref, encoding="utf-8") as f:
                snap = os.path.join(base, "snapshots", f.read().strip())
        elif os.path.isdir(os.path.join(base, "snapshots", revision)):
            snap = os.path.join(base, "snapshots", revision)
        cands = [snap] if snap else sorted(glob.glob(os.path.join(base, "snapshots", "*")), key=os.path.getmtime,
                                           reverse=True)
        for c in cands:
            p = os.path.join(c, "tokenizer.json")
            if os.path.isfile(p):
                return p
    raise FileNotFoundError(f"{identifier!r}: no such directory, and no tokenizer.json for it in the HF hub cache "
                            f"({', '.join(roots)}); fstok does not download")
