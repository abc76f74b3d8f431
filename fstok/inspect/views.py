"""Neighbourhood views of compiled automata of any size, as networkx graphs.

A whole mBERT trie (~100k states) or an o200k pre-tokenizer DFA cannot be drawn, but the part around
one token or one state can:

* WordPiece: `around="##ing"` is the trie state of that token (the path from r, or from r# for a suffix
  token), its ancestors back to the root, its children `depth` levels down and the failure link of every
  state shown.  Nodes carry `label` (the string), `token` (id or -1), `pops` (failure pops as tokens),
  `root` ("r", "r#" or ""); edges carry `kind` ("trie" or "fail") and `label` (the byte).
* BPE: `around=" token"` is the merge graph: the token, the two tokens it was merged from, recursively
  `depth` levels down, and up to `fanout` tokens it merges into (lowest ranks first), `depth` levels up.
  Nodes carry `label`, `id` (external id) and `rank`; edges `kind` ("left", "right").
* DFA (a pre-tokenizer level): `state=N` (default: the start state) and the states reachable within
  `depth` transitions.  Edges carry `label` (byte ranges).
"""
from __future__ import annotations

from typing import Any, Optional

import networkx as nx
import numpy as np

from .._load import fstok_kind


def graph(tok: Any, around: Any = None, *, state: Optional[int] = None, depth: int = 2, level: int = 0,
          fanout: int = 8, max_nodes: int = 400) -> nx.MultiDiGraph:
    """The neighbourhood of a token (`around`) or a state (`state`) in `tok`'s compiled tables."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"depth must be a non-negative int, got {depth!r}")
    if not isinstance(fanout, int) or isinstance(fanout, bool) or fanout < 1:
        raise ValueError(f"fanout must be a positive int, got {fanout!r}")
    from ..pretokenize import CompiledPattern

    if fstok_kind(tok) == "wordpiece":
        if state is not None and around is not None:
            raise ValueError("give either around= or state=, not both")
        return _wordpiece(tok, around, state, depth, fanout, max_nodes)
    if fstok_kind(tok) == "bpe":
        if around is not None:
            return _bpe(tok, around, depth, fanout, max_nodes)
        cp = CompiledPattern.from_sections(tok._art, "dfa.") if tok._pt_mode in ("find", "split") else None
        if cp is None:
            raise ValueError(f"{tok.name}: no compiled pre-tokenizer DFA; pass around=TOKEN for the merge graph")
        return _dfa(cp, state, depth, level, max_nodes)
    if isinstance(tok, CompiledPattern):
        if around is not None:
            raise ValueError("a pre-tokenization DFA has no tokens: use state=N")
        return _dfa(tok, state, depth, level, max_nodes)
    raise TypeError(f"graph() does not know tokenizers of type {type(tok).__name__}")


# ---------------------------------------------------------------------------------------------- WordPiece
class _Trie:
    def __init__(self, tok):
        from ..compile.wordpiece import NONE, node_fields

        a, m = tok._tables, tok._art.meta
        es, nc, _, row = node_fields(a["wp.node"])
        self.es, self.nc, self.row = es.astype(np.int64), nc.astype(np.int64), row
        self.el, self.et = a["wp.edge_label"], a["wp.edge_target"].astype(np.int64)
        self.fail, self.pops, self.pool = a["wp.fail"], a["wp.pops"], a["wp.pool"]
        self.n = int(m["n_nodes"])
        self.root, self.sroot = int(m["root"]), int(m["suffix_root"])
        self.NONE = NONE
        parent = np.full(self.n, -1, dtype=np.int64)
        plabel = np.zeros(self.n, dtype=np.int64)
        total = int(self.nc.sum())
        if total:
            owner = np.repeat(np.arange(self.n), self.nc)
            first = np.repeat(self.es, self.nc)
            k = np.arange(total) - np.repeat(np.cumsum(self.nc) - self.nc, self.nc)
            idx = first + k
            parent[self.et[idx]] = owner
            plabel[self.et[idx]] = self.el[idx]
        self.parent, self.plabel = parent, plabel

    def string(self, v: int, prefix: bytes) -> bytes:
        """The bytes a state stands for; states under r# stand for suffix tokens (prefix + bytes)."""
        out = []
        while v not in (self.root, self.sroot) and v >= 0:
            out.append(int(self.plabel[v]))
            v = int(self.parent[v])
        return (prefix if v == self.sroot else b"") + bytes(reversed(out))

    def walk(self, start: int, data: bytes) -> Optional[int]:
        u = start
        for b in data:
            lo, hi = int(self.es[u]), int(self.es[u] + self.nc[u])
            hit = np.nonzero(self.el[lo:hi] == b)[0]
            if not len(hit):
                return None
            u = int(self.et[lo + int(hit[0])])
        return u

    def children(self, u: int) -> list[tuple[int, int]]:
        lo, hi = int(self.es[u]), int(self.es[u] + self.nc[u])
        return [(int(self.el[i]), int(self.et[i])) for i in range(lo, hi)]


