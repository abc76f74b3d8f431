"""The runtime's state layout (the "blob" derived at load in mod_wordpiece.c): every state is one
byte record [header (kind, nc), labels, f/F by kind, offsets of children 1..nc-1] or a hub's 256 pairs;
the first child is implicit (the next record in DFS preorder).  These tests build tables whose shapes
reach every branch of that layout: sparse states with more than 16, 30 (the header's escape byte) and
32 children (the chunked label compare and the explicit offsets past the first chunk), hubs that are
first children (their pairs are re-aligned inside the record), long one-child chains, pops that are not
inlined, 3- and 4-byte state offsets ($FSTOK_WP_POINTER_BYTES), and compare the C runtime with the
original MaxMatch and with the pure-Python executor of the same tables."""
import random

import pytest

import fstok.compile.wordpiece as cw
from fstok.reference.wordpiece import TableExecutor, original_maxmatch
from test_wordpiece_corner import make, words_of

ALPHA = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789αβγδεζηθ"  # 70 labels, 2-byte too


def _vocab(seed=7):
    rnd = random.Random(seed)
    toks = ["[UNK]"] + list(ALPHA) + ["##" + c for c in ALPHA]
    # a wide second level under "q" (70 children: three 16-label chunks and more) and under "##x"
    toks += ["q" + c for c in ALPHA] + ["##x" + c for c in ALPHA]
    # long single-child chains (one child per state: implicit targets all the way down)
    toks += ["chainlongtokenabcdefghij", "##suffixchainlongabcdefg", "漢字の長いトークン"]
    # random pieces of 2-6 characters, word-initial and suffix
    for _ in range(400):
        w = "".join(rnd.choice(ALPHA) for _ in range(rnd.randint(2, 6)))
        toks.append(w if rnd.random() < 0.5 else "##" + w)
    return list(dict.fromkeys(toks))


@pytest.fixture(params=[10**6, 24, 2], ids=["r-only-dense", "default", "dense>=2"])
def tok(request, monkeypatch):
    monkeypatch.setattr(cw.build_tables, "__defaults__", (request.param,))
    return make(_vocab())


def _words(seed, n=400):
    rnd = random.Random(seed)
    out = ["q" + c for c in ALPHA] + ["qx" + c + c for c in ALPHA[::-1]]
    out += ["chainlongtokenabcdefghijsuffixchainlongabcdefg", "chainlongtokenabcdefghi", "漢字の長いトークン漢字"]
    for _ in range(n):
        out.append("".join(rnd.choice(ALPHA + "漢字のトー") for _ in range(rnd.randint(1, 14))))
    return out


def test_words_match_original_maxmatch(tok):
    vocab = _vocab()
    t2i = {t: i for i, t in enumerate(vocab)}
    ex = TableExecutor(tok)
    for w in _words(1):
        want = original_maxmatch(w, t2i, "[UNK]", "##", 100)
        assert words_of(tok, tok.encode_word(w)) == want, w
        assert words_of(tok, ex.word(w.encode(), len(w))) == want, w


def test_end_to_end_same_under_every_layout(monkeypatch):
    words = _words(2)
    rnd = random.Random(3)
    texts = [" ".join(rnd.sample(words, rnd.randint(1, 30))) + rnd.choice(["", ".", " !q?"]) for _ in range(60)]
    got = {}
    for th in (10**6, 24, 2):
        monkeypatch.setattr(cw.build_tables, "__defaults__", (th,))
        t = make(_vocab())
        got[th] = ([t.encode(x) for x in texts], [t.encode_with_offsets(x) for x in texts])
        ex = TableExecutor(t)
        for x, ids in zip(texts[:20], got[th][0][:20]):
            assert ex.encode(x) == ids, x
    assert got[10**6] == got[24] == got[2]


def test_layout_has_wide_sparse_and_hub_states(monkeypatch):
    """Guards the test's purpose: the vocabulary really has the shapes described above."""
    monkeypatch.setattr(cw.build_tables, "__defaults__", (10**6,))
    t = make(_vocab())
    nc = (t._tables["wp.node"] >> 32) & 0xFF
    assert int(nc.max()) > 32
    monkeypatch.setattr(cw.build_tables, "__defaults__", (2,))
    t = make(_vocab())
    assert t._art.meta["n_dense"] > 50


def test_four_byte_offsets_same_as_three(monkeypatch):
    """Blobs of 16 MB and more use 4-byte state offsets (another instantiation of the walk): forced here."""
    words = _words(4)
    rnd = random.Random(5)
    texts = [" ".join(rnd.sample(words, rnd.randint(1, 30))) + rnd.choice(["", ".", " !q?"]) for _ in range(60)]
    for th in (10**6, 24, 2):
        monkeypatch.setattr(cw.build_tables, "__defaults__", (th,))
        monkeypatch.delenv("FSTOK_WP_POINTER_BYTES", raising=False)
        t3 = make(_vocab())
        monkeypatch.setenv("FSTOK_WP_POINTER_BYTES", "4")
        t4 = make(_vocab())
        monkeypatch.delenv("FSTOK_WP_POINTER_BYTES")
        assert [t4.encode(x) for x in texts] == [t3.encode(x) for x in texts]
        assert [t4.encode_with_offsets(x) for x in texts] == [t3.encode_with_offsets(x) for x in texts]
        assert [t4.encode_word(w) for w in words] == [t3.encode_word(w) for w in words]


