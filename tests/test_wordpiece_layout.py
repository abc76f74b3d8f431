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


# States inside a UTF-8 character (RK_MID in mod_wordpiece.c) store no f/F: a miss there restarts the
# character from the state its first byte was read in.  Tokens of 2-, 3- and 4-byte characters that share
# lead bytes (so the walk often misses one or two bytes into a character), and $FSTOK_WP_NO_MID=1 (every
# state keeps its f/F) as the second opinion.
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


@pytest.mark.parametrize("th", [10**6, 24, 2], ids=["r-only-dense", "default", "dense>=2"])
def test_mid_character_states(monkeypatch, th):
    monkeypatch.setattr(cw.build_tables, "__defaults__", (th,))
    vocab = _mid_vocab()
    t2i = {t: i for i, t in enumerate(vocab)}
    monkeypatch.delenv("FSTOK_WP_NO_MID", raising=False)
    t = make(vocab)
    stats = t._model.layout_stats()
    assert stats["mid"] > 100, stats  # the vocabulary really has such states
    monkeypatch.setenv("FSTOK_WP_NO_MID", "1")
    ref = make(vocab)
    assert ref._model.layout_stats()["mid"] == 0
    assert ref._model.layout_stats()["blob_bytes"] > stats["blob_bytes"]
    words = _mid_words(1)
    for w in words:
        want = original_maxmatch(w, t2i, "[UNK]", "##", 100)
        assert words_of(t, t.encode_word(w)) == want, w
        assert words_of(ref, ref.encode_word(w)) == want, w
    rnd = random.Random(2)
    texts = [" ".join(rnd.sample(words, rnd.randint(1, 20))) + rnd.choice(["", ".", " ! a?"]) for _ in range(80)]
    assert [t.encode(x) for x in texts] == [ref.encode(x) for x in texts]
    assert [t.encode_with_offsets(x) for x in texts] == [ref.encode_with_offsets(x) for x in texts]
    ex = TableExecutor(t)
    for x in texts[:30]:
        assert ex.encode(x) == t.encode(x), x
    monkeypatch.setenv("FSTOK_WP_POINTER_BYTES", "4")
    monkeypatch.delenv("FSTOK_WP_NO_MID")
    t4 = make(vocab)
    assert t4._model.layout_stats()["mid"] == stats["mid"] and t4._model.layout_stats()["pointer_bytes"] == 4
    assert [t4.encode(x) for x in texts] == [ref.encode(x) for x in texts]
