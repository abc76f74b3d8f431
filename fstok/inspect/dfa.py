"""Inspection of compiled pre-tokenization DFAs: summary, byte classes, networkx / GraphML / DOT.

    from fstok.inspect.dfa import summary, to_networkx, to_dot
    cp = fstok.pretokenize.get_pattern("o200k_base")
    summary(cp)                       # states, boundary states, byte classes, accepting states
    g = to_networkx(cp)               # nx.MultiDiGraph: one edge per (state, target) pair
    nx.write_graphml(g, "o200k.graphml"); open("o200k.dot", "w").write(to_dot(g))

`fstok inspect <artifact>` calls `cli_inspect` for regex_dfa artifacts and for any artifact that
embeds DFA sections (a BPE artifact's pre-tokenizer).

Graph nodes are state indices (0 = dead, 1..K = boundary states, K+1 = start) with attributes
`kind` ("dead" | "boundary" | "start" | "state"), `accept` (bool), `giveback` (bytes given back
by a lookahead when this state accepts), `label`.  Edges carry `classes` (comma-separated class
ids), `bytes` (the byte ranges, e.g. "41-5A,61-7A", or "EOI") and `label`.  Edges into the dead
state are omitted (every missing byte goes there).
"""
from __future__ import annotations

import json
import sys
from typing import Any

import networkx as nx
import numpy as np


def _levels(obj) -> list:
    from ..pretokenize import CompiledPattern

    if isinstance(obj, CompiledPattern):
        return obj.levels
    raise TypeError(f"expected a CompiledPattern, got {type(obj).__name__}")


def byte_class_ranges(t) -> list[list[int]]:
    """For each byte class (the EOI class excluded), its bytes as inclusive ranges [[lo, hi], ...]."""
    out: list[list] = [[] for _ in range(t.n_classes - 1)]
    for b in range(256):
        c = int(t.classes[b])
        rs = out[c]
        if rs and rs[-1][1] == b - 1:
            rs[-1][1] = b
        else:
            rs.append([b, b])
    return out


def _fmt_ranges(rs) -> str:
    return ",".join(f"{a:02X}" if a == b else f"{a:02X}-{b:02X}" for a, b in rs)


def level_summary(t) -> dict[str, Any]:
    acc = np.asarray(t.accept) & 15  # the high nibble is a boundary state's give-back
    return {
        "pattern": t.pattern,
        "dialect": t.dialect,
        "unicode": t.unicode,
        "states": int(t.n_states),
        "boundary_states": int(t.n_boundary),
        "giveback_boundary_states": int(getattr(t, "n_giveback", 0)),
        "start_state": int(t.start >> t.shift),
        "accepting_states": int(np.count_nonzero(acc)),
        "lookahead_states": int(np.count_nonzero(acc > 1)),
        "byte_classes": int(t.n_classes - 1),
        "classes_with_eoi": int(t.n_classes),
        "row_stride": 1 << t.shift,
        "table_bytes": int(t.nbytes()),
        "byte_class_ranges": [_fmt_ranges(rs) for rs in byte_class_ranges(t)],
    }


def summary(cp) -> dict[str, Any]:
    levels = _levels(cp)
    return {
        "kind": "regex_dfa",
        "name": cp.name,
        "mode": cp.mode,
        "unicode_tables": cp.unicode_version(),
        "levels": [level_summary(t) for t in levels],
    }


def accepting_states(t) -> list[int]:
    return [int(i) for i in np.nonzero(np.asarray(t.accept) & 15)[0]]


def to_networkx(cp, level: int = 0, max_states: int = 200_000) -> nx.MultiDiGraph:
    levels = _levels(cp)
    if not 0 <= level < len(levels):
        raise ValueError(f"level {level} out of range (the pattern has {len(levels)})")
    t = levels[level]
    if t.n_states > max_states:
        raise ValueError(f"DFA has {t.n_states} states, more than max_states={max_states}")
    M = t.matrix()
    start = t.start >> t.shift
    ranges = byte_class_ranges(t)
    g = nx.MultiDiGraph(name=cp.name or t.pattern[:60], pattern=t.pattern, dialect=t.dialect, unicode=t.unicode)
    for s in range(t.n_states):
        a, pb = int(t.accept[s]) & 15, int(t.accept[s]) >> 4  # pb: a boundary state's piece ended pb bytes back
        kind = "dead" if s == 0 else "boundary" if s <= t.n_boundary else "start" if s == start else "state"
        lab = f"{s}" + ("*" if a else "") + (f"-{a - 1}" if a > 1 else "") + ("B" if kind == "boundary" else "") + \
            (f"<{pb}" if pb else "")
        g.add_node(s, kind=kind, accept=bool(a), giveback=max(0, a - 1), piece_giveback=pb, label=lab)
    for s in range(1, t.n_states):
        by_target: dict[int, list[int]] = {}
        for c in range(t.n_classes):
            d = int(M[s, c])
            if d != 0:
                by_target.setdefault(d, []).append(c)
        for d, cls in by_target.items():
            rs = []
            for c in cls:
                if c == t.eoi:
                    continue
                rs.extend(ranges[c])
            rs.sort()
            merged: list[list[int]] = []
            for a_, b_ in rs:
                if merged and merged[-1][1] + 1 == a_:
                    merged[-1][1] = b_
                else:
                    merged.append([a_, b_])
            label = _fmt_ranges(merged)
            if t.eoi in cls:
                label = (label + "," if label else "") + "EOI"
            g.add_edge(s, d, classes=",".join(map(str, cls)), bytes=label, label=label)
    return g


