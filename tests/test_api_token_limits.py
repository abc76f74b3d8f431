"""BPE token limits (fstok/token_limits.py): truncate, chunk_by_tokens, count_up_to.

Oracle: one whole `encode(text)` and the token bytes, cut by the rule stated in the module docstring
(`_ref_truncate`); chunks are checked by encoding each one.  Long texts (> 4096 characters) go through
the early-stop path (pieces at proven pre-tokenizer cuts), which must give the whole-encode answer.
"""
import random

import pytest
from conftest import needs_shared, read_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from fstok import token_limits
from fstok.bpe import _fix_surrogates

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def bpe(request):
    return fstok.get_encoding(request.param)


def _ref_truncate(tok, text, n, side="right", **kw):
    ids = tok.encode(text, **kw)
    lens = [len(tok.decode_single_token_bytes(i)) for i in ids]
    data = text.encode("utf-8")
    assert sum(lens) == len(data)
    T = len(ids)
    if T <= n:
        return ids, text, len(text) if side == "right" else 0
    if side == "right":
        k, end = n, sum(lens[:n])
        while k > 0 and end < len(data) and (data[end] & 0xC0) == 0x80:
            k -= 1
            end -= lens[k]
        head = data[:end].decode("utf-8")
        return ids[:k], head, len(head)
    k = n
    start = len(data) - sum(lens[T - k:]) if k else len(data)
    while k > 0 and (data[start] & 0xC0) == 0x80:
        start += lens[T - k]
        k -= 1
    tail = data[start:].decode("utf-8")
    return ids[T - k:] if k else [], tail, len(text) - len(tail)


PIECES = ["a", "Z", " ", "  ", "\n", "\n\n", "é", "ß", "漢", "字", "😀", "👍🏽", "🇺🇸", "\u0301", "ע", "क्ष", "<|endoftext|>",
          "\ufffd", "123", "4567", "don't", " the", "Hello", "ÿ", "\U0002a6a5", "\u1f80", "..."]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=30).map("".join)
SPECIAL_KW = st.sampled_from([{"disallowed_special": ()}, {"allowed_special": "all"},
                              {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}])


def _long_text(seed, n_chars):
    rng = random.Random(seed)
    out, size = [], 0
    while size < n_chars:
        p = rng.choice(PIECES + ["word", " word", "tokenizer", " 漢字漢字", "😀😀😀", "\t", "x" * rng.randrange(1, 40)])
        out.append(p)
        size += len(p)
    return "".join(out)


# ---------------------------------------------------------------------------------------------- truncate


@SETTINGS
@given(text=TEXT, n=st.integers(0, 30), side=st.sampled_from(["right", "left"]), kw=SPECIAL_KW)
def test_truncate_matches_reference(bpe, text, n, side, kw):
    r = bpe.truncate(text, n, side=side, **kw)
    assert (r.ids, r.text, r.split) == _ref_truncate(bpe, text, n, side, **kw)
    assert len(r.ids) <= n
    assert bpe.decode(r.ids) == r.text
    assert r.text == (text[: r.split] if side == "right" else text[r.split:])
    full = bpe.encode(text, **kw)
    assert r.ids == (full[: len(r.ids)] if side == "right" else full[len(full) - len(r.ids):])


def test_truncate_examples(bpe):
    assert bpe.truncate("hello world", 1) == (bpe.encode("hello"), "hello", 5)
    assert bpe.truncate("hello world", 1, side="left") == (bpe.encode(" world"), " world", 5)
    assert bpe.truncate("hello world", 100) == (bpe.encode("hello world"), "hello world", 11)
    assert bpe.truncate("hello", 0) == ([], "", 0) and bpe.truncate("hello", 0, side="left") == ([], "", 5)
    assert bpe.truncate("", 5) == ([], "", 0)
    # a character split over byte tokens: cut before it rather than inside it
    s = "a" + "\U0002a6a5" * 3  # rare CJK extension B character: several tokens each
    r = bpe.truncate(s, 2)
    assert r.text in ("a", "a\U0002a6a5") and len(r.ids) <= 2 and bpe.decode(r.ids) == r.text


