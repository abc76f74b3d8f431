"""Pre-tokenization for training: patterns, special-token splitting, streaming, counting.

The training corpus is (1) split at the special tokens (which are never merged and are not
counted), (2) split into pre-tokens by a GPT-style regex, and (3) each *distinct* pre-token is kept
once with its frequency.  Memory is bounded by the distinct pre-tokens plus one chunk of text.

Files are streamed in chunks of about CHUNK_CHARS characters.  A chunk ends only at a position where
every bundled pattern (r50k/p50k/cl100k/o200k) is guaranteed to end a pre-token, so streaming gives
exactly the pre-tokens of the whole file:

  * right before a CR or LF that follows a letter or digit (``abc|\\n``): a letter/digit run ends
    there in every pattern and the whitespace run after it starts a new pre-token;
  * right after an LF that follows a non-space and precedes a letter or digit (``x\\n|Word``): no
    pattern has a pre-token containing an LF followed by a letter/digit, and the lone LF is a
    pre-token of its own whatever follows it;
  * right after a special token.

(tests/test_train_pretok.py checks streamed == whole-text counts on the shared corpora.)  A custom
regex gets the same cut points; it is exact as long as the pattern never matches across them.
If a special token contains CR/LF only the special-token cut points are used.

`split_regex` (the `regex` module, tiktoken's exact pattern strings) is the oracle; fstok's compiled
DFA (fstok.pretokenize) is used when it is importable and agrees with the oracle on a probe.
The two differ only on code points whose Unicode properties changed between the `regex` module's
Unicode tables and tiktoken's (the DFA follows tiktoken / Rust regex).
"""
from __future__ import annotations

import io
import os
from collections import Counter
from typing import Callable, Iterable, Iterator

import regex

# tiktoken 0.14.0 tiktoken_ext/openai_public.py, verbatim (tests compare them with the installed tiktoken)
from ..pretokenize import CL100K_PAT as CL100K_PATTERN  # noqa: E402  (one definition of tiktoken's patterns)
from ..pretokenize import O200K_PAT as O200K_PATTERN  # noqa: E402
from ..pretokenize import R50K_PAT as R50K_PATTERN  # noqa: E402
from .._text import fix_surrogates  # noqa: F401  (tiktoken's lone-surrogate rule, one definition)

PATTERNS = {
    "gpt2": R50K_PATTERN,
    "r50k_base": R50K_PATTERN,
    "p50k_base": R50K_PATTERN,
    "p50k_edit": R50K_PATTERN,
    "cl100k_base": CL100K_PATTERN,
    "o200k_base": O200K_PATTERN,
    "o200k_harmony": O200K_PATTERN,
}

CHUNK_CHARS = 1 << 18

_CUT_BEFORE_NL_SRC = r"(?<=[\p{L}\p{N}])(?=[\r\n])"
_CUT_AFTER_LF_SRC = r"(?<=\S\n)(?=[\p{L}\p{N}])"
# The regex backend's time budget per search: a fixed part plus a part per character far above the module's
# normal cost (~0.1-1 us per character), so only runaway backtracking reaches it.
REGEX_BUDGET_S = 2.0
REGEX_BUDGET_S_PER_CHAR = 20e-6

_CUT_BEFORE_NL = regex.compile("(?r)" + _CUT_BEFORE_NL_SRC)  # reverse: finds the last one
_CUT_AFTER_LF = regex.compile("(?r)" + _CUT_AFTER_LF_SRC)
_CUT_FWD = (regex.compile(_CUT_BEFORE_NL_SRC), regex.compile(_CUT_AFTER_LF_SRC))


def resolve_pattern(name_or_pattern: str) -> tuple[str | None, str]:
    """(name or None, regex) for an encoding name (r50k_base, p50k_base, cl100k_base, o200k_base) or a regex."""
    if not isinstance(name_or_pattern, str):
        raise TypeError(f"pattern must be an encoding name or a regex string, got {type(name_or_pattern).__name__}")
    if name_or_pattern in PATTERNS:
        return name_or_pattern, PATTERNS[name_or_pattern]
    if not name_or_pattern:
        raise ValueError("pattern must not be empty")
    from ..validate_pattern import check_name

    check_name(name_or_pattern, PATTERNS)
    try:
        regex.compile(name_or_pattern)
    except regex.error as e:
        raise ValueError(f"pattern {name_or_pattern!r} is not a valid regex: {e}") from None
    return None, name_or_pattern


def check_pattern_coverage(rx: str) -> None:
    """A custom training pattern must match all of ordinary text (tiktoken drops what it does not match)."""
    from ..validate_pattern import check_coverage

    cp = _load_dfa(rx)
    if cp is not None:
        check_coverage(cp, rx)
        return
    from ..validate_pattern import PROBE

    got = "".join(split_regex(rx, PROBE))
    if len(got) < len(PROBE):
        raise ValueError(f"the pre-tokenizer pattern {rx[:120]!r} matches only {len(got)} of the {len(PROBE)} "
                         "characters of ordinary text; text no match covers is dropped, so it would lose text")


