"""Exceptions of fstok's public API beyond the built-in ones (`ArtifactError` lives in fstok.artifact), and the
checks that raise them for every face alike."""
from __future__ import annotations


class InvalidTokenError(ValueError, KeyError):
    """A token id outside the vocabulary was given to decode (or id_to_token's strict variants).

    A ValueError (the id is a bad value), and a KeyError for code written against tiktoken, whose
    decode raises KeyError for an unknown id.  `token` is the id, `vocab_size` the number of ids."""

    def __init__(self, token, vocab_size: int):
        self.token, self.vocab_size = token, vocab_size
        super().__init__(f"invalid token id {token!r}: not in the vocabulary (ids 0..{vocab_size - 1}, "
                         f"vocab_size={vocab_size})")

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


def check_allowed_all(allowed_special) -> None:
    """The `allowed_special` of a tokenizer that matches its added tokens as HF `tokenizers` does (every one,
    wherever it occurs): only "all" (the default) says that; another value would ask for a different result,
    which is refused rather than ignored."""
    if isinstance(allowed_special, str) and allowed_special == "all":
        return
    raise ValueError(f"allowed_special={allowed_special!r}: a tokenizer.json tokenizer matches every added token in "
                     "the text, as HF tokenizers does; only allowed_special='all' (the default) is supported")

