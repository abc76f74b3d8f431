"""``fstok tokenize`` and the special-token options shared by every command that encodes."""
from __future__ import annotations

import argparse
import re
import sys


def add_special_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allowed-special", action="append", metavar="TOKEN",
                   help="special token to encode as itself when the text spells it (repeat the option; 'all' for "
                        "every one); default: none")
    p.add_argument("--disallowed-special", action="append", metavar="TOKEN",
                   help="special token whose text is an error (repeat; 'all' = every special not allowed, the BPE "
                        "default as in tiktoken; 'none' = special-token text is ordinary text)")


def special_from_args(args) -> dict:
    """{allowed_special, disallowed_special} as the Python API takes them (None = default)."""
    a = args.allowed_special
    d = args.disallowed_special
    allowed = None if not a else ("all" if "all" in a else set(a))
    if not d:
        disallowed = None
    elif "none" in d:
        if len(d) > 1:
            raise ValueError("--disallowed-special none cannot be combined with other values")
        disallowed = ()
    else:
        disallowed = "all" if "all" in d else set(d)
    return {"allowed_special": allowed, "disallowed_special": disallowed}


def encode_kwargs(tok, args) -> dict:
    """Encode keyword arguments for ``tok`` from the command's special-token options (validated)."""
    from .encode import special_kwargs

    return special_kwargs(tok, **special_from_args(args))


_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESC.get(m.group(1), m.group(0)), s)


def cmd_tokenize(args) -> int:
    from .run import tokenize

    if args.lines and args.delimiter:
        raise ValueError("--lines and --delimiter exclude each other")
    split = "lines" if args.lines else ("delimiter" if args.delimiter else "whole")
    m = tokenize(args.inputs, args.model, args.out, format=args.format, input_format=args.input_format,
                 text_field=args.text_field, split=split,
                 delimiter=_unescape(args.delimiter) if args.delimiter else None,
                 keep_delimiter=args.keep_delimiter, append_eot=args.append_eot or bool(args.eot_token),
                 eot_token=args.eot_token, shard_size=args.shard_size, workers=args.workers, engine=args.engine,
                 address=args.address, skip_bad=args.skip_bad, quiet=True if args.quiet else None,
                 **special_from_args(args))
    if m["skipped"]["documents"]:
        print(f"fstok tokenize: skipped {m['skipped']['documents']:,} unreadable document(s) (listed in "
              f"manifest.json)", file=sys.stderr)
    return 0


def add_parser(sub) -> argparse.ArgumentParser:
    t = sub.add_parser(
        "tokenize", help="tokenize files into training shards (flat uint16/uint32 + Megatron .idx, .npy, Parquet)",
        description="Tokenize text / JSON Lines / Parquet files (.gz, .zst too) into shards a training loader "
                    "reads directly, with a manifest. Resumable: a rerun skips finished shards. "
                    "Guide: docs/datasets.md.")
    t.add_argument("inputs", nargs="+", metavar="INPUT", help="files, globs or directories (taken sorted by name)")
    t.add_argument("--model", "-m", required=True, help="encoding name (o200k_base, bert-base-uncased, ...), "
                                                        "artifact or tokenizer source path")
    t.add_argument("--out", "-o", required=True, help="output directory")
    t.add_argument("--format", choices=("bin", "npy", "parquet"), default="bin",
                   help="bin: flat little-endian uint16/uint32 + Megatron .idx (default); npy: .npy + .idx; "
                        "parquet: list<int32> column 'ids'")
    t.add_argument("--input-format", choices=("text", "jsonl", "parquet"),
                   help="default: by extension (.jsonl/.ndjson/.json, .parquet, else text)")
    t.add_argument("--text-field", default="text", help="JSON Lines field / Parquet column (default: text)")
    t.add_argument("--lines", action="store_true", help="text files: one document per line (default: one per file)")
    t.add_argument("--delimiter", help="text files: documents separated by this string (escapes \\n \\t \\r \\0)")
    t.add_argument("--keep-delimiter", action="store_true", help="keep the delimiter / newline at the end of "
                                                                 "each document")
    t.add_argument("--append-eot", action="store_true", help="append the end-of-document token to every document")
    t.add_argument("--eot-token", help="the end-of-document token (default <|endoftext|>; implies --append-eot)")
    add_special_args(t)
    t.add_argument("--shard-size", default="256MB", help="input bytes per shard (default 256MB)")
    t.add_argument("--workers", "-j", type=int, default=1, help="worker processes (local) or local cluster size")
    t.add_argument("--engine", choices=("local", "dask", "ray"), default="local",
                   help="where the shards run: local processes (default), a Dask or a Ray cluster")
    t.add_argument("--address", help="Dask scheduler (tcp://host:8786) or Ray cluster (auto, ray://host:10001)")
    t.add_argument("--skip-bad", action="store_true",
                   help="skip unreadable documents (counted and listed in the manifest) instead of stopping")
    t.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_tokenize)
    return t
