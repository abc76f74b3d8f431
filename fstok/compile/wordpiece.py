"""WordPiece vocabulary -> LinMaxMatch tables (Fast WordPiece, Song et al. 2021, Sections 3-4).

Builder only: everything here runs once, offline.  The runtime (C, and the pure-Python
reference in fstok/reference/wordpiece.py) only reads the arrays produced here.

Trie over UTF-8 bytes of every vocabulary token ("##"-prefixed suffix tokens hang below
r# = the node of the suffix indicator).  Failure links f(v) and failure pops F(v) by
Algorithm 2 (BFS from r and r#).  Because a byte trie of a 120k vocabulary has ~10^6
(state x byte) pairs per 1k states, a full delta'/sigma' table does not fit; the layout is:

  * every state has one 8-byte record: first edge index | #children | first label | dense row.
    States are numbered in DFS preorder (children in label order), so the first child of u
    is u + 1: the common transition costs one record read, and walking down a word reads
    consecutive records.
  * dense rows: for the D "hub" states (r, r#, and every state with fan-out >= DENSE_FANOUT)
    the FST form of Section 3.6 is stored in full: dense[row*256+b] = delta'(u, b) | sigma'(u, b) << 32.
    One 8-byte read per byte, failure chains resolved offline.
  * other children: sorted labels + targets (CSR); a miss follows f(v), which almost always
    lands on a hub (r# for suffixes), so chains are short.  failpops[u] = f(u) | F(u) << 32.

All pops (F and sigma') live in one flat uint32 pool of token ids; a node or row entry holds
`offset << 8 | length` (0 = no pops).  Lists with no new pops share their parent's slice.

E2E (Section 4): punctuation and whitespace are decided per code point by the normalization
table (fstok/compile/bert_normalize.py), which already has to read every code point; a
punctuation character is run as a one-character word from r, which is exactly the paper's
punctuation node with failure link r_p.  Tokens that contain a boundary character can never
be reached in E2E mode, and they do not change f/F of reachable states, so one trie serves
both single-word and E2E mode.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .. import artifact as art
from ..loaders.bert import WordPieceSource
from ..reference.wordpiece import original_maxmatch
from ..wordpiece_layout import NONE, node_fields  # noqa: F401  (the layout the runtime reads)
from .bert_normalize import BertNormOptions, build_norm_table, facts

FAIL = 0xFFFFFFFF
MAX_POPS = 255
DENSE_FANOUT = 24  # measured trade-off, see docs/design/wordpiece.md ("Size against lookups per byte")


class VocabError(ValueError):
    pass


@dataclass
class TrieBuild:
    children: list[dict[int, int]] = field(default_factory=list)
    token: list[int] = field(default_factory=list)  # token id at node or -1
    depth: list[int] = field(default_factory=list)

    def new_node(self, depth: int) -> int:
        self.children.append({})
        self.token.append(-1)
        self.depth.append(depth)
        return len(self.children) - 1

    def insert(self, key: bytes) -> int:
        u = 0
        for b in key:
            nxt = self.children[u].get(b)
            if nxt is None:
                nxt = self.new_node(self.depth[u] + 1)
                self.children[u][b] = nxt
            u = nxt
        return u


def build_tables(tokens: list[str], token_to_id: dict[str, int], unk_token: str, prefix: str, max_chars: int,
                 dense_fanout: int = DENSE_FANOUT) -> tuple[dict[str, np.ndarray], dict]:
    """Build the trie, failure links/pops and dense rows. Returns (sections, meta)."""
    if unk_token not in token_to_id:
        raise VocabError(f"the unk token {unk_token!r} is not in the vocabulary")
    t = TrieBuild()
    root = t.new_node(0)
    for tok, tid in token_to_id.items():
        if tok == "":
            continue  # the empty string is never a WordPiece match (HF skips it too)
        v = t.insert(tok.encode("utf-8"))
        t.token[v] = tid
    suffix_root = t.insert(prefix.encode("utf-8"))  # == root for an empty prefix
    n = len(t.children)
    fail = [NONE] * n
    pops: list[tuple[int, ...]] = [()] * n
    # Algorithm 2
    queue = deque([root] if suffix_root == root else [root, suffix_root])
    while queue:
        u = queue.popleft()
        for c, v in t.children[u].items():
            if v == suffix_root:
                continue
            if t.token[v] >= 0:
                fail[v], pops[v] = suffix_root, (t.token[v],)
            else:
                z, zpops = fail[u], []
                while z != NONE and c not in t.children[z]:
                    zpops.extend(pops[z])
                    z = fail[z]
                if z != NONE:
                    fail[v] = t.children[z][c]
                    pops[v] = pops[u] + tuple(zpops) if zpops else pops[u]
            queue.append(v)

    # State numbering: DFS preorder with children in label order, so the first child of
    # state u is u + 1 and a walk down the trie reads consecutive records (cache lines).
    order: list[int] = []
    stack = [root]
    while stack:
        u = stack.pop()
        order.append(u)
        for _, v in sorted(t.children[u].items(), reverse=True):
            stack.append(v)
    if len(order) != n:
        raise VocabError("internal error: trie is not connected")
    newid = [0] * n
    for k, u in enumerate(order):
        newid[u] = k
    hubs = [root] + ([suffix_root] if suffix_root != root else [])
    hubset = set(hubs)
    for u in order:
        if u not in hubset and (len(t.children[u]) >= dense_fanout or len(t.children[u]) >= 255):
            hubs.append(u)
            hubset.add(u)
    if len(hubs) >= 0xFFFF:
        raise VocabError(f"{len(hubs)} dense rows exceed the record format (max 65534); raise dense_fanout")
    hub_row = {u: k for k, u in enumerate(hubs)}
    n_dense = len(hubs)

    # Pops pool with slice sharing.
    pool: list[int] = []
    slices: dict[tuple[int, ...], int] = {}

    def pack(p: tuple[int, ...]) -> int:
        if not p:
            return 0
        if len(p) > MAX_POPS:
            raise VocabError(f"a failure-pop list has {len(p)} tokens (max {MAX_POPS}); vocabulary too unusual")
        off = slices.get(p)
        if off is None:
            off = len(pool)
            slices[p] = off
            pool.extend(p)
        if off >= (1 << 24):
            raise VocabError("failure-pop pool exceeds 2^24 entries")
        return (off << 8) | len(p)

    node_rec = np.zeros(n, dtype=np.uint64)
    labels: list[int] = []
    targets: list[int] = []
    fail_arr = np.full(n, NONE, dtype=np.uint32)
    pops_arr = np.zeros(n, dtype=np.uint32)
    # depth in bytes below r or r# (the paper's depth, excluding the suffix indicator): it strictly
    # decreases along every failure link, which the loader checks in one vectorized pass, so a
    # corrupted file can never make the runtime loop forever.
    sroot_depth = t.depth[suffix_root]
    depth_arr = np.zeros(n, dtype=np.uint16)
    in_suffix = bytearray(n)
    for u in order:  # preorder: parents before children
        for _, v in t.children[u].items():
            in_suffix[v] = in_suffix[u] or v == suffix_root
    for k, u in enumerate(order):
        d = t.depth[u] - (sroot_depth if in_suffix[u] and suffix_root != root else 0)
        if d > 0xFFFF:
            raise VocabError("a token is longer than 65535 bytes")
        depth_arr[k] = d
        kids = sorted(t.children[u].items())
        es = len(labels)
        for c, v in kids:
            labels.append(c)
            targets.append(newid[v])
        first = kids[0][0] if kids else 0
        row = hub_row.get(u, 0xFFFF)
        node_rec[k] = es | (min(len(kids), 255) << 32) | (first << 40) | (row << 48)
        fail_arr[k] = NONE if fail[u] == NONE else newid[fail[u]]
        pops_arr[k] = pack(pops[u])

    dense_target = np.full(n_dense * 256, FAIL, dtype=np.uint32)
    dense_pops = np.zeros(n_dense * 256, dtype=np.uint32)
    for k, u in enumerate(hubs):
        for b in range(256):
            z, acc = u, []
            while z != NONE and b not in t.children[z]:
                acc.extend(pops[z])
                z = fail[z]
            if z != NONE:
                dense_target[k * 256 + b] = newid[t.children[z][b]]
                dense_pops[k * 256 + b] = pack(tuple(acc))

    sections = {
        "wp.node": node_rec,
        "wp.edge_label": np.array(labels, dtype=np.uint8),
        "wp.edge_target": np.array(targets, dtype=np.uint32),
        # f(v) and F(v) side by side (one cache line read on a failure step)
        "wp.failpops": fail_arr.astype(np.uint64) | (pops_arr.astype(np.uint64) << np.uint64(32)),
        "wp.depth": depth_arr,
        "wp.pool": np.array(pool if pool else [0], dtype=np.uint32),
        # delta' and sigma' side by side (one read per hub transition)
        "wp.dense": dense_target.astype(np.uint64) | (dense_pops.astype(np.uint64) << np.uint64(32)),
    }
    suffix_word = [token_to_id[s] for s in original_maxmatch(prefix, token_to_id, unk_token, prefix, max_chars)] if prefix else []
    meta = {
        "n_nodes": n,
        "n_dense": n_dense,
        "root": newid[root],
        "suffix_root": newid[suffix_root],
        "suffix_word": suffix_word,
        "dense_fanout": dense_fanout,
    }
    return sections, meta


def compile_source(src: WordPieceSource, name: Optional[str] = None) -> art.Artifact:
    """The validated WordPiece artifact of a loaded vocabulary (tables, normalization table, vocabulary, meta)."""
    opts = BertNormOptions(src.clean_text, src.handle_chinese_chars, src.strip, src.lowercase)
    sections, tmeta = build_tables(src.tokens, src.token_to_id, src.unk_token, src.continuing_subword_prefix,
                                   src.max_input_chars_per_word)
    sections.update(build_norm_table(opts))
    enc = [t.encode("utf-8") for t in src.tokens]
    offs = np.zeros(len(enc) + 1, dtype=np.uint32)
    offs[1:] = np.cumsum([len(b) for b in enc])
    sections["vocab.bytes"] = b"".join(enc) or b"\0"
    sections["vocab.offs"] = offs
    sections["wp.suffix_word"] = np.array(tmeta.pop("suffix_word") or [0xFFFFFFFF], dtype=np.uint32)
    options = {
        "lowercase": src.lowercase, "strip_accents": src.strip_accents, "strip": src.strip,
        "handle_chinese_chars": src.handle_chinese_chars, "clean_text": src.clean_text,
        "unk_token": src.unk_token, "continuing_subword_prefix": src.continuing_subword_prefix,
        "max_input_chars_per_word": src.max_input_chars_per_word,
    }
    meta = {
        "name": name or src.source_name,
        "options": options,
        "special_tokens": src.special_tokens,
        "cls_token": src.cls_token,
        "sep_token": src.sep_token,
        "cls_id": src.token_to_id.get(src.cls_token) if src.cls_token else None,
        "sep_id": src.token_to_id.get(src.sep_token) if src.sep_token else None,
        "unk_id": src.token_to_id[src.unk_token],
        "decoder_prefix": src.decoder_prefix,
        "decoder_cleanup": src.decoder_cleanup,
        "unicode_source": facts().source,
        "n_suffix_word": 0 if sections["wp.suffix_word"][0] == 0xFFFFFFFF else int(len(sections["wp.suffix_word"])),
        **tmeta,
    }
    h = art.source_hash(src.source_bytes, repr(sorted(options.items())))
    data = art.write_artifact(None, art.KIND_WORDPIECE, meta, sections, facts().unicode_label, h)
    return art.parse_artifact(data, where=meta["name"] or "<compiled>")
