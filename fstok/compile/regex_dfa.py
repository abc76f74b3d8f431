"""Leftmost-first determinization, lowering to a UTF-8 byte DFA, minimization, byte classes.

Pipeline (each step is exact; nothing here knows any particular pattern):

1. `determinize(nfa)` -- ordered-subset construction over the cell alphabet (+ EOI).  A DFA
   state is the *ordered* tuple of NFA threads (priority order, as regex-automata's
   `util/determinize`), truncated after the first MATCH / MATCH_LA thread, since lower-priority
   threads can never win under leftmost-first semantics.  Its accept kind is that first match.
2. `minimize_cells` -- Moore partition refinement on the cell DFA.
3. `lower_to_bytes` -- every cell transition becomes UTF-8 byte paths.  Lead bytes branch into
   shared continuation sub-automata (a trie of the code point ranges, interned by content); a
   lookahead-accepting target reached through an L-byte character becomes a byte state that
   gives back L bytes.  Invalid UTF-8 goes to the dead state.
4. `minimize` -- Moore refinement on the byte DFA (numpy), then byte classes (identical columns),
   states renumbered dead = 0, start = 1, the rest breadth-first.
5. `add_boundary_states` -- boundary states that let the bulk spanner continue into the next piece
   without a data-dependent branch, also when the piece ended up to 3 bytes before the DFA could
   tell (see its docstring); renumbered dead = 0, boundary 1..K (those with a give-back first),
   start = K+1.

The search (C `fstok_dfa_match`, Python `reference_match`) runs from the start state, remembers
the last accepting position (minus the give-back), stops at the dead state, and at the end of
the text takes the EOI transition once.
"""
from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

import numpy as np

from .regex_nfa import CHAR, EOI, MATCH, MATCH_LA, NFA, Alphabet
from .regex_parse import RegexUnsupported

ACC_NONE, ACC_MATCH, ACC_LA = 0, 1, 2
DEFAULT_MAX_CELL_STATES = 20_000
DEFAULT_MAX_BYTE_STATES = 60_000
DEFAULT_MAX_TABLE_BYTES = 64 << 20


class DFASizeError(RegexUnsupported):
    """The DFA exceeds a size limit."""


# ----------------------------------------------------------------------------- 1. determinize
@dataclass
class CellDFA:
    trans: list  # per state: list of n_syms target ids (last symbol = EOI); state 0 is dead
    acc: list  # per state: ACC_NONE / ACC_MATCH / ACC_LA
    start: int
    n_syms: int


def determinize(nfa: NFA, max_states: int = DEFAULT_MAX_CELL_STATES) -> CellDFA:
    kind, mask, out = nfa.kind, nfa.mask, nfa.out
    n_cells = nfa.alphabet.n_cells
    n_syms = n_cells + 1
    closure = nfa.closure

    def accept_of(st: tuple) -> int:
        if st and kind[st[-1]] == MATCH:
            return ACC_MATCH
        if st and kind[st[-1]] == MATCH_LA:
            return ACC_LA
        return ACC_NONE

    dead: tuple = ()
    ids: dict[tuple, int] = {dead: 0}
    states: list[tuple] = [dead]
    start = tuple(closure([nfa.start]))
    if accept_of(start) != ACC_NONE:
        raise RegexUnsupported("regex not supported: the pattern can match the empty string")
    ids[start] = 1
    states.append(start)
    trans: list = [[0] * n_syms]
    queue = deque([1])
    trans.append(None)
    while queue:
        sid = queue.popleft()
        st = states[sid]
        row = [0] * n_syms
        # group symbols by the tuple of threads that accept them
        char_threads = [s for s in st if kind[s] == CHAR]
        eoi_threads = [s for s in st if kind[s] == EOI]
        groups: dict[tuple, list[int]] = {}
        for c in range(n_cells):
            bit = 1 << c
            key = tuple(s for s in char_threads if mask[s] & bit)
            if key:
                groups.setdefault(key, []).append(c)
        for key, cells in groups.items():
            nxt = tuple(closure([out[s] for s in key]))
            tid = ids.get(nxt)
            if tid is None:
                tid = len(states)
                if tid >= max_states:
                    raise DFASizeError(
                        f"regex DFA exceeds {max_states} states during determinization; simplify the pattern or "
                        "raise max_cell_states")
                ids[nxt] = tid
                states.append(nxt)
                trans.append(None)
                queue.append(tid)
            for c in cells:
                row[c] = tid
        if eoi_threads:
            nxt = tuple(closure([out[s] for s in eoi_threads]))
            tid = ids.get(nxt)
            if tid is None:
                tid = len(states)
                ids[nxt] = tid
                states.append(nxt)
                trans.append(None)
                queue.append(tid)
            row[n_cells] = tid
        trans[sid] = row
    acc = [accept_of(s) for s in states]
    return CellDFA(trans, acc, 1, n_syms)