def special_splitter(special_tokens: Iterable[str]) -> Callable[[str], list[str]]:
    """text -> the pieces between special tokens (longest special wins at a position)."""
    specials = sorted(set(special_tokens), key=lambda s: (-len(s), s))
    if not specials:
        return lambda text: [text]
    rx = regex.compile("|".join(regex.escape(s) for s in specials))
    return rx.split


def split_regex(pattern: str, text: str) -> list[str]:
    """The oracle pre-tokenizer: all non-empty matches of `pattern` in `text` (regex module)."""
    return [m for m in regex.findall(pattern, text) if m]




def _native_counter():
    try:
        from ..runtime import _train
    except ImportError:
        return None
    return _train.WordCounter


class Pretokenizer:
    """Pre-tokenization + counting for one pattern.

    backend "dfa": fstok's compiled DFA spanner (fstok.pretokenize, rust-regex/tiktoken semantics and
    Unicode tables), byte spans counted in C (fstok.runtime._train.WordCounter) with no Python object
    per pre-token; "regex": the `regex` module (the oracle), counted in a Counter of str;
    "auto": "dfa" when importable and the pattern compiles, else "regex".
    $FSTOK_TRAIN_PRETOKENIZER=regex forces the oracle."""

    def __init__(self, pattern: str, backend: str = "auto"):
        if backend not in ("auto", "regex", "dfa"):
            raise ValueError(f"pretokenizer must be 'auto', 'regex' or 'dfa', got {backend!r}")
        name, rx = resolve_pattern(pattern)
        self.pattern = rx
        self.name = name
        self._rx = regex.compile(rx)
        self._empty_ok = self._rx.fullmatch("") is not None
        self._cp = None
        if os.environ.get("FSTOK_TRAIN_PRETOKENIZER", "") == "regex" and backend == "auto":
            backend = "regex"
        if backend != "regex":
            self._cp = _load_dfa(name or rx)
            if self._cp is None and backend == "dfa":
                raise RuntimeError(f"fstok's compiled pre-tokenizer is not available for pattern {pattern!r}")
        self.backend = "dfa" if self._cp is not None else "regex"
        self._wc = _native_counter() if self._cp is not None else None

    def _findall(self, text: str, concurrent: bool = False) -> list[str]:
        """The `regex` module's findall under a time budget proportional to the text: a pattern the DFA compiler
        refuses may backtrack without bound on some text, and training never runs such a search unbounded."""
        budget = REGEX_BUDGET_S + REGEX_BUDGET_S_PER_CHAR * len(text)
        try:
            return self._rx.findall(text, concurrent=concurrent, timeout=budget)
        except TimeoutError:
            raise ValueError(
                f"pre-tokenizer pattern {self.pattern!r} took over {budget:.1f} s on {len(text):,} characters of the "
                "training text (catastrophic backtracking in the regex module, which runs the patterns fstok's DFA "
                "compiler refuses); use a pattern the DFA compiler accepts (pretokenizer='dfa' says why it refuses)"
            ) from None

    def pieces(self, text: str) -> list[str]:
        if self._cp is not None:
            return self._cp.pieces(text)
        out = self._findall(text)
        return [m for m in out if m] if self._empty_ok else out

    def new_counter(self):
        return self._wc() if self._wc is not None else Counter()

    def feed(self, counter, text: str, concurrent: bool = False) -> None:
        """Count the pre-tokens of `text` (a piece between special tokens) into `counter`."""
        if not text:
            return
        if self._cp is not None:
            if self._wc is not None:
                b = text.encode("utf-8")
                counter.add(b, self._cp.byte_spans(b))
            else:
                counter.update(self._cp.pieces(text))
            return
        out = self._findall(text, concurrent=concurrent)
        counter.update([m for m in out if m] if self._empty_ok else out)


def _load_dfa(name_or_pattern: str):
    """fstok's CompiledPattern for a name or regex, or None when unavailable or unsupported."""
    try:
        from ..pretokenize import get_pattern
    except Exception:  # the DFA compiler is not available
        return None
    try:
        cp = get_pattern(name_or_pattern)
        probe = "Hello world's 123 4567 ?! \n\n  x\r\n\t\u00ff\u4e2d\u6587 \u0301a\u00a0b  "
        _, rx = resolve_pattern(name_or_pattern)
        if cp.pieces(probe) != [m for m in regex.findall(rx, probe) if m]:
            return None
        return cp
    except Exception:  # a regex feature the DFA compiler does not support
        return None


