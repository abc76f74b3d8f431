"""Why a text tokenized the way it did: `explain(tok, text)`.

The explanation is computed by pure-Python executors of the *same tables* the C runtime reads
from the artifact (never from the source vocabulary), and records every decision on the way:

* WordPiece: per character, the compiled normalization entry (kept, deleted, whitespace, isolated
  punctuation/CJK, mapped to other characters); per word, the trie path of LinMaxMatch with every
  dense-row or edge step, every failure link followed and the failure pops it emitted.
* BPE (byte-level): the special / added tokens split out first, the pre-tokenizer pieces with the DFA
  states walked and the look-ahead give-back that placed each boundary, and per piece the merge
  sequence with the rank of each merge (the internal id of a merged token is its merge rank).
* Pre-tokenization DFAs alone: the pieces and the states.

`Explanation.ids` equals `tok.encode(text, ...)` for the same arguments; the test suite checks that
over the shared corpora.  `str(explanation)` is the terminal view, `to_dict()` the JSON view and
`draw(path)` a picture.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import heapq
from typing import Any, Optional

import numpy as np

from .._load import fstok_kind

_NONE32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------- records
@dataclass
class Step:
    """One decision of the model inside a piece (a trie step, a failure, a merge)."""

    what: str  # "edge" | "row" | "fail" | "end-fail" | "unk" | "merge" | "byte" | "whole" | "special"
    detail: str
    tokens: list[int] = field(default_factory=list)  # tokens emitted by this step (WordPiece pops)
    span: Optional[tuple[int, int]] = None  # BPE merge: the byte range of the merged token within the piece
    rank: Optional[int] = None  # BPE merge: its rank

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"what": self.what, "detail": self.detail, "tokens": list(self.tokens)}
        if self.span is not None:
            d["span"], d["rank"] = list(self.span), self.rank
        return d


@dataclass
class Piece:
    """A pre-tokenizer piece (a word for WordPiece) and how the model turned it into ids."""

    text: str
    start: int  # character offsets into the text as given (for BPE with a normalizer: the normalized text)
    end: int
    ids: list[int]
    tokens: list[str]
    steps: list[Step] = field(default_factory=list)
    boundary: str = ""  # how the pre-tokenizer placed the end of this piece
    special: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "start": self.start, "end": self.end, "ids": self.ids, "tokens": self.tokens,
                "special": self.special, "boundary": self.boundary, "steps": [s.to_dict() for s in self.steps]}


@dataclass
class CharNote:
    """What normalization did to one character of the input."""

    index: int
    char: str
    action: str  # "keep" | "delete" | "space" | "isolate" | "map"
    output: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "char": self.char, "action": self.action, "output": self.output}


@dataclass
class Explanation:
    kind: str
    text: str
    pieces: list[Piece]
    normalization: list[CharNote] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    subword_prefix: str = ""  # WordPiece: the continuing-subword prefix (for drawing token widths)

    @property
    def ids(self) -> list[int]:
        return [i for p in self.pieces for i in p.ids]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "ids": self.ids, "notes": self.notes,
                "normalization": [c.to_dict() for c in self.normalization if c.action != "keep"],
                "pieces": [p.to_dict() for p in self.pieces]}

    def __str__(self) -> str:
        out = [f"{self.kind}: {len(self.text)} characters -> {len(self.ids)} tokens"]
        out += [f"  note: {n}" for n in self.notes]
        changed = [c for c in self.normalization if c.action != "keep"]
        if changed:
            out.append("normalization (characters that changed):")
            for c in changed[:200]:
                shown = repr(c.output) if c.action == "map" else ""
                out.append(f"  [{c.index}] {c.char!r} {c.action} {shown}".rstrip())
            if len(changed) > 200:
                out.append(f"  ... {len(changed) - 200} more")
        out.append("pieces:")
        for p in self.pieces:
            toks = " ".join(p.tokens)
            head = f"  [{p.start}:{p.end}] {p.text!r}"
            if p.special:
                out.append(f"{head} -> special {p.ids}")
                continue
            out.append(f"{head} -> {p.ids}  ({toks})")
            if p.boundary:
                out.append(f"      boundary: {p.boundary}")
            for s in p.steps:
                extra = f" => {s.tokens}" if s.tokens else ""
                out.append(f"      {s.what:<8} {s.detail}{extra}")
        return "\n".join(out)

    def draw(self, path: str, max_pieces: int = 40) -> None:
        """A picture: the text cut into pieces, each with its tokens (and merge tree for BPE)."""
        from .draw import draw_explanation

        draw_explanation(self, path, max_pieces=max_pieces)


# ---------------------------------------------------------------------------------------------- entry
def explain(tok: Any, text: str, **kw: Any) -> Explanation:
    """Explain `tok.encode(text, **kw)` step by step (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    from ..pretokenize import CompiledPattern

    if fstok_kind(tok) == "wordpiece":
        return _explain_wordpiece(tok, text, **kw)
    if fstok_kind(tok) == "bpe":
        return _explain_bpe(tok, text, **kw)
    if isinstance(tok, CompiledPattern):
        if kw:
            raise TypeError(f"explain() of a pre-tokenization pattern takes no options, got {sorted(kw)}")
        return _explain_pattern(tok, text)
    if type(tok).__name__ == "SentencePieceTokenizer":
        return _explain_spm(tok, text, **kw)
    if type(tok).__name__ == "TekkenTokenizer":
        return _explain_tekken(tok, text, **kw)
    own = getattr(tok, "explain", None)
    if callable(own) and getattr(own, "__func__", None) is not _generic_marker:
        return own(text, **kw)
    if hasattr(tok, "encode_with_offsets"):
        return _explain_generic(tok, text, **kw)
    raise TypeError(f"explain() does not know tokenizers of type {type(tok).__name__}")


def _generic_marker():  # identity sentinel for tokenizers whose own explain() delegates back here
    pass


# ---------------------------------------------------------------------------------------------- DFA trace
def _trace_match(t, data: bytes, pos: int) -> tuple[int, list[int], int]:
    """DFATables.match with the states walked: (end or -1, state indices, give-back of the last accept)."""
    T, C, A = t.trans, t.classes, t.accept
    sh, live = t.shift, t.live
    st, last, gb = t.start, -1, 0
    states = [st >> sh]
    n, i = len(data), pos
    while i < n:
        st = int(T[st + int(C[data[i]])])
        i += 1
        states.append(st >> sh)
        if st < live:
            return last, states, gb
        a = int(A[st >> sh]) & 15
        if a:
            last, gb = i - (a - 1), a - 1
    st = int(T[st + t.eoi])
    if st:
        states.append(st >> sh)
        a = int(A[st >> sh]) & 15
        if a:
            last, gb = n - (a - 1), a - 1
    return last, states, gb


def _boundary_note(t, states: list[int], gb: int, end: int) -> str:
    shown = states if len(states) <= 12 else states[:5] + ["..."] + states[-5:]
    why = f"DFA states {' '.join(map(str, shown))}; last accept at byte {end}"
    if gb:
        why += f" after a look-ahead of {gb} byte{'s' if gb > 1 else ''} (given back)"
    return why


def _dfa_pieces(cp, data: bytes) -> list[tuple[int, int, str]]:
    """(start, end, how) byte spans of a CompiledPattern, from its tables (find or split mode)."""
    if cp.mode == "find":
        t = cp.levels[0]
        out, pos, n = [], 0, len(data)
        while pos < n:
            end, states, gb = _trace_match(t, data, pos)
            if end >= 0:
                out.append((pos, end, _boundary_note(t, states, gb, end)))
                pos = end
                continue
            nxt = pos + 1
            while nxt < n and (data[nxt] & 0xC0) == 0x80:
                nxt += 1
            pos = nxt  # no match starts here: these bytes belong to no piece (find mode drops them)
        return out
    pieces = [(0, len(data), "whole text")] if data else []
    for lvl, t in enumerate(cp.levels):
        nxt: list[tuple[int, int, str]] = []
        for lo, hi, how in pieces:
            sub = data[lo:hi]
            pos = 0
            while pos < len(sub):
                end, states, gb = _trace_match(t, sub, pos)
                if end >= 0:
                    nxt.append((lo + pos, lo + end, f"level {lvl} match: " + _boundary_note(t, states, gb, lo + end)))
                    pos = end
                    continue
                gap = pos + 1
                while gap < len(sub):
                    if (sub[gap] & 0xC0) != 0x80 and _trace_match(t, sub, gap)[0] >= 0:
                        break
                    gap += 1
                nxt.append((lo + pos, lo + gap, f"level {lvl} gap between matches"))
                pos = gap
        pieces = nxt
    return pieces


def _byte_to_char(text: str) -> np.ndarray:
    data = text.encode("utf-8", "surrogatepass")
    b2c = np.zeros(len(data) + 1, dtype=np.int64)
    lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
    b2c[1:] = np.cumsum(lead)
    return b2c


def _explain_pattern(cp, text: str) -> Explanation:
    data = text.encode("utf-8")
    b2c = _byte_to_char(text)
    pieces = [Piece(text[int(b2c[a]):int(b2c[b])], int(b2c[a]), int(b2c[b]), [], [], boundary=how)
              for a, b, how in _dfa_pieces(cp, data)]
    return Explanation("regex_dfa", text, pieces, notes=[f"pattern mode {cp.mode}, {len(cp.levels)} level(s)"])


# ---------------------------------------------------------------------------------------------- BPE
class _BPETables:
    """The merge structure of a BPE artifact, read from the sections the C runtime reads."""

    def __init__(self, tok):
        t = tok._tables
        self.ext = t["int_ext"].astype(np.int64)
        self.split_l = t["split_l"].astype(np.int64)
        self.split_r = t["split_r"].astype(np.int64)
        ar = np.arange(len(self.ext))
        merged = (self.split_l != ar) | (self.split_r != ar)
        self.pair = {(int(a), int(b)): int(k) for a, b, k in zip(self.split_l[merged], self.split_r[merged], ar[merged])}
        self.byte_tok = t["byte_tok"].astype(np.int64)
        # tiktoken looks a piece up whole before merging, and so does HF BPE with ignore_merges
        ranks = tok._meta.get("merge_mode") == "ranks"
        self.whole_first = ranks or bool(tok._meta.get("ignore_merges"))
        self.whole_why = "a piece that is a token is looked up whole" if ranks else "ignore_merges"
        self.tok = tok
        self._memo: dict[bytes, tuple[list[int], list[Step]]] = {}

    def token_text(self, internal: int) -> str:
        return self.tok.decode_single_token_bytes(int(self.ext[internal])).decode("utf-8", "backslashreplace")

    def encode_piece(self, piece: bytes) -> tuple[list[int], list[Step]]:
        hit = self._memo.get(piece)
        if hit is not None:
            return hit
        steps: list[Step] = []
        whole = None
        if self.whole_first and len(piece) > 1:
            whole = self.tok._model.span_lookup(piece)
        if whole is not None:
            ids = [int(whole)]
            steps.append(Step("whole", f"the whole piece is token {whole} ({self.whole_why})"))
        else:
            # lowest rank first, leftmost on ties, as tiktoken and HF merge; a heap over the adjacent pairs with
            # lazy deletion keeps a long piece (a megabyte of one character) at O(n log n), not O(n^2)
            n = len(piece)
            sym = [int(self.byte_tok[b]) for b in piece]
            ln = [1] * n
            nxt = list(range(1, n + 1))
            prv = list(range(-1, n - 1))
            alive = [True] * n
            heap = []
            for i in range(n - 1):
                k = self.pair.get((sym[i], sym[i + 1]))
                if k is not None:
                    heap.append((k, i, sym[i], sym[i + 1]))
            heapq.heapify(heap)
            while heap:
                k, i, a, b = heapq.heappop(heap)
                j = nxt[i]
                if not alive[i] or j >= n or sym[i] != a or sym[j] != b:
                    continue  # a stale entry: one side was merged since it was pushed
                lo = i  # a symbol keeps the index of its first byte
                steps.append(Step("merge", f"rank {k}: {self.token_text(a)!r} + {self.token_text(b)!r}"
                                           f" -> {self.token_text(k)!r} (id {int(self.ext[k])})",
                                  span=(lo, lo + ln[i] + ln[j]), rank=k))
                sym[i], ln[i] = k, ln[i] + ln[j]
                alive[j] = False
                nxt[i] = nxt[j]
                if nxt[j] < n:
                    prv[nxt[j]] = i
                p = prv[i]
                if p >= 0:
                    kp = self.pair.get((sym[p], k))
                    if kp is not None:
                        heapq.heappush(heap, (kp, p, sym[p], k))
                q = nxt[i]
                if q < n:
                    kq = self.pair.get((k, sym[q]))
                    if kq is not None:
                        heapq.heappush(heap, (kq, i, k, sym[q]))
            syms = []
            i = 0
            while i < n:
                syms.append(sym[i])
                i = nxt[i]
            ids = [int(self.ext[s]) for s in syms]
        if len(self._memo) < 100_000:
            self._memo[piece] = (ids, steps)
        return ids, steps


def _bpe_tables(tok) -> _BPETables:
    tb = tok.__dict__.get("_explain_tables")
    if tb is None:
        tb = tok.__dict__["_explain_tables"] = _BPETables(tok)
    return tb


def _explain_bpe(tok, text: str, *, allowed_special: Any = frozenset(), disallowed_special: Any = "all") -> Explanation:
    allowed, disallowed = tok._resolve_special(allowed_special, disallowed_special)
    tok._check_disallowed(text, disallowed)
    tb = _bpe_tables(tok)
    notes: list[str] = []
    if tok._meta.get("normalizer"):
        notes.append(f"normalizer {tok._meta['normalizer']} applied before pre-tokenization; offsets refer to the "
                     "normalized text")
    if tok._meta.get("add_prefix_space"):
        notes.append("a space is prepended to each text segment (add_prefix_space)")
    # the same planning the runtime uses: segments between special / added tokens (literal ids)
    data, triples, new_text = tok._plan(text, allowed)
    b2c = _byte_to_char(new_text)
    cp = None
    if tok._pt_mode in ("find", "split"):
        from ..pretokenize import CompiledPattern

        cp = tok.__dict__.get("_explain_cp")
        if cp is None:
            cp = tok.__dict__["_explain_cp"] = CompiledPattern.from_sections(tok._art, "dfa.")
    native = tok._native
    pieces: list[Piece] = []
    for a, b, lit in np.asarray(triples, dtype=np.int64).tolist():
        if lit != _NONE32:
            s = new_text[int(b2c[a]):int(b2c[b])]
            pieces.append(Piece(s, int(b2c[a]), int(b2c[b]), [int(lit)], [s], special=True))
            continue
        seg = data[a:b]
        if not native:
            spans = [(0, len(seg), "pre-tokenized by the regex stages")]
        elif cp is None:
            spans = [(0, len(seg), "no pre-tokenizer: the segment is one piece")] if seg else []
        else:
            spans = _dfa_pieces(cp, seg)
        for pa, pb, how in spans:
            ids, steps = tb.encode_piece(seg[pa:pb])
            s0, s1 = int(b2c[a + pa]), int(b2c[a + pb])
            toks = [tok.decode_single_token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]
            pieces.append(Piece(new_text[s0:s1], s0, s1, ids, toks, steps, boundary=how))
    return Explanation("bpe", text, pieces, notes=notes)


# ---------------------------------------------------------------------------------------------- WordPiece
_WP_ACTIONS = {0: "keep", 1: "delete", 2: "space", 3: "isolate"}


def _wp_char_notes(ex, text: str) -> list[CharNote]:
    from ..reference.wordpiece import KIND_MAP

    notes = []
    for i, ch in enumerate(text):
        cp = ord(ch)
        e = int(ex.s2[(int(ex.s1[cp >> 8]) << 8) | (cp & 0xFF)])
        kind = e & 7
        if kind != KIND_MAP:
            out = ch if kind in (0, 3) else (" " if kind == 2 else "")
            notes.append(CharNote(i, ch, _WP_ACTIONS[kind], out))
            continue
        off = e >> 3
        hdr = int(ex.npool[off])
        outs = []
        for k in range(1, (hdr & 0xFFFF) + 1):
            it = int(ex.npool[off + k])
            if not (it >> 23) & 1:
                outs.append(chr(it & 0x1FFFFF))
        notes.append(CharNote(i, ch, "map" if (hdr >> 16) == 0 else "isolate", "".join(outs)))
    return notes


def _wp_state_name(ex, u: int) -> str:
    if u == ex.root:
        return "r"
    if u == ex.sroot:
        return "r#"
    return str(u)


def _wp_trace_word(tok, ex, word: str) -> tuple[list[int], list[Step]]:
    """LinMaxMatch over the compiled tables, as TableExecutor.word, recording each step."""
    from ..reference.wordpiece import NONE

    data = word.encode("utf-8")
    steps: list[Step] = []
    if len(word) > ex.max_chars:
        return [ex.unk], [Step("unk", f"{len(word)} characters > max_input_chars_per_word={ex.max_chars}", [ex.unk])]
    out: list[int] = []
    u = ex.root
    for b in data:
        lab = chr(b) if 32 < b < 127 else f"\\x{b:02x}"
        while True:
            if ex.row[u] != 0xFFFF:
                k = ex.row[u] * 256 + b
                popped = ex._slice(int(ex.dp[k]))
                v = int(ex.dt[k])
                steps.append(Step("row", f"{_wp_state_name(ex, u)} -{lab}-> "
                                         f"{_wp_state_name(ex, v) if v != NONE else 'none'} (dense row)", list(popped)))
                out.extend(popped)
                u = v
                break
            hit = None
            for i in range(ex.es[u], ex.es[u] + ex.nc[u]):
                if ex.el[i] == b:
                    hit = ex.et[i]
                    break
            if hit is not None:
                steps.append(Step("edge", f"{_wp_state_name(ex, u)} -{lab}-> {_wp_state_name(ex, hit)}"))
                u = hit
                break
            f = ex.fail[u]
            if f == NONE:
                u = NONE
                break
            popped = ex._slice(ex.pops[u])
            steps.append(Step("fail", f"no edge {lab!r} at {_wp_state_name(ex, u)}: failure link -> "
                                      f"{_wp_state_name(ex, f)}", list(popped)))
            out.extend(popped)
            u = f
        if u == NONE:
            steps.append(Step("unk", f"no transition on {lab!r}: the word is unknown", [ex.unk]))
            return [ex.unk], steps
    while ex.fail[u] != NONE:
        popped = ex._slice(ex.pops[u])
        steps.append(Step("end-fail", f"end of word at {_wp_state_name(ex, u)}: failure link -> "
                                      f"{_wp_state_name(ex, ex.fail[u])}", list(popped)))
        out.extend(popped)
        u = ex.fail[u]
    if u not in (ex.root, ex.sroot):
        steps.append(Step("unk", f"the walk ends at state {u}, not at r or r#: the word is unknown", [ex.unk]))
        return [ex.unk], steps
    if u == ex.sroot and not out:
        res = list(ex.suffix_word) or [ex.unk]
        steps.append(Step("end-fail", "the word is the suffix indicator itself", res))
        return res, steps
    return out, steps


def _explain_wordpiece(tok, text: str, *, allowed_special: Any = (), add_special_tokens: bool = False) -> Explanation:
    from ..reference.wordpiece import TableExecutor

    ex = tok.__dict__.get("_explain_exec")
    if ex is None:
        ex = tok.__dict__["_explain_exec"] = TableExecutor(tok)
    allowed = tok._specials_for(allowed_special) if allowed_special else []
    segments = list(tok._segments(text, allowed)) if allowed else [(text, 0, None)]
    pieces: list[Piece] = []
    notes: list[CharNote] = []
    for seg, start, sid in segments:
        if sid is not None:
            pieces.append(Piece(seg, start, start + len(seg), [sid], [seg], special=True))
            continue
        for cn in _wp_char_notes(ex, seg):
            cn.index += start
            notes.append(cn)
        words = ex.normalize_words(seg)
        if not words:
            continue
        # character offsets of each word, from the runtime's offsets of the tokens it produced
        traced = [_wp_trace_word(tok, ex, w) for w in words]
        _, offs = tok._model.encode(seg, 1) if seg else ([], [])
        k = 0
        for w, (ids, steps) in zip(words, traced):
            n = len(ids)
            if n and k + n <= len(offs):
                a, b = offs[k][0], offs[k + n - 1][1]
            else:
                a = b = 0
            k += n
            pieces.append(Piece(w, start + a, start + b, ids, [str(tok.id_to_token(i)) for i in ids], steps))
    if add_special_tokens:
        ids, _ = tok._add_specials([], None)
        pieces.insert(0, Piece("", 0, 0, [ids[0]], [str(tok.id_to_token(ids[0]))], special=True))
        pieces.append(Piece("", len(text), len(text), [ids[-1]], [str(tok.id_to_token(ids[-1]))], special=True))
    return Explanation("wordpiece", text, pieces, normalization=notes, subword_prefix=tok.continuing_subword_prefix)


# ---------------------------------------------------------------------------------------------- SentencePiece
class _SPMModel:
    """The pieces, types and scores of a SentencePiece artifact, run by the reference algorithms
    (fstok.reference.spm) on the normalized text the runtime produces."""

    def __init__(self, tok):
        from ..reference.spm import NORMAL, UNUSED, USER_DEFINED, PrefixMatcher, SentencePieceReference

        art = tok._art
        ptype = tok._ptype.tolist()
        score = art.array("score32").view(np.float32).astype(np.float64).tolist()
        pieces = [p.encode("utf-8") for p in tok._pieces]
        ref = SentencePieceReference.__new__(SentencePieceReference)
        ref.pieces, ref.reserved = {}, {}
        user = []
        for i, (b, t) in enumerate(zip(pieces, ptype)):
            (ref.pieces if t in (NORMAL, USER_DEFINED, UNUSED) else ref.reserved).setdefault(b, i)
            if t == USER_DEFINED:
                user.append(b)
        ref.unk_id, ref.types, ref.scores = tok.unk_id, ptype, score
        ref.matcher = PrefixMatcher(user)
        ref.maxlen = max((len(b) for b in ref.pieces), default=0)
        ref.min_score, ref.max_score = tok._min_score, tok._max_score
        self.ref, self.pieces, self.types, self.scores = ref, pieces, ptype, score
        self.USER = USER_DEFINED


def _explain_spm(tok, text: str, **kw: Any) -> Explanation:
    from ..reference.spm import CONTROL, UNKNOWN, f32

    if kw.get("allowed_special") or kw.get("add_special_tokens") or kw.get("add_bos") or kw.get("add_eos"):
        raise TypeError("explain() of a SentencePiece model explains plain encode(text); special-token options "
                        "are not supported here")
    m = tok.__dict__.get("_explain_model")
    if m is None:
        m = tok.__dict__["_explain_model"] = _SPMModel(tok)
    norm = tok.normalize(text)
    data = norm.encode("utf-8")
    unigram = tok.model_type.upper() == "UNIGRAM"
    segs = m.ref.unigram(data) if unigram else m.ref.bpe(data)
    notes = [f"normalized text (what the model sees): {norm!r}",
             "model: Unigram, the best path through the lattice of pieces (Viterbi over piece scores)" if unigram else
             "model: BPE, merges applied in the order of the merged piece's score (highest first)"]
    byte_fb = bool(tok._flags & 16)
    unk_score = f32(f32(m.ref.min_score) - 10.0)
    pieces: list[Piece] = []
    total, pos, prev_unk = 0.0, 0, False
    for w, pid in segs:
        t = m.types[pid]
        s = w.decode("utf-8", "backslashreplace")
        if t == UNKNOWN:
            sc = unk_score
        elif t == m.USER:
            sc = f32(f32(float(len(w)) * m.ref.max_score) - 0.1)
        else:
            sc = m.scores[pid]
        total += sc
        steps = [Step("piece", f"score {sc:.4f}; path score so far {total:.4f}" if unigram else f"piece score {sc:.4f}")]
        if t == CONTROL:
            ids = [pid]
        elif t == UNKNOWN and byte_fb:
            ids = [int(tok._h and tok.token_to_id(f"<0x{c:02X}>")) for c in w]
            steps.append(Step("byte", "no piece covers this text: byte fallback to <0xXX> pieces"))
        elif t == UNKNOWN and prev_unk:
            ids = []
            steps.append(Step("unk", "unknown, fused with the unknown piece before it"))
        else:
            ids = [pid]
            if t == UNKNOWN:
                steps.append(Step("unk", "no piece covers this text: the unknown piece"))
        prev_unk = t == UNKNOWN
        start = len(data[:pos].decode("utf-8", "ignore"))
        pos += len(w)
        pieces.append(Piece(s, start, start + len(s), ids, [tok.id_to_token(i) for i in ids], steps))
    return Explanation("sentencepiece-" + ("unigram" if unigram else "bpe"), text, pieces, notes=notes)


def _explain_generic(tok, text: str, **kw: Any) -> Explanation:
    ids, offs = tok.encode_with_offsets(text, **kw)
    toks = [str(tok.id_to_token(i)) for i in ids]
    pieces = [Piece(text[a:b], a, b, [i], [t]) for i, t, (a, b) in zip(ids, toks, offs)]
    return Explanation(type(tok).__name__, text, pieces,
                       notes=["tokens with their offsets; this kind records no step-by-step model decisions"])


def _explain_tekken(tok, text: str, *, add_special_tokens: bool = False) -> Explanation:
    """Mistral tekken: byte-level BPE over ranks (the inner tables), ids shifted by the special-token slots."""
    e = _explain_bpe(tok.inner, text, allowed_special=frozenset(), disallowed_special=())
    for p in e.pieces:
        p.ids = [i + tok.n_special for i in p.ids]
    if add_special_tokens:
        e.pieces.insert(0, Piece("", 0, 0, [tok.bos_id], [tok.specials[tok.bos_id]], special=True))
    e.kind = "tekken"
    e.notes.append(f"ids are the ranks plus {tok.n_special} special-token slots")
    return e
