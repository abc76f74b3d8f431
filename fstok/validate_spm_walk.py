"""The pure-Python form of the native check of a SentencePiece-family artifact's stored walking tables
(`spm_ftrie_check` in fstok/runtime/csrc/lib_spm.c, run by the loader before any walk reads them): the
same invariants, in the same order, with the same messages.  The tests hold the two to the same answer on
damaged tables; loading uses the native check only.

The invariants are what the walks and lookups rely on to stay in bounds and to end: one node record per
node of the pieces trie plus one (the label compare reads 16 bytes from a record's `nk`), fewer than 2^31
nodes, piece ids below the vocabulary size, children after their parent (edges lead forward: no walk loops)
and inside the node array, at most 14 inline children with ascending labels, full rows in range, hash tables
(the character table may be absent) of a power-of-two size whose longest run of occupied slots is at most
PROBE_MAX (a lookup ends within PROBE_MAX + 1 reads), and a pair table only on a model that merges by score.
The tables are the only form of the pieces trie an artifact holds: a damaged one gives other ids, never a
read out of bounds or a walk that does not end."""
from __future__ import annotations

import numpy as np

from .artifact import ArtifactError

PROBE_MAX = 512
INLINE = 14
DENSE = 0x80000000
NONE = 0xFFFFFFFF
SMALL = 129
PT_ID_MAX = (1 << 21) - 2
NODE = np.dtype([("id", "<i4"), ("kids", "<u4"), ("score", "<f8"), ("nk", "u1"), ("type", "u1"), ("lab", "u1", (INLINE,))])
assert NODE.itemsize == 32
NAMES = ("ft_nodes", "ft_rows", "ft_pairs", "ft_chars", "ft_ascii", "ft_small")
RECORD = (32, 1024, 8, 8, 4, 8)
ID21 = np.uint64((1 << 21) - 1)


def longest_run(keys: np.ndarray) -> int:
    """The longest run of non-zero keys, counted around the end; len + 1 when none is zero."""
    n = len(keys)
    empty = np.flatnonzero(keys == 0)
    if not len(empty):
        return n + 1
    # runs between consecutive empty slots, the last one joined to the first around the end
    gaps = np.diff(np.concatenate([empty, [empty[0] + n]])) - 1
    return int(gaps.max())


