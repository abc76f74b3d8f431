"""fstok: a tokenizer compiler.

    tok = fstok.compile("vocab.txt", lowercase=True)     # or tokenizer.json / .tiktoken
    tok.save("bert.fst"); tok = fstok.load("bert.fst")
    fstok.get_encoding("bert-base-uncased")              # bundled, compiled once, cached
    fstok.pretokenize("o200k_base", text)                # regex DFA spans
    fstok.DecodeStream(tok)                              # streaming decode (tok.decode_stream() for BPE)

Heavy modules are imported lazily so `import fstok` stays cheap.
"""
from __future__ import annotations

from ._version import __version__
from .api import compile, get_encoding, list_encodings, load, loads  # noqa: A004
from .artifact import ArtifactError
from .decode_stream import DecodeStream


def __getattr__(name: str):
    # the HF face is imported on first use, keeping `import fstok` cheap
    if name in ("Tokenizer", "AddedToken"):
        from . import hf_tokenizer

        return getattr(hf_tokenizer, name)
    if name == "Encoding":
        from .hf_encoding import Encoding

        return Encoding
    raise AttributeError(f"module 'fstok' has no attribute {name!r}")


def pretokenize(name_or_pattern: str, text: str) -> list[tuple[int, int]]:
    """Spans (character offsets) of the pre-tokenization regex `name_or_pattern` over `text`."""
    from .pretokenize import pretokenize as _p

    return _p(name_or_pattern, text)


def train_bpe(files_or_iterable, vocab_size: int, pattern: str = "r50k_base", special_tokens=("<|endoftext|>",), **kw):
    """Train a byte-level BPE tokenizer (see fstok.train)."""
    from .train import train_bpe as _t

    return _t(files_or_iterable, vocab_size, pattern=pattern, special_tokens=special_tokens, **kw)


__all__ = ["compile", "load", "loads", "get_encoding", "list_encodings", "pretokenize", "train_bpe", "ArtifactError", "DecodeStream", "Tokenizer", "Encoding", "AddedToken"]
