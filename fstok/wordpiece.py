"""WordPiece (BERT) tokenizer: compile a vocabulary, save/load the artifact, encode in C.

    tok = fstok.compile("vocab.txt", lowercase=True)
    tok.encode("Hello world!")            # [7592, 2088, 999]
    tok.encode_with_offsets(text)         # (ids, [(start, end), ...]) character offsets
    tok.encode_batch(texts, num_threads=4)

Semantics are HF tokenizers' BertWordPieceTokenizer (BertNormalizer -> BertPreTokenizer ->
WordPiece -> BertProcessing) with `add_special_tokens=False` by default.  Special-token text
("[CLS]") in the input is ordinary text unless listed in `allowed_special` (HF's default is
to recognise them; pass allowed_special="all" for that).
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Collection, Iterable, Literal, Optional, Sequence, Union

import numpy as np

from ._inspectable import Inspectable
from . import artifact as art
from .validate import check_threads, machine_threads
from .wordpiece_layout import NONE, NORM1_LEN, node_fields

if TYPE_CHECKING:
    from .loaders.bert import WordPieceSource


def _native():
    from .runtime import _wordpiece

    return _wordpiece


def _as_text(text, what: str = "text") -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what} is not valid UTF-8: {e.reason} at byte {e.start}") from None
    raise TypeError(f"{what} must be str or UTF-8 bytes, not {type(text).__name__}")


def _check_threads(num_threads) -> int:
    """A positive int, clamped to the machine (as BPE does)."""
    if type(num_threads) is int and 1 <= num_threads <= 256:  # (check_threads' clamp without its type checks)
        return min(num_threads, 4 * machine_threads())
    return check_threads(num_threads)


def _check_surrogates(text: str, what: str = "text") -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} contains a lone surrogate U+{ord(text[e.start]):04X} at index {e.start}; "
                         f"it cannot be tokenized (encode/decode it with errors='replace' first)") from None


class WordPieceTokenizer(Inspectable):
    """A compiled WordPiece tokenizer backed by a validated artifact (mmap or bytes)."""

    kind = "wordpiece"
    _fstok_kind = "wordpiece"  # fstok.splitters.fstok_kind: how the long-text splitters recognise this class

    # ------------------------------------------------------------------ construction
    def __init__(self, artifact: art.Artifact):
        self._art = artifact
        m = artifact.meta
        self.name: str = m.get("name", "") if isinstance(m.get("name", ""), str) else ""
        self.options: dict = m.get("options") if isinstance(m.get("options"), dict) else {}
        self._validate_and_bind()

    @classmethod
    def compile_vocab(cls, path: str, name: Optional[str] = None, **options) -> "WordPieceTokenizer":
        from .loaders.bert import read_vocab_txt

        return cls.from_source(read_vocab_txt(os.fspath(path), **options), name=name)

    @classmethod
    def compile_tokenizer_json(cls, path: str, name: Optional[str] = None, **options) -> "WordPieceTokenizer":
        if options:
            raise TypeError(f"options {sorted(options)} are read from the tokenizer.json and cannot be overridden")
        from .loaders.bert import read_tokenizer_json

        return cls.from_source(read_tokenizer_json(os.fspath(path)), name=name)

    @classmethod
    def from_source(cls, src: "WordPieceSource", name: Optional[str] = None) -> "WordPieceTokenizer":
        from .compile.wordpiece import compile_source

        return cls(compile_source(src, name))

    @classmethod
    def from_artifact(cls, artifact: art.Artifact) -> "WordPieceTokenizer":
        return cls(artifact)

    def _validate_and_bind(self) -> None:
        """Check every table index before the C runtime may trust it."""
        a, m = self._art, self._art.meta
        from .validate_wordpiece import check

        arrs, v = check(a, self.name)  # every index C follows, proven; errors name the section and element
        n, nd, root, sroot = v["n_nodes"], v["n_dense"], v["root"], v["suffix_root"]
        opts, unk, prefix, maxc = self.options, v["unk_token"], v["prefix"], v["max_chars"]
        node, el, et, pool = arrs["wp.node"], arrs["wp.edge_label"], arrs["wp.edge_target"], arrs["wp.pool"]
        voffs, vbytes, sw, n_sw = arrs["vocab.offs"], arrs["vocab.bytes"], arrs["wp.suffix_word"], v["n_suffix_word"]
        s1, s2, npool = arrs["norm.stage1"], arrs["norm.stage2"], arrs["norm.pool"]
        V = len(voffs) - 1
        tok_len = np.diff(voffs).astype(np.uint32)
        self._vocab_offs, self._vocab_bytes = voffs, vbytes
        self._tokens_cache: Optional[list[str]] = None
        self._t2i_cache: Optional[dict[str, int]] = None
        self.unk_id = v["unk_id"]
        self._prefix = prefix
        self._tok_len = tok_len
        try:
            self._model = _native().Model(
                node, el, et, arrs["wp.failpops"], pool, arrs["wp.dense"], tok_len, s1, s2, npool,
                sw[:n_sw] if n_sw else np.zeros(0, np.uint32),
                n, nd, root, sroot, len(prefix.encode("utf-8")), self.unk_id, maxc, bool(v["strip"]))
        except ValueError as e:  # the runtime's own checks at attach time (the trie's labels spell UTF-8)
            raise art.ArtifactError(f"{a.path or self.name or '<wordpiece artifact>'}: wp.edge_label: {e}") from None
        self._specials = list(v["special_tokens"])
        self.cls_id = v["cls_id"]
        self.sep_id = v["sep_id"]
        self._special_re = None
        self._tables = arrs
        if type(self).encode is WordPieceTokenizer.encode:
            # encode(text) straight into C (no Python frame); every other call reaches the method below
            self.encode = self._model.fast_encode(WordPieceTokenizer.encode.__get__(self))

    # ------------------------------------------------------------------ persistence
    def save(self, path: Union[str, os.PathLike]) -> None:
        art.save_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        return self._art.to_bytes()

    def __reduce__(self):
        # a module-level loader: dill (HF datasets' Hasher) pickles a bound classmethod's class by value
        from ._load import loads

        return (loads, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"<fstok.WordPieceTokenizer {self.name!r} vocab_size={self.vocab_size}>"

    # ------------------------------------------------------------------ vocabulary
    @property
    def _tokens(self) -> list[str]:
        if self._tokens_cache is None:  # decoded on first use: keeps fstok.load in milliseconds
            b, o = self._vocab_bytes.tobytes(), self._vocab_offs.tolist()
            self._tokens_cache = [b[o[i]:o[i + 1]].decode("utf-8", "replace") for i in range(len(o) - 1)]
        return self._tokens_cache

    @property
    def _t2i(self) -> dict[str, int]:
        if self._t2i_cache is None:
            d: dict[str, int] = {}
            for i, t in enumerate(self._tokens):
                d[t] = i  # a duplicated token keeps its last id, as HF's vocab loader
            self._t2i_cache = d
        return self._t2i_cache

    @property
    def vocab_size(self) -> int:
        return len(self._vocab_offs) - 1

    n_vocab = vocab_size

    @property
    def continuing_subword_prefix(self) -> str:
        return self._prefix

    @property
    def special_tokens(self) -> list[str]:
        return list(self._specials)

    def id_to_token(self, i: int) -> Optional[str]:
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"token id must be an int, not {type(i).__name__}")
        return self._tokens[i] if 0 <= i < len(self._tokens) else None

    def token_to_id(self, s: str) -> Optional[int]:
        if not isinstance(s, str):
            raise TypeError(f"token must be a str, not {type(s).__name__}")
        return self._t2i.get(s)

    def get_vocab(self) -> dict[str, int]:
        return dict(self._t2i)

    # ------------------------------------------------------------------ encoding
    def _specials_for(self, allowed_special) -> list[str]:
        if allowed_special == "all":
            return self._specials
        if isinstance(allowed_special, str):
            raise TypeError("allowed_special must be 'all' or a collection of special-token strings")
        allowed = list(allowed_special)
        for t in allowed:
            if t not in self._specials:
                raise ValueError(f"{t!r} is not a special token of this tokenizer (special tokens: {self._specials})")
        return allowed

    def _segments(self, text: str, allowed: list[str]):
        """Split text at allowed special tokens (leftmost, longest first, as HF's added vocabulary)."""
        pat = re.compile("|".join(re.escape(t) for t in sorted(allowed, key=len, reverse=True)))
        pos = 0
        for mt in pat.finditer(text):
            if mt.start() > pos:
                yield text[pos:mt.start()], pos, None
            yield mt.group(), mt.start(), self._t2i[mt.group()]
            pos = mt.end()
        if pos < len(text):
            yield text[pos:], pos, None

    def _encode_one(self, text: str, offsets: bool, allowed_special, add_special_tokens: bool):
        if type(text) is not str:
            text = _as_text(text)
        allowed = self._specials_for(allowed_special) if allowed_special else []
        if allowed and any(t in text for t in allowed):
            ids: list[int] = []
            offs: list[tuple[int, int]] = []
            for seg, start, sid in self._segments(text, allowed):
                if sid is not None:
                    ids.append(sid)
                    offs.append((start, start + len(seg)))
                elif offsets:
                    i2, o2 = self._model.encode(seg, 1)
                    ids.extend(i2)
                    offs.extend((a + start, b + start) for a, b in o2)
                else:
                    ids.extend(self._model.encode(seg, 0))
        else:
            try:
                if offsets:
                    ids, offs = self._model.encode(text, 1)
                else:
                    ids, offs = self._model.encode(text, 0), None
            except UnicodeEncodeError:
                _check_surrogates(text)
                raise
        if add_special_tokens:
            ids, offs = self._add_specials(ids, offs)
        return (ids, offs) if offsets else ids

    def _add_specials(self, ids, offs):
        if self.cls_id is None or self.sep_id is None:
            raise ValueError("this tokenizer has no [CLS]/[SEP] post-processor; use add_special_tokens=False")
        ids = [self.cls_id] + list(ids) + [self.sep_id]
        if offs is not None:
            offs = [(0, 0)] + list(offs) + [(0, 0)]
        return ids, offs

    #: texts at least this long are split across threads by encode(..., num_threads=N)
    PARALLEL_THRESHOLD = 256_000

    def encode(self, text: str, *, add_special_tokens: bool = False,
               allowed_special: Union[Literal["all"], Collection[str]] = (),
               num_threads: Optional[int] = None) -> list[int]:
        """Token ids of `text` (BERT normalization + pre-tokenization + WordPiece, one pass).

        With `num_threads` > 1 a long text (>= PARALLEL_THRESHOLD characters) is split at
        whitespace into pieces encoded on native threads (fstok.parallel); the result is the same.
        """
        if num_threads is not None:
            num_threads = _check_threads(num_threads)
        if num_threads is not None and num_threads > 1 and isinstance(text, str) and len(text) >= self.PARALLEL_THRESHOLD:
            if not allowed_special:
                ids = self._encode_split_native(text, num_threads)
            else:
                from .parallel import encode_long

                ids = encode_long(self, text, num_threads=num_threads, allowed_special=allowed_special)
            return self._add_specials(ids, None)[0] if add_special_tokens else ids
        if type(text) is str and not allowed_special and not add_special_tokens:
            try:
                return self._model.encode(text, 0)  # the common case, straight to C
            except UnicodeEncodeError:
                _check_surrogates(text)
                raise
        return self._encode_one(text, False, allowed_special, add_special_tokens)

    def _encode_split_native(self, text: str, num_threads: int, parts: int = 0) -> list[int]:
        """One long text on `num_threads` native threads: the UTF-8 is cut at ASCII whitespace near
        `parts` (default 4 per thread) equal slices, a boundary for every BERT normalization, so the
        ids equal encode(text); no special-token handling (fstok.parallel covers that)."""
        if type(text) is not str:
            text = _as_text(text)
        try:
            return self._model.encode_split(text, int(num_threads), int(parts), 0)
        except UnicodeEncodeError:
            _check_surrogates(text)
            raise

    def encode_ordinary(self, text: str) -> list[int]:
        return self._encode_one(text, False, (), False)

    def encode_with_offsets(self, text: str, *, add_special_tokens: bool = False,
                            allowed_special: Union[Literal["all"], Collection[str]] = ()):
        """(ids, offsets): offsets are (start, end) character positions in the original `text`."""
        return self._encode_one(text, True, allowed_special, add_special_tokens)

    def encode_to_numpy(self, text: str, num_threads: Optional[int] = None) -> np.ndarray:
        """Ids as a uint32 array; with num_threads > 1 a long text is split across threads (same ids)."""
        text = _as_text(text)
        if num_threads is not None:
            num_threads = _check_threads(num_threads)
        try:  # (a lone surrogate fails the UTF-8 conversion in C; no extra pass over the text here)
            if num_threads is not None and num_threads > 1 and len(text) >= self.PARALLEL_THRESHOLD:
                return np.frombuffer(self._model.encode_split(text, int(num_threads), 0, 2), dtype=np.uint32)
            return np.frombuffer(self._model.encode(text, 2), dtype=np.uint32)
        except UnicodeEncodeError:
            _check_surrogates(text)
            raise

    def encode_with_offsets_numpy(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        text = _as_text(text)
        _check_surrogates(text)
        a, b = self._model.encode(text, 3)
        return np.frombuffer(a, dtype=np.uint32), np.frombuffer(b, dtype=np.uint32).reshape(-1, 2)

    def count(self, text: str) -> int:
        return len(self.encode_to_numpy(text))

    def encode_word(self, word: str) -> list[int]:
        """Single-word LinMaxMatch (Algorithm 1): no normalization, no pre-tokenization."""
        if type(word) is not str:
            word = _as_text(word, "word")
        try:
            return self._model.encode(word, 0, True)
        except UnicodeEncodeError:
            _check_surrogates(word, "word")
            raise

    def encode_batch(self, texts: Sequence[str], num_threads: Optional[int] = None, add_special_tokens: bool = False,
                     allowed_special: Union[Literal["all"], Collection[str]] = (), with_offsets: bool = False):
        """Encode many texts on `num_threads` native threads (default: all cores), GIL released."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch expects a sequence of texts, not a single str/bytes")
        texts = list(texts)
        if num_threads is None:  # (the CPUs this process may run on; os.cpu_count() reads /sys each call)
            num_threads = machine_threads()
        num_threads = _check_threads(num_threads)
        if allowed_special:
            texts = [t if isinstance(t, str) else _as_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
            return [self._encode_one(t, with_offsets, allowed_special, add_special_tokens) for t in texts]
        try:  # the C batch checks that every item is a str (no per-item Python pass over a batch of str)
            res = self._model.encode_batch(texts, num_threads, 1 if with_offsets else 0)
        except TypeError:
            texts = [t if isinstance(t, str) else _as_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
            res = self._model.encode_batch(texts, num_threads, 1 if with_offsets else 0)
        if add_special_tokens:
            if with_offsets:
                res = [self._add_specials(i, o) for i, o in res]
            else:
                res = [self._add_specials(i, None)[0] for i in res]
        return res

    def encode_batch_to_numpy(self, texts: Sequence[str], num_threads: Optional[int] = None) -> tuple[np.ndarray, np.ndarray]:
        """`encode_batch` as two arrays, with no Python object per text or token: `ids` (uint32), every
        text's ids one after another, and `starts` (int64, one more entry than texts): text i's ids are
        `ids[starts[i]:starts[i + 1]]`."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch_to_numpy expects a sequence of texts, not a single str/bytes")
        texts = list(texts)
        if num_threads is None:
            num_threads = machine_threads()
        num_threads = _check_threads(num_threads)
        try:
            ids, lens = self._model.encode_batch(texts, num_threads, 4)
        except TypeError:
            texts = [t if isinstance(t, str) else _as_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
            ids, lens = self._model.encode_batch(texts, num_threads, 4)
        starts = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(lens, dtype=np.int64), out=starts[1:])
        return np.frombuffer(ids, dtype=np.uint32), starts

    def encode_word_batch(self, words: Sequence[str], num_threads: int = 1) -> list[list[int]]:
        words = [_as_text(w, "word") for w in words]
        return self._model.encode_batch(words, _check_threads(num_threads), 0, True)

    # ------------------------------------------------------------------ decoding
    def decode_tokens(self, ids: Iterable[int]) -> list[str]:
        out = []
        for i in ids:
            t = self.id_to_token(int(i)) if isinstance(i, (int, np.integer)) and not isinstance(i, bool) else None
            if t is None:
                if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                    raise TypeError(f"token ids must be int, got {type(i).__name__}")
                from .errors import InvalidTokenError

                raise InvalidTokenError(int(i), self.vocab_size)
            out.append(t)
        return out

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text from ids, as HF's WordPiece decoder (join, glue '##' pieces, clean up spaces)."""
        if isinstance(ids, (str, bytes)):
            raise TypeError("decode expects a sequence of token ids")
        if not isinstance(skip_special_tokens, bool):
            raise TypeError(f"skip_special_tokens must be True or False, got {skip_special_tokens!r}")
        toks = self.decode_tokens(ids)
        if skip_special_tokens:
            sp = set(self._specials)
            toks = [t for t in toks if t not in sp]
        prefix = self._art.meta.get("decoder_prefix", "##")
        cleanup = self._art.meta.get("decoder_cleanup", True)
        parts = []
        for k, t in enumerate(toks):  # HF's WordPiece decoder works token by token
            if k > 0:
                if prefix and t.startswith(prefix):
                    t = t[len(prefix):]
                else:
                    t = " " + t
            parts.append(_cleanup(t) if cleanup else t)
        return "".join(parts)

    def decode_batch(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        """decode() of each id sequence (HF `decode_batch`)."""
        if isinstance(batch, (str, bytes)):
            raise TypeError("decode_batch expects a sequence of id sequences")
        return [self.decode(ids, skip_special_tokens) for ids in batch]


def _cleanup(s: str) -> str:
    # HF tokenizers decoders::wordpiece::cleanup
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
                 (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


def build_bundled(name: str, vocab_path: str, **options) -> WordPieceTokenizer:
    """Registry builder for the bundled BERT vocabularies."""
    return WordPieceTokenizer.compile_vocab(vocab_path, name=name, **options)
