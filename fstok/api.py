"""Entry points that dispatch on the kind of source or artifact.

Each tokenizer kind lives in its own module and is imported only when used:
    wordpiece  -> fstok.wordpiece.WordPieceTokenizer
    bpe        -> fstok.bpe.BPETokenizer
    regex_dfa  -> fstok.pretokenize.CompiledPattern
"""
from __future__ import annotations

import importlib
import json
import os
import re
from typing import Any

from . import artifact as _art
from ._cache import cache_dir
from ._load import _from_artifact, load, loads  # noqa: F401  (fstok.load, fstok.loads)
from .registry import ENCODINGS

_JSON_MEMO: dict = {}


def _read_json(path: str):
    """The parsed file, read once per compile (the dispatch looks at it more than once)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _JSON_MEMO:
        with open(path, "rb") as f:
            try:
                obj = json.loads(f.read().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"{path}: not a valid tokenizer.json ({e})") from None
        _JSON_MEMO.clear()
        _JSON_MEMO[key] = obj
    return _JSON_MEMO[key]


def _sniff_json_model(path: str) -> str:
    obj = _read_json(path)
    if isinstance(obj, dict) and isinstance(obj.get("config"), dict) and isinstance(obj.get("vocab"), list):
        return "tekken"  # Mistral tekken.json
    if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
        raise ValueError(f"{path}: not a tokenizer.json (no 'model' object)")
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):  # the shape every reader assumes
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise ValueError(f"{path}: {key} must be an object with a \"type\" (or null), got {json.dumps(obj[key])[:80]}")
    added = obj.get("added_tokens") or []
    if not isinstance(added, list) or not all(isinstance(a, dict) for a in added):
        raise ValueError(f"{path}: added_tokens must be a list of objects")
    from .pipeline.models import model_type  # the older serializations have no "type"

    return model_type(obj["model"])


def _spm_style_json(path: str):
    """The parsed tokenizer.json when its model is Unigram or SentencePiece-style BPE, else None."""
    from .compile.hf_spm_tables import is_spm_style

    obj = _read_json(path)
    return obj if is_spm_style(obj) else None


def _is_sentencepiece(path: str) -> bool:
    """A SentencePiece ModelProto, by content (tiktoken-format `tokenizer.model` files are text)."""
    from .loaders.spm_model import looks_like_model

    with open(path, "rb") as f:
        head = f.read(1 << 16)
    return looks_like_model(head)


_VERSIONED = re.compile(r"tekken[\w.-]*\.json|tokenizer\.model\.v\w+|[\w.-]+\.model")


def compile(src: str | os.PathLike, **options: Any):  # noqa: A001 - public name from the spec
    """Compile a tokenizer source into an in-memory tokenizer (save it with `.save(path)`).

    Sources, recognised by content: a BERT `vocab.txt` (WordPiece), an HF `tokenizer.json` (every model
    and pipeline stage fstok implements), a SentencePiece `.model` (BPE or Unigram), a Mistral `tekken.json`,
    a `.tiktoken` / tiktoken-format `tokenizer.model` file (BPE, needs `pattern=`), a GPT-2 `vocab.json`
    (BPE, with `merges.txt` next to it), or a directory holding one of these.
    """
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"fstok.compile expects a path, got {type(src).__name__}")
    path = os.fspath(src)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such tokenizer source: {path}")
    if os.path.isdir(path):
        for cand in ("tokenizer.json", "tokenizer.model", "tekken.json", "vocab.txt"):
            if os.path.exists(os.path.join(path, cand)):
                return compile(os.path.join(path, cand), **options)
        # the versioned names model repositories also ship (tekken_240718.json, tokenizer.model.v3, ...)
        found = sorted(n for n in os.listdir(path) if _VERSIONED.fullmatch(n))
        if not found:  # any other name: a SentencePiece model recognised by its content
            found = sorted(n for n in os.listdir(path)
                           if os.path.isfile(os.path.join(path, n)) and _is_sentencepiece(os.path.join(path, n)))
        if len(found) == 1:
            return compile(os.path.join(path, found[0]), **options)
        if found:
            raise ValueError(f"{path}: directory has several tokenizer files ({', '.join(found)}); "
                             f"pass the one to compile")
        raise ValueError(f"{path}: directory has no tokenizer.json, tokenizer.model, tekken.json or vocab.txt")
    base = os.path.basename(path).lower()
    if not options:  # a SentencePiece-family source compiled before, unchanged since: its cached artifact
        from .spm_cache import lookup

        hit = lookup(path)
        if hit is not None:
            return hit
    if base.endswith(".json") and base != "vocab.json":
        if not options.pop("_uncached", False):  # a self-contained source: compiled once into the artifact cache
            from ._compile_cache import cached_compile

            return cached_compile(path, options, lambda: compile(path, _uncached=True, **options))
        model = _sniff_json_model(path)
        if model == "tekken":
            from .pipeline.tekken import compile_tekken

            try:
                return compile_tekken(path, parsed=_read_json(path), **options)
            finally:
                _JSON_MEMO.clear()
        spm_json = _spm_style_json(path) if model in ("Unigram", "BPE") else None
        _JSON_MEMO.clear()
        if spm_json is not None:
            from .hf_spm import HFSentencePieceTokenizer

            try:
                return HFSentencePieceTokenizer.compile_tokenizer_json(path, spm_json, **options)
            except ValueError as e:  # a stage the compiled tables do not express: the stage-by-stage pipeline
                return _pipeline_instead(path, options, e)
        if model == "WordPiece":
            from .wordpiece import WordPieceTokenizer

            try:
                return WordPieceTokenizer.compile_tokenizer_json(path, **options)
            except ValueError as e:
                return _pipeline_instead(path, options, e)
        if model == "BPE":
            from .bpe import BPETokenizer

            try:
                return BPETokenizer.compile_tokenizer_json(path, **options)
            except ValueError:
                pass  # a pipeline the compiled byte-level BPE does not express: the stage-by-stage one below
        if model in ("BPE", "WordLevel"):
            from .pipeline.tokenizer import PipelineTokenizer

            return PipelineTokenizer.from_file(path, name=options.get("name"))
        raise ValueError(f"{path}: model type {model!r} is not supported (supported: WordPiece, BPE, WordLevel)")
    if base == "vocab.json":
        from .bpe import BPETokenizer

        return BPETokenizer.compile_gpt2(path, **options)
    if _is_sentencepiece(path):
        from .spm import SentencePieceTokenizer

        return SentencePieceTokenizer.compile_model(path, **options)
    if base.endswith(".tiktoken") or base.endswith(".model"):
        from .bpe import BPETokenizer

        return BPETokenizer.compile_tiktoken(path, **options)
    from .wordpiece import WordPieceTokenizer

    return WordPieceTokenizer.compile_vocab(path, **options)


def _pipeline_instead(path: str, options: dict, refusal: ValueError):
    """The stage-by-stage tokenizer.json pipeline (fstok.pipeline) for a file the compiled WordPiece /
    SentencePiece-style tables refuse (a normalizer, pre-tokenizer, decoder or added-token flag they do not
    express); where the pipeline refuses it too, both reasons are named."""
    from .pipeline import UnsupportedComponent
    from .pipeline.tokenizer import PipelineTokenizer

    if set(options) - {"name"}:
        raise refusal
    # as the compiled WordPiece and SentencePiece-style tokenizers, encode never truncates or pads (the
    # file's settings apply in fstok.Tokenizer, HF's face)
    obj = dict(_read_json(path), truncation=None, padding=None)
    _JSON_MEMO.clear()
    try:
        return PipelineTokenizer(obj, path, options.get("name"))
    except UnsupportedComponent as e:
        raise ValueError(f"{refusal}; the stage-by-stage pipeline refuses it too: {e}") from None


def list_encodings() -> list[str]:
    return sorted(ENCODINGS)


_LOADED: dict[str, Any] = {}


def get_encoding(name: str):
    """A bundled tokenizer by name: compiled on first use into the cache, then mmap-loaded."""
    if not isinstance(name, str):
        raise TypeError(f"encoding name must be a str, got {type(name).__name__}")
    if name in _LOADED:
        return _LOADED[name]
    try:
        spec = ENCODINGS[name]
    except KeyError:
        raise ValueError(f"unknown encoding {name!r}; known: {', '.join(list_encodings())}") from None
    path = os.path.join(cache_dir(), f"{name}-{spec.cache_key()}.fst")
    tok = None
    if os.path.exists(path):
        try:
            tok = load(path)
        except _art.ArtifactError:
            tok = None  # stale or damaged cache entry: rebuild it below
    if tok is None:
        tok = spec.build()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tok.save(path)
        tok = load(path)
    _LOADED[name] = tok
    return tok