def check(tables, n_pieces: int, wants_pairs: bool) -> str | None:
    """None when the walking tables `tables` (six buffers or None, in NAMES order) are sound for a model of
    `n_pieces` pieces, else "section: what is wrong".
    `wants_pairs`: the model merges by piece score (a .model BPE of at most PT_ID_MAX pieces)."""
    raw = []
    for name, rec, t in zip(NAMES, RECORD, tables):
        b = b"" if t is None else memoryview(t).cast("B")
        if len(b) % rec:
            return f"{name}: its size is not a whole number of records"
        raw.append(np.frombuffer(b, dtype=np.uint8))
    nodes_b, rows_b, pairs_b, chars_b, ascii_b, small_b = raw
    nodes = nodes_b.view(NODE)
    if len(nodes) < 2 or len(nodes) - 1 >= DENSE:
        return "ft_nodes: not between 2 and 2^31 records (the nodes of the pieces trie and one more)"
    n = len(nodes) - 1
    x = nodes[:n]
    rows = rows_b.view("<u4").reshape(-1, 256)
    n_rows = len(rows)
    q = np.arange(n, dtype=np.int64)
    ids = x["id"].astype(np.int64)
    kids = x["kids"].astype(np.int64)
    nk = x["nk"].astype(np.int64)
    dense = (kids & DENSE) != 0
    r = kids & ~DENSE
    # each node's checks in the native order; the first failing node decides the message
    fails = [
        ((ids < -1) | (ids >= n_pieces), "ft_nodes: a piece id is out of range"),
        ((ids < 0) & (x["type"] != 0), "ft_nodes: a node without a piece has a type"),
        (dense & ((nk != 0) | (r >= n_rows)), "ft_nodes: a full row is out of range"),
    ]
    row_bad = np.zeros(n, dtype=bool)
    ok_row = dense & (nk == 0) & (r < n_rows)
    if ok_row.any():
        owners = np.flatnonzero(ok_row)
        sub = rows[r[owners]].astype(np.int64)
        bad = (sub != NONE) & ((sub <= owners[:, None]) | (sub >= n))
        row_bad[owners] = bad.any(axis=1)
    fails.append((row_bad, "ft_rows: a child does not lead to a later node"))
    inl = ~dense
    fails.append((inl & (nk > INLINE), "ft_nodes: a node has more than 14 inline children"))
    fails.append((inl & (nk <= INLINE) & (nk == 0) & (kids != 0), "ft_nodes: a node without children names a first child"))
    fails.append((inl & (nk <= INLINE) & (nk > 0) & ((kids <= q) | (kids + nk > n)),
                  "ft_nodes: a child does not lead to a later node"))
    lab = x["lab"].astype(np.int16)
    pos = np.arange(1, INLINE)[None, :]
    desc = ((lab[:, 1:] <= lab[:, :-1]) & (pos < nk[:, None])).any(axis=1)
    fails.append((inl & (nk <= INLINE) & desc, "ft_nodes: child labels are not strictly ascending"))
    first = n
    for mask, _ in fails:
        hit = np.flatnonzero(mask)
        if len(hit):
            first = min(first, int(hit[0]))
    if first < n:
        for mask, msg in fails:
            if mask[first]:
                return msg
    ascii_ = ascii_b.view("<i4")
    if len(ascii_) != 128:
        return "ft_ascii: not 128 entries"
    if np.any((ascii_ < -2) | (ascii_ >= n_pieces)):
        return "ft_ascii: a piece id is out of range"
    chars = chars_b.view("<u8")
    nc = len(chars)
    if nc:  # absent: symbols walk the trie
        if nc & (nc - 1) or nc > 1 << 40:
            return "ft_chars: the slot count is not a power of two"
        if longest_run(chars) > PROBE_MAX:
            return "ft_chars: a probe run is too long"
        if np.any(((chars >> np.uint64(35)) & np.uint64((1 << 21) - 1)) > n_pieces):
            return "ft_chars: a piece id is out of range"
    pairs = pairs_b.view("<u8")
    if len(pairs):
        npr = len(pairs)
        if not wants_pairs:
            return "ft_pairs: a pair table on a model that merges no pairs by score"
        if npr & (npr - 1) or npr > 1 << 40:
            return "ft_pairs: the slot count is not a power of two"
        if longest_run(pairs) > PROBE_MAX:
            return "ft_pairs: a probe run is too long"
        if np.any((pairs != 0) & (((pairs >> np.uint64(42)) & ID21) >= n_pieces)):
            return "ft_pairs: a piece id is out of range"
    small = small_b.view("<u8")
    if len(small):
        if not len(pairs):
            return "ft_small: a small pair table without the pair table"
        if len(small) != SMALL * SMALL:
            return "ft_small: not 129 x 129 entries"
        c = small & np.uint64((1 << 21) - 1)
        if np.any((small != 0) & ((c == 0) | (c > n_pieces) | ((small >> np.uint64(54)) != 0))):
            return "ft_small: an entry is malformed"
    return None


def wants_pairs(flags: int, is64: bool, n_pieces: int) -> bool:
    """The model merges by piece score through a pair table: a .model BPE (f32 scores) of at most PT_ID_MAX pieces."""
    from .spm_layout import SPF_BPE, SPF_HF

    return bool(flags & SPF_BPE) and not flags & SPF_HF and not is64 and n_pieces <= PT_ID_MAX


MERGE = np.dtype([("key", "<u8"), ("rank", "<u4"), ("new_id", "<i4")])


def check_merges(table, n_pieces: int) -> str | None:
    """The native check of a tokenizer.json BPE's stored merge table (section hf_merges, `spm_hf_merges_check`
    in fstok/runtime/csrc/lib_spm_hf.c): None when it is sound, else "hf_merges: what is wrong".  Lookups
    probe linearly from a hashed slot and end at an empty slot (new id -1): a power-of-two size, new ids -1 or
    below n_pieces, and no run of more than PROBE_MAX occupied slots keep every lookup in bounds and finite."""
    b = memoryview(table).cast("B")
    if len(b) % MERGE.itemsize:
        return "hf_merges: its size is not a whole number of records"
    t = np.frombuffer(b, dtype=MERGE)
    n = len(t)
    if not n or n & (n - 1) or n > 1 << 40:
        return "hf_merges: the slot count is not a power of two"
    nid = t["new_id"].astype(np.int64)
    if np.any((nid < -1) | (nid >= n_pieces)):
        return "hf_merges: a piece id is out of range"
    if longest_run((nid >= 0).astype(np.uint8)) > PROBE_MAX:
        return "hf_merges: a probe run is too long"
    return None
