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
changed on it at run time: tokens added after loading, a new normalizer, pre-tokenizer, model or decoder, or
`encode_special_tokens=True`.
"""
from __future__ import annotations

import json
import warnings
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
        return self._why_hf is not None or bool(getattr(self._hf, "encode_special_tokens", False))

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
        state = "fstok" if not self._use_hf() else f"HF tokenizers ({self._why_hf or 'encode_special_tokens'})"
        return f"fstok.transformers.Backend({state})"


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
        pass  # answered by HF while set (checked per call)
    return b


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

    __init__.__wrapped__ = orig
    TokenizersBackend.__init__ = __init__
    _ORIG_INIT = orig


def unpatch() -> None:
    """Undo `patch()` for tokenizers constructed afterwards (existing ones keep their backend)."""
    global _ORIG_INIT
    if _ORIG_INIT is None:
        return
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    TokenizersBackend.__init__ = _ORIG_INIT
    _ORIG_INIT = None


def is_patched() -> bool:
    return _ORIG_INIT is not None