# Characters as steps: a state at a character boundary whose children are all multi-byte characters is
# looked up by whole characters (RK_CHR in mod_wordpiece.c: 4-byte keys); the states inside characters are
# stored only where a hub's byte row or a state with ASCII children too leads into them (RK_MID: no f/F, a
# miss there restarts the character from the state it began in).  Tokens of 2-, 3- and 4-byte characters
# that share lead bytes (so the walk often misses one or two bytes into a character) and ASCII letters
# beside them, checked against MaxMatch (words), the pure-Python executor of the same tables (ids) and
# offsets computed from the words' tokens.
MID_ALPHA = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяαβγδ漢字のトークン中文日本語𝔸𝔹😀😁"


def _mid_vocab(seed=11):
    rnd = random.Random(seed)
    toks = ["[UNK]"] + list(MID_ALPHA) + ["##" + c for c in MID_ALPHA] + list("abc") + ["##" + c for c in "abc"]
    for _ in range(600):
        w = "".join(rnd.choice(MID_ALPHA + "abc") for _ in range(rnd.randint(2, 5)))
        toks.append(w if rnd.random() < 0.5 else "##" + w)
    return list(dict.fromkeys(toks))


def _mid_words(seed, n=600):
    rnd = random.Random(seed)
    return ["".join(rnd.choice(MID_ALPHA + "abcё") for _ in range(rnd.randint(1, 12))) for _ in range(n)]


def _offsets_from_words(tok, text):
    """HF's offsets for text = words separated by spaces, '.', '!', '?' (each punctuation mark a word; a CJK
    ideograph is one too)."""
    out, i = [], 0
    spaced = "".join(f" {c} " if c in ".!?" or 0x4E00 <= ord(c) <= 0x9FFF else c for c in text)
    for piece in spaced.split(" "):
        if not piece:
            continue
        i = text.index(piece, i)
        toks = words_of(tok, tok.encode_word(piece))
        if toks == ["[UNK]"]:
            out.append((i, i + len(piece)))
        else:
            for k, t in enumerate(toks):
                n = len(t) - (2 if k else 0)
                out.append((i, i + n))
                i += n
            assert "".join(x[2:] if k else x for k, x in enumerate(toks)) == piece
        i = out[-1][1]
    return out


@pytest.mark.parametrize("th", [10**6, 24, 2], ids=["r-only-dense", "default", "dense>=2"])
def test_character_records(monkeypatch, th):
    monkeypatch.setattr(cw.build_tables, "__defaults__", (th,))
    vocab = _mid_vocab()
    t2i = {t: i for i, t in enumerate(vocab)}
    monkeypatch.delenv("FSTOK_WP_POINTER_BYTES", raising=False)
    t = make(vocab)
    stats = t._model.layout_stats()
    # the vocabulary really has such states: character records, stored and dropped states inside characters
    assert stats["char"] > 100 and stats["mid"] > 20 and stats["mid_dropped"] > 100, stats
    words = _mid_words(1)
    for w in words:
        want = original_maxmatch(w, t2i, "[UNK]", "##", 100)
        assert words_of(t, t.encode_word(w)) == want, w
    rnd = random.Random(2)
    texts = [" ".join(rnd.sample(words, rnd.randint(1, 20))) + rnd.choice(["", ".", " ! a?"]) for _ in range(80)]
    got = [t.encode(x) for x in texts]
    ex = TableExecutor(t)
    for x, ids in zip(texts, got):
        assert ex.encode(x) == ids, x
    for w in words[:300]:  # a text that ends inside a word (the last characters' keys read near the end)
        assert t.encode(w) == ex.encode(w), w
    for x, ids in zip(texts, got):
        ids2, offs = t.encode_with_offsets(x)
        assert ids2 == ids and [tuple(o) for o in offs] == _offsets_from_words(t, x), x
    assert t.encode_batch(texts, num_threads=2) == got
    monkeypatch.setenv("FSTOK_WP_POINTER_BYTES", "4")
    t4 = make(vocab)
    s4 = t4._model.layout_stats()
    assert s4["pointer_bytes"] == 4 and (s4["char"], s4["mid"]) == (stats["char"], stats["mid"])
    assert [t4.encode(x) for x in texts] == got
    assert [t4.encode_with_offsets(x) for x in texts] == [t.encode_with_offsets(x) for x in texts]
    assert [t4.encode_word(w) for w in words] == [t.encode_word(w) for w in words]
