"""A whole HF tokenizer.json pipeline: added tokens, normalizer, pre-tokenizer, model, post-processor, decoder.

    tok = PipelineTokenizer.from_file("tokenizer.json")
    tok.encode("Hello world")                              # ids (add_special_tokens=False by default)
    tok.encode("Hello world", add_special_tokens=True)     # with the file's post-processor (HF's default)
    tok.encode_with_offsets("Hello world")                 # (ids, [(start, end), ...]) character offsets
    tok.decode(ids)                                        # skip_special_tokens=True, as HF's default

Exactly HF `tokenizers` 0.23.3 `Tokenizer.encode(text, add_special_tokens=...)` (ids, offsets) and
`decode(ids, skip_special_tokens=...)` for the components of fstok.pipeline; a component it does not
implement raises UnsupportedComponent (a ValueError) naming it and the file when the file is read.
Where the stages allow (fstok.pipeline.native, fstok.pipeline.fastnorm), the text is encoded in one C pass
by the compiled byte-level BPE tables (`_byte_level_tables`); the Python stages run the rest and are the
oracle of that path (`compiled=False` keeps every stage in Python).  `save` / `fstok.load`: one artifact
(fstok.pipeline.persist).
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any, Optional, Sequence

from ..artifact import ArtifactError
from ..errors import check_allowed_all
from . import UnsupportedComponent

# the stage modules (decoders, models, normalizers, pretokenizers, added) are imported where the stages are
# built: a tokenizer loaded from its artifact encodes with the compiled tables and needs none of them

_BUILD_LOCK = threading.RLock()


def _load_json(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
        raise ValueError(f"{path}: not a tokenizer.json (no 'model' object)")
    return obj


def _post_processor(cfg: Any, where: str):
    if cfg is None:
        return None, None
    try:
        from .. import postprocess as _pp
    except ImportError:
        raise UnsupportedComponent(f"{where}: post_processor {cfg.get('type')!r} needs fstok.postprocess, "
                                   "which this installation lacks") from None
    try:
        return _pp, _pp.PostProcessor.from_json(cfg)
    except ValueError as e:
        raise UnsupportedComponent(f"{where}: {e}") from None


def _added_vocabulary(obj: dict, vocab: dict, normalizer, where: str, n_ids: Optional[int] = None):
    """(AddedVocabulary, special token contents -> ids) of the file's added_tokens, `vocab` the model's
    (`n_ids` its size as HF counts it, where that is not len(vocab): a Unigram list with duplicates)."""
    from .added import AddedToken, AddedVocabulary

    # HF ignores the ids written in added_tokens: it adds the tokens in file order, each getting its id
    # in the model vocab, else the next id after the vocabulary (TokenizerImpl::add_tokens)
    by_content: dict[str, int] = {}
    by_id: dict[int, AddedToken] = {}
    specials: set[str] = set()
    next_id = len(vocab) if n_ids is None else n_ids
    for a in obj.get("added_tokens") or []:
        c = a.get("content") if isinstance(a, dict) else None
        if not isinstance(c, str):
            raise UnsupportedComponent(f"{where}: bad added token {a!r}")
        if not c:
            continue
        t = AddedToken(c, 0, bool(a.get("special", False)), bool(a.get("normalized", True)),
                       bool(a.get("lstrip", False)), bool(a.get("rstrip", False)), bool(a.get("single_word", False)))
        i = by_content.get(c)
        if i is not None and by_id[i] == dataclasses.replace(t, id=i):
            continue  # the same token again
        if i is None:
            i = vocab.get(c)
        if i is None:
            i, next_id = next_id, next_id + 1
        by_content[c] = i
        by_id[i] = dataclasses.replace(t, id=i)
        if t.special:
            specials.add(c)
    return AddedVocabulary(list(by_id.values()), normalizer, frozenset(specials)), {c: by_content[c] for c in specials}


class _TokenNames(dict):
    """id -> token string. An id the compiled tables give and the file's vocabulary lacks can only come from
    an artifact whose sections disagree: that is the artifact's fault, named as such."""

    where: Optional[str] = None

    def __missing__(self, i):
        if self.where is None:
            raise KeyError(i)
        raise ArtifactError(f"{self.where}: the tables give id {i}, which the tokenizer.json section does not have")


