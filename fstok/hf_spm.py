"""HF tokenizer.json files with a Unigram model or a SentencePiece-style BPE model (byte fallback, no
ByteLevel stage): T5, XLM-R, multilingual-e5, Llama-2-style and Phi-3 files.

    tok = fstok.compile("tokenizer.json")               # dispatched here by content
    tok.encode(text)                                    # == tokenizers' encode(text, add_special_tokens=False).ids
    tok.encode(text, add_special_tokens=True)           # the file's post-processor
    tok.encode_with_offsets(text)                       # HF's character offsets
    tok.decode(ids)                                     # == tokenizers' decode (skip_special_tokens=True)

The pipeline (added tokens, normalizers, pre-tokenizer, decoders) follows `tokenizers` step by step
with its alignments (fstok.hf_norm); the models run in C (`fstok.runtime._spm`): Unigram with f64 scores as
tokenizers computes them, BPE with a merge list (its pure-Python oracle, fstok.reference.unigram.HFBPE, runs
only where a token's span is not fixed by its id, or for a continuing prefix / end-of-word suffix).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from . import artifact as _art
from .errors import check_allowed_all
from .hf_norm import WHITE_SPACE, GraphemeTable, NString, build_normalizer, build_pretokenizer
from .literals import LiteralSet
from .pipeline import decoders
from .spm_layout import SPF_BPE, SPF_BYTE_FALLBACK, SPF_FUSE_UNK, ArtifactIO, _native, decode_pieces, make_model
from .spm_layout import check_layout, walk_sections, with_walk_tables


def _check_meta(art: _art.Artifact, where: str) -> None:
    """The meta fields the loader reads, typed and in range (ArtifactError naming the field)."""
    from .validate import Meta
    from .validate_spm import check_scores

    m = Meta(art.meta, where)
    n = m.int("n_pieces", 1, 2**31 - 1)
    m.int("flags", 0, 2**31 - 1)
    m.int("unk_id", -1, n - 1)
    m.int("n_charsmaps", 0, 64)
    m.str("model_type", choices=("unigram", "bpe"))
    check_scores(m)
    if len(m.str("bpe_word_split", default="").encode("utf-8", "surrogatepass")) > 4:
        raise m.fail("bpe_word_split", "longer than 4 bytes")
    if art.meta.get("bpe") is not None:
        bm = m.sub("bpe", m.dict("bpe"))
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            bm.opt_str(key, default=None)
        if bm.d.get("ignore_merges") is not None:
            bm.bool("ignore_merges")
    try:
        pipe = json.loads(m.str("pipeline"))
    except json.JSONDecodeError as e:
        raise m.fail("pipeline", f"not JSON ({e})") from None
    pm = Meta(pipe, where, "meta.pipeline")
    for k, t in enumerate(pm.list("added_tokens") if pipe.get("added_tokens") is not None else ()):
        tm = pm.sub(f"added_tokens[{k}]", t)
        tm.str("content")
        tm.int("id", 0, 2**31 - 1)


class HFSentencePieceTokenizer(ArtifactIO):
    def __init__(self, art: _art.Artifact):
        where = art.path or "<artifact>"
        try:
            self._load(art, where)
        except _art.ArtifactError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as e:
            # the file's pipeline (meta.pipeline) is rebuilt stage by stage: a crafted one fails here, by name
            raise _art.ArtifactError(f"{where}: meta.pipeline does not build ({type(e).__name__}: {e})"[:500]) from None

    def _load(self, art: _art.Artifact, where: str) -> None:
        self._art = art
        meta = art.meta
        check_layout(art, where)
        _check_meta(art, where)

        def arr(name, dt):
            if not art.has(name) or art.sections[name].dtype != dt:
                raise _art.ArtifactError(f"{where}: section {name!r} is missing or has the wrong dtype")
            return art.array(name)

        try:
            n = int(meta["n_pieces"])
            self._flags = int(meta["flags"])
            self.unk_id = int(meta["unk_id"])
            self._pipe = json.loads(meta["pipeline"])
            n_cm = int(meta["n_charsmaps"])
            self.model_type = str(meta["model_type"])
        except (KeyError, TypeError, ValueError) as e:
            raise _art.ArtifactError(f"{where}: meta is incomplete ({e})") from None
        self._n = n
        a = {k: arr(k, dt) for k, dt in (("score64", "<u8"),
                                          ("ptype", "|u1"), ("byte_id", "<i4"), ("pieces", "|u1"),
                                          ("piece_off", "<u4"), ("g_start", "<u4"), ("g_end", "<u4"),
                                          ("g_bits", "|u1"))}
        if len(a["score64"]) != n or len(a["ptype"]) != n or len(a["piece_off"]) != n + 1 or len(a["byte_id"]) != 256:
            raise _art.ArtifactError(f"{where}: score64, ptype, piece_off or byte_id: piece arrays do not have {n} entries")
        if not -1 <= self.unk_id < n or np.any(a["byte_id"] < 0) or (n and np.any(a["byte_id"] >= n)):
            raise _art.ArtifactError(f"{where}: meta.unk_id or byte_id: ids out of range")
        po = a["piece_off"]
        if po[0] != 0 or po[-1] != len(a["pieces"]):
            raise _art.ArtifactError(f"{where}: piece_off: piece offsets are inconsistent")
        bad = _native().check_pieces(a["pieces"], po)  # (pieces are decoded lazily: proven UTF-8 here)
        if bad is not None:
            raise _art.ArtifactError(f"{where}: {'pieces' if bad[0] == 'utf8' else 'piece_off'}[{bad[1]}]: the piece "
                                     f"strings are not UTF-8 cut at character boundaries ({bad[0]})")
        if not (len(a["g_start"]) == len(a["g_end"]) == len(a["g_bits"])):
            raise _art.ArtifactError(f"{where}: g_start, g_end, g_bits: grapheme tables disagree in length")
        self._graphemes = GraphemeTable(a["g_start"], a["g_end"], a["g_bits"])
        charsmaps = []
        charsmaps_raw = []
        for k in range(n_cm):
            units, norm = arr(f"cm{k}_units", "<u4"), arr(f"cm{k}_norm", "|u1")
            if len(units) and (len(norm) == 0 or norm[-1] != 0):
                raise _art.ArtifactError(f"{where}: cm{k}_norm: charsmap {k} does not end with NUL")
            charsmaps.append((units, norm.tobytes()))
            charsmaps_raw.append((units, norm))
        self._norm = build_normalizer(self._pipe["normalizer"], where, self._graphemes, charsmaps)
        self._pre = build_pretokenizer(self._pipe["pre_tokenizer"], where)
        self._dec = decoders.from_config(self._pipe["decoder"], where)
        self._blob = a["pieces"]
        self._po = po
        self._vocab_list: list[str] | None = None
        self._tok_id: dict[str, int] | None = None
        self._set_added()
        self._h = None
        if self.model_type == "unigram" or self.model_type == "bpe":
            self._h = make_model(
                where, (None, None, None, None, None, None, None, a["pieces"], po),
                a["score64"], 1, a["ptype"], np.ascontiguousarray(a["byte_id"]), self._flags,
                self.unk_id, float.fromhex(meta["min_score"]), 0.0, walk_sections(art, where))
        self._bpe_model = None
        self._piece_bpe_h = None
        self._merges = None
        if self.model_type == "bpe":
            ma, mb, mn = arr("merge_a", "<i4"), arr("merge_b", "<i4"), arr("merge_new", "<i4")
            if len(ma) != len(mb) or len(ma) != len(mn) or (len(ma) and (
                    min(ma.min(), mb.min(), mn.min()) < 0 or max(ma.max(), mb.max(), mn.max()) >= n)):
                raise _art.ArtifactError(f"{where}: merge_a, merge_b or merge_new: merge table out of range")
            self._merges = (ma, mb, mn)
        self._byte_fallback = bool(self._flags & SPF_BYTE_FALLBACK)
        # a BPE without unk token and byte fallback drops the characters its vocabulary lacks, and tokenizers
        # places the next symbols as if they were not there: the Python model's offsets do the same
        self._drops_chars = self.model_type == "bpe" and self.unk_id < 0 and not self._byte_fallback
        self._hf = self._native_pipeline(a, charsmaps_raw, meta)
        from .postprocess import PostProcessor

        self._pp = PostProcessor.from_json(self._pipe.get("post_processor"))
        # the string path needs every pre-tokenizer but the first to see whole pieces only (Metaspace's
        # "first" scheme reads the piece's original start): one pre-tokenizer at most
        self._fast_ok = len(self._pre) <= 1

    def _set_added(self) -> None:
        """The added-token tables of `_pipe["added_tokens"]`."""
        self._added: dict[int, dict] = {}
        for t in self._pipe["added_tokens"] or []:
            self._added[int(t["id"])] = t
        self._special_ids = {i for i, t in self._added.items() if t.get("special")}
        self._added_by_content = {t["content"]: i for i, t in sorted(self._added.items())}
        raw = [t for t in self._added.values() if not t.get("normalized", not t.get("special"))]
        self._raw_forms = {t["content"]: self._added_by_content[t["content"]] for t in raw}
        self._raw_added = added_matcher(list(self._raw_forms))
        # tokenizers matches a normalized added token by its content passed through the normalizer (a
        # Prepend normalizer makes "</s>" match as "▁</s>"); special tokens first, then by id
        self._norm_forms: dict[str, int] = {}
        # and decodes such a token by that normalized form, skipping it as special only when the form is the
        # content of a special token
        self._decode_forms: dict[int, str] = {}
        for i, t in sorted(self._added.items(), key=lambda kv: (not kv[1].get("special"), kv[0])):
            if t.get("normalized", not t.get("special")):
                form = t["content"]
                for step in self._norm:
                    form = step.apply_str(form)
                if form:
                    self._norm_forms.setdefault(form, i)
                if form != t["content"] and t["content"]:
                    self._decode_forms[i] = form
        self._special_contents = {t["content"] for t in self._added.values() if t.get("special")}
        self._norm_added = added_matcher(list(self._norm_forms))

    def with_added_tokens(self, added: list[dict], vocab: dict | None = None) -> "HFSentencePieceTokenizer":
        """This tokenizer with `added` (tokenizer.json added_tokens entries) as its added tokens, the model
        and its tables shared: what compiling the file with them gives (HF's ids, as `compile` assigns them),
        without compiling.  A normalized added token is matched in the normalized text, which the native
        pipeline does not do: the copy then takes the Python string path.  `vocab`: the model's pieces ->
        ids, where the caller has it (building it from the artifact costs a pass over every piece)."""
        import copy

        from .pipeline.added import hf_added_ids

        tok_id = self._token_ids_model() if vocab is None else vocab
        ids = hf_added_ids([a["content"] for a in added], tok_id, self._n if self.model_type == "unigram" else len(tok_id))
        new = copy.copy(self)
        new._pipe = dict(self._pipe, added_tokens=[dict(a, id=ids.get(a["content"], a.get("id"))) for a in added])
        new._set_added()
        if new._norm_added is not None:
            new._hf = None
        return new

    @property
    def _bpe(self):
        """The pure-Python BPE model (the offsets path and the oracle of the native one), built on first use."""
        if self.model_type != "bpe":
            return None
        if self._bpe_model is None:
            from .reference.unigram import HFBPE

            ma, mb, _ = self._merges
            vocab = self._token_ids_model()
            pieces = self._vocab()
            bp = self._art.meta.get("bpe") or {}
            self._bpe_model = HFBPE(vocab, [(pieces[x], pieces[y]) for x, y in zip(ma.tolist(), mb.tolist())],
                                    None if self.unk_id < 0 else pieces[self.unk_id],
                                    bool(self._flags & SPF_BYTE_FALLBACK), bool(self._flags & SPF_FUSE_UNK),
                                    bp.get("continuing_subword_prefix"), bp.get("end_of_word_suffix"),
                                    bool(bp.get("ignore_merges")))
        return self._bpe_model

    def _native_pipeline(self, a: dict, charsmaps: list, meta: dict):
        """The native handle of the whole string path (normalizer steps, pre-tokenizer, model), or None
        where a stage has no native form (the Python string path then runs it)."""
        ops = _native_norm_ops(self._pipe["normalizer"], list(charsmaps))
        if ops is None or self._norm_added is not None:
            return None
        pre = self._pipe["pre_tokenizer"]
        while pre is not None and pre.get("type") == "Sequence" and len(pre.get("pretokenizers") or []) == 1:
            pre = pre["pretokenizers"][0]
        rep, scheme, split, kind = b"", 0, 1, 0
        if pre is None or (pre.get("type") == "Sequence" and not pre.get("pretokenizers")):
            kind = 0
        elif pre.get("type") == "Metaspace":
            ms = self._pre[0]
            kind, rep, split = 1, ms.rep.encode("utf-8"), int(bool(ms.split))
            scheme = {"always": 0, "first": 1, "never": 2}[ms.scheme]
        elif pre.get("type") == "WhitespaceSplit":
            kind = 2
        else:
            return None
        bp = meta.get("bpe") or {}
        if bp.get("continuing_subword_prefix") or bp.get("end_of_word_suffix"):
            return None
        is_bpe = self.model_type == "bpe"
        word_sep = str(meta.get("bpe_word_split") or "").encode("utf-8") if is_bpe and kind == 0 else b""
        cut = None
        if word_sep and self._art.has("hf_cut_pairs"):
            cut = self._art.array("hf_cut_pairs")
            if self._art.sections["hf_cut_pairs"].dtype != "|u1" or len(cut) != 8192:
                raise _art.ArtifactError(f"{self._art.path or '<artifact>'}: section 'hf_cut_pairs' is not 8192 bytes")
        return self._hf_make(ops, kind, scheme, split, rep, word_sep, cut)

    def _byte_tok(self) -> np.ndarray:
        """The token of each byte under byte fallback (-1: none), as the native pipeline reads it."""
        meta = self._art.meta
        if self._art.has("byte_tok"):
            byte_tok = self._art.array("byte_tok")
            if (self._art.sections["byte_tok"].dtype != "<i4" or len(byte_tok) != 256 or byte_tok.min() < -1
                    or byte_tok.max() >= self._n):
                raise _art.ArtifactError(f"{self._art.path or '<artifact>'}: section 'byte_tok': not 256 token ids")
            return np.ascontiguousarray(byte_tok)
        if meta.get("byte_fallback_complete"):
            return np.ascontiguousarray(self._art.array("byte_id"), dtype=np.int32)
        tid = self._token_ids_model()
        return np.array([tid.get(f"<0x{c:02X}>", -1) for c in range(256)], dtype=np.int32)

    def _hf_make(self, ops: list, kind: int, scheme: int, split: int, rep: bytes, word_sep: bytes, cut=None):
        a = self._art
        bp = a.meta.get("bpe") or {}
        is_bpe = self.model_type == "bpe"
        where = a.path or "<artifact>"
        mt = None
        if is_bpe:
            if not a.has("hf_merges") or a.sections["hf_merges"].dtype != "|u1":
                raise _art.ArtifactError(f"{where}: section 'hf_merges' is missing or has the wrong dtype")
            mt = a.array("hf_merges")
        try:
            return _native().hf_make(self._h, ops, kind, scheme, split, rep, word_sep, a.array("g_start"),
                                     a.array("g_end"), a.array("g_bits"), mt, self._byte_tok(), int(is_bpe),
                                     int(bool(self._flags & SPF_BYTE_FALLBACK)), int(bool(self._flags & SPF_FUSE_UNK)),
                                     int(bool(bp.get("ignore_merges"))), cut)
        except ValueError as e:
            sec, _, what = str(e).partition(": ")
            if sec == "hf_merges":
                raise _art.ArtifactError(f"{where}: section 'hf_merges': {what}") from None
            raise

    @property
    def _piece_bpe(self):
        """(native handle, byte span per id) of the merge-list BPE model alone, for pre-tokenized pieces
        (the Encoding path and the string path); None where the model has no native form (a continuing
        prefix or an end-of-word suffix).  Built on first use."""
        if self._piece_bpe_h is None:
            bp = self._art.meta.get("bpe") or {}
            if (self.model_type != "bpe" or self._h is None or bp.get("continuing_subword_prefix")
                    or bp.get("end_of_word_suffix")):
                self._piece_bpe_h = False
            else:
                # cut before the word separator where the compiler proved that no merge crosses it: the
                # same tokens, and the piece cache serves each word
                h = self._hf_make([], 0, 0, 1, b"", str(self._art.meta.get("bpe_word_split") or "").encode("utf-8"))
                span = self._span_table()
                nchar = [len(t) for t in self._vocab()]
                is_byte = [False] * self._n
                if self._flags & SPF_BYTE_FALLBACK:
                    for i in self._byte_tok().tolist():
                        if i >= 0:
                            is_byte[i] = True
                self._piece_bpe_h = (h, span, nchar, is_byte)
        return self._piece_bpe_h or None

    def _span_table(self) -> list[int]:
        """The number of piece bytes each token id covers whenever the BPE model emits it, or -1 where that
        depends on the text (the unknown token covers a run of characters; a byte-fallback token covers
        one byte; a merge route that makes a token from parts covering another length than its own text).
        Tokens of a pre-tokenized piece spell the piece in order, so their spans follow from these."""
        po = self._po.astype(np.int64)
        span = po[1:] - po[:-1]
        ok = np.ones(self._n, dtype=bool)
        if self._flags & SPF_BYTE_FALLBACK:
            bt = self._byte_tok()
            bt = bt[bt >= 0]
            # a byte token spelled as one character of more than one byte would cover two lengths
            ok[bt] = span[bt] == 1
            if self._n:
                single = np.array([len(self._vocab()[i]) == 1 for i in bt.tolist()], dtype=bool)
                ok[bt] = ok[bt] | ~single
            span[bt] = 1
        if 0 <= self.unk_id < self._n:
            ok[self.unk_id] = False
        ma, mb, mn = (x.astype(np.int64) for x in self._merges)
        while len(mn):
            bad = ok[mn] & ~(ok[ma] & ok[mb] & (span[ma] + span[mb] == span[mn]))
            if not bad.any():
                break
            ok[mn[bad]] = False
        span[~ok] = -1
        return span.tolist()

    # -- vocabulary ---------------------------------------------------------------------------
    def _vocab(self) -> list[str]:
        if self._vocab_list is None:
            self._vocab_list = decode_pieces(self._blob, self._po, self._n)
        return self._vocab_list

    def _token_ids_model(self) -> dict[str, int]:
        if self._tok_id is None:
            d: dict[str, int] = {}
            for i, t in enumerate(self._vocab()):
                d[t] = i
            self._tok_id = d
        return self._tok_id

    @property
    def vocab_size(self) -> int:
        return max([self._n] + [i + 1 for i in self._added])

    def id_to_token(self, token: int) -> str | None:
        if token in self._added:
            return self._added[token]["content"]
        if 0 <= token < self._n:
            return self._vocab()[token]
        return None

    def token_to_id(self, token: str) -> int | None:
        if token in self._added_by_content:
            return self._added_by_content[token]
        return self._token_ids_model().get(token)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_artifact(cls, art: _art.Artifact):
        return cls(art)

    @classmethod
    def compile_tokenizer_json(cls, path: str | os.PathLike, obj: dict | None = None, **options: Any):
        from .compile.hf_spm_tables import hf_tables

        if options:
            raise TypeError(f"unexpected options for a tokenizer.json: {sorted(options)}")
        p = os.fspath(path)

        def build(data: bytes) -> "HFSentencePieceTokenizer":
            meta, sections = hf_tables(obj if obj is not None else json.loads(data.decode("utf-8")), p)
            return with_walk_tables(meta, sections, _art.source_hash(b"spm-hf", data), cls, p)

        from .spm_cache import compiled

        return compiled(p, b"spm-hf", build)

    def __repr__(self) -> str:
        return f"<HFSentencePieceTokenizer {self.model_type} vocab={self._n}>"

    # -- added tokens ---------------------------------------------------------------------------
    def _find_added(self, s: str, rx) -> list[tuple[int | None, int, int]]:
        """AddedVocabulary::find_matches: (id or None, start, end) character spans covering s."""
        return find_added(s, rx, self._raw_forms if rx is self._raw_added else self._norm_forms, self._added)

    # -- encoding -----------------------------------------------------------------------------
    def _model(self, piece: str) -> list[tuple[int, int, int]]:
        """Tokens of one pre-tokenized piece: (id, char start, char end) within the piece."""
        b = piece.encode("utf-8")
        if self.model_type == "bpe":
            got = self._bpe_piece_chars(piece, b)
            if got is not None:
                return got
            toks = self._bpe.tokenize(piece)
        else:
            tri = np.frombuffer(_native().model(self._h, b), dtype=np.int32).reshape(-1, 3).tolist()
            toks = self._unigram_finish(b, tri)
        if piece.isascii():
            return toks
        # spans on character boundaries, in order (a span repeated for the byte tokens of one unknown run):
        # the characters of each span counted once
        out = []
        pos_b = pos_c = 0
        last = None
        for t, bs, be in toks:
            if (bs, be) == last:
                out.append((t, c0, c1))
                continue
            if bs != pos_b:
                break
            try:
                n = len(b[bs:be].decode("utf-8"))
            except UnicodeDecodeError:  # a span inside a character (byte tokens of the Python BPE)
                break
            c0, c1 = pos_c, pos_c + n
            pos_b, pos_c, last = be, c1, (bs, be)
            out.append((t, c0, c1))
        else:
            return out
        cum = {}
        k = 0
        for ci, ch in enumerate(piece):
            cum[k] = ci
            k += len(ch.encode("utf-8"))
        cum[k] = len(piece)

        def c_end(x):
            while x not in cum:
                x += 1
            return cum[x]

        def c_start(x):
            while x not in cum:
                x -= 1
            return cum[x]

        return [(t, c_start(s), c_end(e)) for t, s, e in toks]

    def _bpe_piece_chars(self, piece: str, b: bytes) -> list[tuple[int, int, int]] | None:
        """The native BPE model on one piece as (id, char start, char end) within the piece, or None where
        a span is not fixed by the ids (the Python model then runs).  A vocabulary token covers the
        characters of its own text; the byte tokens of one character (byte fallback) each cover the whole
        character, as tokenizers aligns them."""
        nb = self._piece_bpe
        if nb is None:
            return None
        h, span, nchar, is_byte = nb
        ids = _native().hf_encode(h, b, 1)
        if ids is None:
            return None
        if len(ids) == 1 and (span[ids[0]] == len(b) or self._vocab()[ids[0]] == piece):
            return [(ids[0], 0, len(piece))]  # (ignore_merges: the piece is a token, whatever its merges)
        out = []
        e = c = pend = need = 0
        for t in ids:
            k = span[t]
            if k < 0:
                return None
            if is_byte[t]:
                if not pend:
                    if e >= len(b):
                        return None
                    need = _U8LEN[b[e] >> 4]
                out.append((t, c, c + 1))
                e += 1
                pend += 1
                if pend == need:
                    c += 1
                    pend = 0
            elif pend:
                return None
            else:
                n = nchar[t]
                out.append((t, c, c + n))
                c += n
                e += k
        return out if e == len(b) and c == len(piece) and not pend else None

    def _bpe_piece(self, piece: str, b: bytes) -> list[tuple[int, int, int]]:
        """The BPE model on one piece: (id, byte start, byte end), the merges in C where they have a native
        form; the Python model where a span is not fixed by the ids (the unknown token, an ambiguous id)."""
        nb = self._piece_bpe
        if nb is not None:
            h, span = nb[:2]
            ids = _native().hf_encode(h, b, 1)
            if ids is not None:
                if len(ids) == 1 and (span[ids[0]] == len(b) or self._vocab()[ids[0]] == piece):
                    return [(ids[0], 0, len(b))]
                out = []
                e = 0
                for t in ids:
                    k = span[t]
                    if k < 0:
                        break
                    out.append((t, e, e + k))
                    e += k
                else:
                    if e == len(b):
                        return out
        return self._bpe.tokenize(piece)

    def _unigram_finish(self, b: bytes, tri: list[list[int]]) -> list[tuple[int, int, int]]:
        """Unigram::encode_optimized's unknown fusion and Unigram::tokenize's lookup."""
        unk = self.unk_id
        pieces: list[tuple[int, int, int]] = []  # (id or -2 for a fused run, start, end)
        for tid, s, e in tri:
            if unk >= 0 and tid == unk and pieces and pieces[-1][0] == -2:
                pieces[-1] = (-2, pieces[-1][1], e)
            elif unk >= 0 and tid == unk:
                pieces.append((-2, s, e))
            elif tid < 0:
                raise ValueError("Encountered an unknown token but `unk_id` is missing")
            else:
                pieces.append((tid, s, e))
        out = []
        for tid, s, e in pieces:
            if tid != -2:
                out.append((tid, s, e))
                continue
            sub = b[s:e].decode("utf-8")
            got = self._token_ids_model().get(sub)
            if got is not None:
                out.append((got, s, e))
                continue
            if self._byte_fallback:
                bt = [self._token_ids_model().get(f"<0x{c:02X}>") for c in b[s:e]]
                if all(x is not None for x in bt):
                    out.extend((x, s, e) for x in bt)
                    continue
            out.append((unk, s, e))
        return out

    def _walk(self, text: str):
        """The pipeline walked once, a piece at a time: (id, character span, word index, matched text, None) per
        added-token match; (None, the piece's NString, word index, its text, its model tokens as (id, char
        start, char end) in the piece) per pre-tokenizer piece.  Words are numbered as HF does: one per added
        token and per pre-tokenizer piece, in order."""
        w = 0
        for tid, a, b in self._find_added(text, self._raw_added):
            if tid is not None:
                yield tid, (a, b), w, text[a:b], None
                w += 1
                continue
            ns = NString.from_text(text[a:b], a)
            for step in self._norm:
                step(ns)
            for tid2, c, d in self._find_added(ns.get(), self._norm_added):
                sub = ns.slice(c, d)
                if tid2 is not None:
                    yield tid2, ((sub.align[0][0], sub.align[-1][1]) if sub.align else (0, 0)), w, sub.get(), None
                    w += 1
                    continue
                pieces = [sub]
                for pre in self._pre:
                    pieces = [q for p in pieces for q in pre(p)]
                for p in pieces:
                    s = p.get()
                    if not s:
                        continue
                    yield None, p, w, s, self._model(s)
                    w += 1

    @staticmethod
    def _spans(p, toks) -> list[tuple[int, int]]:
        """Original character spans of a piece's model tokens (a token's first and last normalized characters'
        alignments)."""
        align = p.align
        n = len(align)
        if all(cs < ce <= n for _, cs, ce in toks):
            return [(align[cs][0], align[ce - 1][1]) for _, cs, ce in toks]
        out = []
        for _, cs, ce in toks:
            al = align[cs:ce]
            out.append((al[0][0], al[-1][1]) if al else (p.orig_start, p.orig_start))
        return out

    def tokens(self, text: str) -> Iterator[tuple[int, tuple[int, int], int, str, bool]]:
        """The pipeline step by step: (id, character span in `text`, word index, the text the token covers,
        whether it is an added-token match) per token (`_walk`, a token at a time)."""
        for tid, x, w, s, toks in self._walk(text):
            if toks is None:
                yield tid, x, w, s, True
                continue
            for (tid3, cs, ce), span in zip(toks, self._spans(x, toks)):
                yield tid3, span, w, s[cs:ce], False

    def hf_lists(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[int], list[str]]:
        """`_walk` as the lists the HF face reads, a piece at a time: ids, character offsets, word indices and
        token strings (tokenizers names an added-token match by the text it matched, Unigram's unknown piece
        by its text, every other token by its vocabulary string)."""
        ids: list[int] = []
        offs: list[tuple[int, int]] = []
        words: list[int] = []
        toks_out: list[str] = []
        vocab = self._vocab()
        unk = self.unk_id if self.model_type == "unigram" else -2
        out = (ids, offs, words, toks_out)
        for tid, x, w, s, toks in self._walk(text):
            if toks is None:
                append_added(out, tid, x[0], x[1], w, s)
                continue
            ids += [t for t, _, _ in toks]
            offs += self._spans(x, toks)
            words += [w] * len(toks)
            toks_out += [s[cs:ce] if t == unk else vocab[t] for t, cs, ce in toks]
        return ids, offs, words, toks_out

    def _offset_spans(self) -> np.ndarray:
        """The byte length each model id covers wherever the model emits it (int32), -1 where that depends
        on the text (the unknown token, byte-fallback tokens, a BPE id some merge route builds from parts of
        another length): the native offsets path reads a cached piece's spans from it."""
        sp = self.__dict__.get("_off_span")
        if sp is None:
            if self.model_type == "bpe":
                sp = np.asarray(self._span_table(), dtype=np.int32)
            else:
                po = self._po.astype(np.int64)
                sp = (po[1:] - po[:-1]).astype(np.int32)
                if 0 <= self.unk_id < self._n:
                    sp[self.unk_id] = -1
                bt = self._byte_tok()
                sp[bt[bt >= 0]] = -1
            sp = self._off_span = np.ascontiguousarray(sp, dtype=np.int32)
        return sp

    def hf_lists_batch(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]], list[int], list[str]]]:
        """`hf_lists` of every text, the whole pipeline with its alignments in one native call for the batch
        (`fstok.runtime._spm.hf_encode_offsets`); `hf_lists`, the reference, takes the texts that call
        leaves out (a stage without a native form, text on which tokenizers raises)."""
        if self._hf is None or self._drops_chars:
            return [self.hf_lists(t) for t in texts]
        cuts = None
        if self._raw_added is not None:
            search = self._raw_added.search
            cuts = [None if search(t) is None else [(-1 if i is None else i, a, b) for i, a, b in
                                                    self._find_added(t, self._raw_added)] for t in texts]
            if not any(c is not None for c in cuts):
                cuts = None
        call = self.__dict__.get("_hfo_call")
        if call is None:
            unk = self.unk_id if self.model_type == "unigram" else -2
            fn, hf, span, vocab = _native().hf_encode_offsets, self._hf, self._offset_spans(), self._vocab()
            call = self._hfo_call = lambda xs, cs: fn(hf, span, vocab, unk, xs, cs)
        texts = texts if type(texts) is list else list(texts)
        out = call(texts, cuts)
        for k, r in enumerate(out):
            if r is None:
                out[k] = self.hf_lists(texts[k])
        return out

    def _encode(self, text: str, with_offsets: bool):
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        ids: list[int] = []
        offs: list | None = [] if with_offsets else None
        for tid, span, _, _, _ in self.tokens(text):
            ids.append(tid)
            if offs is not None:
                offs.append(span)
        return ids, offs

    def _post(self, ids: list[int], offs: list | None):
        """The file's post-processor for one sequence (fstok.postprocess, HF's process_encodings)."""
        if self._pp is None:
            return ids, offs
        from .hf_encoding import Encoding
        from .postprocess import post_process

        toks = [self.id_to_token(i) or "" for i in ids]
        enc = Encoding.from_tokens(ids, toks, offs if offs is not None else [(0, 0)] * len(ids))
        enc = post_process(self._pp, enc, None, True)
        return enc.ids, (enc.offsets if offs is not None else None)

    def _ids_fast(self, text: str) -> list[int]:
        """The ids alone: the same stages on plain strings (no alignments), the model in C."""
        native = _native()
        ids: list[int] = []
        for tid, a, b in self._find_added(text, self._raw_added):
            if tid is not None:
                ids.append(tid)
                continue
            s = text[a:b]
            for step in self._norm:
                s = step.apply_str(s)
            for tid2, c, d in self._find_added(s, self._norm_added):
                if tid2 is not None:
                    ids.append(tid2)
                    continue
                pieces = [s[c:d]]
                for k, pre in enumerate(self._pre):
                    pieces = [q for p in pieces for q in pre.split_str(p, self._starts_text(text, a, b, c))]
                for p in pieces:
                    if not p:
                        continue
                    if self.model_type == "bpe":
                        nb = self._piece_bpe
                        got = native.hf_encode(nb[0], p.encode("utf-8"), 1) if nb is not None else None
                        if got is None:
                            got = [t for t, _, _ in self._bpe.tokenize(p)]
                    else:
                        got = native.model_ids(self._h, p.encode("utf-8"), self.unk_id)
                        if got is None:  # an unknown piece: fusion, lookup and byte fallback in Python
                            got = [t for t, _, _ in self._model(p)]
                    ids.extend(got)
        return ids

    def _starts_text(self, text: str, a: int, b: int, c: int) -> bool:
        """Whether the normalized text of text[a:b] from character c has original start 0, which Metaspace's
        "first" scheme reads: the alignments decide where a normalizer step moves the first character (a
        Replace at the start gives its content the span of the last character it replaces)."""
        if not self._norm or not any(getattr(p, "scheme", None) == "first" for p in self._pre):
            return a == 0 and c == 0
        ns = NString.from_text(text[a:b], a)
        for step in self._norm:
            step(ns)
        return ns.align[c][0] == 0 if c < len(ns.align) else a == 0

    def _ids_native(self, text: str) -> list[int]:
        """The ids alone, each segment between added tokens in one native call."""
        hf_encode = _native().hf_encode
        segs = self._find_added(text, self._raw_added)
        if len(segs) == 1 and segs[0][0] is None:  # no added token: the native list is the answer
            got = hf_encode(self._hf, text.encode("utf-8"), True)
            return got if got is not None else self._ids_fast(text)
        ids: list[int] = []
        for tid, a, b in segs:
            if tid is not None:
                ids.append(tid)
                continue
            got = hf_encode(self._hf, text[a:b].encode("utf-8"), a == 0)
            if got is None:  # an unknown piece without an unk id: the Python path raises tokenizers' error
                return self._ids_fast(text)
            ids.extend(got)
        return ids

    def encode(self, text: str, *, add_special_tokens: bool = False, allowed_special: Any = "all") -> list[int]:
        """tokenizers' `encode(text, add_special_tokens=...)`.ids.  Added tokens in the text are always
        recognised (as in tokenizers): `allowed_special` other than "all" is refused."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        if self._hf is not None:
            ids = self._ids_native(text)
        elif self._fast_ok:
            ids = self._ids_fast(text)
        else:
            ids, _ = self._encode(text, False)
        if add_special_tokens:
            ids, _ = self._post(ids, None)
        return ids

    def encode_with_offsets(self, text: str, *, add_special_tokens: bool = False, allowed_special: Any = "all"):
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets expects a str, got {type(text).__name__}")
        ids, offs = self.hf_lists_batch([text])[0][:2]
        if add_special_tokens:
            ids, offs = self._post(ids, offs)
        return ids, offs

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False,
                     allowed_special: Any = "all") -> list[list[int]]:
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        return [self.encode(t, add_special_tokens=add_special_tokens) for t in texts]

    def count(self, text: str) -> int:
        return len(self.encode(text))

    # -- decoding -----------------------------------------------------------------------------
    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """tokenizers' `decode(ids, skip_special_tokens=True)` (its default): ids of neither the
        vocabulary nor the added tokens are dropped, as tokenizers drops them."""
        toks = []
        forms = self._decode_forms
        for i in ids:
            i = int(i)
            if forms and i in forms:
                t = forms[i]
                if not (skip_special_tokens and t in self._special_contents):
                    toks.append(t)
                continue
            if skip_special_tokens and i in self._special_ids:
                continue
            t = self.id_to_token(i)
            if t is not None:
                toks.append(t)
        return decoders.decode_tokens(self._dec, toks)

    def decode_batch(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(x, skip_special_tokens=skip_special_tokens) for x in batch]


_U8LEN = (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)  # UTF-8 sequence length by the lead byte's high nibble


def added_matcher(forms) -> LiteralSet | None:
    """Leftmost-longest matching over literal added-token forms (None: no forms)."""
    return LiteralSet(forms) if any(forms) else None


def find_added(s: str, rx, forms: dict[str, int], entries: dict[int, dict]) -> list[tuple[int | None, int, int]]:
    """tokenizers' AddedVocabulary::find_matches: (id or None, start, end) character spans covering s, for
    the matches of `rx` (an `added_matcher` over `forms`, form -> id), with each token's single_word / lstrip /
    rstrip as its tokenizer.json entry (`entries`, id -> entry) says."""
    if rx is None or not s:
        return [(None, 0, len(s))]
    out = []
    start_offset = 0
    for a, b in rx.finditer(s):
        tid = forms[s[a:b]]
        t = entries[tid]
        if t.get("single_word"):
            if (a > 0 and _is_word(s[a - 1])) or (b < len(s) and _is_word(s[b])):
                continue
        if t.get("lstrip"):
            k = a
            while k > 0 and s[k - 1] in WHITE_SPACE:
                k -= 1
            a = max(k, start_offset)
        if t.get("rstrip"):
            while b < len(s) and s[b] in WHITE_SPACE:
                b += 1
        if start_offset < a:
            out.append((None, start_offset, a))
        out.append((tid, a, b))
        start_offset = b
    if start_offset != len(s):
        out.append((None, start_offset, len(s)))
    return out


def append_added(out: tuple[list, list, list, list], tid: int, a: int, b: int, word: int, token: str) -> int:
    """Appends one added-token match (id, character span a..b, word index, token string) to HF's lists
    (ids, offsets, word indices, token strings); a match is a word of its own, so the next word index is
    returned."""
    ids, offs, words, toks = out
    ids.append(tid)
    offs.append((a, b))
    words.append(word)
    toks.append(token)
    return word + 1


def _is_word(c: str) -> bool:
    from .pipeline.added import is_word_char  # HF's single_word test is Rust regex's Unicode \w

    return is_word_char(c)


def _run_regex(pat: str):
    """(character, k, k_max) when the Regex pattern is one literal character repeated -- c+, c{k,} or
    c{k} -- else None."""
    m = re.fullmatch(r"(\\[\\\[\](){}|.^$*+?\-/ ]|[^\\\[\](){}|.^$*+?])(\+|\{(\d+),\}|\{(\d+)\})", pat)
    if not m:
        return None
    c = m.group(1)[-1]
    if m.group(2) == "+":
        return c, 1, 0
    if m.group(3) is not None:
        k = int(m.group(3))
        return (c, k, 0) if k >= 1 else None
    k = int(m.group(4))
    return (c, k, k) if k >= 1 else None


def _native_norm_ops(spec, charsmaps: list):
    """The normalizer as native steps (kind, a, b, k, k_max, units, norm), or None when a step has none."""
    if spec is None:
        return []
    t = spec.get("type")
    if t == "Sequence":
        out = []
        for s in spec.get("normalizers") or []:
            sub = _native_norm_ops(s, charsmaps)
            if sub is None:
                return None
            out += sub
        return out
    if t == "Precompiled":
        units, norm = charsmaps.pop(0)
        return [(1, b"", b"", 0, 0, units, norm)] if len(units) else []
    if t == "Prepend":
        return [(4, spec["prepend"].encode("utf-8"), b"", 0, 0, None, None)]
    if t == "Replace":
        pat, content = spec["pattern"], spec["content"].encode("utf-8")
        if "String" in pat:
            return [(2, pat["String"].encode("utf-8"), content, 0, 0, None, None)]
        rx = pat.get("Regex")
        if isinstance(rx, str):
            if re.fullmatch(r"[^\\\[\](){}|.^$*+?]+", rx):
                return [(2, rx.encode("utf-8"), content, 0, 0, None, None)]
            run = _run_regex(rx)
            if run is not None:
                c, k, k_max = run
                return [(3, c.encode("utf-8"), content, k, k_max, None, None)]
        return None
    return None
