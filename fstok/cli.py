"""The fstok command line: compile, encode, tokenize, inspect, explain, pretokenize, train."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _load_any(name_or_path: str):
    import fstok

    if os.path.exists(name_or_path):
        with open(name_or_path, "rb") as f:
            magic = f.read(8)
        if magic == b"FSTOKART":
            return fstok.load(name_or_path)
        return fstok.compile(name_or_path)
    return fstok.get_encoding(name_or_path)


def cmd_compile(args) -> int:
    import fstok

    opts = {}
    if args.lowercase is not None:
        opts["lowercase"] = args.lowercase
    if args.strip_accents is not None:
        opts["strip_accents"] = args.strip_accents
    if args.no_chinese_chars:
        opts["handle_chinese_chars"] = False
    if args.no_clean_text:
        opts["clean_text"] = False
    if args.unk_token:
        opts["unk_token"] = args.unk_token
    if args.prefix is not None:
        opts["continuing_subword_prefix"] = args.prefix
    if args.max_chars is not None:
        opts["max_input_chars_per_word"] = args.max_chars
    if args.pattern:
        opts["pattern"] = args.pattern
    t = time.perf_counter()
    tok = fstok.compile(args.src, **opts)
    tok.save(args.output)
    print(f"compiled {args.src} -> {args.output} ({os.path.getsize(args.output):,} bytes) in {time.perf_counter() - t:.2f}s",
          file=sys.stderr)
    return 0


def cmd_encode(args) -> int:
    t_load = time.perf_counter()
    tok = _load_any(args.model)
    t_load = time.perf_counter() - t_load
    text = _read_text(args.file)
    from fstok.dataset.cli import encode_kwargs

    kw = encode_kwargs(tok, args)
    t = time.perf_counter()
    if args.lines:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        res = tok.encode_batch(lines, num_threads=args.threads, **kw)
        dt = time.perf_counter() - t
        out = sys.stdout
        for ids in res:
            out.write(_fmt(tok, ids, args.tokens) + "\n")
        n = sum(len(r) for r in res)
    else:
        # with --threads, a long text is cut at proven boundaries and encoded on threads (same ids); not by
        # default: for BPE the first such call builds the boundary table (~0.3-0.5 s), which a one-shot
        # command would pay every time
        ids = tok.encode(text, num_threads=args.threads, **kw) if args.threads else tok.encode(text, **kw)
        dt = time.perf_counter() - t
        sys.stdout.write(_fmt(tok, ids, args.tokens) + "\n")
        n = len(ids)
    nb = len(text.encode("utf-8"))
    if not args.quiet:
        print(f"{n:,} tokens from {nb:,} bytes in {dt * 1e3:.2f} ms ({nb / max(dt, 1e-9) / 1e6:.1f} MB/s); "
              f"model ready in {t_load * 1e3:.1f} ms", file=sys.stderr)
    return 0


def _read_text(path) -> str:
    """The whole input as text, decoded strictly before any output is written; an error names the
    file (or stdin) and the first byte that is not UTF-8."""
    name = path if path and path != "-" else "<stdin>"
    if name == "<stdin>":
        raw = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not valid UTF-8 text: byte {e.start} ({raw[e.start:e.start + 1]!r}) "
                         f"{e.reason}") from None


def _fmt(tok, ids, tokens: bool) -> str:
    if tokens:
        return " ".join(str(tok.id_to_token(i)) for i in ids)
    return " ".join(map(str, ids))


def cmd_pretokenize(args) -> int:
    import fstok

    text = _read_text(args.file)
    for a, b in fstok.pretokenize(args.pattern, text):
        print(f"{a}\t{b}\t{text[a:b]!r}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fstok", description="fstok: compile tokenizers into finite-state tables and run them.")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile a vocab.txt / tokenizer.json / .tiktoken into an artifact",
                       description="Compile a tokenizer source into one fstok artifact file.")
    c.add_argument("src", help="vocab.txt (BERT WordPiece), tokenizer.json, .tiktoken, or GPT-2 vocab.json")
    c.add_argument("-o", "--output", required=True, help="artifact path to write")
    c.add_argument("--lowercase", dest="lowercase", action="store_true", default=None, help="WordPiece: lowercase (uncased vocab)")
    c.add_argument("--no-lowercase", dest="lowercase", action="store_false", help="WordPiece: keep case")
    c.add_argument("--strip-accents", dest="strip_accents", action="store_true", default=None)
    c.add_argument("--no-strip-accents", dest="strip_accents", action="store_false")
    c.add_argument("--no-chinese-chars", action="store_true", help="WordPiece: do not isolate CJK characters")
    c.add_argument("--no-clean-text", action="store_true", help="WordPiece: keep control characters")
    c.add_argument("--unk-token", help="WordPiece unk token (default [UNK])")
    c.add_argument("--prefix", help="WordPiece continuing-subword prefix (default ##; may be empty)")
    c.add_argument("--max-chars", type=int, help="WordPiece max_input_chars_per_word (default 100)")
    c.add_argument("--pattern", help="BPE: pre-tokenization regex or encoding name (for .tiktoken files)")
    c.set_defaults(func=cmd_compile)

    e = sub.add_parser("encode", help="encode text (a file or stdin) to token ids",
                       description="Encode text with a bundled encoding name, an artifact, or a source file.")
    e.add_argument("--model", "-m", required=True, help="bundled name (e.g. bert-base-uncased), artifact path or source path")
    e.add_argument("file", nargs="?", help="input file (default: stdin)")
    e.add_argument("--lines", action="store_true", help="encode each line separately, without its newline: one output line per input line (batch, threads)")
    e.add_argument("--threads", type=int, default=None,
                   help="threads for --lines (default: all cores), and for one long text (>= 256k characters; default: 1)")
    e.add_argument("--tokens", action="store_true", help="print token strings instead of ids")
    e.add_argument("--quiet", "-q", action="store_true", help="no timing line on stderr")
    from fstok.dataset.cli import add_parser as _add_tokenize, add_special_args

    add_special_args(e)
    e.set_defaults(func=cmd_encode)

    from fstok.inspect.cli import add_parsers as _inspect_parsers

    _inspect_parsers(sub)  # inspect, explain

    pt = sub.add_parser("pretokenize", help="print the pre-tokenization spans of a regex or encoding name",
                        description="Split text with a compiled pre-tokenization DFA; prints start, end, piece.")
    pt.add_argument("pattern", help="encoding name (r50k_base, cl100k_base, o200k_base, ...) or a regex")
    pt.add_argument("file", nargs="?")
    pt.set_defaults(func=cmd_pretokenize)

    _add_tokenize(sub)

    try:
        from fstok.train import cli as train_cli

        tp = train_cli.add_parser(sub)
        if tp is not None and tp.get_default("func") is None:
            tp.set_defaults(func=train_cli.run)
    except ImportError:
        pass
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except BrokenPipeError:
        # the reader went away (`fstok encode ... | head`): stop quietly, as other Unix tools do
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 141
    except (ValueError, TypeError, FileNotFoundError, OSError) as e:
        print(f"fstok {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
