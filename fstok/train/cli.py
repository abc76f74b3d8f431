"""`fstok train`: train a byte-level BPE vocabulary from text files.

    fstok train CORPUS... --vocab-size N [--pattern NAME_OR_REGEX] [--special TOKEN]... -o OUT

OUT's format follows its name unless --format is given: *.tiktoken -> tiktoken file,
*.json -> HF tokenizer.json, anything else -> fstok artifact.  A progress bar (phase, merges/s,
ETA) goes to stderr unless --quiet.

Hooked into fstok/cli.py by the CLI owner through `add_parser(subparsers)` and `run(args)`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

FORMATS = ("auto", "fstok", "tiktoken", "tokenizer.json")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a byte-level BPE vocabulary from text files",
        description="Train a byte-level BPE (incremental pair-count merge loop) on UTF-8 text files.",
    )
    p.add_argument("corpus", nargs="+", help="UTF-8 text files (streamed)")
    p.add_argument("-v", "--vocab-size", type=int, required=True,
                   help="total vocabulary size: 256 bytes + special tokens + merges")
    p.add_argument("-p", "--pattern", default="r50k_base",
                   help="pre-tokenization: r50k_base, p50k_base, cl100k_base, o200k_base or a regex (default r50k_base)")
    p.add_argument("-s", "--special", action="append", default=None, metavar="TOKEN",
                   help="a special token (repeatable; default <|endoftext|>)")
    p.add_argument("--no-special", action="store_true", help="train without special tokens")
    p.add_argument("-o", "--output", required=True, help="output path (.tiktoken, .json or an fstok artifact)")
    p.add_argument("-f", "--format", choices=FORMATS, default="auto", help="output format (default: from OUT's name)")
    p.add_argument("-t", "--threads", type=int, default=1, help="pre-tokenization threads (default 1)")
    p.add_argument("--name", default=None, help="tokenizer name stored in the artifact")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run, command="train")
    return p


def output_format(path: str, fmt: str = "auto") -> str:
    if fmt != "auto":
        return fmt
    low = path.lower()
    if low.endswith(".tiktoken"):
        return "tiktoken"
    if low.endswith(".json"):
        return "tokenizer.json"
    return "fstok"


def run(args) -> int:
    from .core import train_bpe

    if args.no_special:
        if args.special:
            raise ValueError("--no-special and --special are mutually exclusive")
        specials: list[str] = []
    else:
        specials = args.special if args.special else ["<|endoftext|>"]
    fmt = output_format(args.output, args.format)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise FileNotFoundError(f"output directory does not exist: {out_dir}")
    name = args.name or os.path.splitext(os.path.basename(args.output))[0] or "trained-bpe"
    t0 = time.perf_counter()
    tok = train_bpe(
        list(args.corpus),
        args.vocab_size,
        pattern=args.pattern,
        special_tokens=specials,
        progress=not args.quiet,
        num_threads=args.threads,
        name=name,
    )
    t1 = time.perf_counter()
    if fmt == "fstok":
        tok.save(args.output)
    else:
        tok.export(args.output, format=fmt)
    if not args.quiet:
        print(
            f"trained {tok.n_vocab:,} tokens ({len(tok.merges):,} merges, {len(tok.special_tokens)} special) "
            f"in {t1 - t0:.2f}s -> {args.output} ({fmt}, {os.path.getsize(args.output):,} bytes)",
            file=sys.stderr,
        )
    return 0


def main(argv=None) -> int:
    """Stand-alone entry point (python -m fstok.train.cli ...)."""
    parser = argparse.ArgumentParser(prog="fstok")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ValueError, TypeError, OSError, RuntimeError) as e:
        print(f"fstok train: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
