"""train_bpe: corpus -> distinct pre-token counts -> incremental merge loop -> TrainedBPE."""
from __future__ import annotations

import os
import sys
import time
import warnings
from collections import Counter
from itertools import accumulate
from typing import Any, Callable, Iterable

import numpy as np

from . import pretok
from .result import TrainedBPE

DEFAULT_SPECIALS = ("<|endoftext|>",)
MAX_VOCAB = (1 << 31) - 1024


# ------------------------------------------------------------------ inputs

def _looks_like_path(s: str) -> bool:
    if not s or len(s) > 4096 or "\n" in s or "\r" in s or "\0" in s:
        return False
    if os.path.exists(s):
        return True
    if any(c.isspace() for c in s):
        return False
    base = os.path.basename(s)
    return os.sep in s or "/" in s or ("." in base[1:] and len(base.rsplit(".", 1)[1]) <= 8)


def classify_inputs(files_or_iterable: Any) -> tuple[str, Any]:
    """("files", [paths]) or ("texts", iterable of str).

    * a str / os.PathLike -> one file;
    * a list/tuple of os.PathLike, or of str that all look like paths (an existing path, or one
      line without spaces containing a '/' or ending in an extension) -> files;
    * any other iterable -> texts (each item one document; items must be str).
    """
    x = files_or_iterable
    if isinstance(x, (str, os.PathLike)):
        return "files", [os.fspath(x)]
    if isinstance(x, (bytes, bytearray, memoryview)):
        raise TypeError("corpus must be a path, a list of paths or an iterable of str, not bytes (decode it first)")
    if isinstance(x, (list, tuple)):
        if x and all(isinstance(i, os.PathLike) or (isinstance(i, str) and _looks_like_path(i)) for i in x):
            return "files", [os.fspath(i) for i in x]
        if any(isinstance(i, os.PathLike) for i in x):
            raise TypeError("mix of paths and texts: pass either file paths or an iterable of str")
        return "texts", x
    try:
        it = iter(x)
    except TypeError:
        raise TypeError(f"corpus must be a path, a list of paths or an iterable of str, got {type(x).__name__}") from None
    return "texts", it


def _checked_texts(it: Iterable[Any]) -> Iterable[str]:
    for i, t in enumerate(it):
        if not isinstance(t, str):
            raise TypeError(f"corpus item {i} is {type(t).__name__}, expected str")
        yield t


def _check_files(paths: list[str]) -> int:
    total = 0
    for p in paths:
        if not os.path.exists(p):
            hint = ""
            if len(p) > 200 or any(c in p for c in " \n\t"):
                hint = " (to train on text rather than a file, pass an iterable of str: train_bpe([text], ...))"
            shown = p if len(p) <= 200 else p[:200] + "..."
            raise FileNotFoundError(f"corpus file not found: {shown}{hint}")
        if os.path.isdir(p):
            raise IsADirectoryError(f"corpus path is a directory, not a file: {p}")
        total += os.path.getsize(p)
    return total


# ------------------------------------------------------------------ progress

class ProgressBar:
    """A one-line progress bar on a stream (stderr): phase, percentage, rate, ETA.

    Called as bar(phase, done, total); a new phase finishes the previous line."""

    def __init__(self, stream=None, min_interval: float = 0.1, width: int = 28):
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = min_interval
        self.width = width
        self._phase = None
        self._done = 0
        self._total = None
        self._finished = False
        self._t0 = 0.0
        self._last = 0.0
        self._line_len = 0

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        now = time.perf_counter()
        if phase != self._phase:
            self.close()
            self._phase, self._t0, self._last, self._finished = phase, now, 0.0, False
        if self._finished:
            return
        self._done, self._total = done, total
        final = total is not None and done >= total
        if not final and now - self._last < self.min_interval:
            return
        self._last = now
        self._draw(now, final)

    def close(self) -> None:
        if self._phase is not None and not self._finished:
            self._draw(time.perf_counter(), True)
        self._phase = None

    def _draw(self, now: float, final: bool) -> None:
        phase, done, total = self._phase, self._done, self._total
        el = now - self._t0
        rate = done / el if el > 0.02 else None
        if phase == "pretokenize":
            rate_s = f"{rate / 1e6:6.1f} MB/s" if rate is not None else "    -- MB/s"
            amount = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if total else f"{done:,} docs"
        else:
            rate_s = f"{rate:9,.0f} {phase}s/s" if rate is not None else f"       -- {phase}s/s"
            amount = f"{done:,}/{total:,}" if total else f"{done:,}"
        if total:
            frac = min(done / total, 1.0)
            fill = int(frac * self.width)
            bar = "#" * fill + "-" * (self.width - fill)
            if final:
                tail = f"done in {el:.2f}s"
            elif rate:
                tail = f"ETA {(total - done) / rate:6.1f}s"
            else:
                tail = "ETA     --"
            txt = f"{phase:>11} [{bar}] {frac * 100:5.1f}% {amount} {rate_s} {tail}"
        else:
            txt = f"{phase:>11} {amount} {rate_s} {el:.1f}s"
        pad = max(0, self._line_len - len(txt))
        self.stream.write("\r" + txt + " " * pad + ("\n" if final else ""))
        self.stream.flush()
        self._line_len = 0 if final else len(txt)
        if final:
            self._finished = True


