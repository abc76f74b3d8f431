"""Pictures and exports of inspection graphs: PNG/SVG (matplotlib), DOT, GraphML.

One drawing convention for every kind: the node a view is centred on is outlined in blue; token states
are grey; WordPiece roots are labelled r and r# (the paper's r and r-sharp); trie / DFA / merge edges are
solid black; failure links are dashed red.
"""
from __future__ import annotations

import os
from typing import Any

import networkx as nx


def _q(x: Any) -> str:
    return '"' + str(x).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(g: nx.MultiDiGraph) -> str:
    """Graphviz DOT of any inspection graph (labels are escaped once; line breaks become DOT's \\n)."""
    lines = [f"digraph {_q(g.graph.get('name', 'fstok'))} {{", "  rankdir=LR;", "  node [shape=circle, fontsize=10];"]
    for v, d in g.nodes(data=True):
        lab = str(d.get("label", v))
        if d.get("pops"):
            lab += "\nF=[" + d["pops"] + "]"
        if g.graph.get("kind") == "bpe-merges":
            lab += f"\nid {d.get('id')}"
        attrs = [f"label={_q(lab)}"]
        is_token = d.get("token", -1) >= 0 or d.get("accept") or g.graph.get("kind") == "bpe-merges"
        attrs.append("shape=doublecircle" if is_token else "shape=circle")
        if d.get("token", -1) >= 0 or d.get("kind") == "boundary":
            attrs.append('style=filled, fillcolor="#dddddd"')
        if d.get("center") or d.get("root"):
            attrs.append('color="#1f5fbf", penwidth=2')
        lines.append(f"  {v} [{', '.join(attrs)}];")
    for u, v, d in g.edges(data=True):
        if d.get("kind") == "fail":
            lines.append(f"  {u} -> {v} [style=dashed, color=red, constraint=false];")
        else:
            lines.append(f"  {u} -> {v} [label={_q(d.get('label', ''))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(g: nx.MultiDiGraph, path: str) -> str:
    """Write `g` by the file extension: .png / .svg (drawing), .dot / .gv, .graphml.  Returns the format."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".png", ".svg"):
        draw_graph(g, path)
    elif ext in (".dot", ".gv"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_dot(g))
    elif ext == ".graphml":
        nx.write_graphml(g, path)
    else:
        raise ValueError(f"{path}: unknown output format {ext!r} (use .png, .svg, .dot, .gv or .graphml)")
    return ext[1:]


def _layers(g: nx.MultiDiGraph) -> dict[Any, tuple[float, float]]:
    """Left-to-right layers: trie depth for tries, merge-tree height for BPE, BFS distance for DFAs."""
    kind = g.graph.get("kind")
    solid = nx.DiGraph([(u, v) for u, v, d in g.edges(data=True) if d.get("kind") != "fail"])
    solid.add_nodes_from(g.nodes)
    level: dict[Any, int] = {}
    if kind == "bpe-merges":
        # a token sits right of its parts: level = length of its longest chain of parts
        for v in reversed(list(nx.topological_sort(solid))):
            kids = list(solid.successors(v))
            level[v] = 1 + max((level[k] for k in kids), default=-1)
    else:
        roots = [v for v in solid.nodes if solid.in_degree(v) == 0] or [g.graph.get("center")]
        for r in roots:
            for v, dd in nx.single_source_shortest_path_length(solid, r).items():
                level[v] = min(level.get(v, dd), dd)
        for v in solid.nodes:
            level.setdefault(v, 0)
    cols: dict[int, list] = {}
    for v in g.nodes:
        cols.setdefault(level[v], []).append(v)
    # columns are placed starting from the side the edges come from (roots of a trie, the merged token of a
    # merge graph); each node then sits near the mean height of its placed neighbours (fewer crossings)
    order = sorted(cols, reverse=(kind == "bpe-merges"))
    y: dict[Any, float] = {}
    pos = {}
    for lv in order:
        vs = cols[lv]

        def key(v, vs=vs):
            nb = [y[u] for u in list(solid.predecessors(v)) + list(solid.successors(v)) if u in y]
            side = 0 if any(d.get("kind") == "left" for _, _, d in g.in_edges(v, data=True)) else 1
            return (-(sum(nb) / len(nb)) if nb else 0.0, side, str(g.nodes[v].get("label", "")))

        vs.sort(key=key)
        for i, v in enumerate(vs):
            y[v] = -float(i) + (len(vs) - 1) / 2.0
            pos[v] = (float(lv), y[v])
    return pos


def draw_graph(g: nx.MultiDiGraph, path: str, max_nodes: int = 400) -> None:
    """Draw an inspection graph to PNG or SVG (by extension)."""
    if g.number_of_nodes() > max_nodes:
        raise ValueError(f"the graph has {g.number_of_nodes()} nodes; drawings are limited to {max_nodes}: "
                         "draw a neighbourhood (--around TOKEN or --state N with a small --depth) or export DOT/GraphML")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos = _layers(g)
    ncols = 1 + max((p[0] for p in pos.values()), default=0)
    nrows = max((sum(1 for p in pos.values() if p[0] == c) for c in set(p[0] for p in pos.values())), default=1)
    fig, ax = plt.subplots(figsize=(min(40, max(6, 2.2 * ncols)), min(40, max(4, 0.75 * nrows))))
    simple = nx.DiGraph()
    simple.add_nodes_from(g.nodes)
    solid = [(u, v) for u, v, d in g.edges(data=True) if d.get("kind") != "fail"]
    fail = [(u, v) for u, v, d in g.edges(data=True) if d.get("kind") == "fail"]
    colors = ["#cccccc" if (d.get("token", -1) >= 0 or d.get("accept") or d.get("kind") == "boundary") else "white"
              for _, d in g.nodes(data=True)]
    edgec = ["#1f5fbf" if (d.get("center") or d.get("root")) else "black" for _, d in g.nodes(data=True)]
    widths = [2.5 if (d.get("center") or d.get("root")) else 1.0 for _, d in g.nodes(data=True)]
    nx.draw_networkx_nodes(simple, pos, nodelist=list(g.nodes), node_color=colors, edgecolors=edgec, linewidths=widths,
                           node_size=700, ax=ax)
    labels = {}
    for v, d in g.nodes(data=True):
        lab = str(d.get("label", v))
        if len(lab) > 14:
            lab = lab[:13] + "…"
        labels[v] = lab.replace(" ", "␣") if g.graph.get("kind") in ("bpe-merges", "wordpiece-trie") else lab
    nx.draw_networkx_labels(simple, pos, labels, font_size=7, ax=ax)
    nx.draw_networkx_edges(nx.DiGraph(solid), pos, edgelist=solid, ax=ax, arrows=True, node_size=700)
    elabels = {(u, v): d.get("label", "") for u, v, d in g.edges(data=True) if d.get("kind") != "fail"}
    nx.draw_networkx_edge_labels(nx.DiGraph(solid), pos, elabels, font_size=6, ax=ax)
    if fail:
        nx.draw_networkx_edges(nx.DiGraph(fail), pos, edgelist=fail, style="dashed", edge_color="red",
                               connectionstyle="arc3,rad=0.3", ax=ax, arrows=True, node_size=700)
    for v, d in g.nodes(data=True):
        if d.get("pops") and d.get("token", -1) < 0:
            x, y = pos[v]
            ax.text(x, y - 0.33, f"F=[{d['pops']}]", fontsize=6, ha="center", color="darkred")
    legend = {"wordpiece-trie": "trie edges (solid), failure links (dashed red), F = failure pops, r / r# roots",
              "bpe-merges": "every node is a token; l / r point to the left and right tokens it is merged from",
              "dfa": "DFA transitions by byte ranges; * accepting, B boundary state, -k look-ahead give-back"}
    ax.set_title(f"{g.graph.get('name', '')}\n{legend.get(g.graph.get('kind'), '')}", fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw_explanation(ex: Any, path: str, max_pieces: int = 40) -> None:
    """A picture of an Explanation, left to right along the text: the input (one cell per UTF-8 byte for BPE,
    per character for WordPiece), the pre-tokenizer pieces, and above each piece how the model built its
    tokens -- for BPE the merge tree (each box a merged token at the height of its merge), for WordPiece the
    tokens the trie walk emitted.  Final tokens are grey, special tokens blue."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    pieces = ex.pieces[:max_pieces]
    bpe = ex.kind == "bpe"
    unit = (lambda s: len(s.encode("utf-8", "surrogatepass"))) if bpe else len
    x = 0.0
    height = 1
    boxes = []  # (x0, width, row, label, style)
    for p in pieces:
        w = max(1, unit(p.text))
        if ex.kind.startswith("sentencepiece") and p.steps and not p.special:
            boxes.append((x, w, 0, f"{p.text.replace(' ', '␣')}\n{p.steps[0].detail.split(';')[0]}", "scored"))
        else:
            boxes.append((x, w, 0, p.text, "special" if p.special else "text"))
        if p.special:
            pass
        elif bpe:
            merges = [s for s in p.steps if s.what == "merge" and s.span]
            level: dict[tuple[int, int], int] = {}
            for s in merges:  # height of a merged token: one above the higher of its two parts
                a, b = s.span
                inner = [lv for (c, d), lv in level.items() if a <= c and d <= b]
                level[(a, b)] = 1 + max(inner, default=0)
            for (a, b), lv in level.items():
                st = next(s for s in merges if s.span == (a, b))
                made = st.detail.split(" -> ", 1)[1].rsplit(" (id", 1)[0].strip("'\"")
                boxes.append((x + a, b - a, lv, f"{made}\nr{st.rank}", "merge"))
                height = max(height, 1 + lv)
            cum = 0
            for t, i in zip(p.tokens, p.ids):
                n = max(1, len(bytes(t, "utf-8", "surrogatepass")))
                boxes.append((x + cum, min(n, w - cum) or 1, -1, f"{t}\n#{i}", "token"))
                cum += n
        else:
            pre = ex.subword_prefix
            widths = [len(t[len(pre):]) if k and pre and t.startswith(pre) else len(t) for k, t in enumerate(p.tokens)]
            if sum(widths) != w:  # an unknown word: its one token spans it
                widths = [w / max(1, len(p.ids))] * len(p.ids)
            cum = 0.0
            for t, i, ww in zip(p.tokens, p.ids, widths):
                boxes.append((x + cum, ww, -1, f"{t}\n#{i}", "token"))
                cum += ww
        x += w + 0.5
    fig, ax = plt.subplots(figsize=(min(60, max(8, 0.45 * x)), 1.2 + 0.55 * (height + 2)))
    colors = {"text": "white", "scored": "white", "special": "#cfe0ff", "merge": "#fff4d6", "token": "#dddddd"}
    for x0, w, row, label, style in boxes:
        yy = row if row >= 0 else -1.3
        hh = 0.9 if row >= 0 else 1.2
        ax.add_patch(Rectangle((x0, yy), w, hh, facecolor=colors[style], edgecolor="black", linewidth=0.6))
        shown = label.replace(" ", "␣") if style in ("text", "token", "merge") else label
        ax.text(x0 + w / 2, yy + hh / 2, shown, ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_xlim(-0.5, x + 0.5)
    ax.set_ylim(-1.5, height + 1)
    ax.axis("off")
    more = f" (first {max_pieces} of {len(ex.pieces)} pieces)" if len(ex.pieces) > max_pieces else ""
    spm = ex.kind.startswith("sentencepiece")
    how = ("merge tree above each piece: rN = merge of rank N" if bpe else
           "the pieces of the best path with their scores (Unigram) or piece scores (BPE)" if spm else
           "tokens from the trie walk under each word")
    ax.set_title(f"{ex.kind}: {len(ex.text)} characters -> {len(ex.ids)} tokens{more}\n"
                 f"bottom: final tokens; above them: the text cut into pre-tokenizer pieces; {how}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
