"""fstok.DecodeStream: streaming decode == one-shot decode, partial UTF-8 buffered, bad input refused.

Oracles: `tok.decode(ids)` (BPE: decode_bytes(...).decode("utf-8", "replace"); WordPiece: HF's decoder) and,
for what a BPE stream holds back after each step, `_incomplete_tail` below (an independent statement of
"the trailing bytes are a proper prefix of some valid UTF-8 character").
"""
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from fstok import DecodeStream

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def bpe(request):
    return fstok.get_encoding(request.param)


@pytest.fixture(scope="module")
def wp():
    return fstok.get_encoding("bert-base-uncased")


def _pool(tok):
    """Ids to draw from: every single-byte token, tokens whose bytes are not valid UTF-8 on their own
    (pieces of characters), tokens of multi-byte characters, specials, random ids."""
    cached = getattr(tok, "_test_pool", None)
    if cached is not None:
        return cached
    rng = random.Random(7)
    byte_ids = [tok.encode_single_token(bytes([b])) for b in range(256)]
    partial, whole = [], []
    for i in rng.sample(range(100_000), 6000):
        try:
            b = tok.decode_single_token_bytes(i)
        except KeyError:
            continue
        try:
            s = b.decode("utf-8")
            if not s.isascii():
                whole.append(i)
        except UnicodeDecodeError:
            partial.append(i)
    pool = (byte_ids, partial, whole, sorted(tok.special_tokens.values()), list(range(0, 50_000, 97)))
    tok._test_pool = pool
    return pool


def _random_ids(tok, rng, n):
    groups = _pool(tok)
    weights = [4, 3, 2, 0.3, 1]
    return [rng.choice(rng.choices(groups, weights)[0]) for _ in range(n)]


def _incomplete_tail(data: bytes) -> int:
    """Length of the trailing bytes that are a proper prefix of a valid UTF-8 encoding (0..3)."""
    for L in (3, 2, 1):
        if len(data) < L:
            continue
        t = data[-L:]
        lead = t[0]
        need = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
        if need <= L:
            continue
        for second in range(0x80, 0xC0):
            cand = (t + bytes([second]) + b"\x80" * need)[:need] if L == 1 else (t + b"\x80" * need)[:need]
            try:
                cand.decode("utf-8")
                return L
            except UnicodeDecodeError:
                pass
            if L > 1:
                break
    return 0


def _cuts(rng, n):
    """Random grouping of n ids: lengths of consecutive groups (many singles, some runs, some empty)."""
    out, left = [], n
    while left > 0:
        k = rng.choice([0, 1, 1, 1, 2, 3, 17])
        k = min(k, left)
        out.append(k)
        left -= k
    return out


def _feed(stream, ids, groups):
    outs, pos = [], 0
    for g in groups:
        part = ids[pos:pos + g]
        outs.append(stream.step(part[0]) if g == 1 and pos % 2 else stream.step_many(part))
        pos += g
    return outs


# ---------------------------------------------------------------------------------------------- BPE


def test_example_emoji_split(bpe):
    ids = bpe.encode("a😀b漢字🇺🇸")
    s = bpe.decode_stream()
    outs = [s.step(i) for i in ids]
    assert "".join(outs) + s.flush() == "a😀b漢字🇺🇸"
    assert all("\ufffd" not in o for o in outs)
    # the byte tokens of one 4-byte character: nothing until the last one
    four = [bpe.encode_single_token(bytes([b])) for b in "😀".encode()]
    s = DecodeStream(bpe)
    assert [s.step(i) for i in four] == ["", "", "", "😀"]
    assert s.pending_bytes == b"" and s.num_tokens == 4


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 60))
def test_random_ids_equal_decode(bpe, seed, n):
    rng = random.Random(seed)
    ids = _random_ids(bpe, rng, n)
    s = bpe.decode_stream()
    emitted = ""
    data = b""
    for i in ids:
        out = s.step(i)
        emitted += out
        data += bpe.decode_single_token_bytes(i)
        L = _incomplete_tail(data)
        # what is out so far: everything but an incomplete trailing sequence, replaced as one-shot does
        assert emitted == data[: len(data) - L].decode("utf-8", "replace")
        assert s.pending_bytes == data[len(data) - L:]
    assert emitted + s.flush() == bpe.decode(ids)
    assert s.pending_bytes == b""


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 80))
def test_random_grouping_equal_decode(bpe, seed, n):
    rng = random.Random(seed)
    ids = _random_ids(bpe, rng, n)
    s = DecodeStream(bpe)
    outs = _feed(s, ids, _cuts(rng, n))
    assert "".join(outs) + s.flush() == bpe.decode(ids)


TEXT = st.lists(
    st.one_of(
        st.sampled_from(["a", "Z", " ", "\n", "é", "ß", "漢", "字", "😀", "👍🏽", "🇺🇸", "\u0301", "ע", "क्ष", "<|endoftext|>",
                         "\ufffd", "\x00", "  x", "123"]),
        st.text(max_size=4),
    ),
    max_size=30,
).map("".join)


