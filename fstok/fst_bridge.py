"""OpenFst export of a compiled WordPiece tokenizer (verification and interchange only).

The runtime never uses OpenFst.  This module writes the single-word LinMaxMatch transducer of
the paper's Appendix A.7 (Algorithm 4) as a pynini/OpenFst FST, so that OpenFst's own
algorithms (composition, shortest path) can check fstok's tables independently:

    input labels   byte + 1 (1..256; OpenFst reserves 0 for epsilon), END = 257 is the
                   word-end marker (the paper's appended whitespace)
    output labels  token id + 1
    arcs           u --b : sigma'(u, b)--> delta'(u, b)   (multi-token outputs use a chain of
                   epsilon-input states); u --END : end pops--> final when the failure chain
                   from u ends in r or r#.
A word with no path is [UNK] (the FST is partial); the suffix indicator itself ("##") is the
paper's special case handled outside the automaton.
"""
from __future__ import annotations

from typing import Iterable, Optional

from .wordpiece_layout import NONE
from .reference.wordpiece import TableExecutor

END = 257


def wordpiece_fst(tok, alphabet: Optional[Iterable[int]] = None, max_states: int = 20_000):
    """Build the LinMaxMatch FST of `tok` over `alphabet` (bytes; default: bytes of the vocabulary)."""
    import pynini

    m = tok._art.meta
    n = int(m["n_nodes"])
    if n > max_states:
        raise ValueError(f"{n} trie states: OpenFst export is meant for small vocabularies (max_states={max_states})")
    ex = TableExecutor(tok)
    if alphabet is None:
        alphabet = sorted(set(tok._vocab_bytes.tobytes()))
    alphabet = sorted(set(alphabet))
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    states = [f.add_state() for _ in range(n)]
    final = f.add_state()
    f.set_start(states[int(m["root"])])
    f.set_final(final)

    def chain(src: int, ilabel: int, outs: list[int], dst: int) -> None:
        if not outs:
            f.add_arc(src, pynini.Arc(ilabel, 0, one, dst))
            return
        cur, lab = src, ilabel
        for k, tid in enumerate(outs):
            nxt = dst if k == len(outs) - 1 else f.add_state()
            f.add_arc(cur, pynini.Arc(lab, tid + 1, one, nxt))
            cur, lab = nxt, 0

    for u in range(n):
        for b in alphabet:
            out: list[int] = []
            v = ex.step(u, b, out)
            if v != NONE:
                chain(states[u], b + 1, out, states[v])
        out, z = [], u
        while ex.fail[z] != NONE:
            out.extend(ex._slice(ex.pops[z]))
            z = ex.fail[z]
        if z in (ex.root, ex.sroot) and (out or z == ex.root):
            chain(states[u], END, out, final)
    return f


def transduce_word(fst, word: str) -> Optional[list[int]]:
    """Token ids of `word` by composing its byte acceptor with `fst`; None when there is no path."""
    import pynini

    data = word.encode("utf-8")
    acc = pynini.Fst()
    one = pynini.Weight.one(acc.weight_type())
    s = acc.add_state()
    acc.set_start(s)
    for b in list(data) + [END - 1]:
        t = acc.add_state()
        acc.add_arc(s, pynini.Arc(b + 1, b + 1, one, t))
        s = t
    acc.set_final(s)
    out = pynini.compose(acc, fst)
    if out.start() == -1 or out.num_states() == 0:
        return None
    path = pynini.shortestpath(out).topsort()
    ids: list[int] = []
    st = path.start()
    while True:
        arcs = list(path.arcs(st))
        if not arcs:
            break
        a = arcs[0]
        if a.olabel:
            ids.append(a.olabel - 1)
        st = a.nextstate
    return ids