class PipelineTokenizer:
    """An HF tokenizer.json run stage by stage with HF's semantics (see the module docstring)."""

    _fstok_kind = "pipeline"
    # the compiled path (set by _byte_level_tables / the artifact loader); these defaults: the stages only
    _tables = None  # the compiled byte-level BPE (fstok.bpe.BPETokenizer), in either mode
    _mode = "direct"
    _norm_fast = None
    _pieces = None
    _suffix = False
    _prefix_space = False  # a leading ByteLevel(add_prefix_space=true): " " before a text that lacks one
    _cut = None
    _raw_guards: tuple = ()
    _norm_guards: tuple = ()
    _standin_lo = None
    _artifact_where: Optional[str] = None  # the artifact this tokenizer was loaded from (its messages name it)
    _model_native = None  # the model stage in C where the byte-level tables do not run (fstok.pipeline.model_tables)
    # built from the tokenizer.json on first use when the tokenizer was loaded from an artifact (the compiled
    # tables encode without them; the stages, decode and the vocabulary need them)
    _LAZY = frozenset({"normalizer", "pre_tokenizer", "model", "decoder", "_pp_mod", "post_processor", "added",
                       "special_tokens"})

    def __init__(self, obj: dict, where: str = "tokenizer.json", name: Optional[str] = None, compiled: bool = True):
        self.where = where
        self.name = name or os.path.basename(os.path.dirname(os.path.abspath(where))) or "tokenizer"
        for key in ("truncation", "padding"):
            if obj.get(key) is not None:
                # a fixed truncation/padding changes what encode returns; refused rather than ignored
                raise UnsupportedComponent(f"{where}: {key} settings in tokenizer.json are not supported by the "
                                           "pipeline tokenizer")
        self._obj = obj
        self._build_stages()
        self._set_inner(self._byte_level_tables(obj, where) if compiled else None)
        if compiled and self._tables is None:
            self._model_tables(obj, where)
        ids = set(self.model.vocab_r) | set(self.added.by_id)
        self.n_vocab = (max(ids) + 1) if ids else 0
        self._has_pp = self.post_processor is not None

    @property
    def _inner(self):
        """The compiled tables where `_tokens` (ids, offsets, word per added-token split) comes from them: the
        "direct" mode.  In the "guarded" mode the tables give ids only and `_tokens` runs the stages."""
        return self._tables if self._mode == "direct" else None

    def __getattr__(self, name: str):
        if name in PipelineTokenizer._LAZY and "_obj" in self.__dict__:
            with _BUILD_LOCK:
                if name not in self.__dict__:
                    try:
                        if not (name in ("added", "special_tokens") and self._build_added()):
                            self._build_stages()
                    except ArtifactError:
                        raise
                    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
                        if self._artifact_where is None:
                            raise
                        # the artifact's tokenizer.json section, read on first use: its faults are the artifact's
                        raise ArtifactError(f"{self._artifact_where}: the tokenizer.json section does not build "
                                            f"({type(e).__name__}: {e})"[:500]) from None
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _build_stages(self) -> None:
        """The Python stages of the tokenizer.json (the oracle, the path for what the tables do not cover)."""
        from . import decoders as _dec
        from . import models as _models
        from . import normalizers as _norm
        from . import pretokenizers as _pre

        obj, where = self._parsed_obj(), self.where
        normalizer = _norm.from_config(obj.get("normalizer"), where)
        pre_tokenizer = _pre.from_config(obj.get("pre_tokenizer"), where)
        model = _models.from_config(obj["model"], where)
        decoder = _dec.from_config(obj.get("decoder"), where)
        pp_mod, post_processor = _post_processor(obj.get("post_processor"), where)
        self.normalizer, self.pre_tokenizer, self.model, self.decoder = normalizer, pre_tokenizer, model, decoder
        self._pp_mod, self.post_processor = pp_mod, post_processor
        self.added, self.special_tokens = _added_vocabulary(obj, model.vocab, normalizer, where,
                                                            getattr(model, "n_ids", None))

    def _parsed_obj(self) -> dict:
        obj = self._obj
        if hasattr(obj, "parse"):  # the artifact's section (fstok.pipeline.persist), parsed on first need
            obj = self._obj = obj.parse()
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            obj = self._obj = json.loads(bytes(obj).decode("utf-8"))
        return obj

    def _build_added(self) -> bool:
        """The added vocabulary alone, without the model and the other stages (a tokenizer loaded from its
        artifact encodes with the compiled tables; building a large merge list for the stages costs seconds).
        The model's vocab is the file's vocab object itself (fstok.pipeline.models), so the ids are the ones
        `_build_stages` assigns.  False where the vocab is not such an object (the stages decide)."""
        from . import normalizers as _norm

        obj = self._parsed_obj()
        vocab = obj["model"].get("vocab")
        if not isinstance(vocab, dict):
            return False
        normalizer = self.__dict__["normalizer"] if "normalizer" in self.__dict__ else \
            _norm.from_config(obj.get("normalizer"), self.where)
        self.added, self.special_tokens = _added_vocabulary(obj, vocab, normalizer, self.where)
        return True

    @classmethod
    def from_file(cls, path: str | os.PathLike, name: Optional[str] = None, compiled: bool = True) -> "PipelineTokenizer":
        """compiled=False keeps every stage in Python (the oracle of the compiled path)."""
        p = os.fspath(path)
        return cls(_load_json(p), p, name, compiled)

    def _byte_level_tables(self, obj: dict, where: str):
        """The compiled byte-level BPE (C) for the whole text where it computes exactly what the stages compute:
        a pre-tokenizer the tables express without a prefix space (fstok.pipeline.native), a byte-level BPE
        (an `end_of_word_suffix` as a sentinel byte, see `_suffix_source`), a normalizer with a fast form
        (fstok.pipeline.fastnorm) or none.

        Without a normalizer or suffix ("direct"), the tables also match the added tokens (HF's two passes);
        those with lstrip / rstrip / single_word are left out, and a text holding one takes the stages
        (`_guards`).  With a normalizer or suffix ("guarded"), a text holding any added token takes the stages.
        None where the tables do not apply."""
        self._mode, self._norm_fast, self._pieces, self._suffix, self._cut = "direct", None, None, False, None
        self._prefix_space = False
        from . import models as _models

        self._raw_guards: tuple[str, ...] = ()
        self._norm_guards: tuple[str, ...] = ()
        if not isinstance(self.model, _models.BPE) or self.model.prefix or self.model.byte_fallback:
            return None
        m = self.model
        if self.normalizer is not None:
            from .fastnorm import fast_normalizer_plan

            self._norm_fast = fast_normalizer_plan(obj.get("normalizer"))
            if self._norm_fast is None:
                return None
        from ..bpe import BPETokenizer
        from ..loaders.bpe_source import AddedToken as _SrcAdded

        try:
            obj = self._without_prefix_space(obj)
            src = self._byte_level_source(self._suffix_source(obj) if m.suffix else obj, where)
            if src is None or src.add_prefix_space or src.normalizer is not None:
                return None
            if m.suffix or self.normalizer is not None or self._cut is not None or self._prefix_space:
                self._mode = "guarded"
                self._raw_guards = tuple(t.content for t in self.added.tokens if not t.normalized)
                self._norm_guards = tuple(self.added.id_to_token(t.id) for t in self.added.tokens if t.normalized)
                if m.suffix or self._cut is not None:
                    from .native import Cutter

                    self._suffix = bool(m.suffix)
                    if isinstance(self._cut, list):
                        self._pieces = Cutter.build_levels(self._cut)
                    elif self._cut is not None:
                        self._pieces = Cutter.build(*self._cut)
                    else:
                        st = src.stages
                        find = st[0] if len(st) == 1 and not st[0].keep_gaps else None
                        self._pieces = Cutter.build(find, [] if find is not None else list(st))
                    src.stages = []  # the pieces are cut before the tables run
            else:
                # every added token with HF's id; the raw (normalized=false) ones are matched in the first pass,
                # the others in the second, as HF's two tries do (without a normalizer the second sees raw text)
                by_bytes = {b: i for b, i in src.tokens.items()}
                for t in self.added.tokens:
                    if t.lstrip or t.rstrip or t.single_word:
                        continue
                    src.added_tokens.append(_SrcAdded(t.content, t.id, special=False, normalized=t.normalized))
                    if by_bytes.get(t.content.encode("utf-8")) != t.id:
                        src.extra_decode.setdefault(t.id, t.content.encode("utf-8"))
            src.check()
            inner = BPETokenizer.from_source(src)
        except ValueError:
            return None
        return inner

    def _without_prefix_space(self, obj: dict) -> dict:
        """The file with a leading ByteLevel(add_prefix_space=true) as one without the prefix space, which
        `_native_text` then puts before the text itself (`_prefix_space`): HF prepends it to each piece that
        reaches ByteLevel, and with ByteLevel first the only piece is the whole (normalized) text between added
        tokens; a text holding an added token runs the stages ("guarded" mode)."""
        pre = obj.get("pre_tokenizer")
        seq = isinstance(pre, dict) and pre.get("type") == "Sequence"
        items = (pre.get("pretokenizers") or []) if seq else [pre]
        first = items[0] if items else None
        if not (isinstance(first, dict) and first.get("type") == "ByteLevel" and first.get("add_prefix_space", True)):
            return obj
        self._prefix_space = True
        first = dict(first, add_prefix_space=False)
        pre = dict(pre, pretokenizers=[first, *items[1:]]) if seq else first
        return dict(obj, pre_tokenizer=pre)

    #: the sentinel byte that stands for `end_of_word_suffix`: 0xFF never occurs in UTF-8 text
    SENTINEL = 0xFF

    def _suffix_source(self, obj: dict) -> dict:
        """The file with `end_of_word_suffix` as a sentinel byte ending every piece: a token "x</w>" becomes
        x + sentinel, a merge (a, "b</w>") becomes (a, b + sentinel), and merges (c, sentinel) -> "c</w>" for
        every byte come first, so the first merges of a piece rebuild HF's initial symbols (the last one
        carries the suffix) and the rest merges as HF does.  Tokens holding the byte 0xFF itself can never
        match UTF-8 text and are left out.  Raises ValueError where this does not apply (a byte without its
        suffixed token)."""
        from ..bytelevel_table import BYTE_TO_CHAR

        m = self.model
        suf = m.suffix
        sent = BYTE_TO_CHAR[self.SENTINEL]
        vocab: dict[str, int] = {}
        for tok, i in m.vocab.items():
            if tok.endswith(suf) and len(tok) > len(suf):
                base = tok[: -len(suf)]
                if sent not in base:
                    vocab[base + sent] = i
            elif sent not in tok:
                vocab[tok] = i
        chars = [BYTE_TO_CHAR[b] for b in range(256) if b != self.SENTINEL]
        if any(c + sent not in vocab for c in chars):
            raise ValueError("a byte without its end-of-word token")
        vocab[sent] = max(m.vocab.values()) + 1 + len(self.added.tokens)  # never emitted: always merged first
        merges = [f"{c} {sent}" for c in chars]
        if m.ignore_merges:
            raise ValueError("ignore_merges with end_of_word_suffix")
        raw = obj["model"].get("merges") or []
        for k, mg in enumerate(raw):
            a, b = mg.split(" ") if isinstance(mg, str) else mg
            if sent in a or sent in b:
                continue
            if a.endswith(suf):
                continue  # a suffixed token is always last: it never starts a pair
            if b.endswith(suf):
                b = b[: -len(suf)] + sent
            elif (a + b).endswith(suf):
                raise ValueError("a token that spells the suffix inside a word")  # one id, two roles
            merges.append([a, b])
        model = dict(obj["model"], vocab=vocab, merges=merges, end_of_word_suffix=None, unk_token=None)
        return dict(obj, model=model)

    def _byte_level_source(self, obj: dict, where: str):
        """The BPESource of the file without its added tokens and normalizer: the byte-level BPE loader's
        own reading, else the pre-tokenizer as a compiled split pipeline (fstok.pipeline.native).  Bytes
        the vocabulary lacks (GPT-NeoX style) get stand-in tokens with ids from `_standin_lo` on: no merge
        uses them, so the tables emit one exactly when the text holds such a byte, and that text is encoded
        again by the stages (HF drops the byte before merging)."""
        from ..loaders.hf_bpe import source_from_obj
        from .native import NotNative, compile_levels, compile_stages, native_levels, native_stages

        bare = dict(obj, added_tokens=[], normalizer=None)
        self._cut = None
        try:
            src = source_from_obj(bare, where, self.name, check=False)
        except ValueError:
            try:
                find, stages = native_stages(obj.get("pre_tokenizer"))
                stages = compile_stages(stages)
                if find is not None:
                    compile_stages([dataclasses.replace(find, keep_gaps=True)])  # the empty-match check
            except NotNative:
                # stages that remove or merge text (Split behaviors, Whitespace, ...): the pieces are cut by
                # their levels in one C call before the tables run (`_cut_ids`)
                try:
                    levels = compile_levels(native_levels(obj.get("pre_tokenizer")))
                except NotNative:
                    return None
                find, stages = None, None
                self._cut = levels
            src = source_from_obj(dict(bare, pre_tokenizer={"type": "ByteLevel", "add_prefix_space": False,
                                                            "use_regex": False}), where, self.name, check=False)
            if stages is None:
                pass  # cut by `_cut`'s levels
            elif find is None:
                src.stages = stages
            elif not stages:
                src.stages = [find]
            else:
                self._cut = (find, stages)  # the tables cannot cut these pieces: `_cut_ids` does
        missing = [b for b in range(256) if bytes([b]) not in src.tokens]
        self._standin_lo = None
        if missing:
            nxt = max([*src.tokens.values(), *src.extra_decode, *self.added.by_id, len(self.model.vocab) - 1]) + 1
            for k, b in enumerate(missing):
                src.tokens[bytes([b])] = nxt + k
            self._standin_lo = nxt
        src.source_files = []  # identified by its tokens and merges (the stand-ins included), not a file
        return src

    def _set_inner(self, inner) -> None:
        import numpy as np

        self._tables = inner
        self._guards: tuple[str, ...] = ()
        self._lens = None
        if inner is None:
            self._standin_lo = None
            return
        self._guards = tuple(t.content for t in self.added.tokens if t.lstrip or t.rstrip or t.single_word)
        self._lens = np.diff(inner._tables["dec_off"].astype(np.int64))

    def _model_tables(self, obj: dict, where: str) -> None:
        """The model stage in C (fstok.pipeline.model_tables) for a model the byte-level tables do not run
        (WordPiece, Unigram, BPE that is not byte-level), in "guarded" mode: a text holding no added token is
        normalized by the normalizer's fast form (fstok.pipeline.fastnorm; a Precompiled one by the SentencePiece
        runtime's steps, `NativeModel.normalize`), cut into pieces by the pre-tokenizer's split levels in one C
        call (a trailing Metaspace runs in the model stage), and the model encodes every piece in one C call.
        Left unset (the stages run) where a stage has no such form."""
        from . import model_tables as _mt
        from .native import Cutter, NotNative, compile_levels, native_levels

        norm_fast, norm_in_model = None, False
        if self.normalizer is not None:
            from .fastnorm import fast_normalizer_plan

            norm_fast = fast_normalizer_plan(obj.get("normalizer"))
            norm_in_model = norm_fast is None  # (Precompiled: the SentencePiece runtime's steps, where they apply)
        pre, metaspace = _mt.split_metaspace(obj.get("pre_tokenizer"))
        levels = []
        if pre is not None:
            try:
                levels = compile_levels(native_levels(pre, byte_level=False))
            except NotNative:
                return
        nm = _mt.build(self.model, obj, where, metaspace, bool(levels), norm_in_model)
        if nm is None:
            return
        if norm_in_model:
            norm_fast = nm.normalize
        self._mode, self._norm_fast, self._suffix, self._prefix_space, self._cut = "guarded", norm_fast, False, False, None
        self._pieces = Cutter.build_levels(levels) if levels else None
        self._raw_guards = tuple(t.content for t in self.added.tokens if not t.normalized)
        self._norm_guards = tuple(self.added.id_to_token(t.id) for t in self.added.tokens if t.normalized)
        self._model_native = nm

    def _native_text(self, text: str):
        """What the compiled tables encode for `text`: the text itself ("direct" mode), or its normalized
        UTF-8 bytes ("guarded" mode: the normalizer's fast form, fstok.pipeline.fastnorm); None where the
        stages must run (an added token that needs them occurs; the normalizer has no fast form for this
        text)."""
        if self._tables is None and self._model_native is None:
            return None
        if self._mode == "direct":
            for g in self._guards:
                if g in text:
                    return None
            return text
        for g in self._raw_guards:
            if g in text:
                return None
        if self._norm_fast is None:
            try:
                t = text.encode("utf-8")
            except UnicodeEncodeError:
                return None  # lone surrogates: the stages see the text as given
        else:
            t = self._norm_fast(text)
            if t is None:
                return None
        ng = self.__dict__.get("_norm_guards_b")
        if ng is None:
            ng = self.__dict__["_norm_guards_b"] = tuple(g.encode("utf-8") for g in self._norm_guards if g)
        for g in ng:
            if g in t:
                return None
        if self._prefix_space and t and t[:1] != b" ":
            t = b" " + t  # (after the guards: HF matches added tokens before the pre-tokenizer runs)
        return t

    def _native_ok(self, text: str) -> bool:
        return self._native_text(text) is not None

    def _cut_ids(self, data: bytes) -> list[int]:
        """The ids of the normalized UTF-8 `data` where the pieces are cut here (`_pieces`: one C pass for
        the DFAs) and encoded by the tables in one C call (through the piece cache); with end_of_word_suffix
        each piece is followed by the sentinel byte."""
        tri = self._pieces.triples(data)
        if not tri:
            return []
        # with a suffix, C follows each piece with the sentinel byte (in a scratch copy) before its lookup
        return self._tables._model.encode_spans(data, tri, 0, self.SENTINEL if self._suffix else -1)

    # ------------------------------------------------------------------ encoding
    def _ids(self, text: str) -> list[int]:
        """The ids of _tokens(text): one pass in C where the compiled tables apply."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        t = self._native_text(text)
        if t is not None and self._model_native is not None:
            from .model_tables import whole

            a = self._model_native.encode(t, self._pieces.triples(t) if self._pieces is not None else whole(t))
            if a is not None:
                return a
        elif t is not None:
            lo = self._standin_lo
            if self._mode == "direct" and lo is None:
                enc = self.__dict__.get("_direct_enc")
                return (enc or self._direct_encoder())(t)
            try:
                if self._pieces is not None:
                    a = self._cut_ids(t)
                else:
                    sp1, sp2 = self._tables._matchers(frozenset())
                    a = self._tables._model.encode(t, sp1, 0, sp2, 1)
            except UnicodeEncodeError:
                a = None  # lone surrogates: the stages see the text as given
            if a is not None and (lo is None or not a or max(a) < lo):
                return a
        return self._stage_tokens(text)[0]

    def _direct_encoder(self):
        """text -> ids by the tables' C encoder with the added-token matchers bound once (what
        `_tables.encode(text, disallowed_special=())` computes, without its per-call argument handling)."""
        tb = self._tables
        enc = lambda t: tb.encode(t, disallowed_special=())  # noqa: E731
        if tb._native and not tb._python_text_path():
            sp1, sp2 = tb._matchers(frozenset())
            model = tb._model

            def enc(t: str) -> list[int]:
                try:
                    return model.encode(t, sp1, 0, sp2, 1)
                except UnicodeEncodeError:  # lone surrogates: repaired as the tables' encode repairs them
                    return tb.encode(t, disallowed_special=())
        self.__dict__["_direct_enc"] = enc
        return enc

    def _tokens(self, text: str):
        """(ids, token strings, offsets, word indices) before post-processing (HF's Encoding of one text)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if self._mode == "direct" and self._native_ok(text):
            return self._native_tokens(text)
        return self._stage_tokens(text)

    def _stage_tokens(self, text: str):
        """_tokens stage by stage in Python (the oracle of the compiled path)."""
        ids: list[int] = []
        toks: list[str] = []
        offs: list[tuple[int, int]] = []
        words: list[int] = []
        w = 0
        for piece, tok in self.added.extract_and_normalize(text):
            if tok is not None:
                ids.append(tok.id)
                toks.append(piece.text)
                offs.append(piece.span())
                words.append(w)
                w += 1
                continue
            pieces = self.pre_tokenizer.split([piece]) if self.pre_tokenizer is not None else [piece]
            text_of = self.model.token_text
            for p in pieces:
                for i, a, b in self.model.tokenize(p.text):
                    ids.append(i)
                    toks.append(text_of(i, p.text, a, b))
                    offs.append(p.offsets(a, b))
                    words.append(w)
                w += 1
        return ids, toks, offs, words

    def _native_tokens(self, text: str):
        """_tokens by the C tables: offsets from each token's byte start and byte length (a token that
        starts or ends inside a character covers that whole character, as HF's alignments do)."""
        import numpy as np

        (ids, starts), used = self._tables._run(text, frozenset(), 3)
        if not ids:
            return [], [], [], []
        a = np.asarray(ids, dtype=np.int64)
        if used != text or (self._standin_lo is not None and int(a.max()) >= self._standin_lo):
            # lone surrogates the C path repaired, or a byte the vocabulary lacks: the stages, as HF
            return self._stage_tokens(text)
        st = np.frombuffer(starts, dtype=np.uint32).astype(np.int64)
        en = st + self._lens[a]
        raw = text.encode("utf-8")
        by_id = self.added.by_id
        if by_id:
            for k in np.flatnonzero(np.isin(a, np.fromiter(by_id, dtype=np.int64, count=len(by_id)))).tolist():
                c = by_id[ids[k]].content.encode("utf-8")
                if raw.startswith(c, int(st[k])):
                    en[k] = st[k] + len(c)  # an added-token match spans its content, not its id's vocabulary bytes
        if not text.isascii():
            data = np.frombuffer(raw, dtype=np.uint8)
            ci = np.cumsum((data & 0xC0) != 0x80) - 1  # the char holding each byte
            st = ci[st]
            en = ci[en - 1] + 1
        tok_of = self._token_strings()
        toks = [tok_of(i) for i in ids]
        return ids, toks, list(zip(st.tolist(), en.tolist())), [0] * len(ids)

    def _token_strings(self):
        f = self.__dict__.get("_tok_of")
        if f is None:
            model = self.__dict__.get("model")
            vocab = self._parsed_obj()["model"].get("vocab") if model is None else None
            # the model's vocab is the file's vocab object (fstok.pipeline.models): no stages for the names
            table = _TokenNames(model.vocab_r if model is not None or not isinstance(vocab, dict) else
                                {i: t for t, i in vocab.items()})
            table.where = self._artifact_where
            for t in self.added.tokens:
                table[t.id] = t.content
            f = self.__dict__["_tok_of"] = table.__getitem__
        return f

    def _pp_wrap(self):
        """(ids before, ids after) the post-processor puts around a single sequence, or None where its
        result is not that shape (then the full post-processing runs)."""
        hit = self.__dict__.get("_pp_ids")
        if hit is None:
            pp = self._pp_mod
            sentinel = -12345
            enc = pp.post_process(self.post_processor, pp.Encoding.from_tokens([sentinel], ["a"], [(0, 1)], [0]),
                                  add_special_tokens=True)
            got = list(enc.ids)
            hit = (got[:got.index(sentinel)], got[got.index(sentinel) + 1:]) if got.count(sentinel) == 1 else False
            self.__dict__["_pp_ids"] = hit
        return hit or None

    def _encoding(self, text: str, add_special_tokens: bool):
        ids, toks, offs, words = self._tokens(text)
        if self.post_processor is None:
            return ids, offs
        pp = self._pp_mod
        enc = pp.post_process(self.post_processor, pp.Encoding.from_tokens(ids, toks, offs, words),
                              add_special_tokens=add_special_tokens)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    def encode(self, text: str, *, add_special_tokens: bool = False, allowed_special: Any = "all") -> list[int]:
        """Token ids of text (HF `encode(text, add_special_tokens=...).ids`); added tokens are always matched,
        as in HF (`allowed_special` other than "all" is refused)."""
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        if not add_special_tokens or not self._has_pp:
            return self._ids(text)
        wrap = self._pp_wrap()
        if wrap is not None:
            return wrap[0] + self._ids(text) + wrap[1]
        return self._encoding(text, True)[0]

    def encode_with_offsets(self, text: str, *, add_special_tokens: bool = False,
                            allowed_special: Any = "all") -> tuple[list[int], list[tuple[int, int]]]:
        """(ids, offsets): offsets[i] = (start, end) character offsets of token i in text (HF's offsets,
        including a post-processor's offset trimming)."""
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        return self._encoding(text, add_special_tokens)

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False,
                     num_threads: Optional[int] = None, allowed_special: Any = "all") -> list[list[int]]:
        """encode() of each text; where the compiled tables take the texts as they are ("direct" mode), the
        whole batch is one C call on `num_threads` threads (default: the machine's cores), and only the texts
        that need the stages (an lstrip / rstrip / single_word added token, a byte the vocabulary lacks, lone
        surrogates) take `encode`."""
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a sequence of str, not a str")
        if allowed_special != "all":
            check_allowed_all(allowed_special)
        texts = texts if isinstance(texts, list) else list(texts)
        out = self._direct_batch(texts, num_threads)
        if out is None:
            return [self.encode(t, add_special_tokens=add_special_tokens) for t in texts]
        if add_special_tokens and self._has_pp:
            wrap = self._pp_wrap()
            if wrap is None:
                return [self.encode(t, add_special_tokens=True) for t in texts]
            a, b = wrap
            return [a + ids + b for ids in out]
        return out

    def _direct_batch(self, texts: list, num_threads: Optional[int]):
        """The ids of `texts` by one batch call of the tables (what `_ids` gives each), or None where the
        mode is not "direct" (the stages or a normalized text decide)."""
        tb = self._tables
        if tb is None or self._mode != "direct" or not tb._native or tb._python_text_path():
            return None
        sp1, sp2 = tb._matchers(frozenset())
        out, missing = tb._model.encode_batch(texts, sp1, tb._threads(num_threads, len(texts)), 0, sp2, True)
        redo = set(missing)  # lone surrogates: repaired as `_ids` repairs them
        lo = self._standin_lo
        if lo is not None:  # a byte the vocabulary lacks (its stand-in id): the stages, as `_ids` decides
            redo.update(i for i, ids in enumerate(out) if ids and max(ids) >= lo)
        guards = self._guards
        if guards:
            joined = "\0".join(texts)  # (every item is a str: the C call checked them)
            if any(g in joined for g in guards):
                redo.update(i for i, t in enumerate(texts) if any(g in t for g in guards))
        for i in redo:
            out[i] = self._ids(texts[i])
        return out

    def count(self, text: str) -> int:
        return len(self._ids(text))

    # ------------------------------------------------------------------ decoding
    def id_to_token(self, i: int) -> Optional[str]:
        t = self.added.id_to_token(i)
        return t if t is not None else self.model.id_to_token(i)

    def token_to_id(self, token: str) -> Optional[int]:
        for a in self.added.tokens:
            if a.content == token:
                return a.id
        return self.model.vocab.get(token)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ids (HF `decode`): unknown ids are skipped; with skip_special_tokens the special added
        tokens are left out; the decoder (or " ".join without one) makes the text."""
        toks = []
        sp = self.added.special_contents
        for i in ids:
            t = self.id_to_token(int(i))
            if t is None or (skip_special_tokens and t in sp):
                continue
            toks.append(t)
        from . import decoders as _dec

        return _dec.decode_tokens(self.decoder, toks)

    def decode_batch(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in batch]

    # ------------------------------------------------------------------ persistence
    def to_bytes(self) -> bytes:
        """The artifact (kind "pipeline"): the tokenizer.json and, where they apply, the compiled tables."""
        from .persist import pipeline_artifact

        return pipeline_artifact(self)

    def save(self, path) -> None:
        from .. import artifact as _art

        _art.save_bytes(path, self.to_bytes())

    @classmethod
    def from_artifact(cls, art) -> "PipelineTokenizer":
        from .persist import load_pipeline

        return load_pipeline(cls, art)

    def __reduce__(self):
        from .._load import loads

        return (loads, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"<PipelineTokenizer {self.name!r} vocab={self.n_vocab}>"
