"""Pure-Python oracle of SentencePiece (`.model` files): normalizer, Unigram, BPE and decode, written
from the library's definitions (normalizer.cc, unigram_model.cc EncodeOptimized, bpe_model.cc,
sentencepiece_processor.cc).  It reads the precompiled charsmap's double array directly, so it is
independent of the tables fstok compiles from it.  Slow by design; the test oracle of fstok.spm.
"""
from __future__ import annotations

import heapq
import struct

from ..loaders.spm_model import (BPE, BYTE, CONTROL, NORMAL, UNIGRAM, UNKNOWN, UNUSED, USER_DEFINED,
                                 ModelProto)

SPACE = "\u2581".encode()
_F32 = struct.Struct("<f")


def f32(x: float) -> float:
    """Round a double to the nearest float32 (what storing into a C `float` does)."""
    return _F32.unpack(_F32.pack(x))[0]


def _score_rank(score: float) -> int:
    """The agenda's order of BPE pair scores: their float32 bit patterns compared as bpe_model.cc does
    (the order of the floats, with -0 below +0)."""
    (i,) = struct.unpack("<i", _F32.pack(score))
    return i if i >= 0 else -(2**31) - i - 1


# ---------------------------------------------------------------------------------------------
# Darts-clone double array (the precompiled charsmap's trie and the library's prefix matchers)


def _has_leaf(u: int) -> bool:
    return bool((u >> 8) & 1)


def _value(u: int) -> int:
    return u & 0x7FFFFFFF


def _label(u: int) -> int:
    return u & 0x800000FF


def _offset(u: int) -> int:
    return (u >> 10) << ((u & (1 << 9)) >> 6)


class Charsmap:
    """The precompiled charsmap: uint32 trie size, a Darts double array, NUL-terminated outputs."""

    def __init__(self, blob: bytes, where: str = "<charsmap>"):
        if len(blob) <= 4:
            raise ValueError(f"{where}: precompiled charsmap is broken (size {len(blob)})")
        (tsize,) = struct.unpack_from("<I", blob, 0)
        if tsize >= len(blob) or tsize % 4:
            raise ValueError(f"{where}: precompiled charsmap trie size {tsize} does not fit the blob")
        self.units = list(struct.unpack_from(f"<{tsize // 4}I", blob, 4))
        self.normalized = blob[4 + tsize :]

    def _unit(self, i: int) -> int:
        # reads past the array are a broken file; the library would read garbage
        if i >= len(self.units):
            raise ValueError("precompiled charsmap: trie index out of range")
        return self.units[i]

    def prefixes(self, data: bytes, i: int) -> list[tuple[int, int]]:
        """commonPrefixSearch: (length, value) of every key that is a prefix of data[i:]."""
        out = []
        units = self.units
        node = _offset(units[0])
        for k in range(i, len(data)):
            c = data[k]
            node ^= c
            if node >= len(units):
                return out
            u = units[node]
            if _label(u) != c:
                return out
            node ^= _offset(u)
            if _has_leaf(u):
                out.append((k - i + 1, _value(self._unit(node))))
        return out

    def output(self, value: int) -> bytes:
        end = self.normalized.find(b"\0", value)
        return self.normalized[value : (len(self.normalized) if end < 0 else end)]

    def entries(self) -> list[tuple[bytes, bytes]]:
        """Every key of the trie with its replacement.  Unit x is child c of node p when its label is c
        and x == base(p) ^ c (what the lookup checks), so children are found by grouping the units by
        x ^ label(x), then walked from the root."""
        import numpy as np

        u = np.asarray(self.units, dtype=np.int64)
        n = len(u)
        idx = np.arange(n, dtype=np.int64)
        off = (u >> 10) << ((u & (1 << 9)) >> 6)
        base = idx ^ off
        lab = u & 0x800000FF
        cand = np.nonzero((lab >= 1) & (lab <= 255))[0]
        claimed = cand ^ lab[cand]
        o = np.argsort(claimed, kind="stable")
        claimed_s, cand_s = claimed[o], cand[o]
        out = []
        stack = [(0, b"")]
        while stack:
            pos, key = stack.pop()
            bp = int(base[pos])
            lo = int(np.searchsorted(claimed_s, bp, "left"))
            hi = int(np.searchsorted(claimed_s, bp, "right"))
            for x in cand_s[lo:hi].tolist():
                k2 = key + bytes([int(lab[x])])
                if (u[x] >> 8) & 1:
                    leaf = int(base[x])
                    if leaf >= n:
                        raise ValueError("precompiled charsmap: trie index out of range")
                    out.append((k2, self.output(int(u[leaf] & 0x7FFFFFFF))))
                stack.append((x, k2))
        return out


