"""Byte-level BPE tokenizers (tiktoken / HF tokenizer.json / GPT-2 models) on compiled tables.

    tok = fstok.get_encoding("cl100k_base")          # bundled, compiled once into the cache
    tok = BPETokenizer.compile_tiktoken("x.tiktoken", pattern=..., special_tokens={...})
    tok.encode("hello world")                       # tiktoken's API and semantics
    tok.save("x.fst"); fstok.load("x.fst")

The compiled tables (`fstok.compile.bpe`) live in one artifact; encoding runs in C
(`fstok.runtime._bpe`) with the GIL released.  `fstok.reference.bpe.ReferenceBPE` is the oracle.
"""
from __future__ import annotations

import os
import re
import threading
import unicodedata
from typing import AbstractSet, Any, Collection, Iterable, Literal, Optional, Sequence

import numpy as np

from ._inspectable import Inspectable
from . import artifact as _art
from ._text import fix_surrogates as _fix_surrogates
from .loaders.bpe_source import AddedToken, BPESource, PreTokStage
from .validate import check_threads, machine_threads

_NONE = 0xFFFFFFFF


def _native():
    from .runtime import _bpe

    return _bpe


def _utf8(text: str) -> tuple[str, bytes]:
    try:
        return text, text.encode("utf-8")
    except UnicodeEncodeError:
        text = _fix_surrogates(text)
        return text, text.encode("utf-8")


def _char_to_byte_offsets(text: str) -> np.ndarray | None:
    """cum[i] = byte offset of character i (len(text)+1 entries); None for ASCII text (identity)."""
    if text.isascii():
        return None
    cp = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    w = 1 + (cp >= 0x80).astype(np.uint32) + (cp >= 0x800) + (cp >= 0x10000)
    cum = np.zeros(len(cp) + 1, dtype=np.uint32)
    np.cumsum(w, out=cum[1:])
    return cum


def raise_disallowed_special_token(token: str):
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )


def _literal_regex(tokens: Iterable[str]) -> re.Pattern[str]:
    # longest first: leftmost-longest among literals that match at the same position
    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=lambda t: (-len(t), t))))


class _RegexSpanner:
    """Pre-tokenizer stages run by the `regex` module (fallback until the C DFA spanner is used)."""

    def __init__(self, stages: list[PreTokStage]):
        import regex

        self.stages = stages
        self.pats = [regex.compile(s.pattern) for s in stages]

    def char_spans(self, text: str, base: int, out: list[int]) -> None:
        """Append (start, end) character spans of the pre-tokens of text (offset by base)."""
        if not text:
            return
        if len(self.pats) == 1:
            if self.stages[0].keep_gaps:
                last = 0
                for m in self.pats[0].finditer(text):
                    s, e = m.span()
                    if s > last:
                        out += (base + last, base + s)
                    if e > s:
                        out += (base + s, base + e)
                    last = e
                if last < len(text):
                    out += (base + last, base + len(text))
            else:
                for m in self.pats[0].finditer(text):
                    s, e = m.span()
                    if e > s:
                        out += (base + s, base + e)
            return
        pieces = [(0, len(text))]
        for st, pat in zip(self.stages, self.pats):
            nxt = []
            for ps, pe in pieces:
                sub = text[ps:pe]
                last = 0
                for m in pat.finditer(sub):
                    s, e = m.span()
                    if st.keep_gaps and s > last:
                        nxt.append((ps + last, ps + s))
                    if e > s:
                        nxt.append((ps + s, ps + e))
                    last = e
                if st.keep_gaps and last < len(sub):
                    nxt.append((ps + last, pe))
            pieces = nxt
        for s, e in pieces:
            out += (base + s, base + e)


#: pieces per thread of a long text cut at proven boundaries (more pieces balance the threads' loads; each
#: piece costs a little setup).  8 rather than 4: the threads' last pieces end closer together (16 cores,
#: 1 MB, same process: 16 threads 0.104-0.159 of one-shot vs 0.109-0.173 with 4; 2 threads 0.50-0.65 vs
#: 0.54-0.69; docs/bench/long.md)
_PARTS_PER_THREAD = max(1, int(os.environ.get("FSTOK_SPLIT_PARTS", "8") or 8))


