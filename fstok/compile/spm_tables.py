"""Compile SentencePiece-family sources into the `spm` artifact's tables.

A `.model` file gives the pieces (strings, scores, types), the trainer and normalizer specs and the
precompiled charsmap; the charsmap's double array is expanded into its (key -> replacement) rules and
rebuilt as an fstok byte trie, the same layout as the piece trie and the user-defined-piece matcher:

    <t>_first  <u4  n_nodes + 1   node i's edges are [first[i], first[i+1])
    <t>_label  |u1  n_edges       sorted within a node
    <t>_target <u4  n_edges       always greater than the node it leaves (so walks end)
    <t>_value  <i4  n_nodes       -1: no key ends here
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..loaders.spm_model import (BPE, BYTE, NORMAL, UNIGRAM, UNKNOWN, UNUSED, USER_DEFINED, MODEL_TYPE_NAMES,
                                 ModelProto)

SPF_ADD_DUMMY = 1
SPF_REMOVE_WS = 2
SPF_ESCAPE_WS = 4
SPF_WS_SUFFIX = 8
SPF_BYTE_FALLBACK = 16
SPF_BPE = 32
SPF_HF = 64
SPF_FUSE_UNK = 128
SPF_WORDS = 256
SPF_CUTS = 512


def build_trie(keys: list[bytes], values: list[int]):
    """Byte trie in depth-first preorder (every edge goes to a larger node), built with numpy from the
    sorted keys: key i adds the nodes of its prefixes longer than its common prefix with key i-1.
    Returns (first, label, target, value)."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    skeys = [keys[i] for i in order]
    for i in range(1, len(skeys)):
        if skeys[i] == skeys[i - 1]:
            raise ValueError(f"duplicate trie key {skeys[i]!r}")
    n = len(skeys)
    lens = np.array([len(k) for k in skeys], dtype=np.int64)
    if n == 0:
        return [np.zeros(2, np.uint32), np.zeros(0, np.uint8), np.zeros(0, np.uint32), np.full(1, -1, np.int32)]
    if lens.min() == 0:
        raise ValueError("empty trie key")
    L = int(lens.max())
    A = np.zeros((n, L), dtype=np.uint8)
    flat = np.frombuffer(b"".join(skeys), dtype=np.uint8)
    rows = np.repeat(np.arange(n), lens)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
    A[rows, cols] = flat
    lcp = np.zeros(n, dtype=np.int64)
    if n > 1:
        diff = A[1:] != A[:-1]
        first_diff = np.where(diff.any(axis=1), diff.argmax(axis=1), L)
        lcp[1:] = np.minimum(first_diff, np.minimum(lens[1:], lens[:-1]))
    new = lens - lcp  # nodes added by each key (>= 1: keys are unique and sorted)
    total = int(new.sum())
    node_key = np.repeat(np.arange(n), new)
    node_depth = np.arange(total) - np.repeat(np.cumsum(new) - new, new) + np.repeat(lcp, new) + 1
    node_id = np.arange(1, total + 1)  # 0 is the root
    label = A[node_key, node_depth - 1]
    # a key's nodes after its first are children of the node before; the first one's parent is the
    # node at depth lcp on the previous key's path, created by the latest key j with lcp_j < lcp
    # (found with a stack of keys by increasing lcp)
    parent = node_id - 1
    start = np.cumsum(new) - new  # index (in node_id order) of key i's first node
    lcp_l, start_l = lcp.tolist(), start.tolist()
    firsts = [0] * n
    stack: list[int] = []
    for i in range(n):
        p = lcp_l[i]
        while stack and lcp_l[stack[-1]] >= p:
            stack.pop()
        if p > 0:
            j = stack[-1]
            firsts[i] = start_l[j] + (p - lcp_l[j])  # node id (1-based) of depth p on key j
        stack.append(i)
    parent[start] = np.asarray(firsts, dtype=np.int64)
    n_nodes = total + 1
    o = np.argsort(parent, kind="stable")  # children of a node are created in label order
    first = np.zeros(n_nodes + 1, dtype=np.uint32)
    np.cumsum(np.bincount(parent, minlength=n_nodes), out=first[1:])
    value = np.full(n_nodes, -1, dtype=np.int32)
    last = np.cumsum(new)  # the node of key i's whole string
    value[last] = np.asarray(values, dtype=np.int64)[order]
    return [first, label[o].astype(np.uint8), node_id[o].astype(np.uint32), value]


