"""`fstok inspect` and `fstok explain`: the command-line face of fstok.inspect."""
from __future__ import annotations

import argparse
import json
import os
import sys


def _read_sample(path: str | None, limit: int) -> str | None:
    if not path:
        return None
    with open(path, encoding="utf-8", newline="") as f:
        return f.read(limit)


def _parse_around(tok, around: str):
    """--around takes a token string; a number prefixed with '#id:' is a token id."""
    if around.startswith("#id:"):
        try:
            return int(around[4:])
        except ValueError:
            raise ValueError(f"--around {around!r}: expected #id:<integer>") from None
    return around


def cmd_inspect(args) -> int:
    from .draw import write
    from .summary import format_text, load_any, summary
    from .views import graph

    tok, times = load_any(args.target)
    s = summary(tok, _read_sample(args.sample, args.sample_bytes))
    s["source"] = args.target
    s.update({k: round(v, 2) for k, v in times.items()})
    if args.json:
        print(json.dumps(s, indent=2, ensure_ascii=False))
    else:
        print(format_text(s))
    outs = [p for p in (args.png, args.svg, args.dot, args.graphml) if p]
    if args.fst:
        from ..fst_bridge import wordpiece_fst

        wordpiece_fst(tok, max_states=args.max_states).write(args.fst)
        print(f"wrote {args.fst} (OpenFst: input labels byte+1 and 257 = end of word, output labels id+1)",
              file=sys.stderr)
    if not outs:
        return 0
    if args.around is not None or args.state is not None:
        g = graph(tok, _parse_around(tok, args.around) if args.around is not None else None, state=args.state,
                        depth=args.depth, level=args.level, fanout=args.fanout)
    else:
        g = _whole(tok, args)
    for p in outs:
        write(g, p)
        print(f"wrote {p} ({g.number_of_nodes():,} nodes, {g.number_of_edges():,} edges, "
              f"{os.path.getsize(p):,} bytes)", file=sys.stderr)
    return 0


def _whole(tok, args):
    """The whole automaton (DOT/GraphML of any size up to --max-states; pictures of small ones only)."""
    from ..bpe import BPETokenizer
    from ..pretokenize import CompiledPattern
    from ..wordpiece import WordPieceTokenizer
    from . import dfa, wordpiece

    if isinstance(tok, WordPieceTokenizer):
        return wordpiece.to_networkx(tok, max_states=args.max_states)
    if isinstance(tok, BPETokenizer):
        if tok._pt_mode not in ("find", "split"):
            raise ValueError(f"{tok.name}: no pre-tokenizer DFA to export; use --around TOKEN for the merge graph")
        return dfa.to_networkx(CompiledPattern.from_sections(tok._art, "dfa."), args.level, max_states=args.max_states)
    if isinstance(tok, CompiledPattern):
        return dfa.to_networkx(tok, args.level, max_states=args.max_states)
    raise ValueError(f"no graph view for {type(tok).__name__}")


def cmd_explain(args) -> int:
    from .explain import explain
    from .summary import load_any

    tok, _ = load_any(args.model)
    if args.file:
        with open(args.file, encoding="utf-8", newline="") as f:
            text = f.read()
    elif args.text is not None:
        text = args.text
    else:
        text = sys.stdin.read()
    kw = {}
    if args.allowed_special:
        kw["allowed_special"] = "all" if args.allowed_special == ["all"] else set(args.allowed_special)
    e = explain(tok, text, **kw)
    if args.json:
        print(json.dumps(e.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(e)
    if args.png:
        e.draw(args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    i = sub.add_parser(
        "inspect", help="what is inside a tokenizer: pipeline, counts, table sizes; views of its automata",
        description="Summarize a compiled tokenizer (an artifact, a source file such as vocab.txt / tokenizer.json, "
                    "or a bundled name): the pipeline stages with their options, vocabulary and special-token "
                    "counts, table sizes per section, compile and load time. With --around TOKEN or --state N, "
                    "draw or export the neighbourhood of a token or state (works for automata of any size); "
                    "without them, export the whole automaton (--dot/--graphml; pictures of small ones only).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    i.add_argument("target", help="artifact path, source path or bundled encoding name")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    i.add_argument("--sample", help="text file: measure table lookups per byte / bytes per token on it")
    i.add_argument("--sample-bytes", type=int, default=1_000_000, help="read at most this many characters of --sample")
    i.add_argument("--around", help="centre the view on this token (e.g. '##ing', ' token'; '#id:123' for an id)")
    i.add_argument("--state", type=int, help="centre the view on this trie or DFA state")
    i.add_argument("--depth", type=int, default=2, help="levels of the neighbourhood around the centre")
    i.add_argument("--fanout", type=int, default=8, help="at most this many children / merges per node")
    i.add_argument("--level", type=int, default=0, help="which DFA level (pre-tokenizers with several levels)")
    i.add_argument("--png", help="draw the view as PNG")
    i.add_argument("--svg", help="draw the view as SVG")
    i.add_argument("--dot", help="write the view as Graphviz DOT")
    i.add_argument("--graphml", help="write the view as GraphML")
    i.add_argument("--fst", help="WordPiece: write the LinMaxMatch transducer as an OpenFst binary (needs pynini)")
    i.add_argument("--max-states", type=int, default=2_000_000, help="refuse whole-automaton exports above this")
    i.set_defaults(func=cmd_inspect)

    e = sub.add_parser(
        "explain", help="why a text tokenized the way it did, step by step",
        description="Explain the tokenization of a text: per character the normalization applied, the pre-tokenizer "
                    "pieces with the DFA states and look-ahead that placed each boundary, and per piece the model's "
                    "decisions (WordPiece trie path with failure links and pops; BPE merges with their ranks). "
                    "Computed from the compiled tables; the ids are those of encode.")
    e.add_argument("--model", "-m", required=True, help="bundled name, artifact path or source path")
    e.add_argument("text", nargs="?", help="the text (default: --file or stdin)")
    e.add_argument("--file", help="read the text from this file")
    e.add_argument("--allowed-special", nargs="+", metavar="TOKEN", help="special tokens to recognize ('all' for all)")
    e.add_argument("--json", action="store_true", help="print the explanation as JSON")
    e.add_argument("--png", help="also draw the explanation as a PNG picture")
    e.set_defaults(func=cmd_explain)
