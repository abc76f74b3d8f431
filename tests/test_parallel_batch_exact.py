"""A batch call gives exactly what encoding each text alone gives, on any number of threads.

Why these tests: a batch reads each str's code units on worker threads and encodes them to UTF-8 there
(pystr_utf8.h: Latin-1, UCS-2 and UCS-4 strs, strs whose UTF-8 is already stored, lone surrogates); the
workers come from a persistent pool and build result lists while the caller runs; the id lists a batch
returns are untracked by the cyclic GC.  A wrong conversion, a text skipped or encoded twice, a result put
at the wrong index or a surrogate text not repaired would each show as a batch result that differs from
the one-by-one result here."""
import gc
import random

import pytest

import fstok

WORDS = ["the", " cat", " café", " naïve", "ÿ", " Ünïcödé", " 東京", " Привет", "🙂", "𝔘𝔫𝔦", " x=[1,2]", "\n",
         "  ", "\t", "12345", "", "<|endoftext|>", "\u00a0", "é" * 40, "a" * 300, " 𠀀𠀁"]


def _texts(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        k = rnd.choice([0, 1, 2, 5, 12, 40])
        t = "".join(rnd.choice(WORDS) for _ in range(k))
        # fresh str objects: no UTF-8 stored in them yet (the worker-side conversion)
        out.append(t.encode("utf-8").decode("utf-8"))
    return out


@pytest.fixture(scope="module")
def o200k():
    return fstok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def bert():
    return fstok.get_encoding("bert-base-uncased")


@pytest.mark.parametrize("seed", range(6))
def test_bpe_batch_equals_one_by_one(o200k, seed):
    rnd = random.Random(seed)
    texts = _texts(seed, rnd.choice([1, 2, 7, 64, 333, 1024, 2500]))
    want = [o200k.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 3, 8):
        fresh = [t.encode("utf-8").decode("utf-8") for t in texts]
        assert o200k.encode_ordinary_batch(fresh, num_threads=nt) == want, nt
        # the same strs again: now their UTF-8 is stored in them (read in place)
        assert o200k.encode_ordinary_batch(texts, num_threads=nt) == want, nt
        assert o200k.count_batch(fresh, num_threads=nt) == [len(w) for w in want]


def test_bpe_batch_code_unit_widths(o200k):
    # one str of each storage width (ASCII, Latin-1, UCS-2, UCS-4), alone and mixed, long enough to go to threads
    kinds = ["plain ascii words " * 30, "Latin-1 ÿ café " * 30, "UCS-2 東京 Привет " * 30, "UCS-4 🙂 𝔘𝔫𝔦 " * 30]
    texts = [k.encode().decode() for k in kinds for _ in range(20)]
    random.Random(1).shuffle(texts)
    want = [o200k.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 4):
        assert o200k.encode_ordinary_batch([t.encode().decode() for t in texts], num_threads=nt) == want


def test_bpe_batch_lone_surrogates(o200k):
    texts = _texts(3, 400)
    for i in range(0, 400, 37):
        texts[i] = texts[i] + "\ud800" + " tail 東京"
    texts[5] = "\udfff"
    texts[6] = "🙂\udc00🙂"  # a UCS-4 str with a surrogate
    texts[7] = "é\ud83d"      # UCS-2
    want = [o200k.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 5):
        assert o200k.encode_ordinary_batch([t.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
                                            for t in texts], num_threads=nt) == want


def test_bpe_batch_specials(o200k):
    texts = ["a <|endoftext|> b", "<|endoftext|>", "東京<|endoftext|>🙂", "none here"] * 50
    want = [o200k.encode(t, allowed_special="all") for t in texts]
    for nt in (1, 2, 4):
        assert o200k.encode_batch(texts, num_threads=nt, allowed_special="all") == want
    with pytest.raises(ValueError):
        o200k.encode_batch(texts, num_threads=2)  # disallowed by default, as tiktoken


def test_bpe_batch_empty_and_errors(o200k):
    assert o200k.encode_ordinary_batch([], num_threads=4) == []
    assert o200k.encode_ordinary_batch(["", "", ""], num_threads=2) == [[], [], []]
    with pytest.raises(TypeError):
        o200k.encode_ordinary_batch(["a", b"b"], num_threads=2)


def test_batch_lists_are_plain_lists_outside_the_gc(o200k, bert):
    texts = _texts(9, 300)
    for out in (o200k.encode_ordinary_batch(texts, num_threads=2), o200k.encode_ordinary_batch(texts, num_threads=1),
                bert.encode_batch(texts, num_threads=2)):
        assert all(type(x) is list for x in out)
        assert not any(gc.is_tracked(x) for x in out)
        assert gc.is_tracked(out)
        out[0].append(5)  # still an ordinary, mutable list
        assert out[0][-1] == 5


@pytest.mark.parametrize("seed", range(4))
def test_wordpiece_batch_equals_one_by_one(bert, seed):
    rnd = random.Random(seed)
    texts = [t.replace("<|endoftext|>", "[SEP]") for t in _texts(seed + 100, rnd.choice([1, 5, 100, 1024, 2100]))]
    want = [bert.encode(t) for t in texts]
    want_off = [bert.encode_with_offsets(t) for t in texts[:200]]
    for nt in (1, 2, 3, 8):
        fresh = [t.encode("utf-8").decode("utf-8") for t in texts]
        assert bert.encode_batch(fresh, num_threads=nt) == want, nt
        assert bert.encode_batch(texts, num_threads=nt) == want, nt
        got = bert.encode_batch([t.encode().decode() for t in texts[:200]], num_threads=nt, with_offsets=True)
        assert [(list(a), list(b)) for a, b in got] == [(list(a), list(b)) for a, b in want_off]


def test_wordpiece_batch_lone_surrogate_error(bert):
    texts = ["fine", "東京 \ud800", "ok"] * 10
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        bert.encode_batch(texts, num_threads=2)


def _rows(ids, starts):
    assert ids.dtype.name == "uint32" and starts.dtype.name == "int64" and starts[0] == 0
    assert len(ids) == starts[-1]
    return [ids[starts[i]:starts[i + 1]].tolist() for i in range(len(starts) - 1)]


@pytest.mark.parametrize("seed", range(3))
def test_bpe_batch_to_numpy(o200k, seed):
    texts = _texts(seed + 50, random.Random(seed).choice([0, 1, 9, 500, 1500]))
    texts += ["bad \ud800 text", "<|endoftext|> special"]
    want = [o200k.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 4):
        assert _rows(*o200k.encode_batch_to_numpy(texts, num_threads=nt, disallowed_special=())) == want
    want_sp = [o200k.encode(t, allowed_special="all") for t in texts]
    assert _rows(*o200k.encode_batch_to_numpy(texts, num_threads=2, allowed_special="all")) == want_sp
    with pytest.raises(ValueError):
        o200k.encode_batch_to_numpy(texts, num_threads=2)


def test_bpe_batch_disallowed_check(o200k):
    # the batch check (one search over the texts joined) raises as the one-by-one check, for the same text
    texts = ["fine"] * 100 + ["x <|endofprompt|> y <|endoftext|>"] + ["also fine"] * 10
    with pytest.raises(ValueError) as batch_err:
        o200k.encode_batch(texts, num_threads=2)
    with pytest.raises(ValueError) as one_err:
        o200k.encode(texts[100])
    assert str(batch_err.value) == str(one_err.value)
    assert o200k.encode_batch(["<|endoftext", "|>"], num_threads=2) == [o200k.encode_ordinary("<|endoftext"),
                                                                        o200k.encode_ordinary("|>")]
    with pytest.raises(TypeError):
        o200k.encode_batch(["a", 3], num_threads=2)


def test_wordpiece_batch_to_numpy(bert):
    texts = [t.replace("<|endoftext|>", "[SEP]") for t in _texts(77, 700)] + [b"bytes text \xc3\xa9"]
    want = [bert.encode(t if isinstance(t, str) else t.decode()) for t in texts]
    for nt in (1, 2, 4):
        assert _rows(*bert.encode_batch_to_numpy(texts, num_threads=nt)) == want
    assert _rows(*bert.encode_batch_to_numpy([], num_threads=2)) == []


def test_wordpiece_word_batch_on_threads(bert):
    words = [w.strip().lower() for w in " ".join(_texts(5, 400)).split() if w.strip()][:3000]
    want = [bert.encode_word(w) for w in words]
    for nt in (1, 2, 4):
        assert bert.encode_word_batch(words, num_threads=nt) == want