def _byte_label(b: int) -> str:
    return chr(b) if 32 < b < 127 else f"\\x{b:02x}"


def _wordpiece(tok, around, state, depth, fanout, max_nodes) -> nx.MultiDiGraph:
    tr = tok.__dict__.get("_view_trie")
    if tr is None:
        tr = tok.__dict__["_view_trie"] = _Trie(tok)
    if around is not None:
        if isinstance(around, (int, np.integer)) and not isinstance(around, bool):
            s = tok.id_to_token(int(around))
            if s is None:
                raise ValueError(f"token id {around} is not in the vocabulary (size {tok.vocab_size})")
            around = s
        if not isinstance(around, str):
            raise TypeError(f"around must be a token string or id, got {type(around).__name__}")
        pre = tok.continuing_subword_prefix
        if pre and around.startswith(pre) and len(around) > len(pre):
            center = tr.walk(tr.sroot, around[len(pre):].encode("utf-8"))
        else:
            center = tr.walk(tr.root, around.encode("utf-8"))
        if center is None:
            raise ValueError(f"{around!r} is not a path of the trie of {tok.name!r} (is it in the vocabulary?)")
    else:
        center = tr.root if state is None else int(state)
        if not 0 <= center < tr.n:
            raise ValueError(f"state {state} out of range (the trie has {tr.n} states)")
    keep: dict[int, None] = {}
    v = center
    while v >= 0:  # the path from the root: how the walk gets here
        keep[v] = None
        v = int(tr.parent[v])
    keep[tr.sroot] = None
    frontier = [center]
    for _ in range(depth):
        nxt = []
        for u in frontier:
            for _, c in tr.children(u)[:fanout]:
                if c not in keep and len(keep) < max_nodes:
                    keep[c] = None
                    nxt.append(c)
        frontier = nxt
    for u in list(keep):
        f = int(tr.fail[u])
        if f != tr.NONE and len(keep) < max_nodes:
            keep.setdefault(f, None)
    t2i = tok._t2i
    pre = tok.continuing_subword_prefix
    g = nx.MultiDiGraph(name=f"{tok.name}: around {around!r}" if around is not None else f"{tok.name}: state {center}",
                        kind="wordpiece-trie", center=int(center))
    for u in keep:
        s = tr.string(u, pre.encode("utf-8")).decode("utf-8", "backslashreplace")
        tid = t2i.get(s, -1) if u not in (tr.root, tr.sroot) else -1
        p = int(tr.pops[u])
        pops = []
        if int(tr.fail[u]) != tr.NONE:
            pops = [str(tok.id_to_token(int(x))) for x in tr.pool[p >> 8:(p >> 8) + (p & 0xFF)]]
        root = "r" if u == tr.root else "r#" if u == tr.sroot else ""
        g.add_node(int(u), label=root or s, string=s, token=int(tid), pops=" ".join(pops), root=root,
                   center=bool(u == center))
    for u in keep:
        for b, c in tr.children(u):
            if c in keep:
                g.add_edge(int(u), int(c), kind="trie", label=_byte_label(b))
        f = int(tr.fail[u])
        if f != tr.NONE and f in keep:
            g.add_edge(int(u), f, kind="fail", label="")
    return g