@pytest.mark.parametrize("seed", range(6))
def test_truncate_long_early_stop(bpe, seed, monkeypatch):
    text = _long_text(seed, 20_000 + 3000 * seed)
    kw = {"disallowed_special": ()} if seed % 2 else {"allowed_special": "all"}
    total = len(bpe.encode(text, **kw))
    rng = random.Random(seed)
    for n in [1, 7, 100, rng.randrange(1, total), total - 1, total, total + 1]:
        for side in ("right", "left"):
            assert tuple(bpe.truncate(text, n, side=side, **kw)) == _ref_truncate(bpe, text, n, side, **kw), (n, side)
    # small limits encode only a part of a long text
    seen = []
    enc = bpe.encode
    monkeypatch.setattr(bpe, "encode", lambda t, **k: seen.append(len(t)) or enc(t, **k))
    bpe.truncate(text, 10, **kw)
    bpe.truncate(text, 10, side="left", **kw)
    assert bpe.count_up_to(text, 10, **kw) == 11
    assert max(seen) < len(text) // 2


@pytest.mark.parametrize("seed", range(4))
def test_small_pieces_are_exact(bpe, seed, monkeypatch):
    """Force the early-stop path to encode many small pieces (every proven cut then matters)."""
    monkeypatch.setattr(token_limits, "_EARLY_MIN_CHARS", 0)
    monkeypatch.setattr(token_limits, "_MIN_STEP", 7 + seed)
    monkeypatch.setattr(token_limits, "_STEP_PER_TOKEN", 0)
    monkeypatch.setattr(token_limits, "_MAX_STEP", 7 + seed)
    text = _long_text(50 + seed, 3000)
    kw = {"allowed_special": "all"} if seed % 2 else {"disallowed_special": ()}
    full = bpe.encode(text, **kw)
    ids, end = token_limits._prefix_ids(bpe, text, 10**9, frozenset(bpe.special_tokens) if seed % 2 else frozenset())
    assert end == len(text) and ids == full
    ids, start = token_limits._suffix_ids(bpe, text, 10**9, frozenset(bpe.special_tokens) if seed % 2 else frozenset())
    assert start == 0 and ids == full
    rng = random.Random(seed)
    for n in [1, 5, 50] + [rng.randrange(1, len(full) + 2) for _ in range(6)]:
        for side in ("right", "left"):
            assert tuple(bpe.truncate(text, n, side=side, **kw)) == _ref_truncate(bpe, text, n, side, **kw), (n, side)
        assert bpe.count_up_to(text, n, **kw) == min(len(full), n + 1)


@needs_shared
@pytest.mark.parametrize("corpus", ["multilingual", "code", "chinese_long"])
def test_truncate_and_count_corpus(bpe, corpus):
    data = read_corpus(corpus)
    rng = random.Random(len(data))
    for _ in range(3):
        a = rng.randrange(max(1, len(data) - 30_000))
        text = data[a:a + 30_000]
        total = bpe.count(text)
        for n in [3, 500, rng.randrange(1, total + 2), total]:
            for side in ("right", "left"):
                assert tuple(bpe.truncate(text, n, side=side, disallowed_special=())) == _ref_truncate(
                    bpe, text, n, side, disallowed_special=())
            assert bpe.count_up_to(text, n) == min(total, n + 1)


@SETTINGS
@given(text=TEXT, n=st.integers(0, 40), kw=SPECIAL_KW)
def test_count_up_to(bpe, text, n, kw):
    kw = dict(kw)
    kw.setdefault("disallowed_special", ())
    assert bpe.count_up_to(text, n, **kw) == min(len(bpe.encode(text, **kw)), n + 1)


# ---------------------------------------------------------------------------------------------- chunks


def _check_chunks(tok, text, n, chunks, kw):
    assert "".join(chunks) == text
    for c in chunks:
        assert c and len(tok.encode(c, **kw)) <= n


@SETTINGS
@given(text=TEXT, n=st.integers(1, 12), kw=SPECIAL_KW)
def test_chunk_by_tokens(bpe, text, n, kw):
    try:
        chunks = bpe.chunk_by_tokens(text, n, **kw)
    except ValueError as e:
        # only when one character alone needs more than n tokens
        assert "on its own" in str(e)
        assert any(len(bpe.encode(ch, disallowed_special=())) > n for ch in text)
        return
    _check_chunks(bpe, text, n, chunks, {"disallowed_special": (), **kw})
    pairs = bpe.chunk_by_tokens(text, n, return_ids=True, **kw)
    assert [c for c, _ in pairs] == chunks
    assert all(ids == bpe.encode(c, **kw) for c, ids in pairs)


@pytest.mark.parametrize("seed", range(4))
def test_chunk_long(bpe, seed):
    text = _long_text(100 + seed, 15_000)
    total = bpe.count(text)
    for n in (4, 64, 1000):
        chunks = bpe.chunk_by_tokens(text, n, disallowed_special=())
        _check_chunks(bpe, text, n, chunks, {"disallowed_special": ()})
        assert len(chunks) <= 1.5 * total / n + 2  # cuts are late, not degenerate