def _progress_fn(progress) -> tuple[Callable | None, Callable | None]:
    if progress is None or progress is False:
        return None, None
    if progress is True:
        bar = ProgressBar()
        return bar, bar.close
    if callable(progress):
        return progress, getattr(progress, "close", None)
    raise TypeError("progress must be a bool or a callable(phase, done, total)")


# ------------------------------------------------------------------ counting

def count_corpus(
    files_or_iterable,
    pattern: str = "r50k_base",
    special_tokens=DEFAULT_SPECIALS,
    num_threads: int = 1,
    progress=None,
    pretokenizer: str = "auto",
    chunk_chars: int = pretok.CHUNK_CHARS,
) -> Counter:
    """Distinct pre-tokens and their frequencies of a corpus (files streamed, or an iterable of str
    documents): a fstok.runtime._train.WordCounter (DFA backend) or a Counter {str: int}.
    Use `as_dict(...)` for a plain {bytes: int}."""
    specials = list(dict.fromkeys(special_tokens))
    splitter = pretok.Pretokenizer(pattern, pretokenizer)
    kind, src = classify_inputs(files_or_iterable)
    report = progress
    if kind == "files":
        total = _check_files(src)
        state = {"base": 0}
        if report is not None:
            report("pretokenize", 0, total)

        def chunks():
            for p in src:
                size = os.path.getsize(p)

                def on_bytes(n, base=state["base"]):
                    if report is not None:
                        report("pretokenize", base + n, total)

                yield from pretok.iter_chunks_file(p, specials, chunk_chars, on_bytes=on_bytes)
                state["base"] += size

        counts = pretok.count_pretokens(chunks(), splitter, specials, num_threads)
        if report is not None:
            report("pretokenize", total, total)
        return counts

    seen = [0]

    def text_chunks():
        for t in _checked_texts(src):
            seen[0] += 1
            if report is not None and seen[0] % 256 == 0:
                report("pretokenize", seen[0], None)
            yield from pretok.iter_chunks_text(t, specials, chunk_chars)

    return pretok.count_pretokens(text_chunks(), splitter, specials, num_threads)


def as_dict(counts) -> dict[bytes, int]:
    """{pre-token bytes: frequency} from count_corpus's result."""
    if isinstance(counts, dict):
        return {(k.encode("utf-8") if isinstance(k, str) else bytes(k)): int(v) for k, v in counts.items()}
    return counts.items()


# ------------------------------------------------------------------ training

def _native():
    try:
        from ..runtime import _train
    except ImportError:
        return None
    return _train


