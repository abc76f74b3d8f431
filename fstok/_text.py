"""Text helpers shared by the encoders, the token limits and the reference implementations (no fstok imports)."""
from __future__ import annotations


def fix_surrogates(text: str) -> str:
    """tiktoken's repair of text that is not valid UTF-8: lone surrogates become U+FFFD, surrogate pairs are joined."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