def cut_point(buf: str, start: int, use_newlines: bool, special_rx, special_max: int = 0) -> int:
    """The last safe chunk end in buf[start:] (0 when there is none).

    A special-token match is only trusted when it ends at least `special_max` characters before
    the end of `buf` (a longer special token could continue past the end)."""
    best = 0
    if use_newlines:
        lo = max(0, start - 1)
        m = _CUT_BEFORE_NL.search(buf, lo)
        if m is not None and m.start() > 0:
            best = m.start()
        m = _CUT_AFTER_LF.search(buf, max(lo, best))
        if m is not None and m.start() > best:
            best = m.start()
    if special_rx is not None and best == 0:
        last = None
        for m in special_rx.finditer(buf, max(0, start - special_max)):
            if m.end() + special_max <= len(buf):
                last = m
        if last is not None:
            best = last.end()
    return best


def iter_chunks_text(text: str, special_tokens=(), chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """Cut one long text into pieces whose pre-tokens are exactly those of the whole text."""
    if len(text) <= chunk_chars:
        if text:
            yield text
        return
    use_nl = not any(("\n" in s or "\r" in s) for s in special_tokens)
    srx = _special_rx(special_tokens)
    smax = max((len(s) for s in special_tokens), default=0)
    pos = 0
    n = len(text)
    while n - pos > chunk_chars:
        window_end = pos + chunk_chars
        cut = cut_point(text[pos:window_end], 1, use_nl, srx, smax)
        if cut <= 0:
            # no cut point in the window: look further ahead for the first one
            cut = _first_cut_after(text, window_end, use_nl, srx)
            if cut <= 0:
                break
            cut -= pos
        yield text[pos : pos + cut]
        pos += cut
    if pos < n:
        yield text[pos:]


def _first_cut_after(text: str, at: int, use_nl: bool, srx) -> int:
    best = -1
    if use_nl:
        for fwd in _CUT_FWD:
            m = fwd.search(text, at)
            if m is not None and m.start() > 0 and (best < 0 or m.start() < best):
                best = m.start()
    if srx is not None:
        m = srx.search(text, at)
        if m is not None and (best < 0 or m.end() < best):
            best = m.end()
    return best


def _special_rx(special_tokens):
    specials = sorted(set(special_tokens), key=lambda s: (-len(s), s))
    if not specials:
        return None
    return regex.compile("|".join(regex.escape(s) for s in specials))


def iter_chunks_file(path: str, special_tokens=(), chunk_chars: int = CHUNK_CHARS, on_bytes=None) -> Iterator[str]:
    """Stream a UTF-8 file as text chunks cut at safe points (see the module docstring).

    `on_bytes(n)` is called with the number of bytes consumed so far (for progress)."""
    use_nl = not any(("\n" in s or "\r" in s) for s in special_tokens)
    srx = _special_rx(special_tokens)
    smax = max((len(s) for s in special_tokens), default=0)
    with open(path, "rb") as raw:
        f = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")
        carry = ""
        while True:
            try:
                new = f.read(chunk_chars)
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not valid UTF-8 ({e})") from None
            if on_bytes is not None:
                try:
                    on_bytes(raw.tell())
                except (OSError, ValueError):
                    pass
            if not new:
                if carry:
                    yield carry
                return
            buf = carry + new if carry else new
            cut = cut_point(buf, len(carry), use_nl, srx, smax)
            if cut <= 0:
                carry = buf
                continue
            yield buf[:cut]
            carry = buf[cut:]


def count_pretokens(
    chunks: Iterable[str],
    pretokenizer: Pretokenizer,
    special_tokens=(),
    num_threads: int = 1,
):
    """Distinct pre-tokens and frequencies over text chunks (each split at special tokens first).

    Returns a fstok.runtime._train.WordCounter (DFA backend) or a Counter {str: int} (regex backend)."""
    split_special = special_splitter(special_tokens)
    pt = pretokenizer
    if num_threads <= 1:
        counts = pt.new_counter()
        for chunk in chunks:
            for piece in split_special(fix_surrogates(chunk)):
                pt.feed(counts, piece)
        return counts

    import threading
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()
    all_counters = []
    lock = threading.Lock()

    def work(chunk: str) -> None:
        c = getattr(local, "c", None)
        if c is None:
            c = local.c = pt.new_counter()
            with lock:
                all_counters.append(c)
        for piece in split_special(fix_surrogates(chunk)):
            pt.feed(c, piece, concurrent=True)

    with ThreadPoolExecutor(max_workers=num_threads) as ex:
        pending = []
        for chunk in chunks:
            pending.append(ex.submit(work, chunk))
            if len(pending) >= 2 * num_threads:
                pending.pop(0).result()
        for fut in pending:
            fut.result()
    if not all_counters:
        return pt.new_counter()
    total = all_counters[0]
    for c in all_counters[1:]:
        total.update(c)
    return total