def merge_loop(
    word_counts: dict,
    num_merges: int,
    backend: str = "auto",
    tie_break: str = "bytes",
    progress: Callable | None = None,
    batch: int = 256,
) -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """Learn up to `num_merges` merges from the pre-token counts: {str or bytes: frequency} or a
    fstok.runtime._train.WordCounter."""
    if tie_break not in ("bytes", "hf"):
        raise ValueError("tie_break must be 'bytes' (fstok) or 'hf' (HF BpeTrainer's order)")
    if backend not in ("auto", "native", "python"):
        raise ValueError("backend must be 'auto', 'native' or 'python'")
    native = _native() if backend != "python" else None
    if backend == "native" and native is None:
        raise RuntimeError("the native trainer fstok.runtime._train is not built (pip install -e .)")
    if progress is not None:
        progress("merge", 0, num_merges)
    tokens = [bytes([i]) for i in range(256)]
    merges: list[tuple[bytes, bytes]] = []
    counts: list[int] = []
    mode = 0 if tie_break == "bytes" else 1
    if native is not None:
        if not isinstance(word_counts, dict):
            data, offsets, fr = word_counts.export(2)
            del word_counts  # train_bpe hands over its only reference: free the counter before training
        else:
            words: list[bytes] = []
            freqs: list[int] = []
            for w, f in word_counts.items():
                b = w.encode("utf-8") if isinstance(w, str) else bytes(w)
                if len(b) >= 2:
                    words.append(b)
                    freqs.append(int(f))
            data = b"".join(words)
            offsets = np.fromiter(accumulate((len(w) for w in words), initial=0), dtype=np.int64, count=len(words) + 1).tobytes()
            fr = np.asarray(freqs, dtype=np.int64).tobytes()
            del words, freqs
        tr = native.Trainer(data, offsets, fr, mode)
        del data, offsets, fr

        def step(n):
            pb, cb = tr.step(n)
            pairs = np.frombuffer(pb, dtype=np.int32).reshape(-1, 2).tolist()
            cs = np.frombuffer(cb, dtype=np.int64).tolist()
            return [(a, b, c) for (a, b), c in zip(pairs, cs)]

    else:
        from .fast import FastTrainer

        ft = FastTrainer(as_dict(word_counts), mode=tie_break)
        step = ft.step
    while len(merges) < num_merges:
        got = step(min(batch, num_merges - len(merges)))
        for a, b, c in got:
            t = tokens[a] + tokens[b]
            merges.append((tokens[a], tokens[b]))
            tokens.append(t)
            counts.append(c)
        if progress is not None:
            progress("merge", len(merges), num_merges)
        if not got:
            break
    return merges, counts


def _validate(vocab_size, special_tokens, num_threads):
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if isinstance(special_tokens, str):
        special_tokens = (special_tokens,)
    if special_tokens is None:
        special_tokens = ()
    specials = []
    for s in special_tokens:
        if not isinstance(s, str):
            raise TypeError(f"special tokens must be str, got {type(s).__name__}")
        if not s:
            raise ValueError("special tokens must not be empty")
        if s in specials:
            raise ValueError(f"special token {s!r} given twice")
        specials.append(s)
    vocab_size = int(vocab_size)
    need = 256 + len(specials)
    if vocab_size < need:
        raise ValueError(
            f"vocab_size {vocab_size} is smaller than the 256 byte tokens + {len(specials)} special tokens = {need}"
        )
    if vocab_size > MAX_VOCAB:
        raise ValueError(f"vocab_size {vocab_size} is too large (max {MAX_VOCAB})")
    if num_threads is None:
        num_threads = 1
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
    return vocab_size, specials, num_threads


def train_bpe(
    files_or_iterable,
    vocab_size: int,
    pattern: str = "r50k_base",
    special_tokens=DEFAULT_SPECIALS,
    progress=False,
    num_threads: int | None = 1,
    *,
    name: str = "trained-bpe",
    backend: str = "auto",
    tie_break: str = "bytes",
    pretokenizer: str = "auto",
) -> TrainedBPE:
    """Train a byte-level BPE vocabulary (see fstok/train/__init__.py for the full description)."""
    vocab_size, specials, num_threads = _validate(vocab_size, special_tokens, num_threads)
    pattern_name, rx = pretok.resolve_pattern(pattern)
    if pattern_name is None:
        pretok.check_pattern_coverage(rx)
    report, close = _progress_fn(progress)
    try:
        counts = count_corpus(files_or_iterable, rx, specials, num_threads, report, pretokenizer)
        if len(counts) == 0:
            raise ValueError("empty corpus: no text to train on (after removing special tokens)")
        num_merges = vocab_size - 256 - len(specials)
        handover = [counts]
        del counts
        merges, mcounts = merge_loop(handover.pop(), num_merges, backend=backend, tie_break=tie_break, progress=report)
    finally:
        if close is not None:
            close()
    if len(merges) < num_merges:
        warnings.warn(
            f"the corpus ran out of pairs after {len(merges)} merges: vocabulary has "
            f"{256 + len(merges) + len(specials)} tokens, not {vocab_size}",
            RuntimeWarning,
            stacklevel=2,
        )
    return TrainedBPE(
        merges,
        specials,
        pattern_name or rx,
        name=name,
        merge_counts=mcounts,
        requested_vocab_size=vocab_size,
    )
