"""`explain` and `graph` for every compiled tokenizer class: thin entry points into fstok.inspect, which is
imported only when they are called (the runtime itself never loads the inspection code)."""
from __future__ import annotations

from typing import Any, Optional


class Inspectable:
    def explain(self, text: str, **kw: Any):
        """Why `text` tokenizes as it does, step by step, from the compiled tables (fstok.inspect.explain);
        `.ids` equals `encode(text, **kw)`; print it, `.to_dict()` it, or `.draw("why.png")` it."""
        from .inspect.explain import explain

        return explain(self, text, **kw)

    def graph(self, around: Any = None, *, state: Optional[int] = None, depth: int = 2, **kw: Any):
        """The networkx neighbourhood of a token (`around`) or state in the compiled tables
        (fstok.inspect.graph); write it with fstok.inspect.write(g, "x.png" / ".svg" / ".dot" / ".graphml")."""
        from .inspect.views import graph

        return graph(self, around, state=state, depth=depth, **kw)
