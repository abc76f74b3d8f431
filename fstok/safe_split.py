"""Proven split points of a compiled pre-tokenizer ("safe split" for BPE).

A character position p of a text T = L + R (p = len(L), c = the character before p, d = the one
at p) is a *proven boundary* of a compiled pattern when the pieces of T are exactly the pieces of
L followed by the pieces of R shifted by p -- for every possible L ending in c and R starting with
d.  Then a long text cut at proven boundaries can be pre-tokenized (and BPE-encoded) piece by
piece, with no overlap work.  This module decides it for every pair (c, d) from the DFA tables
alone (the same tables C runs), at load time, into a small table over character classes.

The search (C `fstok_dfa_find_all`, Python `DFATables.next_span`) is a sequence of anchored
*attempts*: an attempt at q runs the DFA from the start state over T[q:], remembers the last
accept (an accept code 1 + g puts the match end g bytes back: the one-character lookahead of
`\\s+(?!\\S)`), stops at the dead state -- or at a boundary state, which for an anchored match is
dead too (see `add_restart_states`) -- and at the end of the text takes the EOI transition once.
A match [q, e) continues with an attempt at e; a failed attempt with the next position the start
state does not die on.  Nothing in an attempt looks behind q (the pattern language has no `^`,
lookbehind or `\\b`: the parser refuses them), so the attempts at q >= p see only R.

Let S be the states an attempt can be in at a character boundary (the closure of {start} under
whole characters), t = the state after reading c from s in S, u = after reading d from t.
Condition on (c, d), for every s in S with t alive:
  (L)  the attempt run on L (EOI after c) ends its match at p:  t accepts with give-back 0, or
       the EOI transition from t accepts (an EOI accept always ends at the end of the text);
  (T)  the same attempt run on T ends its match at p: an accept at p (t accepts with give-back 0,
       or u accepts giving back exactly d), and no accept can come later: u is dead, or u
       accepts nothing beyond p and no accepting state (nor EOI accept) is reachable from u.
Attempts whose state dies before p or on c's bytes read the same bytes in T and in L and end
before p.  So every attempt at q < p returns the same result in T and in L, and none covers p:
the attempt sequence of T is that of L (which stops at p), followed by attempts at positions
>= p, which are those of R (same bytes, same end of text; a failed attempt's skip to the next
candidate also reads only R).  Hence find-mode pieces split exactly at p.  Split mode (HF
`Split(Isolated)`: the gaps between matches are pieces too) additionally needs a piece to
*start* at p, otherwise a gap could span p: require that the attempt at p -- which happens,
since no match covers p and the start state does not die on d -- matches d alone with
give-back 0 (so it succeeds in every context).  Later split levels work inside level-0 pieces,
so level 0 alone decides.

Character classes: two code points are equivalent when they move every DFA state to the same
state (the DFA cannot tell them apart), computed from the byte classes of their UTF-8 bytes.
The table has one row and column per class, plus a class for surrogates (never a boundary: a
surrogate pair is one character for tiktoken's repair, a lone one becomes U+FFFD).
"""
from __future__ import annotations

import hashlib
import os
import threading
from typing import Optional

import numpy as np

MAX_CP = 0x110000
NEVER_LABEL = "surrogate"


