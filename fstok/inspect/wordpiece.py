"""Inspection of WordPiece artifacts: summary statistics and the trie as a graph.

The graph has one node per trie state (attribute `label` = the string it represents,
`token` = its vocabulary id or -1, `pops` = F(v) as token strings, `dense` = whether the
state has a full delta'/sigma' row) and two kinds of edges: `kind="trie"` (label = byte) and
`kind="fail"` (failure link).  Export with networkx to GraphML, or to DOT / PNG here.
"""
from __future__ import annotations

from typing import Optional

import networkx as nx
import numpy as np

from ..wordpiece_layout import NONE, node_fields


def summary(tok, sample: Optional[str] = None) -> dict:
    a, m = tok._tables, tok._art.meta
    s = {
        "kind": "wordpiece",
        "name": tok.name,
        "vocab_size": tok.vocab_size,
        "states": int(m["n_nodes"]),
        "trie_edges": int(len(a["wp.edge_label"])),
        "failure_links": int(np.count_nonzero(a["wp.fail"] != NONE)),
        "dense_rows": int(m["n_dense"]),
        "dense_fanout_threshold": int(m.get("dense_fanout", 0)),
        "pop_pool_entries": int(len(a["wp.pool"])),
        "artifact_bytes": tok._art.nbytes(),
        "unicode_tables": tok._art.unicode_version,
        "options": tok.options,
        "sections": {k: int(v.nbytes) for k, v in sorted(((k, tok._art.sections[k]) for k in tok._art.sections), key=lambda kv: kv[0])},
    }
    if sample:
        from ..reference.wordpiece import TableExecutor

        ex = TableExecutor(tok)
        ex.encode(sample)
        s["sample_bytes_fed"] = ex.stats.bytes_fed
        s["lookups_per_byte"] = round(ex.stats.lookups_per_byte, 4)
        s["failure_steps_per_byte"] = round(ex.stats.failure_steps / max(1, ex.stats.bytes_fed), 4)
    return s


def _strings(tok) -> list[bytes]:
    a, m = tok._tables, tok._art.meta
    es, nc, _, _ = node_fields(a["wp.node"])
    el, et = a["wp.edge_label"], a["wp.edge_target"]
    n = int(m["n_nodes"])
    out: list[Optional[bytes]] = [None] * n
    out[m["root"]] = b""
    stack = [int(m["root"])]
    while stack:
        u = stack.pop()
        for i in range(int(es[u]), int(es[u] + nc[u])):
            v = int(et[i])
            out[v] = out[u] + bytes([int(el[i])])
            stack.append(v)
    return [b if b is not None else b"" for b in out]


def to_networkx(tok, max_states: int = 200_000) -> nx.MultiDiGraph:
    a, m = tok._tables, tok._art.meta
    n = int(m["n_nodes"])
    if n > max_states:
        raise ValueError(f"trie has {n} states (> max_states={max_states}); pass a larger max_states to export it")
    strings = _strings(tok)
    pool = a["wp.pool"]
    es, nc, _, row = node_fields(a["wp.node"])
    el, et, fail, pops = a["wp.edge_label"], a["wp.edge_target"], a["wp.fail"], a["wp.pops"]
    g = nx.MultiDiGraph(name=tok.name, kind="wordpiece-trie", suffix_indicator=tok.options["continuing_subword_prefix"])
    t2i = tok._t2i
    for v in range(n):
        label = strings[v].decode("utf-8", "backslashreplace")
        p = int(pops[v])
        plist = [tok.id_to_token(int(x)) for x in pool[p >> 8:(p >> 8) + (p & 0xFF)]] if fail[v] != NONE else []
        root = "r" if v == m["root"] else "r#" if v == m["suffix_root"] else ""
        g.add_node(v, label=root or label, string=label, root=root,
                   token=t2i.get(label, -1) if not root else -1,
                   pops=" ".join(plist), dense=bool(row[v] != 0xFFFF))
    for u in range(n):
        for i in range(int(es[u]), int(es[u] + nc[u])):
            b = int(el[i])
            g.add_edge(u, int(et[i]), kind="trie", label=chr(b) if 32 < b < 127 else f"\\x{b:02x}")
        if fail[u] != NONE:
            g.add_edge(u, int(fail[u]), kind="fail", label="")
    return g


def to_dot(g: nx.MultiDiGraph) -> str:
    """Graphviz DOT of the trie (see fstok.inspect.draw.to_dot)."""
    from .draw import to_dot as _to_dot

    return _to_dot(g)


def draw_png(g: nx.MultiDiGraph, path: str) -> None:
    """A picture like the paper's Figure 1: trie edges solid, failure links dashed red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if g.number_of_nodes() > 300:
        raise ValueError(f"the whole trie has {g.number_of_nodes()} states; a whole-trie picture is for small "
                         "vocabularies (<= 300 states): draw a neighbourhood instead (fstok inspect ... --around TOKEN)")
    trie = nx.DiGraph([(u, v) for u, v, d in g.edges(data=True) if d["kind"] == "trie"])
    trie.add_nodes_from(g.nodes)
    depth = {}
    roots = [v for v in trie.nodes if trie.in_degree(v) == 0]
    for r in roots:
        for v, dd in nx.single_source_shortest_path_length(trie, r).items():
            depth[v] = dd
    layers: dict[int, list] = {}
    for v in sorted(trie.nodes):
        layers.setdefault(depth.get(v, 0), []).append(v)
    pos = {v: (d, -i) for d, vs in layers.items() for i, v in enumerate(vs)}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(layers)), max(4, 0.8 * max(len(v) for v in layers.values()))))
    colors = ["#cccccc" if g.nodes[v].get("token", -1) >= 0 else "white" for v in trie.nodes]
    nx.draw_networkx_nodes(trie, pos, node_color=colors, edgecolors="black", node_size=500, ax=ax)
    nx.draw_networkx_labels(trie, pos, {v: g.nodes[v].get("root") or str(v) for v in trie.nodes}, font_size=8, ax=ax)
    nx.draw_networkx_edges(trie, pos, ax=ax, arrows=True)
    nx.draw_networkx_edge_labels(trie, pos, {(u, v): d["label"] for u, v, d in g.edges(data=True) if d["kind"] == "trie"}, font_size=8, ax=ax)
    fl = [(u, v) for u, v, d in g.edges(data=True) if d["kind"] == "fail"]
    nx.draw_networkx_edges(nx.DiGraph(fl), pos, edgelist=fl, style="dashed", edge_color="red", connectionstyle="arc3,rad=0.25", ax=ax, arrows=True)
    for v in trie.nodes:
        p = g.nodes[v].get("pops")
        if p:
            x, y = pos[v]
            ax.text(x, y - 0.35, f"F=[{p}]", fontsize=6, ha="center", color="darkred")
    ax.set_title(f"{g.graph.get('name', '')}: trie (solid), failure links (dashed), failure pops F")
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
