"""Proof that a regex DFA from an artifact cannot make the C scanners loop, write out of bounds or
return a piece that ends before it starts.

`fstok.pretokenize.validate_tables` checks the tables' shapes and that every index is in range.  This
module proves the one property the scanners in `runtime/csrc/lib_dfa.c` need beyond that: **every
piece end is strictly after the previous one**.  The scanners rely on it in three places:

* `fstok_dfa_find_ends` / `dual_window` size their output as "at most one piece end per byte";
  an end that does not move forward writes past the buffer (heap corruption);
* every loop over a text advances to the last piece end; an end that does not move forward never
  finishes (a hang at constant memory in BPE, unbounded growth of the span list in `spans()`);
* a give-back boundary state moves the end it just wrote `g` bytes back; further back than the
  start of the piece gives backward spans.

Model.  A scan is in some state `s` with `L` bytes of the current piece read (L = 0 only at the
piece start, in the start state).  Reading one byte into

* an ordinary state: L + 1;
* a boundary state (1..n_boundary): the piece ended `g` bytes before that byte (g = accept >> 4,
  0 for a plain boundary state); the ended piece is non-empty only if g < L, and the new piece
  has read g + 1 bytes;
* the dead state: the scanner re-matches the piece from its start with the anchored match,
  which reports `i - (a - 1)` after reading up to byte i into a state whose accept code is a
  (low nibble); the match is non-empty only if a <= the number of bytes read.

The end-of-input class (read at the end of the text, no byte) reports `n - (a - 1)` with the same
condition on the bytes read so far (at least one: the scanners never take it at a piece start), where
`a` is the target's whole accept byte: the scanners do not mask it there, so a give-back state reached
at the end of the text would move the end back by 15 bytes or more.

So with Lmin(s) = the fewest bytes of a piece read on arriving in s (over every path a scan can
take, boundary states included), the tables are safe when for every transition s -> t on a byte:
boundary t needs g(t) + 1 <= Lmin(s); t's accept code a(t) needs a(t) <= Lmin after the step; and
the EOI target e of s needs its whole accept byte <= max(Lmin(s), 1).  Every constraint is at most 16 (g <= 15,
a <= 5), so Lmin is computed exactly only below 16: a breadth-first search of at most 16 levels
from the start state (0) and from every boundary state (g + 1; counted as reachable, which only
makes the check stricter), cost O(states x classes).  With these, each scanner step that emits a
piece end emits one past the last: the end of every scanning loop and the buffer bounds follow.
"""
from __future__ import annotations

import numpy as np

from .artifact import ArtifactError

GIVEBACK_SHIFT = 4
_CAP = 16  # no constraint needs more bytes than this (g + 1 <= 16)