def charsmap_sections(blob: bytes, where: str) -> dict:
    """The precompiled charsmap as the library stores it: its Darts double array (`cm_units`) and the
    NUL-terminated replacements (`cm_norm`), checked for the layout the runtime relies on."""
    if not blob:
        return {"cm_units": np.zeros(0, np.uint32), "cm_norm": np.zeros(0, np.uint8)}
    if len(blob) <= 4:
        raise ValueError(f"{where}: the precompiled charsmap is broken ({len(blob)} bytes)")
    (tsize,) = struct.unpack_from("<I", blob, 0)
    if tsize >= len(blob) or tsize % 4 or tsize == 0:
        raise ValueError(f"{where}: the precompiled charsmap's trie size {tsize} does not fit its {len(blob)} bytes")
    units = np.frombuffer(blob, dtype="<u4", count=tsize // 4, offset=4).astype(np.uint32)
    norm = blob[4 + tsize :]
    if not norm.endswith(b"\0"):
        norm += b"\0"  # the library reads replacements up to a NUL; one at the end bounds every read
    return {"cm_units": units, "cm_norm": np.frombuffer(norm, dtype=np.uint8)}


def piece_bytes(pieces: list[str]) -> tuple[np.ndarray, np.ndarray]:
    enc = [p.encode("utf-8") for p in pieces]
    off = np.zeros(len(enc) + 1, dtype=np.uint32)
    np.cumsum([len(b) for b in enc], out=off[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8), off


def model_tables(m: ModelProto, where: str) -> tuple[dict, dict]:
    """(meta, sections) of a .model file's artifact, with sentencepiece's load-time checks."""
    t, ns = m.trainer, m.normalizer
    if t.model_type not in (UNIGRAM, BPE):
        name = MODEL_TYPE_NAMES.get(t.model_type, str(t.model_type))
        raise ValueError(f"{where}: SentencePiece model type {name!r} is not supported (supported: unigram, bpe)")
    if m.denormalizer.present and m.denormalizer.precompiled_charsmap:
        raise ValueError(f"{where}: a denormalizer_spec with rules is not supported")
    pieces_map: dict[bytes, int] = {}
    reserved: dict[bytes, int] = {}
    unk_id = -1
    user: list[bytes] = []
    byte_found = [False] * 256
    for i, p in enumerate(m.pieces):
        b = p.piece.encode("utf-8")
        # sentencepiece's own load-time refusals (model_interface.cc, unigram_model.cc)
        if len(b) >= 8000:
            raise ValueError(f"{where}: piece {i} is too long ({len(b)} bytes; sentencepiece refuses 8000 or more)")
        if b"\0" in b:
            raise ValueError(f"{where}: piece {i} ({p.piece!r}) contains a NUL character")
        if t.model_type == UNIGRAM and not math.isfinite(p.score):
            raise ValueError(f"{where}: piece {i} ({p.piece!r}) has score {p.score} (a Unigram score must be finite)")
        d = pieces_map if p.type in (NORMAL, USER_DEFINED, UNUSED) else reserved
        if b in d or (t.model_type == BPE and b in (reserved if d is pieces_map else pieces_map)):
            # a BPE model keeps every piece in one map: a string may not be both reserved and normal
            raise ValueError(f"{where}: piece {p.piece!r} is defined twice")
        d[b] = i
        if p.type == USER_DEFINED:
            user.append(b)
        if p.type == UNKNOWN:
            if unk_id >= 0:
                raise ValueError(f"{where}: more than one unknown piece")
            unk_id = i
        if p.type == BYTE:
            if not t.byte_fallback:
                raise ValueError(f"{where}: byte piece {p.piece!r} found although byte_fallback is false")
            bv = _piece_to_byte(p.piece)
            if bv < 0:
                raise ValueError(f"{where}: byte piece {p.piece!r} is invalid")
            byte_found[bv] = True
    if unk_id < 0:
        raise ValueError(f"{where}: the model has no unknown piece")
    if t.byte_fallback and not all(byte_found):
        raise ValueError(f"{where}: byte_fallback is true but the 256 byte pieces are not all present")
    # the trie of the model's pieces (normal, user-defined, unused) and their ids; the runtime finds a reserved
    # piece (PieceToId) by its string
    keys = list(pieces_map)
    ptrie = build_trie(keys, [pieces_map[k] for k in keys])
    sections: dict = {}
    for name, arr in zip(("p_first", "p_label", "p_target", "p_value"), ptrie):
        sections[name] = arr
    sections.update(charsmap_sections(ns.precompiled_charsmap, where))
    utrie = build_trie(user, [0] * len(user))
    for name, arr in zip(("u_first", "u_label", "u_target", "u_value"), utrie):
        sections[name] = arr
    scores = np.array([p.score for p in m.pieces], dtype=np.float32)
    sections["score32"] = scores.view(np.uint32)
    sections["ptype"] = np.array([p.type for p in m.pieces], dtype=np.uint8)
    byte_id = np.full(256, unk_id, dtype=np.int32)
    if t.byte_fallback:
        for c in range(256):
            k = f"<0x{c:02X}>".encode()
            byte_id[c] = reserved[k] if k in reserved else pieces_map.get(k, unk_id)
    sections["byte_id"] = byte_id
    sections["pieces"], sections["piece_off"] = piece_bytes([p.piece for p in m.pieces])
    normal = [p.score for p in m.pieces if p.type == NORMAL]
    flags = 0
    if ns.add_dummy_prefix:
        flags |= SPF_ADD_DUMMY
    if ns.remove_extra_whitespaces:
        flags |= SPF_REMOVE_WS
    if ns.escape_whitespaces:
        flags |= SPF_ESCAPE_WS
    if t.treat_whitespace_as_suffix:
        flags |= SPF_WS_SUFFIX
    if t.byte_fallback:
        flags |= SPF_BYTE_FALLBACK
    if t.model_type == BPE:
        flags |= SPF_BPE
        sep = "\u2581" if ns.escape_whitespaces else " "
        if not any(_spans_word(p.piece, sep) for p in m.pieces if p.type in (NORMAL, USER_DEFINED, UNUSED)):
            flags |= SPF_WORDS
        if not any(p.type == UNUSED for p in m.pieces):
            # an unused piece resegments by the split that last formed it, an order words would change
            sections["cut_pairs"] = boundary_pairs(p.piece for p in m.pieces if p.type in (NORMAL, USER_DEFINED))
            flags |= SPF_CUTS
    meta = {
        "family": "spm",
        "source": "model",
        "model_type": MODEL_TYPE_NAMES[t.model_type],
        "flags": flags,
        "unk_id": unk_id,
        "bos_id": t.bos_id,
        "eos_id": t.eos_id,
        "pad_id": t.pad_id,
        "unk_surface": t.unk_surface,
        "normalizer": ns.name,
        "min_score": float(np.float32(min(normal))).hex() if normal else float(np.finfo(np.float32).max).hex(),
        "max_score": float(np.float32(max(normal))).hex() if normal else float(np.finfo(np.float32).tiny).hex(),
        "n_pieces": len(m.pieces),
    }
    return meta, sections


def boundary_pairs(pieces) -> np.ndarray:
    """A bit per byte pair (b1, b2), bit b1 * 256 + b2: set where some piece has a character ending in byte
    b1 right before one beginning with b2.  Where the bit is clear no piece, so no merge, spans such a
    character boundary, and the BPE of the text is the BPE of its two sides (the runtime cuts there)."""
    bits = np.zeros(8192, dtype=np.uint8)
    seen = set()
    for piece in pieces:
        b = piece.encode("utf-8")
        i = 0
        prev_last = -1
        while i < len(b):
            c0 = b[i]
            n = 1 if c0 < 0xC0 else 2 if c0 < 0xE0 else 3 if c0 < 0xF0 else 4
            if prev_last >= 0:
                seen.add(prev_last * 256 + c0)
            i += n
            prev_last = b[min(i, len(b)) - 1]
    for k in seen:
        bits[k >> 3] |= 1 << (k & 7)
    return bits


def _spans_word(piece: str, sep: str) -> bool:
    """A separator right after another character: the piece could span a word boundary."""
    return any(piece[i] == sep and piece[i - 1] != sep for i in range(1, len(piece)))


def _piece_to_byte(piece: str) -> int:
    # PieceToByte: exactly "<0xXX>" with two upper-case hex digits
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        h = piece[3:5]
        if all(c in "0123456789ABCDEF" for c in h):
            return int(h, 16)
    return -1
