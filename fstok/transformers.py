"""fstok as the backend of `transformers` fast tokenizers.

    import fstok.transformers
    fstok.transformers.patch()                   # AutoTokenizer / PreTrainedTokenizerFast built from now on
    tok = AutoTokenizer.from_pretrained(local_dir)
    tok(texts, text_pair=pairs, padding=True, truncation=True, max_length=128, return_tensors="np")
    fstok.transformers.unpatch()

`PreTrainedTokenizerFast` (`TokenizersBackend`) keeps an HF `tokenizers.Tokenizer` in `_tokenizer` and encodes
through its `encode_batch`, `decode` and settings. `patch()` wraps that object after construction in `Backend`,
which answers those calls with `fstok.Tokenizer` (same tokenizer.json, same truncation / padding /
post-processor state) and hands everything else to the HF object it wraps. transformers itself is unchanged:
it builds the same BatchEncoding from the same Encoding fields.

A tokenizer that fstok cannot compile keeps the HF backend, with a warning that names the reason. The HF object
also serves, for the rest of that tokenizer's life, once something the compiled core does not follow is
changed on it at run time: tokens added after loading, or a new normalizer, pre-tokenizer, model or decoder.
`encode_special_tokens` (transformers' `split_special_tokens=True`) is followed by fstok's core.
"""
from __future__ import annotations

import inspect
import json
import types
import warnings
from collections.abc import Sequence
from typing import Any, Optional

__all__ = ["patch", "unpatch", "is_patched", "Backend"]

_ORIG_INIT = None
_DELEGATED = ("normalizer", "pre_tokenizer", "model", "decoder")


class Backend:
    """A `tokenizers.Tokenizer` look-alike: fstok encodes and decodes, the wrapped HF object does the rest."""

    def __init__(self, hf, ours):
        object.__setattr__(self, "_hf", hf)
        object.__setattr__(self, "_ours", ours)
        object.__setattr__(self, "_why_hf", None)

    # --- state kept in step on both ---
    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_hf"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._hf, name, value)
        if name == "post_processor":
            self._resync()
        elif name in _DELEGATED:
            self._give_up(f"{name} replaced at run time")
        elif name == "encode_special_tokens":
            try:
                self._ours.encode_special_tokens = value
            except NotImplementedError as e:
                self._give_up(f"encode_special_tokens: {e}")

    def _give_up(self, why: str) -> None:
        if self._why_hf is None:
            object.__setattr__(self, "_why_hf", why)

    def _resync(self) -> None:
        from .postprocess import PostProcessor

        obj = json.loads(self._hf.to_str())
        try:
            self._ours._processor = PostProcessor.from_json(obj.get("post_processor"))
        except (ValueError, NotImplementedError) as e:
            self._give_up(f"post-processor: {e}")

    def _use_hf(self) -> bool:
        return self._why_hf is not None

    def enable_truncation(self, max_length, stride=0, strategy="longest_first", direction="right"):
        self._hf.enable_truncation(max_length, stride=stride, strategy=strategy, direction=direction)
        self._ours.enable_truncation(max_length, stride=stride, strategy=strategy, direction=direction)

    def no_truncation(self):
        self._hf.no_truncation()
        self._ours.no_truncation()

    def enable_padding(self, direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]", length=None,
                       pad_to_multiple_of=None):
        self._hf.enable_padding(direction=direction, pad_id=pad_id, pad_type_id=pad_type_id, pad_token=pad_token,
                                length=length, pad_to_multiple_of=pad_to_multiple_of)
        self._ours.enable_padding(direction=direction, pad_id=pad_id, pad_type_id=pad_type_id, pad_token=pad_token,
                                  length=length, pad_to_multiple_of=pad_to_multiple_of)

    def no_padding(self):
        self._hf.no_padding()
        self._ours.no_padding()

    def add_tokens(self, tokens) -> int:
        n = self._hf.add_tokens(tokens)
        if n:
            self._give_up("tokens added at run time")
        return n

    def add_special_tokens(self, tokens) -> int:
        n = self._hf.add_special_tokens(tokens)
        if n:
            self._give_up("special tokens added at run time")
        return n

    # --- the calls transformers encodes and decodes with ---
    def encode_batch(self, input, add_special_tokens=True, is_pretokenized=False):  # noqa: A002
        if self._use_hf():
            return self._hf.encode_batch(input, add_special_tokens=add_special_tokens, is_pretokenized=is_pretokenized)
        return self._ours.encode_batch(input, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)

    def encode_batch_fast(self, input, add_special_tokens=True, is_pretokenized=False):  # noqa: A002
        return self.encode_batch(input, add_special_tokens, is_pretokenized)

    def encode(self, sequence, pair=None, is_pretokenized=False, add_special_tokens=True):
        if self._use_hf():
            return self._hf.encode(sequence, pair, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)
        return self._ours.encode(sequence, pair, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)

    def decode(self, ids, skip_special_tokens=True):
        if self._use_hf():
            return self._hf.decode(ids, skip_special_tokens=skip_special_tokens)
        return self._ours.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_batch(self, sequences, skip_special_tokens=True):
        if self._use_hf():
            return self._hf.decode_batch(sequences, skip_special_tokens=skip_special_tokens)
        return self._ours.decode_batch(sequences, skip_special_tokens=skip_special_tokens)

    def __deepcopy__(self, memo):
        import copy

        return Backend(copy.deepcopy(self._hf, memo), self._ours.__class__.from_str(self._hf.to_str()))

    def __repr__(self) -> str:
        state = "fstok" if not self._use_hf() else f"HF tokenizers ({self._why_hf})"
        return f"fstok.transformers.Backend({state})"


