"""Byte-level BPE training (docs/design/training.md).

    tok = fstok.train_bpe("corpus.txt", 32000, pattern="o200k_base", special_tokens=["<|endoftext|>"])
    tok.encode("hello"); tok.decode(ids)
    tok.export("my.tiktoken", format="tiktoken")
    tok.export("tokenizer.json", format="tokenizer.json")     # HF tokenizers encodes it identically
    tok.save("my.fst")                                         # fstok artifact (via fstok.bpe)

train_bpe(files_or_iterable, vocab_size, pattern="r50k_base", special_tokens=("<|endoftext|>",),
          progress=False, num_threads=1, *, name=..., backend="auto", tie_break="bytes",
          pretokenizer="auto") -> TrainedBPE

  files_or_iterable  a path, a list of paths (streamed, UTF-8), or an iterable of str documents
  vocab_size         256 byte tokens + the special tokens + the merges
  pattern            an encoding name (r50k_base, p50k_base, cl100k_base, o200k_base) or a regex
  special_tokens     split out of the corpus before pre-tokenization, never merged; their ids
                     follow the last merge
  progress           True: a progress bar on stderr; or a callable(phase, done, total)
  num_threads        threads for pre-tokenization (the merge loop is sequential)
  backend            "auto" (native C loop when built), "native" or "python" (fstok.train.fast)
  tie_break          "bytes": among pairs with the same count the lexicographically greatest pair
                     of byte strings (bytes(a), bytes(b)) is merged;
                     "hf": HF BpeTrainer's order (smallest ids), for cross-checking only

The algorithm is the incremental pair-count update (see fstok/train/fast.py and
fstok/runtime/csrc/mod_train.c); fstok/train/naive.py is the recount-everything reference.
"""
from __future__ import annotations

from .core import ProgressBar, as_dict, count_corpus, merge_loop, train_bpe
from .naive import naive_merges, train_naive_texts
from .pretok import PATTERNS, resolve_pattern
from .result import TrainedBPE

__all__ = [
    "train_bpe",
    "TrainedBPE",
    "count_corpus",
    "as_dict",
    "merge_loop",
    "naive_merges",
    "train_naive_texts",
    "PATTERNS",
    "resolve_pattern",
    "ProgressBar",
]
