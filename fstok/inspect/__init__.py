"""Inspection of compiled tokenizers: what is inside, and why a text tokenized the way it did.

    from fstok import inspect
    inspect.summary(tok)                        # kind, pipeline stages, counts, table sizes (JSON-ready)
    g = inspect.graph(tok, around="##ing")      # networkx neighbourhood of a token or state (any table size)
    inspect.write(g, "ing.png")                 # .png / .svg / .dot / .graphml
    e = inspect.explain(tok, "text")            # per character, per piece, per model step; e.ids == encode
    print(e); e.draw("why.png")

Everything here reads the artifact's own tables (the ones the C runtime runs), never the source files.
Modules: `summary` (what is inside), `views` (neighbourhood graphs), `explain` (decisions per step),
`draw` (pictures and exports), `dfa` / `wordpiece` (whole-automaton views of small automata).
"""
from __future__ import annotations

from .draw import draw_graph, to_dot, write
from .explain import Explanation, explain
from .summary import format_text, summarize_path, summary
from .views import graph

__all__ = ["summary", "summarize_path", "format_text", "graph", "explain", "Explanation", "write", "to_dot",
           "draw_graph"]