def to_graphml(g: nx.MultiDiGraph, path: str) -> None:
    nx.write_graphml(g, path)


def to_dot(g: nx.MultiDiGraph) -> str:
    def q(x: Any) -> str:
        return '"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {q(g.graph.get('name', 'dfa'))} {{", "  rankdir=LR;", '  node [shape=circle, fontsize=10];']
    for n, d in g.nodes(data=True):
        if n == 0:
            continue
        shape = "doublecircle" if d.get("accept") else "circle"
        style = ', style=filled, fillcolor="#dddddd"' if d.get("kind") == "boundary" else ""
        style += ", penwidth=2" if d.get("kind") == "start" else ""
        lines.append(f"  {n} [label={q(d.get('label', n))}, shape={shape}{style}];")
    for u, v, d in g.edges(data=True):
        lines.append(f"  {u} -> {v} [label={q(d.get('label', ''))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def find_dfa_prefixes(art) -> list[str]:
    """Prefixes of DFA section groups in an artifact (e.g. 'dfa.' in a regex_dfa or BPE file)."""
    out = []
    for name in art.sections:
        if name.endswith("source") and (name[: -len("source")] + "0.info") in art.sections:
            out.append(name[: -len("source")])
    return sorted(out)


def cli_inspect(tok, art, args) -> int:
    """`fstok inspect` for regex_dfa artifacts and artifacts that embed DFA sections."""
    from ..pretokenize import CompiledPattern

    cps = []
    if isinstance(tok, CompiledPattern):
        cps.append(("", tok))
    else:
        for p in find_dfa_prefixes(art):
            cps.append((p, CompiledPattern.from_sections(art, p)))
    if not cps:
        print(json.dumps({"kind": art.kind_name, "sections": {k: s.nbytes for k, s in art.sections.items()}}, indent=2))
        return 0
    out = {"kind": art.kind_name, "artifact_bytes": art.nbytes(), "unicode_tables": art.unicode_version}
    if len(cps) == 1 and not cps[0][0]:
        out.update(summary(cps[0][1]))
    else:
        out["dfas"] = {p: summary(cp) for p, cp in cps}
    sample = getattr(args, "sample", None)
    if sample:
        with open(sample, encoding="utf-8", newline="") as f:
            text = f.read(getattr(args, "sample_bytes", 1_000_000))
        cp = cps[0][1]
        n = cp.count(text)
        out["sample_pieces"] = n
        out["sample_bytes_per_piece"] = round(len(text.encode("utf-8")) / max(1, n), 3)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    graphml, dot = getattr(args, "graphml", None), getattr(args, "dot", None)
    png = getattr(args, "png", None)
    if graphml or dot or png:
        g = to_networkx(cps[0][1], 0, max_states=getattr(args, "max_states", 200_000))
        if graphml:
            to_graphml(g, graphml)
            print(f"wrote {graphml}", file=sys.stderr)
        if dot:
            with open(dot, "w", encoding="utf-8") as f:
                f.write(to_dot(g))
            print(f"wrote {dot}", file=sys.stderr)
        if png:
            draw_png(g, png)
            print(f"wrote {png}", file=sys.stderr)
    return 0


def draw_png(g: nx.MultiDiGraph, path: str, max_nodes: int = 300) -> None:
    if g.number_of_nodes() > max_nodes:
        raise ValueError(f"graph has {g.number_of_nodes()} nodes; PNG drawing is limited to {max_nodes} "
                         "(export GraphML or DOT instead)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos = nx.spring_layout(g, seed=0)
    plt.figure(figsize=(12, 9))
    nx.draw_networkx(g, pos, labels={n: d.get("label", n) for n, d in g.nodes(data=True)}, node_size=300, font_size=7,
                     arrows=True)
    plt.savefig(path, dpi=120)
    plt.close()
