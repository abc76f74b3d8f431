"""SentencePiece-family tokenizers (Unigram and score-ordered BPE from `.model` files) on compiled tables.

    tok = fstok.compile("tokenizer.model")          # sniffed by content: a SentencePiece ModelProto
    tok.encode("Hello world")                        # == sentencepiece's sp.encode(text)
    tok.decode(ids)                                  # == sp.decode(ids)
    tok.save("llama2.fst"); fstok.load("llama2.fst")

The normalizer (precompiled charsmap, dummy prefix, whitespace rules), the model and the unknown-piece
handling run in C (`fstok.runtime._spm`) over tables validated here at load.  The oracle is
`fstok.reference.spm.SentencePieceReference`.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

from . import artifact as _art

from .spm_layout import (_SECTIONS, _SPACE, KIND_SPM, SPF_ADD_DUMMY, SPF_BPE, SPF_BYTE_FALLBACK,  # noqa: F401
                         SPF_CUTS, SPF_ESCAPE_WS, SPF_FUSE_UNK, SPF_HF, SPF_REMOVE_WS, SPF_WORDS, SPF_WS_SUFFIX,
                         SPT_BYTE, SPT_CONTROL,
                         SPT_NORMAL, SPT_UNKNOWN, SPT_UNUSED, SPT_USER, ArtifactIO, _native, decode_pieces,
                         check_layout, make_model, walk_sections, with_walk_tables)


class SentencePieceError(ValueError):
    """A SentencePiece-family artifact or source fstok cannot use."""


class SentencePieceTokenizer(ArtifactIO):
    """A SentencePiece `.model` tokenizer (Unigram or BPE), exact to the `sentencepiece` library."""

    def __init__(self, art: _art.Artifact):
        self._art = art
        where = art.path or "<artifact>"
        meta = art.meta
        if meta.get("family") != "spm":
            raise _art.ArtifactError(f"{where}: meta.family: not a SentencePiece-family artifact")
        from .validate_spm import check

        check_layout(art, where)
        check(art, where)  # meta fields typed, piece strings valid UTF-8 (errors name the field / section)
        a = {}
        for name, dt in _SECTIONS.items():
            if not art.has(name) or art.sections[name].dtype != dt:
                raise _art.ArtifactError(f"{where}: section {name!r} is missing or has the wrong dtype")
            a[name] = art.array(name)
        try:
            n = int(meta["n_pieces"])
            self._flags = int(meta["flags"])
            self.unk_id = int(meta["unk_id"])
            self._min_score = float.fromhex(meta["min_score"])
            self._max_score = float.fromhex(meta["max_score"])
        except (KeyError, TypeError, ValueError) as e:
            raise _art.ArtifactError(f"{where}: meta is incomplete ({e})") from None
        known = (SPF_ADD_DUMMY | SPF_REMOVE_WS | SPF_ESCAPE_WS | SPF_WS_SUFFIX | SPF_BYTE_FALLBACK | SPF_BPE | SPF_HF
                 | SPF_FUSE_UNK | SPF_WORDS | SPF_CUTS)
        if self._flags & ~known or self._flags < 0:
            raise _art.ArtifactError(f"{where}: meta.flags: {self._flags:#x} has bits this runtime does not know")
        if self._flags & SPF_CUTS and not self._flags & SPF_BPE:
            raise _art.ArtifactError(f"{where}: meta.flags: a cut-point table (section 'cut_pairs') on a Unigram model")
        is64 = bool(self._flags & SPF_HF)
        sname = "score64" if is64 else "score32"
        if not art.has(sname) or art.sections[sname].dtype != ("<u8" if is64 else "<u4"):
            raise _art.ArtifactError(f"{where}: section {sname!r} is missing or has the wrong dtype")
        score = art.array(sname)
        if len(score) != n or len(a["ptype"]) != n or len(a["piece_off"]) != n + 1 or len(a["byte_id"]) != 256:
            raise _art.ArtifactError(f"{where}: score/ptype/piece_off/byte_id: piece arrays do not have {n} entries")
        if np.any(a["ptype"] < 1) or np.any(a["ptype"] > 6):
            raise _art.ArtifactError(f"{where}: ptype: a piece has an unknown type")
        if not 0 <= self.unk_id < n or a["ptype"][self.unk_id] != SPT_UNKNOWN:
            raise _art.ArtifactError(f"{where}: meta.unk_id: {self.unk_id} is not an unknown piece (ptype)")
        if np.any(a["byte_id"] < 0) or np.any(a["byte_id"] >= n):
            raise _art.ArtifactError(f"{where}: byte_id: out of range")
        po = a["piece_off"]
        if po[0] != 0 or po[-1] != len(a["pieces"]):  # their order and UTF-8 cuts: validate_spm.check
            raise _art.ArtifactError(f"{where}: piece_off: piece offsets are inconsistent")
        if len(a["cm_units"]) and (len(a["cm_norm"]) == 0 or a["cm_norm"][-1] != 0):
            raise _art.ArtifactError(f"{where}: cm_norm: the charsmap's replacements do not end with NUL")
        none = None
        arrays = tuple(a[k] if len(a[k]) else none for k in (
            "cm_units", "cm_norm", "u_first", "u_label", "u_target", "u_value"))
        cut = None
        if self._flags & SPF_CUTS:
            if not art.has("cut_pairs") or art.sections["cut_pairs"].dtype != "|u1" or len(art.array("cut_pairs")) != 8192:
                raise _art.ArtifactError(f"{where}: meta.flags asks for section 'cut_pairs', which is missing or is not 8192 bytes")
            cut = art.array("cut_pairs")
        arrays = arrays + (cut, a["pieces"], po)
        self._h = make_model(where, arrays, score, int(is64), a["ptype"], np.ascontiguousarray(a["byte_id"]),
                             self._flags, self.unk_id, self._min_score, self._max_score, walk_sections(art, where))
        self._n = n
        self._ptype = a["ptype"]
        self._blob = a["pieces"]
        self._po = po
        self._pieces_list: list[str] | None = None
        self._piece_id_map: dict[str, int] | None = None
        self.bos_id = int(meta.get("bos_id", -1))
        self.eos_id = int(meta.get("eos_id", -1))
        self.pad_id = int(meta.get("pad_id", -1))
        self._unk_surface = str(meta.get("unk_surface", " \u2047 "))
        self.model_type = str(meta.get("model_type", ""))

    @property
    def _pieces(self) -> list[str]:
        # decoded on first use: loading stays a validation of the arrays
        if self._pieces_list is None:
            self._pieces_list = decode_pieces(self._blob, self._po, self._n)
        return self._pieces_list

    @property
    def _piece_id(self) -> dict[str, int]:
        if self._piece_id_map is None:
            pieces = self._pieces
            d: dict[str, int] = {}
            for i in range(self._n - 1, -1, -1):
                d.setdefault(pieces[i], i)
            # PieceToId: reserved (unknown/control/byte) pieces first
            for i in np.nonzero(np.isin(self._ptype, (SPT_UNKNOWN, SPT_CONTROL, SPT_BYTE)))[0].tolist():
                d[pieces[i]] = i
            self._piece_id_map = d
        return self._piece_id_map

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_artifact(cls, art: _art.Artifact):
        if art.meta.get("source") == "hf":  # a tokenizer.json pipeline (fstok.hf_spm)
            from .hf_spm import HFSentencePieceTokenizer

            return HFSentencePieceTokenizer(art)
        return cls(art)

    @classmethod
    def compile_model(cls, path: str | os.PathLike, **options: Any) -> "SentencePieceTokenizer":
        from .compile.spm_tables import model_tables
        from .loaders.spm_model import parse_model

        if options:
            raise TypeError(f"unexpected options for a SentencePiece model: {sorted(options)}")
        p = os.fspath(path)

        def build(data: bytes) -> "SentencePieceTokenizer":
            m = parse_model(data, where=p)
            meta, sections = model_tables(m, p)
            return with_walk_tables(meta, sections, _art.source_hash(b"spm-model", data), cls, p)

        from .spm_cache import compiled

        return compiled(p, b"spm-model", build)

    def __repr__(self) -> str:
        return f"<SentencePieceTokenizer {self.model_type} vocab={self._n}>"

    # -- vocabulary ---------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._n

    @property
    def n_vocab(self) -> int:
        return self._n

    def id_to_token(self, token: int) -> str:
        if not 0 <= token < self._n:
            raise IndexError(f"token id {token} is out of range (vocabulary of {self._n})")
        return self._pieces[token]

    def token_to_id(self, token: str) -> int | None:
        return self._piece_id.get(token)

    def piece_to_id(self, piece: str) -> int:
        """sentencepiece's PieceToId: the unknown id for a string that is not a piece."""
        return self._piece_id.get(piece, self.unk_id)

    def is_control(self, token: int) -> bool:
        return bool(self._ptype[token] == SPT_CONTROL)

    # -- encoding -----------------------------------------------------------------------------
    def _special_ids(self, add_special_tokens: bool, add_bos: bool | None, add_eos: bool | None):
        bos = add_special_tokens if add_bos is None else add_bos
        eos = False if add_eos is None else add_eos
        return ([self.bos_id] if bos and self.bos_id >= 0 else []), ([self.eos_id] if eos and self.eos_id >= 0 else [])

    def encode(self, text: str, *, add_special_tokens: bool = False, add_bos: bool | None = None,
               add_eos: bool | None = None, allowed_special: Iterable[str] | str = ()) -> list[int]:
        """sentencepiece's `encode(text)`.  `add_special_tokens=True` prepends the BOS id (as the Llama /
        Gemma tokenizers of transformers do); `add_bos` / `add_eos` are sentencepiece's options.
        `allowed_special`: control pieces (or "all") recognised in the text; the text between them is
        encoded as separate sentences.  By default control pieces are ordinary text, as in sentencepiece."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        pre, post = self._special_ids(add_special_tokens, add_bos, add_eos)
        if allowed_special:
            ids = []
            for seg, sid in self._split_special(text, allowed_special):
                ids.extend([sid] if sid is not None else _native().encode(self._h, _utf8(seg)))
        else:
            ids = _native().encode(self._h, _utf8(text))
        return pre + ids + post if (pre or post) else ids

    def _split_special(self, text: str, allowed):
        import re

        if allowed == "all":
            toks = [p for i, p in enumerate(self._pieces) if self._ptype[i] == SPT_CONTROL]
        else:
            toks = list(allowed)
            for t in toks:
                if t not in self._piece_id:
                    raise ValueError(f"{t!r} is not a piece of this model")
        if not toks:
            return [(text, None)]
        rx = re.compile("|".join(re.escape(t) for t in sorted(toks, key=len, reverse=True)))
        out, pos = [], 0
        for mt in rx.finditer(text):
            if mt.start() > pos:
                out.append((text[pos : mt.start()], None))
            out.append((mt.group(), self._piece_id[mt.group()]))
            pos = mt.end()
        if pos < len(text):
            out.append((text[pos:], None))
        return out

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False, **kw: Any) -> list[list[int]]:
        if kw or add_special_tokens:
            return [self.encode(t, add_special_tokens=add_special_tokens, **kw) for t in texts]
        return _native().encode_batch(self._h, [_utf8(t) for t in texts])

    def encode_with_offsets(self, text: str, *, add_special_tokens: bool = False) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and (start, end) character offsets of each token in `text` (sentencepiece's begin/end:
        a byte-fallback run's pieces before its last one are empty spans at its start)."""
        b = _utf8(text)
        tri = np.frombuffer(_native().encode(self._h, b, 1), dtype=np.int32).reshape(-1, 3)
        ids = tri[:, 0].tolist()
        if text.isascii():
            offs = list(zip(tri[:, 1].tolist(), tri[:, 2].tolist()))
        else:
            # byte offset -> character offset (offsets inside a character round down to its start)
            cp = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
            w = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
            cum = np.zeros(len(cp) + 1, dtype=np.int64)
            np.cumsum(w, out=cum[1:])
            s = np.searchsorted(cum, tri[:, 1], side="right") - 1
            e = np.searchsorted(cum, tri[:, 2], side="left")
            offs = list(zip(s.tolist(), e.tolist()))
        pre, post = self._special_ids(add_special_tokens, None, None)
        if pre:
            ids = pre + ids
            offs = [(0, 0)] + offs
        return ids, offs

    def count(self, text: str) -> int:
        return len(self.encode(text))

    # -- decoding -----------------------------------------------------------------------------
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """sentencepiece's `decode(ids)`: control pieces decode to nothing (with or without
        `skip_special_tokens`), the unknown piece to the model's unk surface (" \u2047 " by default),
        byte pieces to their bytes (invalid UTF-8 as U+FFFD per byte)."""
        n = self._n
        out: list[str] = []
        pend = bytearray()
        fl = self._flags
        strip_bos = bool(fl & (SPF_ADD_DUMMY | SPF_REMOVE_WS))
        remove_ws = bool(fl & SPF_REMOVE_WS)
        is_bos_ws = True
        bos_ws_seen = False
        have_text = False
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise IndexError(f"Invalid id: {i}")
            w = self._pieces[i]
            pid = self._piece_id.get(w, self.unk_id)
            t = self._ptype[pid]
            if t == SPT_BYTE:
                pend.append(int(w[3:5], 16))
                continue
            if pend:
                s = _sp_bytes(bytes(pend))
                pend.clear()
                out.append(s)
                have_text = have_text or bool(s)
            if bos_ws_seen or have_text:
                is_bos_ws = False
            has_bos_ws = False
            if t == SPT_CONTROL:
                d = ""
            elif t == SPT_UNKNOWN:
                d = self._unk_surface if self._pieces[pid] == w else w
            else:
                if is_bos_ws and strip_bos:
                    if w.startswith(_SPACE):
                        w = w[1:]
                        has_bos_ws = not remove_ws
                d = w.replace(_SPACE, " ")
            bos_ws_seen = has_bos_ws
            if d:
                out.append(d)
                have_text = True
        if pend:
            out.append(_sp_bytes(bytes(pend)))
        return "".join(out)

    def decode_batch(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in batch]

    # -- introspection for tests --------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The model's normalized form of `text` (what the model sees)."""
        norm, _ = _native().normalize(self._h, _utf8(text))
        return norm.decode("utf-8")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        # sentencepiece cannot take lone surrogates either (its binding raises)
        raise ValueError(f"text is not valid Unicode (a lone surrogate at index {e.start})") from None


def _sp_bytes(bs: bytes) -> str:
    """Bytes of a run of byte pieces as sentencepiece renders them: each structurally invalid byte
    (surrogates and overlongs included) becomes U+FFFD."""
    from .reference.spm import is_valid_decode_utf8

    try:
        s = bs.decode("utf-8")
        return s  # Python's strict UTF-8 is the same validity as sentencepiece's, valid text passes
    except UnicodeDecodeError:
        pass
    out = []
    j = 0
    while j < len(bs):
        ok, c = is_valid_decode_utf8(bs, j)
        if ok:
            out.append(bs[j : j + c].decode("utf-8"))
        else:
            out.append("\ufffd")
            c = 1
        j += c
    return "".join(out)