class _LazyEncodings(Sequence):
    """`BatchEncoding.encodings` of a batch made by the numpy path: the Encoding objects are built on first
    access only, with the truncation / padding settings of the call that made the batch."""

    def __init__(self, ours, inputs: list, add_special_tokens: bool):
        self._ours, self._inputs, self._add = ours, inputs, add_special_tokens
        self._trunc, self._pad = ours.truncation, ours.padding
        self._encs: Optional[list] = None

    def _get(self) -> list:
        if self._encs is None:
            # a shallow view with the call's settings (copy.copy would re-read the tokenizer.json: __reduce__)
            t = object.__new__(type(self._ours))
            t.__dict__.update(self._ours.__dict__)
            t._truncation, t._padding = self._trunc, self._pad
            self._encs = t.encode_batch(self._inputs, add_special_tokens=self._add)
        return self._encs

    def __getitem__(self, i):
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._inputs)


# `_encode_plus`'s parameters (transformers 5) with their defaults
_PLUS_ARGS = {"text": None, "text_pair": None, "add_special_tokens": True, "padding_strategy": None,
              "truncation_strategy": None, "max_length": None, "stride": 0, "is_split_into_words": False,
              "pad_to_multiple_of": None, "padding_side": None, "return_tensors": None,
              "return_token_type_ids": None, "return_attention_mask": None, "return_overflowing_tokens": False,
              "return_special_tokens_mask": False, "return_offsets_mapping": False, "return_length": False,
              "verbose": True, "split_special_tokens": None}


def _numpy_call(tok, text, text_pair, add_special_tokens, padding_strategy, truncation_strategy, max_length, stride,
                is_split_into_words, pad_to_multiple_of, padding_side, return_tensors, return_token_type_ids,
                return_attention_mask, return_overflowing_tokens, return_special_tokens_mask, return_offsets_mapping,
                return_length, verbose, split_special_tokens, kwargs):
    """transformers' `_encode_plus` for a batch of texts (and pairs) with padding and return_tensors="np",
    straight from fstok's numpy batch; None when the call is of another shape (the regular path serves it)."""
    from transformers.tokenization_utils_base import BatchEncoding
    from transformers.utils import PaddingStrategy, TensorType

    backend = tok.__dict__.get("_tokenizer")
    if not isinstance(backend, Backend) or backend._use_hf():
        return None
    if return_tensors not in ("np", TensorType.NUMPY) or is_split_into_words or return_overflowing_tokens:
        return None
    if padding_strategy is None or truncation_strategy is None:
        return None
    if padding_strategy == PaddingStrategy.DO_NOT_PAD or kwargs.get("sanitize_control_tokens"):
        return None
    split = bool(tok.split_special_tokens if split_special_tokens is None else split_special_tokens)
    if backend.encode_special_tokens != split:  # as transformers' own _encode_plus sets it
        backend.encode_special_tokens = split
        if backend._use_hf():
            return None
    if isinstance(text, str):
        texts = [text]
        pairs = [text_pair] if text_pair else None  # transformers drops an empty single pair too
        if pairs is not None and not isinstance(text_pair, str):
            return None
    elif isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
        texts = list(text)
        if text_pair is None:
            pairs = None
        elif isinstance(text_pair, (list, tuple)) and len(text_pair) == len(texts) and \
                all(isinstance(t, str) for t in text_pair):
            pairs = list(text_pair)
        else:
            return None  # transformers raises its own errors for these
    else:
        return None
    ours = backend._ours
    if return_offsets_mapping:
        from .hf_batch import offsets_untouched

        if not offsets_untouched(ours._processor):
            return None
    tok.set_truncation_and_padding(padding_strategy=padding_strategy, truncation_strategy=truncation_strategy,
                                   max_length=max_length, stride=stride, pad_to_multiple_of=pad_to_multiple_of,
                                   padding_side=padding_side)
    try:
        out = ours.encode_batch_numpy(texts, pairs, add_special_tokens=add_special_tokens,
                                      return_offsets_mapping=return_offsets_mapping,
                                      return_special_tokens_mask=return_special_tokens_mask)
    except (ValueError, NotImplementedError):
        return None  # rows the numpy batch does not model (fixed padding below a row): the regular path
    if return_token_type_ids is None:
        return_token_type_ids = "token_type_ids" in tok.model_input_names
    if return_attention_mask is None:
        return_attention_mask = "attention_mask" in tok.model_input_names
    data = {"input_ids": out["input_ids"]}
    if return_token_type_ids:
        data["token_type_ids"] = out["token_type_ids"]
    if return_attention_mask:
        data["attention_mask"] = out["attention_mask"]
    if return_special_tokens_mask:
        data["special_tokens_mask"] = out["special_tokens_mask"]
    if return_offsets_mapping:
        data["offset_mapping"] = out["offset_mapping"]
    if return_length:
        import numpy as np

        data["length"] = np.full(len(texts), out["input_ids"].shape[1], dtype=np.int64)
    if len(texts):
        tok._eventual_warn_about_too_long_sequence(range(out["input_ids"].shape[1]), max_length, verbose)
    inputs = texts if pairs is None else list(zip(texts, pairs))
    n_seq = None
    if texts:
        first = ours.encode(texts[0], None if pairs is None else pairs[0], add_special_tokens=add_special_tokens)
        n_seq = first.n_sequences
    return BatchEncoding(data, _LazyEncodings(ours, inputs, add_special_tokens), tensor_type=return_tensors,
                         n_sequences=n_seq)