@SETTINGS
@given(text=TEXT, seed=st.integers(0, 2**32 - 1))
def test_encoded_text_streams_back(bpe, text, seed):
    rng = random.Random(seed)
    ids = bpe.encode(text, allowed_special="all")
    s = bpe.decode_stream()
    outs = _feed(s, ids, _cuts(rng, len(ids)))
    assert "".join(outs) + s.flush() == text
    assert all("\ufffd" not in o for o in outs) or "\ufffd" in text


def test_invalid_bytes_split_at_every_position(bpe):
    """Invalid and truncated sequences at every cut: U+FFFD exactly where the one-shot decode puts them."""
    samples = [b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82A", b"\xf4\x90\x80\x80",
               b"\xf0\x9f\x98", b"\x80\x80\xbf", b"\xe0\x80\x80", b"\xef\xbf\xbd", b"\xf0\x90\x80\x80\xe2", b"\xff"]
    byte_id = [bpe.encode_single_token(bytes([b])) for b in range(256)]
    for a in samples:
        for b in samples:
            data = b"x" + a + b + b"y"
            ids = [byte_id[c] for c in data]
            expect = data.decode("utf-8", "replace")
            for cut in range(len(ids) + 1):
                s = DecodeStream(bpe)
                got = s.step_many(ids[:cut])
                assert got == data[: cut - _incomplete_tail(data[:cut])].decode("utf-8", "replace")
                got += "".join(s.step(i) for i in ids[cut:]) + s.flush()
                assert got == expect, (data, cut)


def test_flush_midstream_and_reset(bpe):
    e = "😀".encode()
    b = [bpe.encode_single_token(bytes([c])) for c in e]
    s = bpe.decode_stream()
    assert s.step_many(b[:2]) == "" and s.pending_bytes == e[:2]
    assert s.flush() == "\ufffd" == bpe.decode(b[:2])
    assert s.step_many(b[2:]) == "\ufffd\ufffd"  # lone continuation bytes: invalid at once
    assert s.flush() == ""
    s.step_many(b[:3])
    s.reset()
    assert s.pending_bytes == b"" and s.num_tokens == 0
    assert s.step_many(b) == "😀"


def test_midstream_flush_is_decode_of_parts(bpe):
    rng = random.Random(3)
    for _ in range(40):
        ids = _random_ids(bpe, rng, 30)
        k = rng.randrange(31)
        s = DecodeStream(bpe)
        got = s.step_many(ids[:k]) + s.flush() + s.step_many(ids[k:]) + s.flush()
        assert got == bpe.decode(ids[:k]) + bpe.decode(ids[k:])


def test_prefill(bpe):
    rng = random.Random(5)
    for _ in range(40):
        ids = _random_ids(bpe, rng, 30)
        k = rng.randrange(31)
        s1 = DecodeStream(bpe)
        shown = s1.prefill(ids[:k])
        rest = "".join(s1.step(i) for i in ids[k:]) + s1.flush()
        assert shown + rest == bpe.decode(ids)
        s2 = bpe.decode_stream(prefill=ids[:k])
        assert s2.num_tokens == k
        assert "".join(s2.step(i) for i in ids[k:]) + s2.flush() == rest


def test_special_tokens(bpe):
    eot = bpe.eot_token
    ids = bpe.encode("hi") + [eot] + bpe.encode(" 漢")
    s = bpe.decode_stream()
    assert "".join(s.step(i) for i in ids) + s.flush() == bpe.decode(ids) == "hi<|endoftext|> 漢"
    s = bpe.decode_stream(skip_special_tokens=True)
    assert "".join(s.step(i) for i in ids) + s.flush() == "hi 漢"
    # a special between the bytes of one character: skipped, the character completes
    e = [bpe.encode_single_token(bytes([c])) for c in "漢".encode()]
    s = bpe.decode_stream(skip_special_tokens=True)
    assert s.step_many([e[0], eot, e[1], e[2]]) == "漢"
    s = bpe.decode_stream()
    assert s.step_many([e[0], eot, e[1], e[2]]) + s.flush() == bpe.decode([e[0], eot, e[1], e[2]])


def test_numpy_ids(bpe):
    ids = bpe.encode("numpy 😀 ids")
    s = bpe.decode_stream()
    assert s.step_many(np.array(ids, dtype=np.uint32)) + s.flush() == "numpy 😀 ids"
    s = bpe.decode_stream()
    assert "".join(s.step(np.int64(i)) for i in ids) == "numpy 😀 ids"


def test_errors_strict(bpe):
    byte_id = [bpe.encode_single_token(bytes([b])) for b in range(256)]
    s = bpe.decode_stream(errors="strict")
    assert s.step(byte_id[0xE2]) == "" and s.step(byte_id[0x82]) == ""
    with pytest.raises(UnicodeDecodeError):
        s.step(byte_id[ord("A")])
    s = bpe.decode_stream(errors="strict")
    s.step(byte_id[0xE2])
    with pytest.raises(UnicodeDecodeError):
        s.flush()
    s = bpe.decode_stream(errors="ignore")
    assert s.step_many([byte_id[0xFF], byte_id[ord("A")]]) == "A"