def _char_vectors(v: "DFAView"):
    """For every code point: the id of its *state vector* (the state each live non-boundary state
    goes to on the character's UTF-8 bytes), built level by level over UTF-8 prefixes with the
    vectors deduplicated; -1 for surrogates.  Returns (vid per code point [0x110000], vectors,
    UTF-8 length per code point)."""
    S = np.arange(v.nb + 1, v.n)
    vecs: list = [S]
    ids: dict = {S.tobytes(): 0}

    def vec_id(w: np.ndarray) -> int:
        k = w.tobytes()
        i = ids.get(k)
        if i is None:
            i = len(vecs)
            ids[k] = i
            vecs.append(w)
        return i

    def extend(vid: np.ndarray, bytes_: np.ndarray) -> np.ndarray:
        """vid [...] x bytes [k] -> vid of prefix + byte, shape [..., k]."""
        uv, vinv = np.unique(vid, return_inverse=True)
        bc = v.classes[bytes_]
        uc, cinv = np.unique(bc, return_inverse=True)
        tab = np.empty((len(uv), len(uc)), dtype=np.int64)
        for a, x in enumerate(uv):
            vx = vecs[int(x)]
            for b, c in enumerate(uc):
                tab[a, b] = vec_id(v.step[vx, int(c)])
        return tab[vinv.reshape(vid.shape)[..., None], cinv.reshape(-1)]

    cp_vid = np.full(MAX_CP, -1, dtype=np.int64)
    cp_len = np.zeros(MAX_CP, dtype=np.int64)
    zero = np.zeros((), dtype=np.int64)
    cont = np.arange(0x80, 0xC0)
    c6 = cont & 0x3F
    # 1 byte
    cp_vid[:0x80] = extend(zero, np.arange(0x80))
    cp_len[:0x80] = 1
    # 2 bytes: C2..DF
    leads = np.arange(0xC2, 0xE0)
    v1 = extend(zero, leads)  # [30]
    v2 = extend(v1, cont)  # [30, 64]
    cps = ((leads & 0x1F)[:, None] << 6) | c6[None, :]
    cp_vid[cps] = v2
    cp_len[cps] = 2
    # 3 bytes: E0..EF (E0: second byte >= A0; ED: second byte < A0, no surrogates)
    leads = np.arange(0xE0, 0xF0)
    v1 = extend(zero, leads)
    v2 = extend(v1, cont)  # [16, 64]
    v3 = extend(v2, cont)  # [16, 64, 64]
    cps = ((leads & 0x0F)[:, None, None] << 12) | (c6[None, :, None] << 6) | c6[None, None, :]
    valid = np.ones(cps.shape, dtype=bool)
    valid[0, :0x20] = False
    valid[0xD, 0x20:] = False
    cp_vid[cps[valid]] = v3[valid]
    cp_len[cps[valid]] = 3
    # 4 bytes: F0..F4 (F0: second byte >= 90; F4: second byte < 90)
    leads = np.arange(0xF0, 0xF5)
    v1 = extend(zero, leads)
    v2 = extend(v1, cont)
    v3 = extend(v2, cont)
    v4 = extend(v3, cont)  # [5, 64, 64, 64]
    cps = (((leads & 0x07)[:, None, None, None] << 18) | (c6[None, :, None, None] << 12)
           | (c6[None, None, :, None] << 6) | c6[None, None, None, :])
    valid = np.ones(cps.shape, dtype=bool)
    valid[0, :0x10] = False
    valid[4, 0x10:] = False
    cp_vid[cps[valid]] = v4[valid]
    cp_len[cps[valid]] = 4
    return cp_vid, vecs, cp_len


class DFAView:
    """The anchored-match semantics of runtime tables (fstok.pretokenize.DFATables), by state index:
    `step[s, byte class]` with boundary states folded into the dead state 0, `eoi[s]`, `acc[s]`."""

    def __init__(self, tables):
        m = tables.matrix()  # [n_states, n_classes] state indices, last column = EOI
        nb = int(tables.n_boundary)
        step = m[:, :-1].copy()
        step[(step >= 1) & (step <= nb)] = 0  # a boundary state ends an anchored match
        self.step = step
        self.eoi = m[:, -1].copy()
        self.acc = np.asarray(tables.accept, dtype=np.int64) & 15  # high nibble: boundary give-back (folded above)
        self.classes = np.asarray(tables.classes, dtype=np.int64)
        self.start = int(tables.start) >> int(tables.shift)
        self.nb = nb
        self.n = m.shape[0]

    def future_accept(self) -> np.ndarray:
        """fut[s]: an accepting state (or an accepting EOI transition) is reachable from s in >= 1 step."""
        acc_eoi = self.acc[self.eoi] > 0
        nxt_acc = (self.acc[self.step] > 0).any(axis=1)
        fut = acc_eoi | nxt_acc
        fut[0] = False
        while True:
            new = fut | fut[self.step].any(axis=1)
            new[0] = False
            if np.array_equal(new, fut):
                return fut
            fut = new