def prove_progress(t, where: str) -> None:
    """Raise ArtifactError (naming the section and element) unless every piece end of a scan with
    the DFA tables `t` (a `fstok.pretokenize.DFATables`, already range-checked) moves forward."""
    n, sh = int(t.n_states), int(t.shift)
    stride = 1 << sh
    nb = int(t.n_boundary)
    T = np.asarray(t.trans).reshape(n, stride)
    cols = np.unique(np.asarray(t.classes)).astype(np.intp)  # the columns a byte can select
    tb = T[:, cols] >> np.uint32(sh)                         # [n, k] target state indices
    acc = np.asarray(t.accept)
    low = (acc & 15).astype(np.int32)
    g = (acc >> GIVEBACK_SHIFT).astype(np.int32)
    bnd = np.zeros(n, dtype=bool)
    bnd[1:nb + 1] = True
    # dist: Lmin on arriving in a state; min_in: the least Lmin of a state with a byte edge into it
    # (both exact below _CAP, and >= _CAP otherwise: no constraint can fail there)
    dist = np.full(n, _CAP, dtype=np.int32)
    dist[1:nb + 1] = g[1:nb + 1] + 1
    start = int(t.start) >> sh
    dist[start] = 0
    min_in = np.full(n, _CAP, dtype=np.int32)
    for d in range(_CAP):
        fr = np.nonzero(dist == d)[0]
        if not fr.size:
            continue
        seen = np.zeros(n, dtype=bool)
        seen[tb[fr].ravel()] = True
        tg = np.nonzero(seen)[0]
        tg = tg[min_in[tg] > d]
        min_in[tg] = d  # levels rise: the first level that reaches a state is its least
        tg = tg[(tg > nb) & (dist[tg] > d + 1)]
        dist[tg] = d + 1

    def edge_into(tt: int) -> str:
        s = int(np.nonzero((dist == min_in[tt]) & (tb == tt).any(axis=1))[0][0])
        c = int(cols[int(np.nonzero(tb[s] == tt)[0][0])])
        return f"state {s} on class {c} ({where}.trans[{s * stride + c}]), after {int(min_in[tt])} byte(s) of a piece"

    bad = np.nonzero(bnd & (g + 1 > min_in))[0]
    if bad.size:
        tt = int(bad[0])
        raise ArtifactError(
            f"{where}.accept[{tt}]: boundary state {tt} ends the piece {int(g[tt])} byte(s) before the byte just "
            f"read, but it is reached from {edge_into(tt)}: the piece would end at or before its start")
    bad = np.nonzero(np.where(bnd, low > g + 1, (low > min_in + 1) & (min_in < _CAP)))[0]
    if bad.size:
        tt = int(bad[0])
        how = (f"a boundary state starts its piece with {int(g[tt]) + 1} byte(s) read" if bnd[tt]
               else f"it is reached from {edge_into(tt)}")
        raise ArtifactError(
            f"{where}.accept[{tt}]: accept code {int(low[tt])} gives back {int(low[tt]) - 1} byte(s), but {how}: "
            "the match would be empty or end before it starts")
    # the end-of-input step reads the target's whole accept byte (a give-back state's high nibble too)
    # and reports n - (a - 1): every state counts here, a reachable one with its Lmin, any other with 1
    eoi = int(t.eoi)
    te = T[:, eoi] >> np.uint32(sh)
    whole = acc.astype(np.int32)
    bad = np.nonzero((te != 0) & (whole[te] > np.maximum(dist, 1)))[0]
    if bad.size:
        s, e = int(bad[0]), int(te[bad[0]])
        raise ArtifactError(
            f"{where}.accept[{e}]: accept byte {int(whole[e]):#x} of the end-of-input target of state {s} "
            f"({where}.trans[{s * stride + eoi}]) gives back {int(whole[e]) - 1} byte(s), but state {s} is reached "
            f"after only {max(int(dist[s]), 1)} byte(s) of a piece")