# ------------------------------------------------------------------------------- 2. minimize
_HASH_MULT = np.random.default_rng(0x5EED).integers(1, 2**63, size=1024, dtype=np.uint64) | np.uint64(1)


def _split_rows(sig: np.ndarray) -> np.ndarray:
    """Label rows of `sig` so that equal rows (and only those) share a label.  Rows are hashed to 64 bits
    for speed; the result is verified row by row and recomputed exactly if two rows ever collide."""
    m = sig.shape[1]
    mult = _HASH_MULT[:m] if m <= len(_HASH_MULT) else None
    if mult is not None:
        with np.errstate(over="ignore"):
            h = (sig.astype(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
        _, first, lab = np.unique(h, return_index=True, return_inverse=True)
        lab = lab.reshape(-1)
        if np.array_equal(sig, sig[first[lab]]):
            return lab
    _, lab = np.unique(sig, axis=0, return_inverse=True)
    return lab.reshape(-1)


def _moore(trans: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Block label per state (Moore refinement); dead-equivalent states share a block."""
    _, block = np.unique(acc, return_inverse=True)
    block = block.reshape(-1)
    n_blocks = block.max() + 1
    while True:
        sig = np.concatenate([block[:, None], block[trans]], axis=1)
        nb = _split_rows(sig)
        m = nb.max() + 1
        block = nb
        if m == n_blocks:
            return block
        n_blocks = m


def _bfs_number(qtrans: np.ndarray, first: list, seeds: list) -> tuple[list, np.ndarray]:
    """Numbering of the blocks of a quotient table: `first` in that order, then the blocks reachable
    from `seeds`, breadth-first.  Returns (block per new number, new number per block)."""
    pos: dict = {}
    order: list = []
    for b in first:
        if b not in pos:
            pos[b] = len(order)
            order.append(b)
    q = deque(seeds)
    while q:
        b = q.popleft()
        for t in qtrans[b]:
            t = int(t)
            if t not in pos:
                pos[t] = len(order)
                order.append(t)
                q.append(t)
    remap = np.zeros(qtrans.shape[0], dtype=np.int64)
    for b, i in pos.items():
        remap[b] = i
    return order, remap


def _renumber(block: np.ndarray, trans: np.ndarray, start: int, dead: int) -> tuple[np.ndarray, np.ndarray]:
    """Quotient by `block`, numbered dead = 0, start = 1, then breadth-first.  Returns (old
    representative per new state, new transition table)."""
    n_blocks = int(block.max()) + 1
    rep = np.full(n_blocks, -1, dtype=np.int64)
    for s in range(len(block) - 1, -1, -1):
        rep[block[s]] = s
    qtrans = block[trans[rep]]  # [n_blocks, n_syms] in block ids
    order, remap = _bfs_number(qtrans, [int(block[dead]), int(block[start])], [int(block[start])])
    order_arr = np.array(order, dtype=np.int64)
    new_trans = remap[qtrans[order_arr]]
    return rep[order_arr], new_trans


def minimize_cells(d: CellDFA) -> CellDFA:
    trans = np.array(d.trans, dtype=np.int64)
    acc = np.array(d.acc, dtype=np.int64)
    block = _moore(trans, acc)
    if block[d.start] == block[0]:
        raise RegexUnsupported("regex not supported: the pattern can never match")
    reps, new_trans = _renumber(block, trans, d.start, 0)
    return CellDFA(new_trans.tolist(), acc[reps].tolist(), 1, d.n_syms)


# ------------------------------------------------------------------------- 3. lower to bytes
class _Trie:
    """UTF-8 continuation structure of the cell map, interned by content.

    A node is (k, children): k = continuation bytes still to read; children has 64 entries for
    continuation bytes 0x80..0xBF: a cell id (k == 1) or a child node id (k > 1), -1 = invalid."""

    def __init__(self, alpha: Alphabet):
        self.alpha = alpha
        self.nodes: list[tuple[int, tuple]] = []
        self.ids: dict[tuple, int] = {}
        self.cells_in: list[tuple] = []  # distinct cells reachable below each node

    def _intern(self, k: int, children: tuple) -> int:
        key = (k, children)
        nid = self.ids.get(key)
        if nid is None:
            nid = len(self.nodes)
            self.ids[key] = nid
            self.nodes.append(key)
            if k == 1:
                cs = sorted({c for c in children if c >= 0})
            else:
                cs = sorted({c for ch in children if ch >= 0 for c in self.cells_in[ch]})
            self.cells_in.append(tuple(cs))
        return nid

    def leaf(self, base: int) -> int:
        """The node of the 64 code points base..base+63 (one continuation byte left).  Filled run by run
        (the runs are sorted and disjoint), not code point by code point: lowering visits ~17k blocks."""
        a = self.alpha
        lo, hi, cell = a.runs_lo, a.runs_hi, a.runs_cell
        end = base + 63
        i = bisect.bisect_right(lo, base) - 1
        if i >= 0 and hi[i] >= end:
            return self._intern(1, (cell[i],) * 64)
        cells = [-1] * 64
        j = max(i, 0)
        while j < len(lo) and lo[j] <= end:
            s, e = max(lo[j], base), min(hi[j], end)
            if s <= e:
                cells[s - base:e - base + 1] = [cell[j]] * (e - s + 1)
            j += 1
        return self._intern(1, tuple(cells))

    def lead(self, b: int):
        """('cell', c) for ASCII, ('node', nid, L) for a multi-byte lead, None if invalid."""
        if b < 0x80:
            return ("cell", self.alpha.cell_of(b), 1)
        if 0xC2 <= b <= 0xDF:
            return ("node", self.leaf((b & 0x1F) << 6), 2)
        if 0xE0 <= b <= 0xEF:
            ch = []
            for c1 in range(0x80, 0xC0):
                if (b == 0xE0 and c1 < 0xA0) or (b == 0xED and c1 >= 0xA0):
                    ch.append(-1)
                else:
                    ch.append(self.leaf(((b & 0x0F) << 12) | ((c1 & 0x3F) << 6)))
            return ("node", self._intern(2, tuple(ch)), 3)
        if 0xF0 <= b <= 0xF4:
            ch1 = []
            for c1 in range(0x80, 0xC0):
                if (b == 0xF0 and c1 < 0x90) or (b == 0xF4 and c1 >= 0x90):
                    ch1.append(-1)
                    continue
                base1 = ((b & 0x07) << 18) | ((c1 & 0x3F) << 12)
                ch2 = tuple(self.leaf(base1 | ((c2 & 0x3F) << 6)) for c2 in range(0x80, 0xC0))
                ch1.append(self._intern(2, ch2))
            return ("node", self._intern(3, tuple(ch1)), 4)
        return None


@dataclass
class ByteDFA:
    """A byte-level leftmost-first DFA.  State 0 is dead, `start` is 1.

    trans   uint32 [n_states, n_classes]   next state per (state, class)
    classes uint8  [256]                   byte -> class; class n_classes-1 is EOI
    accept  uint8  [n_states]              0: not accepting; 1+g: accepting, the match ends g
                                           bytes before the current position (lookahead give-back)
    """

    trans: np.ndarray
    classes: np.ndarray
    accept: np.ndarray
    start: int = 1

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.trans.shape[1])

    @property
    def eoi_class(self) -> int:
        return self.n_classes - 1


def lower_to_bytes(d: CellDFA, alpha: Alphabet, max_states: int = DEFAULT_MAX_BYTE_STATES) -> tuple[np.ndarray, np.ndarray]:
    """Byte transition table [n, 257] (column 256 = EOI) and accept codes (0 / 1+giveback)."""
    trie = _Trie(alpha)
    leads = [trie.lead(b) for b in range(256)]
    eoi = alpha.eoi
    rows: list = [[0] * 257]
    accs: list[int] = [0]
    row_ids: dict = {}
    top: dict[tuple[int, int], int] = {}
    pending: list[tuple[int, int]] = []  # (byte state, cell state) whose row must be filled

    def new_state(row, acc) -> int:
        if len(rows) >= max_states:
            raise DFASizeError(f"regex byte DFA exceeds {max_states} states; simplify the pattern or raise "
                               "max_byte_states")
        rows.append(row)
        accs.append(acc)
        return len(rows) - 1

    def top_id(t: int, L: int) -> int:
        if t == 0:
            return 0
        a = d.acc[t]
        gb = L if a == ACC_LA else 0
        key = (t, gb)
        sid = top.get(key)
        if sid is None:
            code = 0 if a == ACC_NONE else 1 + gb
            sid = new_state(None, code)
            top[key] = sid
            pending.append((sid, t))
        return sid

    memo: dict = {}

    def resolve(nid: int, S: int, L: int) -> int:
        k, children = trie.nodes[nid]
        tr = d.trans[S]
        key = (nid, L, tuple(tr[c] for c in trie.cells_in[nid]))
        sid = memo.get(key)
        if sid is not None:
            return sid
        row = [0] * 257
        if k == 1:
            for j, c in enumerate(children):
                if c >= 0:
                    row[0x80 + j] = top_id(tr[c], L)
        else:
            for j, ch in enumerate(children):
                if ch >= 0:
                    row[0x80 + j] = resolve(ch, S, L)
        rk = tuple(row)
        sid = row_ids.get(rk)
        if sid is None:
            sid = new_state(row, 0)
            row_ids[rk] = sid
        memo[key] = sid
        return sid

    start = top_id(d.start, 0)
    while pending:
        sid, S = pending.pop()
        tr = d.trans[S]
        row = [0] * 257
        for b in range(256):
            ld = leads[b]
            if ld is None:
                continue
            if ld[0] == "cell":
                if ld[1] >= 0:
                    row[b] = top_id(tr[ld[1]], 1)
            else:
                row[b] = resolve(ld[1], S, ld[2])
        row[256] = top_id(tr[eoi], 0)
        rows[sid] = row
    trans = np.array(rows, dtype=np.int64)
    acc = np.array(accs, dtype=np.int64)
    assert start == 1
    return trans, acc


def minimize(trans: np.ndarray, acc: np.ndarray, start: int = 1) -> ByteDFA:
    block = _moore(trans, acc)
    if block[start] == block[0]:
        raise RegexUnsupported("regex not supported: the pattern can never match")
    reps, new_trans = _renumber(block, trans, start, 0)
    new_acc = acc[reps]
    # byte classes: identical columns among the 256 byte columns; EOI is its own (last) class
    cols = new_trans[:, :256].T  # [256, n]
    _, first_idx, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    # number classes in order of first byte for readability
    order = np.argsort(first_idx)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    classes = rank[inv].astype(np.uint8) if len(order) <= 255 else None
    if classes is None:
        raise DFASizeError("more than 255 byte classes")
    n_bc = len(order)
    tbl = np.zeros((new_trans.shape[0], n_bc + 1), dtype=np.uint32)
    for b in range(256):
        tbl[:, classes[b]] = new_trans[:, b]
    tbl[:, n_bc] = new_trans[:, 256]
    return ByteDFA(tbl, classes, new_acc.astype(np.uint8), 1)


def add_restart_states(bd: ByteDFA) -> tuple[ByteDFA, int]:
    """Boundary states with no give-back only (`add_boundary_states(bd, 0)`): (dfa, K)."""
    out, k, _ = add_boundary_states(bd, 0)
    return out, k


DEFAULT_MAX_GIVEBACK = 3  # covers one UTF-8 character read past a match's end (Indic letter + mark)
GIVEBACK_SHIFT = 4  # boundary give-back lives in the accept byte's high nibble


def add_boundary_states(bd: ByteDFA, max_giveback: int = DEFAULT_MAX_GIVEBACK,
                        max_states: int = DEFAULT_MAX_BYTE_STATES) -> tuple[ByteDFA, int, int]:
    """Boundary states for the branch-free bulk spanner (C `fstok_dfa_find_ends` / `find_all`).

    The bulk spanner runs one DFA over the whole text, piece after piece.  A *boundary state* says
    "a piece ended g bytes before the byte just read, and the next piece has read everything since":
    its row is that of the state the next piece is in, its accept byte has the piece's accept code in
    the low nibble and g in the high nibble.

    g = 0 (the common case): an accepting state X (match ending here, no give-back) reads a byte b
    on which it dies; the match ending before b is final and the next one starts at b, so X --b-->
    goes to a boundary copy of start --b--> Y.

    g >= 1: the match cannot be extended but the DFA only learns it some bytes later -- after an
    Indic letter, ` ?\\p{L}+` reads the three bytes of a combining mark before dying on the last one,
    and the piece ended before the mark.  Without help the spanner dies and re-matches the piece
    from its start.  So states carry a *pending restart*: (X, d, Y) means "the last accept (no
    give-back) was d bytes ago, and a piece started there would be in state Y now" (Y is again one
    of these states, so a pending restart of the next piece is tracked too).  When X dies on b and Y
    survives b as an ordinary state, X --b--> goes to a boundary copy of Y's successor with g = d.
    A lookahead accept (`\\s+(?!\\S)` before "return": the match gives back the last space) starts a
    pending restart too: the next piece starts at the character given back, and its state is the start
    state's run over that character, which states near a lookahead accept track as they read it.
    d is bounded by `max_giveback`; beyond it (cl100k's "\\n" + indentation), or when two pieces would
    end on one byte, X just dies as before and the runtime re-matches (correct, slower).

    Renumbers states: 0 dead, 1..G boundary states with g >= 1, G+1..K boundary states with g = 0,
    K+1 start, then the others breadth-first.  States are minimized (Moore, with g as part of the
    label).  If the construction would exceed `max_states` (or 3x the states it starts from), it is
    redone with max_giveback = 0.
    Returns (dfa, K, G)."""
    T = bd.trans.astype(np.int64)
    acc = bd.accept.astype(np.int64)
    n, nc = T.shape
    nbc = nc - 1  # byte classes (the last class is EOI)
    start = int(bd.start)
    START = (start, 0, None, None, 0)  # (D state, d, restart state, start-run over this character, its length)
    memo: dict = {}
    # near[x]: a lookahead (give-back) accept is reachable from x within 3 bytes -- only there is it
    # worth tracking where the next piece would be if the match gave this character back
    near = np.zeros(n, dtype=bool)
    gba = (acc > 1)
    for _ in range(3):
        near = near | gba[T[:, :nbc]].any(axis=1) | near[T[:, :nbc]].any(axis=1)
    near[0] = False

    def normal(r) -> bool:
        return r is not None and r != 0 and r[0] != "B"

    def step(key: tuple, c: int, track: bool = True):
        """Successor of a state key on byte class c: 0 (dead), ("B", g, key) or a state key.
        key = (x, d, y, c1, c1len): D state x; if d > 0, the last accept was d bytes ago and a piece
        started there would be in state y; c1 = the start state's run over the bytes of the current
        character so far (c1len of them), tracked only near lookahead accepts (and not inside c1
        itself: `track` False -- its own lookahead then just dies and re-matches)."""
        mk = (key, c, track)
        r = memo.get(mk)
        if r is not None:
            return r
        x, d, y, c1, c1len = key
        x2 = int(T[x, c])
        if x2:
            c1n, c1ln = None, 0
            if track and max_giveback and (near[x2] or acc[x2] > 1):
                if T[start, c]:  # a character starts here
                    c1n, c1ln = step(START, c, False), 1
                elif c1 is not None:
                    c1n, c1ln = step(c1, c, False), c1len + 1
                if not normal(c1n):
                    c1n, c1ln = None, 0
            a2 = acc[x2]
            nd, ny = 0, None
            if a2 == 1:
                pass  # a new last accept
            elif a2 > 1:  # a lookahead accept: the match gives back this character; a piece would start there
                if c1n is not None and c1ln == a2 - 1 <= max_giveback:
                    nd, ny = a2 - 1, c1n
            elif acc[x] == 1 and max_giveback > 0:  # just left an accept: a restart begins with this byte
                y1 = step(START, c)
                if normal(y1):
                    nd, ny = 1, y1
            elif d and d < max_giveback:
                y2 = step(y, c)
                if normal(y2):
                    nd, ny = d + 1, y2
            keep = near[x2] and c1n is not None
            r = (x2, nd, ny, c1n if keep else None, c1ln if keep else 0)
        else:
            r = 0
            if acc[x] == 1:
                y1 = step(START, c)
                if normal(y1):
                    r = ("B", 0, y1)
            elif d:
                y2 = step(y, c)
                if normal(y2):
                    r = ("B", d, y2)
        memo[mk] = r
        return r

    ids: dict = {0: 0, START: 1}
    order: list = [0, START]
    rows: list = [None, None]
    q = 1
    while q < len(order):
        key = order[q]
        base = key[2] if key[0] == "B" else key
        row = []
        for c in range(nc):
            if c == nbc:  # EOI: only the target's accept code matters
                x2 = int(T[base[0], c])
                r = (x2, 0, None, None, 0) if x2 else 0
            else:
                r = step(base, c)
            if r not in ids:
                ids[r] = len(order)
                order.append(r)
                rows.append(None)
                if max_giveback and len(order) > min(max_states, 3 * n + 1024):
                    return add_boundary_states(bd, 0, max_states)  # too big: no give-back states
            row.append(ids[r])
        rows[q] = row
        q += 1
    N = len(order)
    trans = np.zeros((N, nc), dtype=np.int64)
    label = np.zeros(N, dtype=np.int64)  # acc + 16 * (g + 1) for boundary states
    for k in range(1, N):
        trans[k] = rows[k]
        key = order[k]
        if key[0] == "B":
            label[k] = acc[key[2][0]] + 16 * (key[1] + 1)
        else:
            label[k] = acc[key[0]]
    block = _moore(trans, label)
    n_blocks = int(block.max()) + 1
    rep = np.full(n_blocks, -1, dtype=np.int64)
    for s_ in range(N - 1, -1, -1):
        rep[block[s_]] = s_
    qtrans = block[trans[rep]]
    qlabel = label[rep]
    # numbering: dead, boundary g >= 1, boundary g = 0, start, the rest breadth-first from start
    dead_b, start_b = int(block[0]), int(block[1])
    gb = sorted((b for b in range(n_blocks) if qlabel[b] >= 32), key=lambda b: (qlabel[b] >> 4, b))
    g0 = [b for b in range(n_blocks) if 16 <= qlabel[b] < 32]
    new_order, remap = _bfs_number(qtrans, [dead_b] + gb + g0 + [start_b], [start_b] + gb + g0)
    arr = np.array(new_order, dtype=np.int64)
    new_trans = remap[qtrans[arr]]
    new_acc = np.array([(qlabel[b] & 15) | ((max(0, (qlabel[b] >> 4) - 1)) << GIVEBACK_SHIFT) if qlabel[b] >= 16
                        else qlabel[b] for b in new_order], dtype=np.int64)
    K, G = len(gb) + len(g0), len(gb)
    return ByteDFA(new_trans.astype(np.uint32), bd.classes, new_acc.astype(np.uint8), K + 1), K, G


def compile_dfa(nfa: NFA, max_cell_states: int = DEFAULT_MAX_CELL_STATES,
                max_byte_states: int = DEFAULT_MAX_BYTE_STATES,
                max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> ByteDFA:
    cd = minimize_cells(determinize(nfa, max_cell_states))
    trans, acc = lower_to_bytes(cd, nfa.alphabet, max_byte_states)
    bd = minimize(trans, acc)
    nbytes = bd.n_states * _stride(bd.n_classes) * 4
    if nbytes > max_table_bytes:
        raise DFASizeError(f"regex DFA table would take {nbytes} bytes (limit {max_table_bytes})")
    return bd


def _stride(n_classes: int) -> int:
    s = 1
    while s < n_classes:
        s <<= 1
    return s


# ------------------------------------------------------------------ reference search (Python)
def reference_match(d: ByteDFA, data: bytes, pos: int, n_boundary: int = 0) -> int:
    """End of the leftmost-first match anchored at `pos`, or -1.  States 0..n_boundary end
    the search (dead and boundary states, see `add_restart_states`)."""
    trans, classes, accept = d.trans, d.classes, d.accept
    st = d.start
    last = -1
    n = len(data)
    i = pos
    while i < n:
        st = int(trans[st, classes[data[i]]])
        i += 1
        if st <= n_boundary:
            return last
        a = int(accept[st])
        if a:
            last = i - (a - 1)
    st = int(trans[st, d.eoi_class])
    if st and accept[st]:
        last = n - (int(accept[st]) - 1)
    return last