class BoundaryTable:
    """Proven-boundary table of one compiled DFA (see the module docstring).

    cp_class  uint16 [0x110000]  code point -> character class (the last class = surrogates)
    ok        bool [K, K]        ok[class(c), class(d)]: a boundary between c and d in every context
    maps      int64 [K-1, n]     state after reading a character of each class (by state index)
    """

    def __init__(self, tables, mode: str = "find"):
        if mode not in ("find", "split"):
            raise ValueError(f"mode must be 'find' or 'split', got {mode!r}")
        self.mode = mode
        v = DFAView(tables)
        self.view = v
        cp_vid, vecs, cp_len = _char_vectors(v)
        # character classes: distinct final vectors (every live state's successor after the character)
        scalar = cp_vid >= 0
        used = np.unique(cp_vid[scalar])
        K = len(used)
        renum = np.full(len(vecs), -1, dtype=np.int64)
        renum[used] = np.arange(K)
        cp_class = np.full(MAX_CP, K, dtype=np.uint16)
        cls_of_cp = renum[cp_vid[scalar]]
        cp_class[scalar] = cls_of_cp
        S = np.arange(v.nb + 1, v.n)
        cmaps = np.zeros((K, v.n), dtype=np.int64)
        cmaps[:, S] = np.stack([vecs[i] for i in used])
        self.cp_class = cp_class
        self.maps = cmaps
        self.n_classes = K + 1
        # byte length of the characters of each class (-1 when mixed)
        lens = cp_len[scalar]
        lens_of = np.full(K, -1, dtype=np.int64)
        for L in (1, 2, 3, 4):
            present = np.bincount(cls_of_cp[lens == L], minlength=K) > 0
            lens_of = np.where(present & (lens_of == -1), L, np.where(present & (lens_of != L), -2, lens_of))
        lens_of[lens_of == -2] = -1
        self.class_len = lens_of
        # states an attempt can be in at a character boundary (for reports; the proof uses all of S:
        # from a state inside a character, a character's lead byte goes to the dead state)
        seen = np.zeros(v.n, dtype=bool)
        seen[v.start] = True
        frontier = np.array([v.start])
        while len(frontier):
            nxt = np.unique(cmaps[:, frontier])
            nxt = nxt[(nxt != 0) & ~seen[nxt]]
            seen[nxt] = True
            frontier = nxt
        self.reachable = np.flatnonzero(seen)
        self.ok = np.zeros((K + 1, K + 1), dtype=bool)
        self.ok[:K, :K] = self._prove(v, cmaps, S, lens_of, mode)

    @staticmethod
    def _prove(v: DFAView, cmaps: np.ndarray, S: np.ndarray, class_len: np.ndarray, mode: str) -> np.ndarray:
        K = len(cmaps)
        acc, eoi = v.acc, v.eoi
        fut = v.future_accept()
        t = cmaps[:, S]  # [K(c), m]
        alive = t != 0
        acc_t0 = acc[t] == 1  # accepts at p, no give-back
        ok_L = acc_t0 | (acc[eoi[t]] > 0)
        ok = np.ones((K, K), dtype=bool)
        for j in range(K):  # d's class
            u = cmaps[j][t]  # [K, m]
            la = (acc[u] > 1) & (acc[u] - 1 == class_len[j]) & (class_len[j] > 0)
            at_p = acc_t0 | ((u != 0) & la)
            later_none = (u == 0) | (((acc[u] == 0) | la) & ~fut[u])
            good = ~alive | (ok_L & at_p & later_none)
            ok[:, j] = good.all(axis=1)
        if mode == "split":
            v0 = cmaps[:, v.start]
            d_alone = acc[v0] == 1
            ok &= d_alone[None, :]
        return ok

    # ------------------------------------------------------------------------------ queries
    def classes_of(self, text: str) -> np.ndarray:
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        return self.cp_class[cps]

    def positions(self, text: str, lo: int = 1, hi: Optional[int] = None) -> np.ndarray:
        """Proven boundaries p with lo <= p < hi (character offsets; 0 < p < len(text))."""
        n = len(text)
        hi = n if hi is None else min(hi, n)
        lo = max(lo, 1)
        if hi <= lo:
            return np.zeros(0, dtype=np.int64)
        c = self.classes_of(text[lo - 1:hi + 1] if hi < n else text[lo - 1:])
        ok = self.ok[c[:-1], c[1:]]
        ok = ok[: hi - lo]
        return np.flatnonzero(ok) + lo

    def is_boundary(self, text: str, p: int) -> bool:
        if not 0 < p < len(text):
            return False
        return bool(self.ok[self.cp_class[ord(text[p - 1])], self.cp_class[ord(text[p])]])

    def count_pairs(self) -> int:
        return int(self.ok.sum())