def check_tables(t, where: str) -> None:
    """Every index the C spanner follows in range, then `prove_progress`.  `where` is "<file>: dfa.<i>";
    errors name the section and element, e.g. "x.fst: dfa.0.trans[1234]: ..."."""
    err = ArtifactError
    info = f"{where}.info"
    if not 0 <= t.shift <= 9:
        raise err(f"{info}[3]: row stride 2^{t.shift} is not 2^0..2^9")
    stride = 1 << t.shift
    if t.n_states < 2 or t.n_states > (1 << 32) // stride - 1:
        raise err(f"{info}[1]: state count {t.n_states} is not in [2, 2^32 / {stride})")
    if not 2 <= t.n_classes <= stride or t.eoi != t.n_classes - 1:
        raise err(f"{info}[5]: class count {t.n_classes} / end-of-input class {t.eoi} do not fit the row stride {stride}")
    if t.trans.dtype != np.uint32 or t.trans.size != t.n_states * stride:
        raise err(f"{where}.trans: has {t.trans.size} {t.trans.dtype} entries, expected {t.n_states * stride} uint32 "
                  f"({info}: {t.n_states} states x {stride})")
    if t.classes.dtype != np.uint8 or t.classes.size != 256:
        raise err(f"{where}.classes: must have 256 uint8 entries, has {t.classes.size} {t.classes.dtype}")
    if t.accept.dtype != np.uint8 or t.accept.size != t.n_states:
        raise err(f"{where}.accept: has {t.accept.size} entries, expected {t.n_states} ({info}[1])")
    sh = np.uint32(t.shift)
    bad = ((t.trans & np.uint32(stride - 1)) != 0) | ((t.trans >> sh) >= t.n_states)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise err(f"{where}.trans[{k}]: target {int(t.trans[k])} is not a state (row offsets are multiples of {stride} "
                  f"below {t.n_states * stride})")
    if np.any(t.trans[:stride]):
        k = int(np.flatnonzero(t.trans[:stride])[0])
        raise err(f"{where}.trans[{k}]: the dead state 0 must go to itself on every class")
    bad = t.classes >= t.eoi
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise err(f"{where}.classes[{k}]: class {int(t.classes[k])} of byte {k} is not below the end-of-input class {t.eoi}")
    if not 0 <= t.n_boundary < t.n_states - 1:
        raise err(f"{info}[6]: boundary state count {t.n_boundary} is not below {t.n_states - 1}")
    if not 0 <= t.n_giveback <= t.n_boundary:
        raise err(f"{info}[7]: give-back state count {t.n_giveback} is not in [0, {t.n_boundary}]")
    acc = t.accept
    gb = acc >> np.uint8(GIVEBACK_SHIFT)
    bad = (acc & np.uint8(15)) > 5
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise err(f"{where}.accept[{k}]: accept code {int(acc[k]) & 15} is not 0..5")
    if acc[0]:
        raise err(f"{where}.accept[0]: the dead state must not accept")
    ng = t.n_giveback
    bad = np.zeros(t.n_states, dtype=bool)
    bad[1:ng + 1] = gb[1:ng + 1] == 0
    bad[ng + 1:] = gb[ng + 1:] != 0
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise err(f"{where}.accept[{k}]: give-back {int(gb[k])} where states 1..{ng} ({info}[7]) and only they give back")
    if t.start < t.live or t.start % stride or t.start // stride >= t.n_states:
        raise err(f"{info}[4]: start state {t.start} is not an ordinary state (a multiple of {stride} in "
                  f"[{t.live}, {t.n_states * stride}))")
    prove_progress(t, where)


def _native_ok(t, c_check: bool = True) -> bool:
    """The rules of `check_tables` in one C pass where the runtime is built (`fstok_dfa_check`, run when a
    `fstok.runtime._dfa.DFA` is made: ranges, the dead state, accept codes, give-back states and the same
    progress proof), after the info-level facts only Python sees (dtypes, the class count, the give-back
    count the info states).  True when all hold; False: the Python checks give the message."""
    try:
        from .runtime import _dfa
    except ImportError:
        return False
    try:
        stride = 1 << int(t.shift)
        n, ng, nb = int(t.n_states), int(t.n_giveback), int(t.n_boundary)
        acc = t.accept
        if not (0 <= t.shift <= 9 and 2 <= t.n_classes <= stride and t.eoi == t.n_classes - 1
                and t.trans.dtype == np.uint32 and t.classes.dtype == np.uint8 and acc.dtype == np.uint8
                and acc.size == n and 2 <= n and 0 <= nb < n - 1 and 0 <= ng <= nb):
            return False
        # the give-back states are exactly 1..ng (C counts them from the accept bytes)
        if (ng and not acc[ng] >> GIVEBACK_SHIFT) or (ng < nb and acc[ng + 1] >> GIVEBACK_SHIFT):
            return False
        if c_check:  # (False: the caller hands the tables to a C runtime that runs fstok_dfa_check itself)
            _dfa.DFA(t.trans, t.classes, acc, n, int(t.shift), int(t.start), int(t.eoi), nb)
        return True
    except (ValueError, TypeError, OverflowError, BufferError):
        return False


def validate(t, where: str, c_check: bool = True) -> None:
    """`check_tables` by its C pass where it holds (loading an artifact computes no numpy proof); else the
    Python checks, whose errors name the section and element.  c_check=False: the info-level facts only, for a
    caller that hands the tables to a C runtime running the same C pass (fstok_dfa_check) before it reads them,
    and calls `validate` again to name what that pass refuses."""
    if _native_ok(t, c_check):
        return
    check_tables(t, where)
    raise ArtifactError(f"{where}: the tables fail the C runtime's check (fstok_dfa_check)")