def test_chunk_specials(bpe):
    text = "ab<|endoftext|>cd" * 3
    with pytest.raises(ValueError, match="disallowed special token"):
        bpe.chunk_by_tokens(text, 2)
    chunks = bpe.chunk_by_tokens(text, 2, allowed_special="all")
    assert "".join(chunks) == text and any("<|endoftext|>" in c for c in chunks)  # never cut inside
    for c in chunks:
        assert len(bpe.encode(c, allowed_special="all")) <= 2
    chunks = bpe.chunk_by_tokens(text, 2, disallowed_special=())
    assert "".join(chunks) == text and all("<|endoftext|>" not in c for c in chunks)  # ordinary text: split
    assert bpe.chunk_by_tokens("", 3) == []


def test_specials_truncate_and_count(bpe):
    text = "hi <|endoftext|> there"
    with pytest.raises(ValueError, match="disallowed special token"):
        bpe.truncate(text, 3)
    r = bpe.truncate(text, 3, allowed_special="all")
    assert r.ids[-1] == bpe.eot_token and r.text == "hi <|endoftext|>"
    assert bpe.count_up_to(text, 100) == bpe.count(text)  # count's default: specials are ordinary
    assert bpe.count_up_to(text, 100, allowed_special="all") == len(bpe.encode(text, allowed_special="all"))
    with pytest.raises(ValueError, match="disallowed special token"):
        bpe.count_up_to(text, 1, disallowed_special="all")
    # the disallowed check covers the whole text, also beyond the limit of a long text
    with pytest.raises(ValueError, match="disallowed special token"):
        bpe.truncate("word " * 3000 + "<|endoftext|>", 5)


def test_lone_surrogates(bpe):
    text = "a\ud800b\ud83d\ude00c" + "x" * 10
    fixed = _fix_surrogates(text)
    r = bpe.truncate(text, 3)
    assert r.ids == bpe.encode(text)[: len(r.ids)] and r.text == fixed[: r.split]
    assert "".join(bpe.chunk_by_tokens(text, 2)) == text  # slices of the text given (lone surrogates kept)
    assert bpe.count_up_to(text, 100) == bpe.count(text)


def test_bad_input(bpe, monkeypatch):
    for bad in (-1,):
        with pytest.raises(ValueError, match="max_tokens"):
            bpe.truncate("x", bad)
        with pytest.raises(ValueError, match="max_tokens"):
            bpe.count_up_to("x", bad)
    with pytest.raises(ValueError, match="max_tokens"):
        bpe.chunk_by_tokens("x", 0)
    for bad in ("3", 3.0, True, None):
        for f in (bpe.truncate, bpe.chunk_by_tokens, bpe.count_up_to):
            with pytest.raises(TypeError, match="max_tokens"):
                f("x", bad)
    for bad in (b"x", None, ["x"]):
        for f in (bpe.truncate, bpe.chunk_by_tokens, bpe.count_up_to):
            with pytest.raises(TypeError, match="text"):
                f(bad, 3)
    with pytest.raises(ValueError, match="side"):
        bpe.truncate("x", 3, side="middle")
    with pytest.raises(TypeError):
        bpe.truncate("x", 3, allowed_special="<|endoftext|>")
    with pytest.raises(ValueError, match="on its own"):
        bpe.chunk_by_tokens("a\U0002a6a5", 1)
    monkeypatch.setattr(bpe, "_python_text_path", lambda: True)
    with pytest.raises(ValueError, match="changes the text"):
        bpe.truncate("x", 3)
    with pytest.raises(ValueError, match="changes the text"):
        token_limits.chunk_by_tokens(bpe, "x", 3)


def test_chunk_starting_inside_a_token():
    """Regression (found by hypothesis): ' ß' is [' \\xc3', '\\x9f'] under cl100k, so after the chunk ' ' the next
    start lies inside a token and the global tokens bound nothing; the chunker must still try the next
    character boundary ('ß' alone is one token) instead of reporting that 'ß' needs more than 1 token."""
    import fstok

    enc = fstok.get_encoding("cl100k_base")
    assert enc.encode(" ß") == [1717, 253] and enc.encode("ß") == [8156]
    assert enc.chunk_by_tokens(" ß", 1) == [" ", "ß"]
    assert enc.chunk_by_tokens("a ßb ß", 1) == ["a", " ", "ß", "b", " ", "ß"]