def wrap(hf) -> Optional[Backend]:
    """`Backend` over an HF `tokenizers.Tokenizer`, or None (with a warning naming why) when fstok cannot."""
    from .hf_tokenizer import Tokenizer

    if isinstance(hf, Backend):
        return hf
    try:
        ours = Tokenizer.from_str(hf.to_str())
    except (NotImplementedError, ValueError) as e:
        warnings.warn(f"fstok.transformers: using HF tokenizers for this tokenizer: {e}", stacklevel=3)
        return None
    b = Backend(hf, ours)
    if getattr(hf, "encode_special_tokens", False):
        b.encode_special_tokens = True  # the mode set before wrapping
    return b


def _encode_plus(self, *args, **kwargs):
    """transformers' `_encode_plus`, with the numpy batch of `_numpy_call` for the call shapes it serves; set
    on each tokenizer that patch() gives fstok's backend (an instance attribute: transformers' classes stay as
    they are, and the tokenizer keeps it after unpatch())."""
    orig = type(self)._encode_plus
    if isinstance(self.__dict__.get("_tokenizer"), Backend):
        params = _plus_params(orig)
        bound = dict(zip(params, args))
        bound.update(kwargs)
        extra = {k: v for k, v in bound.items() if k not in _PLUS_ARGS}
        call = {k: bound.get(k, d) for k, d in _PLUS_ARGS.items()}
        got = _numpy_call(self, **call, kwargs=extra)
        if got is not None:
            return got
    return orig(self, *args, **kwargs)


_PARAMS: dict = {}


def _plus_params(fn) -> list:
    if fn not in _PARAMS:
        _PARAMS[fn] = list(inspect.signature(fn).parameters)[1:]
    return _PARAMS[fn]


def patch() -> None:
    """Make every transformers fast tokenizer constructed from now on encode and decode with fstok."""
    global _ORIG_INIT
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    if _ORIG_INIT is not None:
        return
    orig = TokenizersBackend.__init__

    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        hf = self.__dict__.get("_tokenizer")
        if hf is not None and not isinstance(hf, Backend):
            b = wrap(hf)
            if b is not None:
                self._tokenizer = b
                self._encode_plus = types.MethodType(_encode_plus, self)

    __init__.__wrapped__ = orig
    TokenizersBackend.__init__ = __init__
    _ORIG_INIT = orig


def unpatch() -> None:
    """Undo `patch()`: transformers' classes are exactly as before it. Tokenizers constructed while patched keep
    fstok's backend."""
    global _ORIG_INIT
    if _ORIG_INIT is None:
        return
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    TokenizersBackend.__init__ = _ORIG_INIT
    _ORIG_INIT = None


def is_patched() -> bool:
    return _ORIG_INIT is not None