def test_bad_input_bpe(bpe):
    s = bpe.decode_stream()
    s.step(bpe.encode_single_token(b"\xe2"))
    before = s.pending_bytes
    for bad in ("a", 1.0, None, True, b"x", [1]):
        with pytest.raises(TypeError):
            s.step(bad)
    for bad in (-1, bpe.n_vocab, bpe.n_vocab + 10, 2**64, 100256 if bpe.name == "cl100k_base" else 199998):
        with pytest.raises(ValueError, match="invalid token id"):
            s.step(bad)
    with pytest.raises(TypeError):
        s.step_many([1, 2, "x"])
    with pytest.raises(ValueError):
        s.step_many([1] * 20 + [bpe.n_vocab + 1])  # the bulk path reports the bad id too
    with pytest.raises(ValueError):
        s.step_many([1, -5])
    for bad in ("abc", b"abc", 5, np.array([1.0, 2.0])):
        with pytest.raises(TypeError):
            s.step_many(bad)
    # nothing was consumed by the failed calls
    assert s.pending_bytes == before and s.num_tokens == 1
    with pytest.raises(ValueError, match="error handler"):
        DecodeStream(bpe, errors="bogus")
    with pytest.raises(TypeError):
        DecodeStream(bpe, skip_special_tokens="yes")
    with pytest.raises(TypeError):
        DecodeStream(object())
    with pytest.raises(TypeError):
        DecodeStream(bpe, prefill="abc")


# ---------------------------------------------------------------------------------------------- WordPiece


def _wp_pool(wp):
    rng = random.Random(11)
    vocab = wp.get_vocab()
    cont = [i for t, i in vocab.items() if t.startswith("##")]
    words = [i for t, i in vocab.items() if not t.startswith("##") and not t.startswith("[")]
    punct = [wp.token_to_id(c) for c in ".,!?'" if wp.token_to_id(c) is not None]
    specials = [wp.token_to_id(t) for t in wp.special_tokens]
    return [rng.sample(cont, 300), rng.sample(words, 300), punct, specials]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), skip=st.sampled_from([None, True, False]))
def test_wordpiece_random_ids(wp, seed, n, skip):
    rng = random.Random(seed)
    groups = _wp_pool(wp) if not hasattr(wp, "_test_pool") else wp._test_pool
    wp._test_pool = groups
    ids = [rng.choice(rng.choices(groups, [3, 3, 2, 1])[0]) for _ in range(n)]
    s = DecodeStream(wp, skip_special_tokens=skip)
    outs = _feed(s, ids, _cuts(rng, n))
    expect = wp.decode(ids) if skip is None else wp.decode(ids, skip_special_tokens=skip)
    assert "".join(outs) + s.flush() == expect


@SETTINGS
@given(text=TEXT, seed=st.integers(0, 2**32 - 1))
def test_wordpiece_encoded_text(wp, text, seed):
    rng = random.Random(seed)
    ids = wp.encode(text, add_special_tokens=True)
    s = DecodeStream(wp)
    outs = _feed(s, ids, _cuts(rng, len(ids)))
    assert "".join(outs) + s.flush() == wp.decode(ids)


def test_wordpiece_prefill_and_specials(wp):
    ids = wp.encode("hello world, isn't it unaffable?", add_special_tokens=True)
    for k in range(len(ids) + 1):
        s = DecodeStream(wp)
        shown = s.prefill(ids[:k])
        assert shown + s.step_many(ids[k:]) + s.flush() == wp.decode(ids)
    # the first text-producing token gets no space, even after skipped specials
    cls = wp.token_to_id("[CLS]")
    s = DecodeStream(wp)
    assert s.step(cls) == "" and s.step(wp.token_to_id("hello")) == "hello"
    assert s.step(wp.token_to_id("##s")) == "s" and s.step(wp.token_to_id("world")) == " world"
    s = DecodeStream(wp, skip_special_tokens=False)
    assert s.step(cls) == "[CLS]" and s.step(wp.token_to_id("hello")) == " hello"
    s.reset()
    assert s.step(wp.token_to_id("##s")) == "##s"


def test_bad_input_wordpiece(wp):
    s = DecodeStream(wp)
    s.step(wp.token_to_id("hello"))
    for bad in (-1, wp.vocab_size, 10**12):
        with pytest.raises(ValueError, match="invalid token id"):
            s.step(bad)
    for bad in ("hello", 2.0, True):
        with pytest.raises(TypeError):
            s.step(bad)
    with pytest.raises(ValueError):
        s.step_many([wp.token_to_id("world"), wp.vocab_size])
    assert s.num_tokens == 1
    assert s.step(wp.token_to_id("world")) == " world"  # context survived the failed calls
    assert s.pending_bytes == b"" and s.flush() == ""