class BPETokenizer(Inspectable):
    """A compiled byte-level BPE tokenizer with tiktoken's encoding API."""

    _fstok_kind = "bpe"  # fstok.splitters.fstok_kind: how the long-text splitters recognise this class

    # ------------------------------------------------------------------ construction

    def __init__(self, art: _art.Artifact):
        if art.kind != _art.KIND_BPE:
            raise _art.ArtifactError(f"artifact kind is {art.kind_name!r}, expected 'bpe'")
        self._art = art
        meta = art.meta
        from .validate_bpe import check_meta

        checked = check_meta(art)  # every field read below is present, typed and in range
        self._meta = meta
        self.name: str = meta["name"]
        self._semantics = meta["semantics"]
        self._special_tokens: dict[str, int] = {str(k): int(v) for k, v in meta["special_tokens"].items()}
        self._added = [AddedToken(a["content"], int(a["id"]), False, bool(a["normalized"])) for a in meta["added_tokens"]]
        self._normalizer = meta.get("normalizer")
        self._opaque_check = None  # the characters whose facts HF and Python disagree on (_hf_opaque)
        self._add_prefix_space = bool(meta.get("add_prefix_space"))
        self._stages = [PreTokStage(s["pattern"], bool(s["keep_gaps"]), s.get("dialect", "rust-regex")) for s in meta["stages"]]
        #: the tokenizer.json's post-processor (fstok.postprocess), applied by add_special_tokens=True; else None
        self.post_processor = checked["post_processor"]
        self._pp_wrap: Optional[tuple] = None
        self.max_token_value: int = int(meta["max_token_value"])
        from .validate_bpe import check_tables, table_arrays, where_of

        tables = table_arrays(art, checked)  # present, typed and sized; the contents are proven by Model itself
        self._tables = tables
        nat = _native()
        try:
            # the C pass over every table where the encoders read them (runtime/csrc/bpe_validate.h)
            self._model = nat.Model(tables, checked["n_int"], checked["n_ext"], checked["da_size"],
                                    checked["pair_bits"], checked["max_span_len"], checked["backtrack_ok"],
                                    checked["short_max"], checked["trie_has_spans"])
        except ValueError as e:
            check_tables(art, checked, native=False)  # the numpy checks (the oracle) name the bad element
            raise _art.ArtifactError(f"{where_of(art)}: BPE tables: {e}") from None
        self._model._tune(checked["short_max"], True, checked["hash_max"], checked["short_max_mb"])
        self._pt_mode = meta.get("pretok_mode", "regex")
        self._spanner_obj: Optional[_RegexSpanner] = None  # the `regex` module only for artifacts that need it
        self._pattern = None  # the compiled pre-tokenizer (its C spanner gives the HF face's word ids)
        if self._pt_mode in ("find", "split"):
            from .pretokenize import CompiledPattern

            # the levels' C pass (fstok_dfa_check) is set_pretokenizer's, once; the Python checks name what it refuses
            cp = self._pattern = CompiledPattern.from_sections(art, "dfa.", c_check=False)
            if cp.mode != self._pt_mode:
                raise _art.ArtifactError("BPE artifact: pre-tokenizer mode does not match its DFA sections")
            try:
                self._model.set_pretokenizer(
                    0 if cp.mode == "find" else 1,
                    tuple((t.trans, t.classes, t.accept, t.n_states, t.shift, t.start, t.eoi, t.n_boundary)
                          for t in cp.levels),
                )
            except ValueError as e:
                from .pretokenize import validate_tables

                for k, t in enumerate(cp.levels):
                    validate_tables(t, f"{where_of(art)}: dfa.{k}")
                raise _art.ArtifactError(f"{where_of(art)}: dfa.: {e}") from None
        elif self._pt_mode == "whole":
            self._model.set_pretokenizer(1, ())
        self._native = self._pt_mode in ("find", "split", "whole")
        self._specials_cache: dict[Any, Any] = {}
        self._dec_off = tables["dec_off"]
        self._special_values = set(self._special_tokens.values())
        self._special_re_cache: dict[frozenset, re.Pattern[str]] = {}
        self._lock = threading.Lock()
        self._index_added()

    def _index_added(self) -> None:
        """The matchers' tables of the added tokens: raw contents, and normalized ones by the form HF looks
        for in the normalized text (the content passed through the normalizer; the first of two contents
        that normalize alike)."""
        self._added_raw = {a.content: a.id for a in self._added if not a.normalized}
        self._added_norm: dict[str, int] = {}
        for a in self._added:
            if a.normalized:
                form = self._hf_normalize(a.content) if self._semantics == "hf" and self._normalizer else a.content
                if form:
                    self._added_norm.setdefault(form, a.id)
        self._specials_cache = {}

    def with_added_tokens(self, tokens: list[tuple[str, int, bool]]) -> "BPETokenizer":
        """A tokenizer sharing this one's compiled tables, with more added tokens ((content, id, normalized)
        each) matched as HF matches them: the added tokens live in the matchers built at run time, not in the
        tables, so nothing is compiled.  A content that is one of the special tokens moves to the added tokens
        (HF matches a special token with normalized=true in the normalized text, not in the raw text).  This
        tokenizer is left as it is."""
        new = object.__new__(type(self))  # (copy.copy would go through __reduce__: a reload from bytes)
        new.__dict__.update(self.__dict__)
        moved = {c for c, _, _ in tokens if c in self._special_tokens}
        if moved:
            new._special_tokens = {k: v for k, v in self._special_tokens.items() if k not in moved}
            new._special_values = set(new._special_tokens.values())
        new._added = self._added + [AddedToken(c, int(i), False, bool(n)) for c, i, n in tokens]
        new._lock = threading.Lock()
        new._special_re_cache = {}
        new._index_added()
        return new

    @property
    def _spanner(self) -> _RegexSpanner:
        """Pre-tokenizer stages run by the `regex` module (artifacts without a compiled DFA, HF text paths)."""
        sp = self._spanner_obj
        if sp is None:
            sp = self._spanner_obj = _RegexSpanner(self._stages)
        return sp

    @classmethod
    def from_artifact(cls, art: _art.Artifact) -> "BPETokenizer":
        return cls(art)

    @classmethod
    def from_source(cls, src: BPESource, **options: Any) -> "BPETokenizer":
        from .compile.bpe import compile_source, source_identity

        tuning = {"short_max", "short_max_mb", "hash_max", "hot_tokens", "hot_pairs"}
        unknown = sorted(set(options) - tuning)
        if unknown:
            where = ", ".join(src.source_files) or src.name
            raise TypeError(f"{where}: option(s) {', '.join(unknown)} do not apply to this byte-level BPE source "
                            "(a .tiktoken file takes pattern=, special_tokens=, name=; a tokenizer.json or GPT-2 "
                            "vocab.json takes its settings from the files)")
        meta, sections, uv = compile_source(src, **options)
        data = _art.write_artifact(None, _art.KIND_BPE, meta, sections, uv, _art.source_hash(*source_identity(src)))
        tok = cls(_art.parse_artifact(data, where=f"<compiled {src.name}>"))
        fails, first = tok._model.self_check()
        if fails:
            raise ValueError(f"{src.name}: compiled BPE tables failed the self-encoding check ({fails} tokens, e.g. id {first})")
        return tok

    @classmethod
    def compile_tiktoken(cls, path, pattern: str | None = None, special_tokens: dict[str, int] | None = None,
                         name: str | None = None, **options: Any) -> "BPETokenizer":
        from .loaders.tiktoken_file import load_tiktoken

        return cls.from_source(load_tiktoken(path, pattern=pattern, special_tokens=special_tokens, name=name), **options)

    @classmethod
    def compile_tokenizer_json(cls, path, name: str | None = None, **options: Any) -> "BPETokenizer":
        from .loaders.hf_bpe import load_tokenizer_json

        return cls.from_source(load_tokenizer_json(path, name=name), **options)

    @classmethod
    def compile_gpt2(cls, vocab_json_path, merges_path=None, name: str = "gpt2", **options: Any) -> "BPETokenizer":
        from .loaders.gpt2 import load_gpt2

        return cls.from_source(load_gpt2(vocab_json_path, merges_path, name=name), **options)

    @classmethod
    def from_ranks(cls, ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int], name: str = "custom",
                   **options: Any) -> "BPETokenizer":
        """Build from tiktoken-style mergeable ranks (token bytes -> rank = id), a split regex and specials."""
        if not isinstance(ranks, dict):
            raise TypeError(f"ranks must be a dict[bytes, int], got {type(ranks).__name__}")
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        if not isinstance(special_tokens, dict):
            raise TypeError(f"special_tokens must be a dict[str, int], got {type(special_tokens).__name__}")
        src = BPESource(
            name=name,
            tokens={bytes(k): v for k, v in ranks.items()},
            stages=[PreTokStage(pattern, keep_gaps=False)],
            special_tokens=dict(special_tokens),
            merges=None,
            semantics="tiktoken",
        )
        return cls.from_source(src, **options)

    # ------------------------------------------------------------------ persistence

    def to_bytes(self) -> bytes:
        return self._art.to_bytes()

    def save(self, path: str | os.PathLike) -> None:
        _art.save_bytes(path, self.to_bytes())

    @classmethod
    def _from_bytes(cls, data: bytes) -> "BPETokenizer":
        return cls(_art.parse_artifact(data))

    def __reduce__(self):
        # a module-level loader: dill (HF datasets' Hasher) pickles a bound classmethod's class by value
        from ._load import loads

        return (loads, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"<BPETokenizer {self.name!r} n_vocab={self.n_vocab}>"

    # ------------------------------------------------------------------ vocabulary

    @property
    def n_vocab(self) -> int:
        return self.max_token_value + 1

    @property
    def vocab_size(self) -> int:
        return self.n_vocab

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_tokens)

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @property
    def pattern(self) -> str:
        return self._stages[0].pattern if len(self._stages) == 1 else "|".join(s.pattern for s in self._stages)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_values

    def _invalid(self, e: KeyError) -> Exception:
        from .errors import InvalidTokenError

        return InvalidTokenError(e.args[0] if e.args else None, self.n_vocab)

    def decode_single_token_bytes(self, token: int) -> bytes:
        if not isinstance(token, (int, np.integer)):
            raise TypeError(f"token id must be an int, got {type(token).__name__}")
        try:
            return self._model.decode_bytes([int(token)])
        except KeyError as e:  # one error for every tokenizer kind: id and vocabulary size
            raise self._invalid(e) from None

    def id_to_token(self, token: int) -> bytes:
        """The bytes of a token id (special tokens: their UTF-8 text). KeyError if unknown."""
        return self.decode_single_token_bytes(token)

    def token_to_id(self, token: str | bytes) -> int:
        """Id of a token given as bytes, or as str (a special token, or the UTF-8 text of a token)."""
        return self.encode_single_token(token)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            for a in self._added:
                if a.content == text_or_bytes:
                    return a.id
            b = text_or_bytes.encode("utf-8", "surrogatepass")
        elif isinstance(text_or_bytes, (bytes, bytearray, memoryview)):
            b = bytes(text_or_bytes)
            try:
                s = b.decode("utf-8")
                if s in self._special_tokens:
                    return self._special_tokens[s]
            except UnicodeDecodeError:
                pass
        else:
            raise TypeError(f"expected str or bytes, got {type(text_or_bytes).__name__}")
        tid = self._token_id_for_bytes(b)
        if tid is None:
            raise KeyError(text_or_bytes)
        return tid

    def _token_id_for_bytes(self, b: bytes) -> int | None:
        tid = self._model.span_lookup(b)
        if tid is not None:
            return tid
        if not hasattr(self, "_bytes_index"):
            kinds = self._tables["dec_kind"]
            ids = np.nonzero(kinds == 1)[0]
            off, arena = self._dec_off, self._tables["dec_bytes"]
            self._bytes_index = {bytes(arena[off[i] : off[i + 1]]): int(i) for i in ids}
        return self._bytes_index.get(b)

    def token_byte_values(self) -> list[bytes]:
        kinds = self._tables["dec_kind"]
        off, arena = self._dec_off, self._tables["dec_bytes"]
        return [bytes(arena[off[i] : off[i + 1]]) for i in np.nonzero(kinds == 1)[0]]

    # ------------------------------------------------------------------ encoding

    def _special_regex(self, tokens: frozenset) -> re.Pattern[str]:
        r = self._special_re_cache.get(tokens)
        if r is None:
            r = _literal_regex(tokens)
            with self._lock:
                if len(self._special_re_cache) > 64:
                    self._special_re_cache.clear()
                self._special_re_cache[tokens] = r
        return r

    def _resolve_special(self, allowed_special, disallowed_special) -> tuple[frozenset, frozenset]:
        if type(allowed_special) is set and not allowed_special and type(disallowed_special) is tuple \
                and not disallowed_special:  # encode_ordinary*: no ABC isinstance checks (a batch call's serial part)
            return _NO_SPECIALS
        if allowed_special == "all" and (disallowed_special == "all" or disallowed_special == ()):
            # the common call of HF-style files (every special allowed): one frozenset per tokenizer, not per call
            hit = self.__dict__.get("_all_allowed")
            if hit is None:
                hit = self.__dict__["_all_allowed"] = (frozenset(self._special_tokens), frozenset())
            return hit
        if allowed_special == "all":
            allowed = frozenset(self._special_tokens)
        elif isinstance(allowed_special, str):
            raise TypeError("allowed_special must be 'all' or a set of special-token strings, not a str")
        elif isinstance(allowed_special, (AbstractSet, list, tuple, dict)):
            allowed = frozenset(allowed_special)
        else:
            raise TypeError(f"allowed_special must be 'all' or a set of str, got {type(allowed_special).__name__}")
        if disallowed_special == "all":
            disallowed = frozenset(self._special_tokens) - allowed
        elif isinstance(disallowed_special, str):
            raise TypeError("disallowed_special must be 'all' or a collection of special-token strings, not a str")
        else:
            try:
                disallowed = frozenset(disallowed_special)
            except TypeError:
                raise TypeError(
                    f"disallowed_special must be 'all' or a collection of str, got {type(disallowed_special).__name__}"
                ) from None
        return allowed, disallowed

    def _check_disallowed(self, text: str, disallowed: frozenset) -> None:
        if not disallowed:
            return
        if len(disallowed) <= 8:
            # str.find is a fast two-way search; report the leftmost match like tiktoken's regex
            best = None
            for tok in disallowed:
                i = text.find(tok)
                if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(tok) > len(best[1]))):
                    best = (i, tok)
            if best is not None:
                raise_disallowed_special_token(best[1])
            return
        m = self._special_regex(disallowed).search(text)
        if m:
            raise_disallowed_special_token(m.group())

    def _matchers(self, allowed: frozenset):
        """(first-pass, second-pass) C matchers for the allowed specials (+ HF added tokens)."""
        key = allowed
        hit = self._specials_cache.get(key)
        if hit is not None:
            return hit
        nat = _native()
        first = {s: self._special_tokens[s] for s in allowed if s in self._special_tokens}
        if self._semantics == "hf":
            first.update(self._added_raw)
        sp1 = nat.Specials([(k.encode("utf-8"), v) for k, v in first.items()]) if first else None
        sp2 = None
        if self._semantics == "hf" and self._added_norm:
            sp2 = nat.Specials([(k.encode("utf-8"), v) for k, v in self._added_norm.items()])
        with self._lock:
            if len(self._specials_cache) > 64:
                self._specials_cache.clear()
            self._specials_cache[key] = (sp1, sp2)
        return sp1, sp2

    def _python_text_path(self) -> bool:
        # text-changing HF steps (normalizer, prefix space) are applied in Python before C
        return self._semantics == "hf" and (bool(self._normalizer) or self._add_prefix_space)

    def _text_needs_python(self, text: str) -> bool:
        """Whether this text takes the Python steps of _python_text_path.  A text already in the normalizer's
        form skips them: every substring of a text in NFC / NFKC is in that form too (normalization is decided
        by neighbouring characters only), so normalizing the pieces between added tokens changes nothing."""
        if not self._python_text_path():
            return False
        return self._add_prefix_space or not self._in_normal_form(text)

    def _in_normal_form(self, text: str) -> bool:
        """Whether HF's normalizer leaves this text unchanged.  Python's `unicodedata` decides it, except
        for texts holding a character whose facts differ in HF's older Unicode tables."""
        if text.isascii() or not self._nf_touched()(text):
            return True
        if self._hf_opaque()(text):
            return False
        # Only the runs of touched characters, each with the character before it, can be out of the form: an
        # untouched character is a starter that nothing before it reorders or composes with (a normalization
        # boundary), so the text is in the form exactly when each such span is.
        spans = self._nf_touched_runs(text, 32)
        form = self._normalizer
        if spans is None:  # many: one look at the whole text
            return unicodedata.is_normalized(form, text)
        return all(unicodedata.is_normalized(form, text[spans[k]: spans[k + 1]]) for k in range(0, len(spans), 2))

    def _nf_touched(self):
        """text -> whether it holds a character the normal-form check must look at (fstok.pipeline.unicode
        `touched`): one C scan; a text without any is in the form."""
        f = self.__dict__.get("_nf_touched_check")
        if f is None:
            from .pipeline import unicode as hf_unicode
            from .pipeline.fastnorm import _bitmap, _native as _norm_native, _sorted_cps

            nat = _norm_native()
            bm, any_in, runs = _bitmap(_sorted_cps(hf_unicode.touched(self._normalizer))).tobytes(), nat.any_in, nat.runs
            self.__dict__["_nf_touched_bm"] = bm
            self.__dict__["_nf_touched_runs"] = lambda t, limit: runs(t, bm, limit)
            f = self.__dict__["_nf_touched_check"] = lambda t: any_in(t, bm)
        return f

    def _nf_touched_bitmap(self) -> bytes:
        """The bitmap of `_nf_touched`'s characters (0x110000 bits), for Model.encode's check in C."""
        bm = self.__dict__.get("_nf_touched_bm")
        if bm is None:
            self._nf_touched()
            bm = self.__dict__["_nf_touched_bm"]
        return bm

    def _batch_in_normal_form(self, texts: list) -> bool:
        """Whether every text is in the normalizer's form, by one look at them all joined with U+0000 (a
        starter without decompositions that composes with nothing: no normalization crosses it, so the joined
        text is in NFC / NFKC exactly when every text is)."""
        return self._in_normal_form("\0".join(texts))

    def _hf_opaque(self):
        """text -> whether it holds one of those characters: one C scan over the code points against a
        bitmap (a regex character class of them costs ~0.5 us a character)."""
        if self._opaque_check is None:
            from .pipeline import unicode as hf_unicode
            from .pipeline.fastnorm import _bitmap, _native as _norm_native, _sorted_cps

            chars = hf_unicode.opaque_compat() if "K" in self._normalizer else hf_unicode.opaque()
            bm, any_in = _bitmap(_sorted_cps(chars)).tobytes(), _norm_native().any_in
            self._opaque_check = lambda t: any_in(t, bm)
        return self._opaque_check

    def _hf_normalize(self, piece: str) -> str:
        """HF's NFC / NFKC of a piece: `unicodedata` where the two agree, else HF's own tables."""
        if piece.isascii() or not self._hf_opaque()(piece):
            return unicodedata.normalize(self._normalizer, piece)
        from .pipeline.normalizers import Unicode

        return Unicode(self._normalizer).normalize_str(piece)

    def _run(self, text: str, allowed: frozenset, kind: int, num_threads: int = 1):
        """Encode with the C pipeline; returns (result, text actually encoded)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if self._native and not self._add_prefix_space and self._python_text_path() and not text.isascii():
            # an HF NFC / NFKC normalizer: C looks for the characters a normal-form check must look at (`_nf_touched`)
            # and, where there are none (the text is in the form), encodes it in the same call; else None
            sp1, sp2 = self._matchers(allowed)
            try:
                r = self._model.encode(text, sp1, kind, sp2, num_threads, self._nf_touched_bitmap())
            except UnicodeEncodeError:
                r = None  # lone surrogates: repaired below
            if r is not None:
                return r, text
        if self._native and not self._text_needs_python(text):
            sp1, sp2 = self._matchers(allowed)
            try:
                return self._model.encode(text, sp1, kind, sp2, num_threads), text
            except UnicodeEncodeError:
                text = _fix_surrogates(text)
                return self._model.encode(text, sp1, kind, sp2, num_threads), text
        if self._native and not self._add_prefix_space:
            norm = self._whole_normalized(text, allowed)
            if norm is not None:  # one piece normalized as a whole: the C pass over it, second-pass tokens in C
                try:
                    return self._model.encode(norm, None, kind, self._matchers(allowed)[1], num_threads), norm
                except UnicodeEncodeError:
                    pass  # lone surrogates: the plan repairs them
        data, segs, new_text = self._plan(text, allowed)
        if self._native:
            return self._model.encode_segments(data, segs, kind), new_text
        return self._model.encode_spans(data, segs, kind), new_text

    def _whole_normalized(self, text: str, allowed: frozenset) -> Optional[str]:
        """HF's normalization of `text` where HF normalizes it as one piece (an HF normalizer, and no token of
        the first pass -- an added token with normalized=false or an allowed special -- occurs in it), else
        None (lone surrogates included)."""
        if self._semantics != "hf" or not self._normalizer:
            return None
        sp1 = self._matchers(allowed)[0]
        if sp1 is not None:
            try:
                raw = text.encode("utf-8")
            except UnicodeEncodeError:
                return None
            if sp1.find(raw, 0) is not None:
                return None
        return self._hf_normalize(text)

    def _plan(self, text: str, allowed: frozenset) -> tuple[bytes, np.ndarray, str]:
        """Python planning: UTF-8 bytes and (start, end, literal) byte triples.  With the C pre-tokenizer
        (self._native) the triples are segments that C pre-tokenizes; otherwise they are the pieces."""
        text, _ = _utf8(text)
        if self._semantics == "hf":
            return self._plan_hf(text, allowed)
        allowed_map = {s: self._special_tokens[s] for s in allowed if s in self._special_tokens}
        char_spans: list[int] = []
        lits: list[tuple[int, int]] = []
        piece = (lambda t, base, out: out.extend((base, base + len(t))) if t else None) if self._native else self._spanner.char_spans
        if not allowed_map:
            piece(text, 0, char_spans)
        else:
            pos = 0
            for m in self._special_regex(frozenset(allowed_map)).finditer(text):
                piece(text[pos : m.start()], pos, char_spans)
                lits.append((len(char_spans) // 2, allowed_map[m.group()]))
                char_spans += (m.start(), m.end())
                pos = m.end()
            piece(text[pos:], pos, char_spans)
        return text.encode("utf-8"), self._triples(text, char_spans, lits), text

    def _triples(self, text: str, char_spans: list[int], lits: list[tuple[int, int]]) -> np.ndarray:
        cs = np.array(char_spans, dtype=np.uint32).reshape(-1, 2)
        cum = _char_to_byte_offsets(text)
        tr = np.empty((len(cs), 3), dtype=np.uint32)
        tr[:, :2] = cs if cum is None else cum[cs]
        tr[:, 2] = _NONE
        for i, tid in lits:
            tr[i, 2] = tid
        return tr

    def _plan_hf(self, text: str, allowed: frozenset) -> tuple[bytes, np.ndarray, str]:
        # HF added vocabulary: non-normalized added tokens (and allowed specials) are split out of the
        # raw text, the rest is normalized, then normalized added tokens are split out, then each
        # remaining piece gets the prefix space (if configured) and is pre-tokenized on its own.
        raw = dict(self._added_raw)
        for s in allowed:
            if s in self._special_tokens:
                raw[s] = self._special_tokens[s]
        pieces: list[tuple[str, int | None]] = []
        for piece, tid in self._split_literals(text, raw):
            if tid is not None:
                pieces.append((piece, tid))
                continue
            if self._normalizer:
                piece = self._hf_normalize(piece)
            for sub, tid2 in self._split_literals(piece, self._added_norm):
                if tid2 is None and self._add_prefix_space and not sub.startswith(" "):
                    sub = " " + sub
                pieces.append((sub, tid2))
        new_text = "".join(p for p, _ in pieces)
        char_spans: list[int] = []
        lits: list[tuple[int, int]] = []
        pos = 0
        for p, tid in pieces:
            if tid is not None:
                lits.append((len(char_spans) // 2, tid))
                char_spans += (pos, pos + len(p))
            elif self._native:
                if p:
                    char_spans += (pos, pos + len(p))
            else:
                self._spanner.char_spans(p, pos, char_spans)
            pos += len(p)
        return new_text.encode("utf-8"), self._triples(new_text, char_spans, lits), new_text

    def _split_literals(self, text: str, toks: dict[str, int]) -> list[tuple[str, int | None]]:
        if not toks or not text:
            return [(text, None)] if text else []
        res: list[tuple[str, int | None]] = []
        pos = 0
        for m in self._special_regex(frozenset(toks)).finditer(text):
            if m.start() > pos:
                res.append((text[pos : m.start()], None))
            res.append((m.group(), toks[m.group()]))
            pos = m.end()
        if pos < len(text):
            res.append((text[pos:], None))
        return res

    def encode_ordinary(self, text: str, *, num_threads: int | None = None) -> list[int]:
        """Encode text, treating special-token text as ordinary text (tiktoken `encode_ordinary`)."""
        nt = 1 if num_threads is None else self._threads(num_threads, 1 << 30)
        if nt > 1 and isinstance(text, str) and len(text) >= self.PARALLEL_THRESHOLD:
            ids = self._encode_split(text, nt, frozenset())
            if ids is not None:
                return ids
        return self._run(text, frozenset(), 0, nt)[0]

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        num_threads: int | None = None,
        add_special_tokens: bool = False,
    ) -> list[int]:
        """Encode text (tiktoken `encode`): raises ValueError on disallowed special-token text.

        num_threads > 1 on a long text (>= PARALLEL_THRESHOLD characters): the text is cut at positions the
        compiled pre-tokenizer proves are piece boundaries, and the parts are encoded on that many C threads
        (exact: the same ids as one thread; docs/design/parallel.md).
        add_special_tokens=True applies the tokenizer.json's post-processor (HF `encode(text).ids`: e.g. the
        BOS id first); a tokenizer without one (tiktoken encodings) is unchanged by it."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        self._check_disallowed(text, disallowed)
        nt = 1 if num_threads is None else self._threads(num_threads, 1 << 30)
        ids = None
        if nt > 1 and len(text) >= self.PARALLEL_THRESHOLD:
            ids = self._encode_split(text, nt, allowed)
        if ids is None:
            ids = self._run(text, allowed, 0, nt)[0]
        return self._with_special_tokens(ids) if add_special_tokens and self.post_processor is not None else ids

    def _with_special_tokens(self, ids: list[int]) -> list[int]:
        """ids as the post-processor leaves a single sequence (HF `process`): the ids it puts before and after,
        found once from a one-token sequence; a template that repeats the sequence runs in full each time."""
        from . import postprocess as pp

        if self._pp_wrap is None:
            mark = -1
            got = list(pp.post_process(self.post_processor, pp.Encoding.from_tokens([mark], ["a"], [(0, 1)], [0]),
                                       add_special_tokens=True).ids)
            self._pp_wrap = (got[:got.index(mark)], got[got.index(mark) + 1:]) if got.count(mark) == 1 else ()
        if self._pp_wrap:
            before, after = self._pp_wrap
            return before + ids + after if before or after else ids
        n = len(ids)
        enc = pp.Encoding.from_tokens(list(ids), ["a"] * n, [(0, 0)] * n, [0] * n)  # ids depend on ids alone
        return list(pp.post_process(self.post_processor, enc, add_special_tokens=True).ids)

    #: texts at least this long are cut at proven pre-tokenizer boundaries by encode(..., num_threads=N)
    PARALLEL_THRESHOLD = 256_000

    def _encode_split(self, text: str, num_threads: int, allowed: frozenset, kind: int = 0):
        """A long text cut at proven pre-tokenizer boundaries (fstok.splitters.ProvenSplitter, _PARTS_PER_THREAD
        pieces per thread), the pieces encoded on native threads as texts of their own, one result
        (Model.encode_proven; kind 0: a list, 1: the uint32 ids as bytes, 2: their number).  None where that
        does not apply (no compiled DFA, an HF normalizer or prefix space, no proven boundary, lone
        surrogates): the caller encodes another way."""
        if not self._native or self._python_text_path():
            return None
        from .splitters import bpe_splitter

        sp = bpe_splitter(self)
        if sp is None:
            return None
        # the cut search runs in C on the UTF-8 (ProvenSplitter.split_points' rule, in bytes)
        args = self.__dict__.get("_proven_args")
        if args is None:
            tab = sp.table
            args = (np.ascontiguousarray(tab.cp_class, dtype=np.uint16), np.ascontiguousarray(tab.ok, dtype=np.uint8),
                    int(tab.ok.shape[0]), [g.encode("utf-8") for g in sp.guards])
            self.__dict__["_proven_args"] = args
        sp1, sp2 = self._matchers(allowed)
        try:
            return self._model.encode_proven(text, *args, _PARTS_PER_THREAD * num_threads, sp1, int(num_threads), sp2,
                                             16384, kind)
        except UnicodeEncodeError:
            return None

    def _encode_cuts(self, text: str, cuts: list[int], num_threads: int, allowed: frozenset) -> Optional[list[int]]:
        """Ids of `text` encoded as the pieces between `cuts` (code point offsets that are proven piece
        boundaries and outside every special-token occurrence; the caller's responsibility) on native threads.
        None for text with lone surrogates (the caller repairs it the tiktoken way)."""
        sp1, sp2 = self._matchers(allowed)
        try:
            return self._model.encode_cuts(text, cuts, sp1, int(num_threads), sp2)
        except UnicodeEncodeError:
            return None

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        num_threads: int | None = None,
    ) -> np.ndarray:
        """`encode` as a read-only uint32 array (no Python int per token); num_threads as in `encode`."""
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_disallowed(text, disallowed)
        nt = 1 if num_threads is None else self._threads(num_threads, 1 << 30)
        if nt > 1 and len(text) >= self.PARALLEL_THRESHOLD:
            raw = self._encode_split(text, nt, allowed, 1)
            if raw is not None:
                return np.frombuffer(raw, dtype=np.uint32)
        return np.frombuffer(self._run(text, allowed, 1, nt)[0], dtype=np.uint32)

    def count(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = (),
        num_threads: int | None = None,
    ) -> int:
        """Number of tokens of `encode(text, ...)` without building the list (specials ordinary by default);
        num_threads as in `encode`."""
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_disallowed(text, disallowed)
        nt = 1 if num_threads is None else self._threads(num_threads, 1 << 30)
        if nt > 1 and len(text) >= self.PARALLEL_THRESHOLD:
            n = self._encode_split(text, nt, allowed, 2)
            if n is not None:
                return n
        return self._run(text, allowed, 2, nt)[0]

    def encode_with_offsets(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = (),
    ) -> tuple[list[int], list[int]]:
        """(ids, offsets): offsets[i] is the index in `text` of the first character that holds bytes of
        token i (tiktoken `decode_with_offsets` semantics). Specials are ordinary text by default.
        For text with lone surrogates (replaced by U+FFFD as in tiktoken, surrogate pairs joined) and for
        HF models with a normalizer or a prefix space, offsets index the text that was encoded."""
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_disallowed(text, disallowed)
        (ids, starts), used = self._run(text, allowed, 3)
        if not ids:
            return ids, []
        st = np.frombuffer(starts, dtype=np.uint32).astype(np.int64)
        d = np.frombuffer(used.encode("utf-8"), dtype=np.uint8)
        lead = (d & 0xC0) != 0x80
        cum = np.zeros(len(d) + 1, dtype=np.int64)
        np.cumsum(lead, out=cum[1:])
        cont = np.zeros(len(st), dtype=np.int64)
        inside = st < len(d)
        cont[inside] = ~lead[st[inside]]
        offs = np.maximum(cum[st] - cont, 0)
        return ids, offs.tolist()

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        return self.encode_batch(text, num_threads=num_threads, allowed_special=set(), disallowed_special=())

    def encode_batch(
        self,
        text: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        add_special_tokens: bool = False,
    ) -> list[list[int]]:
        """Encode many texts; the work runs on `num_threads` C threads (default: all cores) without the GIL.
        add_special_tokens=True: as `encode`, the post-processor's ids around each."""
        if isinstance(text, str):
            raise TypeError("encode_batch expects a sequence of str, not a str")
        if add_special_tokens and self.post_processor is not None:
            return [self._with_special_tokens(ids) for ids in self.encode_batch(
                text, num_threads=num_threads, allowed_special=allowed_special, disallowed_special=disallowed_special)]
        texts = text if isinstance(text, list) else list(text)
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        nt = self._threads(num_threads, len(texts))
        self._check_disallowed_batch(texts, disallowed)
        if self._native and not (self._add_prefix_space and self._python_text_path()):
            sp1, sp2 = self._matchers(allowed)
            out, missing = self._model.encode_batch(texts, sp1, nt, 0, sp2, True)
            for i in missing:  # lone surrogates: repaired as tiktoken does
                out[i] = self._run(texts[i], allowed, 0)[0]
            if self._python_text_path() and not self._batch_in_normal_form(texts):
                for i, t in enumerate(texts):  # texts not in the normalizer's form: their own path (_run)
                    if not self._in_normal_form(t):
                        out[i] = self._run(t, allowed, 0)[0]
            return out
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be str, got {type(t).__name__}")
        if nt <= 1:
            return [self._run(t, allowed, 0)[0] for t in texts]
        from concurrent.futures import ThreadPoolExecutor  # (imported here: loading a tokenizer needs no threads)

        with ThreadPoolExecutor(nt) as ex:
            return list(ex.map(lambda t: self._run(t, allowed, 0)[0], texts))

    def encode_batch_to_numpy(
        self,
        text: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[np.ndarray, np.ndarray]:
        """`encode_batch` as two arrays, with no Python object per text or token: `ids` (uint32), every
        text's ids one after another, and `starts` (int64, one more entry than texts): text i's ids are
        `ids[starts[i]:starts[i + 1]]`."""
        if isinstance(text, str):
            raise TypeError("encode_batch_to_numpy expects a sequence of str, not a str")
        texts = text if isinstance(text, list) else list(text)
        allowed, disallowed = self._resolve_special(allowed_special, disallowed_special)
        nt = self._threads(num_threads, len(texts))
        if not self._native or self._python_text_path():
            rows = self.encode_batch(texts, num_threads=nt, allowed_special=allowed, disallowed_special=disallowed)
            return _flat(rows)
        self._check_disallowed_batch(texts, disallowed)
        sp1, sp2 = self._matchers(allowed)
        (ids, starts), missing = self._model.encode_batch(texts, sp1, nt, 1, sp2, True)
        ids, starts = np.frombuffer(ids, dtype=np.uint32), np.frombuffer(starts, dtype=np.int64)
        if missing:  # lone surrogates: repaired as tiktoken does, spliced in
            rows = [ids[starts[i]:starts[i + 1]] for i in range(len(texts))]
            for i in missing:
                rows[i] = np.asarray(self._run(texts[i], allowed, 0)[0], dtype=np.uint32)
            return _flat(rows)
        return ids, starts

    def _check_disallowed_batch(self, texts: list, disallowed: frozenset) -> None:
        """`_check_disallowed` over a batch: one search of the texts joined by a character no special token
        holds, then the per-text search (its leftmost-match error) only where a special token occurs."""
        if not disallowed:
            return
        if any("\0" in tok for tok in disallowed):
            joined = None
        else:
            try:
                joined = "\0".join(texts)
            except TypeError:
                joined = None
        if joined is not None:
            if len(disallowed) <= 8:
                hit = any(tok in joined for tok in disallowed)
            else:
                hit = self._special_regex(disallowed).search(joined) is not None
            if not hit:
                return
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be str, got {type(t).__name__}")
            self._check_disallowed(t, disallowed)

    def count_batch(self, text: Sequence[str], *, num_threads: int | None = None) -> list[int]:
        """Token counts of many texts (special-token text ordinary), on C threads."""
        texts = list(text)
        if self._native and not (self._add_prefix_space and self._python_text_path()):
            sp1, sp2 = self._matchers(frozenset())
            out = self._model.encode_batch(texts, sp1, self._threads(num_threads, len(texts)), 2, sp2)
            py = self._python_text_path() and not self._batch_in_normal_form(texts)
            return [r if r is not None and not (py and not self._in_normal_form(t))
                    else self.count(t) for r, t in zip(out, texts)]
        return [self.count(t) for t in texts]

    def clear_cache(self) -> None:
        """Forget the pre-token memos of this tokenizer (bounded, exact; see fstok/runtime/csrc/bpe.h).
        Results never depend on them; benchmarks call this to measure a cold start."""
        self._model.clear_cache()

    @staticmethod
    def _threads(num_threads: int | None, n: int) -> int:
        # a positive int, clamped to the machine (validate's functions imported with the module: an import
        # statement here cost 15-70 us of every batch call, on the calling thread with the GIL held)
        if num_threads is None:  # (not os.cpu_count(): it reads /sys each call, ~40 us of every batch call)
            return max(1, min(machine_threads(), n))
        if type(num_threads) is int and num_threads >= 1:  # (check_threads' clamp without its type checks)
            return max(1, min(num_threads, 4 * machine_threads(), 256, n))
        return max(1, min(check_threads(num_threads), n))

    # ------------------------------------------------------------------ decoding

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        if isinstance(tokens, np.ndarray):
            tokens = tokens.tolist()
        try:
            return self._model.decode_bytes(tokens)
        except KeyError as e:
            raise self._invalid(e) from None

    def decode(self, tokens: Sequence[int], errors: str = "replace", *, skip_special_tokens: bool | None = None) -> str:
        """The text of tokens (tiktoken `decode`). skip_special_tokens leaves out the special tokens' ids; its
        default is HF's for a tokenizer compiled from a tokenizer.json (True) and tiktoken's otherwise (False)."""
        if skip_special_tokens is None:
            skip_special_tokens = self._semantics == "hf"
        elif not isinstance(skip_special_tokens, bool):
            raise TypeError(f"skip_special_tokens must be a bool or None, got {type(skip_special_tokens).__name__}")
        if skip_special_tokens and self._special_tokens:
            special = self._special_ids
            if isinstance(tokens, np.ndarray):
                tokens = tokens.tolist()
            tokens = [t for t in tokens if t not in special]
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    @property
    def _special_ids(self) -> frozenset:
        got = self.__dict__.get("_special_id_set")
        if got is None:
            got = self.__dict__["_special_id_set"] = frozenset(self._special_tokens.values())
        return got

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        token_bytes = self.decode_tokens_bytes(tokens)
        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)) if token else text_len)
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)
        text = b"".join(token_bytes).decode("utf-8", errors="strict")
        return text, offsets

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int | None = None,
                     skip_special_tokens: bool | None = None) -> list[str]:
        return [self.decode(t, errors=errors, skip_special_tokens=skip_special_tokens) for t in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int | None = None) -> list[bytes]:
        return [self.decode_bytes(t) for t in batch]

    def decode_stream(self, *, skip_special_tokens: bool | None = None, errors: str = "replace",
                      prefill: Sequence[int] | None = None) -> "DecodeStream":
        """A `fstok.DecodeStream` over this tokenizer: `step(id)` returns the text each generated id
        completes, buffering a partial UTF-8 character; all outputs + `flush()` == `decode(all ids)`."""
        from .decode_stream import DecodeStream

        return DecodeStream(self, skip_special_tokens=skip_special_tokens, errors=errors, prefill=prefill)

    # ------------------------------------------------------------------ token limits (fstok/token_limits.py)

    def truncate(self, text: str, max_tokens: int, *, side: Literal["right", "left"] = "right",
                 allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
                 disallowed_special: Literal["all"] | Collection[str] = "all") -> "Truncation":
        """At most max_tokens ids of encode(text), cut where they end (side="right") or start (side="left")
        on a character boundary: Truncation(ids, text_part, split) with text_part == text[:split] (right)
        or text[split:] (left) == decode(ids).  Long texts are only encoded as far as needed."""
        from .token_limits import truncate

        return truncate(self, text, max_tokens, side=side, allowed_special=allowed_special,
                        disallowed_special=disallowed_special)

    def chunk_by_tokens(self, text: str, max_tokens: int, *, return_ids: bool = False,
                        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
                        disallowed_special: Literal["all"] | Collection[str] = "all") -> list:
        """Consecutive non-empty chunks of text, "".join(chunks) == text, each encoding to <= max_tokens
        tokens (return_ids=True: (chunk, ids) pairs).  See fstok/token_limits.py."""
        from .token_limits import chunk_by_tokens

        return chunk_by_tokens(self, text, max_tokens, return_ids=return_ids, allowed_special=allowed_special,
                               disallowed_special=disallowed_special)

    def count_up_to(self, text: str, max_tokens: int, *,
                    allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
                    disallowed_special: Literal["all"] | Collection[str] = ()) -> int:
        """min(count(text), max_tokens + 1), encoding a long text only as far as the limit."""
        from .token_limits import count_up_to

        return count_up_to(self, text, max_tokens, allowed_special=allowed_special,
                           disallowed_special=disallowed_special)


def build_bundled(name: str, path: str, sha256: str | None = None, **options: Any) -> BPETokenizer:
    """Registry builder for the bundled OpenAI encodings (see fstok/registry.py)."""
    if sha256 is not None:
        import hashlib

        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != sha256:
            raise ValueError(f"{path}: sha256 {got} does not match the expected {sha256}; the bundled file is damaged")
    return BPETokenizer.compile_tiktoken(path, name=name, **options)


_NO_SPECIALS = (frozenset(), frozenset())


def _flat(rows) -> tuple[np.ndarray, np.ndarray]:
    """(ids, starts) of a list of id sequences, as encode_batch_to_numpy returns them."""
    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    starts = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    ids = np.concatenate([np.asarray(r, dtype=np.uint32) for r in rows]) if rows else np.zeros(0, dtype=np.uint32)
    return ids.astype(np.uint32, copy=False), starts
