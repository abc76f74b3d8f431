"""Checks of a user's pre-tokenizer pattern before a tokenizer is built on it.

tiktoken-style ("find") pre-tokenization drops the text no match covers.  A pattern that matches
almost nothing therefore builds a tokenizer whose `encode` silently returns too few ids (or none):
`pattern="gpt4"` is the regex matching the four letters g, p, t, 4, and `pattern="a*"` matches only
empty strings.  So:

* `check_name`: a pattern that reads like a name (letters, digits, `_`, `-`) but is not one of
  fstok's named patterns is an error listing the names (write `(?:gpt4)` for the literal regex);
* `check_coverage`: the compiled pattern must cover every character of a probe text that mixes
  letters of several scripts, digits, punctuation, spaces, tabs, newlines and emoji; otherwise it is
  an error showing the first text it would drop.
"""
from __future__ import annotations

import re

_NAME_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
PROBE = ("Hello World, it's 2024! The quick brown fox: 12345 x\ty\n\n  z\r\n"
         "héllo Ünïcode 東京 中文 русский עברית ☃ 😀 ...  end")


def check_name(pattern: str, known) -> None:
    """ValueError if `pattern` looks like a name but is not one of `known`."""
    if pattern not in known and _NAME_LIKE.fullmatch(pattern):
        raise ValueError(f"unknown encoding name {pattern!r} as a pre-tokenizer pattern; known: "
                         f"{', '.join(sorted(known))} (to use it as a literal regex, write (?:{pattern}))")


def check_coverage(cp, pattern: str, where: str = "") -> None:
    """ValueError if the compiled pattern `cp` (find mode) leaves part of the probe text unmatched."""
    spans = cp.spans(PROBE)
    pos = 0
    gaps = []
    for s, e in spans:
        if s > pos:
            gaps.append(PROBE[pos:s])
        pos = max(pos, e)
    if pos < len(PROBE):
        gaps.append(PROBE[pos:])
    if gaps:
        covered = sum(e - s for s, e in spans)
        pre = f"{where}: " if where else ""
        raise ValueError(
            f"{pre}the pre-tokenizer pattern {pattern[:120]!r} matches only {covered} of the {len(PROBE)} characters "
            f"of ordinary text (it drops e.g. {gaps[0][:40]!r}); text no match covers is dropped from the encoding, "
            "so this pattern would lose text.  Use a pattern that matches every character (e.g. end it with "
            r"'|\s+|.' ), or a named pattern such as 'o200k_base'")