# ---------------------------------------------------------------------------------------------
# UTF-8 as sentencepiece reads it (string_util::DecodeUTF8 / IsValidDecodeUTF8 / OneCharLen)


def one_char_len(b: int) -> int:
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[b >> 4]


def _trail(b: int) -> bool:
    return 0x80 <= b <= 0xBF


def _valid_cp(c: int) -> bool:
    return c < 0xD800 or 0xE000 <= c <= 0x10FFFF


def decode_utf8(data: bytes, i: int) -> tuple[int, int]:
    """(code point or 0xFFFD, length) as string_util::DecodeUTF8."""
    n = len(data) - i
    b0 = data[i]
    if b0 < 0x80:
        return b0, 1
    if n >= 2 and (b0 & 0xE0) == 0xC0:
        cp = ((b0 & 0x1F) << 6) | (data[i + 1] & 0x3F)
        if _trail(data[i + 1]) and cp >= 0x80 and _valid_cp(cp):
            return cp, 2
    elif n >= 3 and (b0 & 0xF0) == 0xE0:
        cp = ((b0 & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
        if _trail(data[i + 1]) and _trail(data[i + 2]) and cp >= 0x800 and _valid_cp(cp):
            return cp, 3
    elif n >= 4 and (b0 & 0xF8) == 0xF0:
        cp = ((b0 & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6) | (data[i + 3] & 0x3F)
        if _trail(data[i + 1]) and _trail(data[i + 2]) and _trail(data[i + 3]) and cp >= 0x10000 and _valid_cp(cp):
            return cp, 4
    return 0xFFFD, 1


def is_valid_decode_utf8(data: bytes, i: int) -> tuple[bool, int]:
    cp, n = decode_utf8(data, i)
    return (cp != 0xFFFD or n == 3), n


# ---------------------------------------------------------------------------------------------


class PrefixMatcher:
    """normalizer::PrefixMatcher over the user-defined pieces: the longest one at a position."""

    def __init__(self, words):
        self.words = {w for w in words}
        self.maxlen = max((len(w) for w in self.words), default=0)

    def match(self, data: bytes, i: int) -> tuple[int, bool]:
        best = 0
        for n in range(1, min(self.maxlen, len(data) - i) + 1):
            if data[i : i + n] in self.words:
                best = n
        if best:
            return best, True
        return min(len(data) - i, one_char_len(data[i])), False


class SentencePieceReference:
    def __init__(self, m: ModelProto, where: str = "<model>"):
        self.m = m
        self.where = where
        t, ns = m.trainer, m.normalizer
        if t.model_type not in (UNIGRAM, BPE):
            raise ValueError(f"{where}: model type {t.model_type} is not supported")
        self.pieces: dict[bytes, int] = {}
        self.reserved: dict[bytes, int] = {}
        self.unk_id = -1
        user = []
        for i, p in enumerate(m.pieces):
            b = p.piece.encode()
            d = self.pieces if p.type in (NORMAL, USER_DEFINED, UNUSED) else self.reserved
            if b in d:
                raise ValueError(f"{where}: piece {p.piece!r} is already defined")
            d[b] = i
            if p.type == USER_DEFINED:
                user.append(b)
            if p.type == UNKNOWN:
                self.unk_id = i
        if self.unk_id < 0:
            raise ValueError(f"{where}: unk is not defined")
        self.types = [p.type for p in m.pieces]
        self.scores = [p.score for p in m.pieces]
        self.matcher = PrefixMatcher(user)
        self.charsmap = Charsmap(ns.precompiled_charsmap, where) if ns.precompiled_charsmap else None
        self.maxlen = max(len(b) for b in self.pieces) if self.pieces else 0
        normal = [p.score for p in m.pieces if p.type == NORMAL]
        self.min_score = min(normal) if normal else 3.4028234663852886e38
        self.max_score = max(normal) if normal else 1.1754943508222875e-38  # FLT_MIN

    # -- normalizer ------------------------------------------------------------------------------
    def normalize_prefix(self, data: bytes, i: int) -> tuple[bytes, int]:
        n, found = self.matcher.match(data, i)
        if found:
            return data[i : i + n], n
        if self.charsmap is not None:
            res = self.charsmap.prefixes(data, i)
            if res:
                best_len = 0
                for ln, v in res:
                    if best_len == 0 or ln > best_len:
                        best_len, value = ln, v
                return self.charsmap.output(value), best_len
        ok, n = is_valid_decode_utf8(data, i)
        if not ok:
            return "\ufffd".encode(), 1
        return data[i : i + n], n

    def normalize(self, data: bytes) -> tuple[bytes, list[int]]:
        ns = self.m.normalizer
        suffix = self.m.trainer.treat_whitespace_as_suffix
        out = bytearray()
        n2o: list[int] = []
        if not data:
            return b"", []
        consumed = 0
        i = 0
        if ns.remove_extra_whitespaces:
            while i < len(data):
                sp, n = self.normalize_prefix(data, i)
                if sp != b" ":
                    break
                i += n
                consumed += n
        if i >= len(data):
            return b"", []
        ws = SPACE if ns.escape_whitespaces else b" "

        def add_ws():
            out.extend(ws)
            n2o.extend([consumed] * len(ws))

        if not suffix and ns.add_dummy_prefix:
            add_ws()
        is_prev_space = ns.remove_extra_whitespaces
        while i < len(data):
            sp, n = self.normalize_prefix(data, i)
            if is_prev_space:
                while sp.startswith(b" "):
                    sp = sp[1:]
            if sp:
                for c in sp:
                    if ns.escape_whitespaces and c == 0x20:
                        out.extend(SPACE)
                        n2o.extend([consumed] * 3)
                    else:
                        out.append(c)
                        n2o.append(consumed)
                is_prev_space = sp.endswith(b" ")
            consumed += n
            i += n
            if not ns.remove_extra_whitespaces:
                is_prev_space = False
        if ns.remove_extra_whitespaces:
            while out.endswith(ws):
                length = len(out) - len(ws)
                consumed = n2o[length]
                del out[length:]
                del n2o[length:]
        if suffix and ns.add_dummy_prefix:
            add_ws()
        n2o.append(consumed)
        return bytes(out), n2o

    # -- models ------------------------------------------------------------------------------------
    def piece_to_id(self, b: bytes) -> int:
        if b in self.reserved:
            return self.reserved[b]
        return self.pieces.get(b, self.unk_id)

    def unigram(self, s: bytes) -> list[tuple[bytes, int]]:
        """unigram_model.cc EncodeOptimized: float path scores, rebased (the score at the current start
        subtracted from every position reached so far) when they leave [-1e5, 1e5]."""
        size = len(s)
        if size == 0:
            return []
        unk_score = f32(f32(self.min_score) - 10.0)
        best = [0.0] * (size + 1)
        start = [-1] * (size + 1)
        ids = [-1] * (size + 1)
        st = 0
        frontier = 0
        while st < size:
            here = best[st]
            if here < -100000.0 or here > 100000.0:
                for i in range(st, frontier + 1):
                    if i == st or start[i] != -1:
                        best[i] = f32(best[i] - here)
                here = 0.0
            single = False
            mblen = min(one_char_len(s[st]), size - st)
            for ln in range(1, min(self.maxlen, size - st) + 1):
                pid = self.pieces.get(s[st : st + ln])
                if pid is None:
                    continue
                t = self.types[pid]
                if t == UNUSED:
                    continue
                end = st + ln
                frontier = max(frontier, end)
                # float arithmetic, as the library's types give it (ties depend on it); a user-defined
                # piece scores 0.1 per byte after its first
                score = f32(0.1 * (ln - 1)) if t == USER_DEFINED else self.scores[pid]
                cand = f32(score + here)
                if start[end] == -1 or cand > best[end]:
                    best[end] = cand
                    start[end] = st
                    ids[end] = pid
                if not single and ln == mblen:
                    single = True
            if not single:
                end = st + mblen
                frontier = max(frontier, end)
                cand = f32(unk_score + here)
                if start[end] == -1 or cand > best[end]:
                    best[end] = cand
                    start[end] = st
                    ids[end] = self.unk_id
            st += mblen
        out = []
        e = size
        while e > 0:
            b = start[e]
            out.append((s[b:e], ids[e]))
            e = b
        out.reverse()
        return out

    def bpe(self, s: bytes) -> list[tuple[bytes, int]]:
        # symbols: [start, length, prev, next, freeze]
        syms = []
        i = 0
        while i < len(s):
            n, freeze = self.matcher.match(s, i)
            syms.append([i, n, len(syms) - 1, -1, freeze])
            i += n
        if not syms:
            return []
        for k in range(len(syms) - 1):
            syms[k][3] = k + 1
        heap: list = []
        rev: dict[bytes, tuple[bytes, bytes]] = {}

        def add(left: int, right: int):
            if left == -1 or right == -1 or syms[left][4] or syms[right][4]:
                return
            a, b = syms[left], syms[right]
            piece = s[a[0] : a[0] + a[1] + b[1]]
            pid = self.pieces.get(piece)
            if pid is None:
                return
            heapq.heappush(heap, (-_score_rank(self.scores[pid]), left, right, len(piece)))
            if self.types[pid] == UNUSED:
                rev[piece] = (s[a[0] : a[0] + a[1]], s[b[0] : b[0] + b[1]])

        for k in range(1, len(syms)):
            add(k - 1, k)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            a, b = syms[left], syms[right]
            if a[1] == 0 or b[1] == 0 or a[1] + b[1] != size:
                continue
            a[1] += b[1]
            a[3] = b[3]
            if b[3] >= 0:
                syms[b[3]][2] = left
            b[1] = 0
            add(a[2], left)
            add(left, a[3])
        out: list[tuple[bytes, int]] = []

        def reseg(w: bytes, depth: int):
            # bpe_model.cc: past depth 100 the symbol as it is; a normal / user-defined piece itself; an
            # unused piece the pair that last formed it; anything else the unknown piece
            pid = self.pieces.get(w)
            if depth > 100:
                out.append((w, self.piece_to_id(w)))
            elif pid is None:
                out.append((w, self.unk_id))
            elif self.types[pid] != UNUSED:
                out.append((w, pid))
            elif w not in rev:
                out.append((w, self.unk_id))
            else:
                reseg(rev[w][0], depth + 1)
                reseg(rev[w][1], depth + 1)

        k = 0
        while k != -1:
            reseg(s[syms[k][0] : syms[k][0] + syms[k][1]], 0)
            k = syms[k][3]
        return out

    # -- processor -------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        norm, _ = self.normalize(text.encode("utf-8"))
        res = self.unigram(norm) if self.m.trainer.model_type == UNIGRAM else self.bpe(norm)
        ids: list[int] = []
        prev_unk = False
        fallback = self.m.trainer.byte_fallback
        for w, pid in res:
            is_unk = self.types[pid] == UNKNOWN
            if self.types[pid] == CONTROL:
                ids.append(pid)
            elif is_unk and fallback:
                for c in w:
                    ids.append(self.piece_to_id(f"<0x{c:02X}>".encode()))
            elif not (prev_unk and is_unk):
                ids.append(pid)
            prev_unk = is_unk
        return ids

    def decode(self, ids) -> str:
        m = self.m
        n = len(m.pieces)
        pieces = []
        for i in ids:
            if not 0 <= i < n:
                raise IndexError(f"Invalid id: {i}")
            pieces.append(m.pieces[i].piece.encode())
        ns = m.normalizer
        unk_surface = m.trainer.unk_surface.encode()
        text = bytearray()
        strip_bos = ns.add_dummy_prefix or ns.remove_extra_whitespaces

        def flush(bs: bytes):
            j = 0
            while j < len(bs):
                ok, c = is_valid_decode_utf8(bs, j)
                if not ok:
                    text.extend("\ufffd".encode())
                    c = 1
                else:
                    text.extend(bs[j : j + c])
                j += c

        is_bos_ws = True
        bos_ws_seen = False
        pend = bytearray()
        for w in pieces:
            pid = self.piece_to_id(w)
            t = self.types[pid]
            if t == BYTE:
                pend.append(int(w[3:5], 16))
                continue
            flush(bytes(pend))
            pend.clear()
            if bos_ws_seen or text:
                is_bos_ws = False
            has_bos_ws = False
            if t == CONTROL:
                d = b""
            elif t == UNKNOWN:
                d = unk_surface if m.pieces[pid].piece.encode() == w else w
            else:
                if is_bos_ws and strip_bos:
                    if w.startswith(SPACE):
                        w = w[3:]
                        has_bos_ws = True
                    if ns.remove_extra_whitespaces:
                        has_bos_ws = False
                d = w.replace(SPACE, b" ")
            bos_ws_seen = has_bos_ws
            text.extend(d)
        flush(bytes(pend))
        return bytes(text).decode("utf-8")