# ---------------------------------------------------------------------------------------------- BPE
def _bpe(tok, around, depth, fanout, max_nodes) -> nx.MultiDiGraph:
    t = tok._tables
    ext = t["int_ext"].astype(np.int64)
    sl, sr = t["split_l"].astype(np.int64), t["split_r"].astype(np.int64)
    n = len(ext)
    ar = np.arange(n)
    if isinstance(around, (int, np.integer)) and not isinstance(around, bool):
        hits = np.nonzero(ext == int(around))[0]
        if not len(hits):
            raise ValueError(f"token id {around} is not a mergeable token of {tok.name!r}")
        center = int(hits[0])
    elif isinstance(around, (str, bytes)):
        b = around.encode("utf-8") if isinstance(around, str) else around
        tid = tok._model.span_lookup(b)
        if tid is None:
            try:
                tid = tok._token_id_for_bytes(b)
            except Exception:  # noqa: BLE001 - any lookup failure means "not a token" here
                tid = None
        hits = np.nonzero(ext == int(tid))[0] if tid is not None else []
        if not len(hits):
            raise ValueError(f"{around!r} is not a mergeable token of {tok.name!r}")
        center = int(hits[0])
    else:
        raise TypeError(f"around must be a token (str, bytes) or id, got {type(around).__name__}")
    merged = (sl != ar) | (sr != ar)
    users: dict[int, list[int]] = {}

    def users_of(k: int) -> list[int]:
        u = users.get(k)
        if u is None:
            u = users[k] = [int(x) for x in np.nonzero(merged & ((sl == k) | (sr == k)))[0][:fanout]]
        return u

    keep: dict[int, None] = {center: None}
    down = [center]
    for _ in range(depth):
        nxt = []
        for k in down:
            if merged[k]:
                for c in (int(sl[k]), int(sr[k])):
                    if c not in keep and len(keep) < max_nodes:
                        keep[c] = None
                        nxt.append(c)
        down = nxt
    up = [center]
    for _ in range(depth):
        nxt = []
        for k in up:
            for p in users_of(k):
                if p not in keep and len(keep) < max_nodes:
                    keep[p] = None
                    nxt.append(p)
        up = nxt
    g = nx.MultiDiGraph(name=f"{tok.name}: merges around {around!r}", kind="bpe-merges", center=center)
    for k in keep:
        lab = tok.decode_single_token_bytes(int(ext[k])).decode("utf-8", "backslashreplace")
        g.add_node(int(k), label=lab, id=int(ext[k]), rank=int(k), center=bool(k == center), merged=bool(merged[k]))
    for k in keep:
        if merged[k]:
            for side, c in (("left", int(sl[k])), ("right", int(sr[k]))):
                if c in keep:
                    g.add_edge(int(k), c, kind=side, label=side[0])
    return g


# ---------------------------------------------------------------------------------------------- DFA
def _dfa(cp, state, depth, level, max_nodes) -> nx.MultiDiGraph:
    from .dfa import _fmt_ranges, byte_class_ranges

    if not 0 <= level < len(cp.levels):
        raise ValueError(f"level {level} out of range (the pattern has {len(cp.levels)} level(s))")
    t = cp.levels[level]
    M = t.matrix()
    start = t.start >> t.shift
    center = start if state is None else int(state)
    if not 0 < center < t.n_states:
        raise ValueError(f"state {state} out of range (the DFA has states 1..{t.n_states - 1})")
    ranges = byte_class_ranges(t)
    keep: dict[int, None] = {center: None}
    frontier = [center]
    for _ in range(depth):
        nxt = []
        for s in frontier:
            for d in dict.fromkeys(int(x) for x in M[s]):
                if d and d not in keep and len(keep) < max_nodes:
                    keep[d] = None
                    nxt.append(d)
        frontier = nxt
    g = nx.MultiDiGraph(name=f"{cp.name or 'pattern'} level {level}: state {center}", kind="dfa", center=center)
    for s in keep:
        a, pb = int(t.accept[s]) & 15, int(t.accept[s]) >> 4
        kind = "boundary" if s <= t.n_boundary else "start" if s == start else "state"
        lab = f"{s}" + ("*" if a else "") + (f"-{a - 1}" if a > 1 else "") + ("B" if kind == "boundary" else "") + \
            (f"<{pb}" if pb else "")
        g.add_node(int(s), label=lab, kind=kind, accept=bool(a), giveback=max(0, a - 1), center=bool(s == center))
    for s in keep:
        by: dict[int, list[int]] = {}
        for c in range(t.n_classes):
            d = int(M[s, c])
            if d in keep:
                by.setdefault(d, []).append(c)
        for d, cls in by.items():
            rs = sorted(r for c in cls if c != t.eoi for r in ranges[c])
            lab = _fmt_ranges(rs) if len(rs) <= 6 else f"{len(rs)} byte ranges"
            if t.eoi in cls:
                lab = (lab + "," if lab else "") + "EOI"
            g.add_edge(int(s), d, kind="dfa", label=lab)
    return g
