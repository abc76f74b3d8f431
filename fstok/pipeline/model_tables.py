"""The model stage of a tokenizer.json pipeline in C, for the models the byte-level BPE tables do not run.

    nm = model_tables.build(tok, obj, where)     # NativeModel, or None (the Python model runs)
    nm.encode(data, triples)                      # ids of the pieces (uint32 start, end, flag triples of data)

The pieces are cut by the pipeline's own pre-tokenizer in one C call (fstok.pipeline.native.Cutter) over the
normalized UTF-8 (fstok.pipeline.fastnorm), and the model runs over all of them in one C call:

  WordPiece                   the WordPiece runtime's single-word walk (fstok.runtime._wordpiece,
                              `Model.encode_spans`) over a WordPiece artifact of the model's vocabulary (no
                              normalization of its own)
  WordLevel                   the same walk with a continuing prefix no token starts with: the whole piece or
                              the unk token
  Unigram, BPE (not byte-level: byte_fallback, unk, fuse_unk, ignore_merges; no continuing prefix or
  end-of-word suffix)         the tokenizer.json SentencePiece runtime (fstok.runtime._spm, `hf_encode_spans`)
                              over an artifact of the model alone; a trailing Metaspace pre-tokenizer runs
                              there too, on each piece (replacement, prepend scheme, split)

Each is exactly fstok.pipeline.models' Python model (the oracle); the compiled model is a whole artifact of
its kind nested in the pipeline artifact (section `model`), validated when it loads as every artifact of
that kind.  Everything else keeps the Python model.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from .. import artifact as _art

#: the kinds of nested model artifacts
KINDS = ("wordpiece", "spm")


class NativeModel:
    """A compiled model over pre-cut pieces: `encode(data, triples)` -> ids, or None where the Python model
    must decide (an unknown piece and no unk id: HF raises)."""

    def __init__(self, kind: str, inner, first_ok: bool = False, norm: bool = False):
        self.kind, self.inner, self.first_ok, self.norm = kind, inner, first_ok, norm
        self.normalize = None
        if kind == "wordpiece":
            f = inner._model.encode_spans
            self.encode = lambda data, tri: f(data, tri, 0)  # noqa: E731
            return
        from ..runtime import _spm

        if inner._hf is None:
            raise _art.ArtifactError(f"{inner._art.path or '<bytes>'}: the model has no native form")
        h, g, fo = _model_handle(inner, norm), _spm.hf_encode_spans, first_ok
        self.encode = lambda data, tri: g(h, data, tri, fo)  # noqa: E731
        if norm:  # the file's normalizer (Precompiled, Replace, Prepend) as the runtime's own steps
            nh, nf = inner._hf, _spm.hf_normalize

            def normalize(text: str) -> Optional[bytes]:
                try:
                    return nf(nh, text.encode("utf-8"))
                except UnicodeEncodeError:
                    return None  # lone surrogates: the stages see the text as given

            self.normalize = normalize

    def encode(self, data: bytes, tri: bytes) -> Optional[list[int]]:  # (replaced per instance)
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        return self.inner.to_bytes()

    def meta(self) -> dict:
        return {"kind": self.kind, "first_ok": self.first_ok, "norm": self.norm}

    @classmethod
    def from_artifact(cls, art: _art.Artifact, meta: Any) -> "NativeModel":
        """The nested model of a pipeline artifact (section `model`), validated as every artifact of its kind."""
        where = art.path or "<bytes>"
        if not (isinstance(meta, dict) and meta.get("kind") in KINDS and isinstance(meta.get("first_ok"), bool)
                and isinstance(meta.get("norm", False), bool) and not (meta.get("norm") and meta["kind"] != "spm")):
            raise _art.ArtifactError(f"{where}: meta.model_native {meta!r} is not a native model description"[:300])
        if "model" not in art.sections:
            raise _art.ArtifactError(f"{where}: meta.model_native without a 'model' section")
        s = art.sections["model"]
        view = memoryview(art.buffer)[s.offset: s.offset + s.nbytes]
        kind = meta["kind"]
        expect = _art.KIND_WORDPIECE if kind == "wordpiece" else _art.KIND_SPM
        inner_art = _art.parse_artifact(view, where=f"{where}: model", expect_kind=expect, verify_payload=False)
        inner_art.path = f"{where}: model"
        if kind == "wordpiece":
            from ..wordpiece import WordPieceTokenizer

            inner = WordPieceTokenizer(inner_art)
        else:
            from ..hf_spm import HFSentencePieceTokenizer

            inner = HFSentencePieceTokenizer(inner_art)
        return cls(kind, inner, meta["first_ok"], meta.get("norm", False))


def _model_handle(inner, norm: bool):
    """The SentencePiece runtime's handle of `inner`'s pre-tokenizer (a Metaspace or none) and model, without
    its normalizer steps (they run before the pipeline cuts the pieces)."""
    pre = inner._pre
    if pre:
        ms = pre[0]
        kind, rep, split, scheme = 1, ms.rep.encode("utf-8"), int(bool(ms.split)), {"always": 0, "first": 1,
                                                                                    "never": 2}[ms.scheme]
    else:
        kind, rep, split, scheme = 0, b"", 1, 0
    if not norm:
        return inner._hf  # (no normalizer steps: the handle itself)
    word_sep = b""
    cut = None
    if inner.model_type == "bpe" and kind == 0:
        a = inner._art
        word_sep = str(a.meta.get("bpe_word_split") or "").encode("utf-8")
        if word_sep and a.has("hf_cut_pairs"):
            cut = a.array("hf_cut_pairs")
            if a.sections["hf_cut_pairs"].dtype != "|u1" or len(cut) != 8192:
                raise _art.ArtifactError(f"{a.path or '<artifact>'}: section 'hf_cut_pairs' is not 8192 bytes")
    return inner._hf_make([], kind, scheme, split, rep, word_sep, cut)


def whole(data: bytes) -> bytes:
    """The one triple of a text that is one piece (no pre-tokenizer)."""
    return struct.pack("=III", 0, len(data), 0xFFFFFFFF) if data else b""


def split_metaspace(cfg: Any) -> tuple[Any, Optional[dict]]:
    """(the pre-tokenizer before a trailing Metaspace, that Metaspace or None)."""
    if isinstance(cfg, dict) and cfg.get("type") == "Metaspace":
        return None, cfg
    if isinstance(cfg, dict) and cfg.get("type") == "Sequence":
        items = list(cfg.get("pretokenizers") or [])
        if items and isinstance(items[-1], dict) and items[-1].get("type") == "Metaspace":
            rest = items[:-1]
            return (dict(cfg, pretokenizers=rest) if rest else None), items[-1]
    return cfg, None


_FIRST_SAFE = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase"}


def _first_safe(norm_cfg: Any) -> bool:
    """Whether the normalizer keeps the first normalized character at original offset 0 (Metaspace's "first"
    scheme reads the piece's original start): its steps never delete or insert at the start."""
    if norm_cfg is None:
        return True
    items = norm_cfg.get("normalizers") if norm_cfg.get("type") == "Sequence" else [norm_cfg]
    return all(isinstance(c, dict) and c.get("type") in _FIRST_SAFE for c in items or [])


def build(model, obj: dict, where: str, metaspace: Optional[dict], has_levels: bool,
          norm: bool = False) -> Optional[NativeModel]:
    """The compiled form of the pipeline's Python `model` (fstok.pipeline.models), or None where it has none.
    `metaspace`: a trailing Metaspace pre-tokenizer the model stage runs per piece (None: none); `norm`: the
    file's normalizer runs as the SentencePiece runtime's steps (`NativeModel.normalize`; Unigram and BPE)."""
    from . import models as _m

    if isinstance(model, _m.WordPiece):
        if norm or metaspace is not None or model.unk_token not in model.vocab or not model.vocab:
            return None
        return _wordpiece(model, where)
    if isinstance(model, _m.WordLevel):
        # the whole piece's id, else the unk token's: WordPiece's greedy walk with a continuing prefix no token
        # starts with (the longest match from the start is the whole piece exactly when it is a token; any other
        # start leaves a rest that prefix + rest never matches, and the word is the unk token)
        if norm or metaspace is not None or not has_levels or model.unk_token not in model.vocab:
            return None
        prefix = next((p for p in ("\U0010fffe\U0010ffff\x00", "\U0010ffff\x00\U0010fffe\x01")
                       if not any(t.startswith(p) for t in model.vocab)), None)
        if prefix is None:
            return None
        return _wordpiece(model, where, prefix, 1 << 30)
    if isinstance(model, (_m.Unigram, _m.BPE)):
        if isinstance(model, _m.BPE) and (model.prefix or model.suffix):
            return None
        first_ok = True
        if metaspace is not None and str(metaspace.get("prepend_scheme", "always")) == "first":
            # the scheme prepends to the piece that starts the text only: the piece at byte 0 where nothing
            # before the model moves the text's start
            first_ok = _first_safe(obj.get("normalizer"))
            if not first_ok:
                return None
        return _spm(obj, where, metaspace, first_ok, norm)
    return None


def _wordpiece(model, where: str, prefix: Optional[str] = None, max_chars: Optional[int] = None) -> Optional[NativeModel]:
    from ..compile.wordpiece import compile_source
    from ..loaders.bert import WordPieceSource
    from ..wordpiece import WordPieceTokenizer

    vocab = model.vocab
    n = max(vocab.values()) + 1
    tokens = [""] * n
    for t, i in vocab.items():
        tokens[i] = t
    src = WordPieceSource(tokens=tokens, token_to_id=dict(vocab), lowercase=False, strip_accents=False,
                          handle_chinese_chars=False, clean_text=False, unk_token=model.unk_token,
                          continuing_subword_prefix=model.prefix if prefix is None else prefix,
                          max_input_chars_per_word=model.max_chars if max_chars is None else max_chars,
                          cls_token=None, sep_token=None, source_name=where)
    try:
        inner = WordPieceTokenizer(compile_source(src, "pipeline-model"))
    except ValueError:
        return None
    return NativeModel("wordpiece", inner)


def _spm(obj: dict, where: str, metaspace: Optional[dict], first_ok: bool, norm: bool) -> Optional[NativeModel]:
    from ..compile.hf_spm_tables import hf_tables
    from ..hf_spm import HFSentencePieceTokenizer
    from ..spm_layout import with_walk_tables

    bare = {"model": obj["model"], "normalizer": obj.get("normalizer") if norm else None, "pre_tokenizer": metaspace,
            "decoder": None,
            "post_processor": None, "added_tokens": []}
    try:
        meta, sections = hf_tables(bare, where)
        inner = with_walk_tables(meta, sections, _art.source_hash(b"pipeline-model", where.encode()),
                                 HFSentencePieceTokenizer, where)
    except ValueError:
        return None
    if inner._hf is None:
        return None  # (a normalizer step without a native form)
    return NativeModel("spm", inner, first_ok, norm)