_cache: dict = {}
_cache_lock = threading.Lock()


def boundary_table(tables, mode: str = "find") -> BoundaryTable:
    """The proven-boundary table of one level's DFA tables, cached by table content (the tables of a
    BPE artifact and of fstok.pretokenize's pattern cache share one table)."""
    bt = tables.__dict__.get("_fstok_boundary_" + mode)
    if bt is not None:
        return bt
    h = hashlib.sha1()
    for a in (tables.trans, tables.classes, tables.accept):
        h.update(np.ascontiguousarray(a).view(np.uint8).data)
    key = (h.hexdigest(), int(tables.n_boundary), int(tables.start), int(tables.shift), mode)
    with _cache_lock:
        bt = _cache.get(key)
    if bt is None:
        bt = _disk_load(key)
        if bt is None:
            bt = BoundaryTable(tables, mode)
            _disk_store(key, bt)
        with _cache_lock:
            bt = _cache.setdefault(key, bt)
    tables.__dict__["_fstok_boundary_" + mode] = bt
    return bt


# ------------------------------------------------------------------------------ disk cache
# Building a table takes 0.3-0.5 s (numpy over every code point and DFA state); a process that encodes
# one long text with num_threads would pay it each time.  Tables are cached next to the compiled
# encodings, keyed by the DFA's content and by this module's source (a changed proof never reuses old
# tables), and validated on load; any problem means "recompute".
def _disk_path(key) -> Optional[str]:
    try:
        from ._cache import cache_dir

        with open(__file__, "rb") as f:
            src = hashlib.sha1(f.read()).hexdigest()[:16]
        name = hashlib.sha1(repr((key, src)).encode()).hexdigest()[:32]
        return os.path.join(cache_dir(), f"boundary-{name}.npz")
    except Exception:  # noqa: BLE001 - no cache dir: no disk cache
        return None


def _disk_load(key) -> Optional["BoundaryTable"]:
    path = _disk_path(key)
    if not path or not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            cp_class, ok = z["cp_class"], z["ok"]
            mode = str(z["mode"])
            K1 = ok.shape[0]
            if (cp_class.dtype != np.uint16 or cp_class.shape != (MAX_CP,) or ok.dtype != bool
                    or ok.shape != (K1, K1) or int(cp_class.max()) >= K1 or mode != key[-1]):
                return None
            bt = BoundaryTable.__new__(BoundaryTable)
            bt.mode, bt.cp_class, bt.ok, bt.n_classes = mode, cp_class, ok, K1
            bt.maps, bt.class_len, bt.reachable = z["maps"], z["class_len"], z["reachable"]
            bt.view = None  # (only the construction needs the DFA view)
            return bt
    except Exception:  # noqa: BLE001 - unreadable or foreign file: recompute
        return None


def _disk_store(key, bt: "BoundaryTable") -> None:
    path = _disk_path(key)
    if not path:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
        with open(tmp, "wb") as f:
            np.savez_compressed(f, cp_class=bt.cp_class, ok=bt.ok, mode=np.array(bt.mode), maps=bt.maps,
                                class_len=bt.class_len, reachable=bt.reachable)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - read-only cache dir: keep it in memory only
        pass
