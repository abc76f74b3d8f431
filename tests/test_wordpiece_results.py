"""How the WordPiece runtime builds its results (mod_wordpiece.c): ids go first into a buffer on the
C stack (STACK_IDS ids, then a malloc'd copy that grows), and a token id's int object is created on
first use and then shared (id_int; the cache fills lazily, under the GIL).  The ids must not depend
on either: these compare every output route across the stack buffer's limit, with a cold and a warm
int cache, on threads, and after the model is gone."""
import functools
import gc
import threading

import numpy as np
import pytest
from conftest import needs_shared, read_corpus

import fstok
from fstok.reference.wordpiece import TableExecutor
from test_wordpiece_corner import make

STACK_IDS = 512  # mod_wordpiece.c


@functools.lru_cache(maxsize=None)
def tok(name):
    return fstok.get_encoding(name)


def fresh(name):
    """A new model (cold int cache) over the same tables."""
    return fstok.loads(tok(name).to_bytes())


def _texts_around_stack_limit():
    # "a b c ..." gives one id per word: texts of STACK_IDS - 2 .. STACK_IDS + 2 ids and far beyond,
    # short enough (< 4096 bytes) to stay on the path that keeps the GIL, and one that releases it
    out = []
    for k in (1, STACK_IDS - 1, STACK_IDS, STACK_IDS + 1, STACK_IDS + 7, 3 * STACK_IDS):
        out.append(" ".join("ab"[i % 2] for i in range(k)))
    out.append("x" * 2000 + " y" * 600)  # one long word (unk) then many: growth after the first word
    out.append("hello, world! " * 600)  # > 4096 bytes: the GIL-free branch, same stack buffer
    return out


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-multilingual-cased"])
def test_ids_across_the_stack_buffer(name):
    t = tok(name)
    for text in _texts_around_stack_limit():
        want, _ = t.encode_with_offsets(text)  # offsets path: malloc'd buffers only
        assert t.encode(text) == want
        assert t.encode_to_numpy(text).tolist() == want  # bytes of uint32 (mode 2): the stack buffer too
        assert np.frombuffer(t._model.encode(text, 2), dtype=np.uint32).tolist() == want
        assert t.encode_batch([text, text], num_threads=2) == [want, want]


def test_stack_limit_sizes_are_exact():
    t = tok("bert-base-uncased")
    for k in (STACK_IDS - 1, STACK_IDS, STACK_IDS + 1):
        ids = t.encode(" ".join(["a"] * k))
        assert len(ids) == k and set(ids) == {t.token_to_id("a")}


def test_reference_executor_long_text():
    # a small vocabulary (a new model: its int cache starts empty) against the pure-Python executor
    t = make(["[UNK]", "a", "b", "ab", "##a", "##b", "##ab", "c", "##c"])
    words = ["ab", "abab", "cab", "x", "abcabcab", "b"] * 200
    text = " ".join(words)
    got = t.encode(text)
    assert len(got) > STACK_IDS
    assert got == [i for w in words for i in t.encode_word(w)]
    assert got == TableExecutor(t).encode(text)


def test_int_objects_shared_and_equal():
    t = fresh("bert-base-multilingual-cased")
    text = "The quick brown fox jumps over the lazy dog; Der schnelle braune Fuchs 東京 Привет мир"
    a = t.encode(text)
    b = t.encode(text)
    assert a == b
    assert all(x is y for x, y in zip(a, b))  # cached after first use
    assert all(type(x) is int for x in a)
    # a cold model gives the same values
    assert fresh("bert-base-multilingual-cased").encode(text) == a


def test_ints_outlive_the_model():
    t = fresh("bert-base-uncased")
    text = "some words that are tokenized before the model goes away"
    ids = t.encode(text)
    batch = t.encode_batch([text] * 3, num_threads=2)
    want = list(ids)
    want_vals = [int(x) for x in ids]
    del t
    gc.collect()
    assert [x + 0 for x in ids] == want_vals
    assert batch == [want] * 3
    assert tok("bert-base-uncased").encode(text) == want_vals


@needs_shared
def test_cold_and_warm_cache_across_threads():
    # the first ints are created while other threads encode long texts without the GIL (encode_split
    # reads the cache with atomic loads) and while encode_batch workers run: same ids everywhere
    name = "bert-base-multilingual-cased"
    lines = read_corpus("multilingual").splitlines()[:400]
    long_text = read_corpus("english")[:200_000]
    want_lines = [tok(name).encode(x) for x in lines]
    want_long = tok(name).encode(long_text)
    t = fresh(name)
    errors = []

    def split_worker():
        try:
            for _ in range(3):
                if t._model.encode_split(long_text, 2, 16) != want_long:
                    errors.append("split")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def batch_worker():
        try:
            for _ in range(3):
                if t.encode_batch(lines, num_threads=2) != want_lines:
                    errors.append("batch")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    th = [threading.Thread(target=split_worker), threading.Thread(target=batch_worker)]
    for x in th:
        x.start()
    for _ in range(3):
        assert [t.encode(x) for x in lines] == want_lines
    for x in th:
        x.join()
    assert not errors
    assert t.encode(long_text, num_threads=2) == want_long


def test_ids_beyond_the_vocabulary_size_not_cached():
    # the suffix-word / unk paths emit ids from the vocabulary only; ids are ints < vocab_size
    t = tok("bert-base-uncased")
    ids = t.encode("[UNK] ## ### #" + "\u00e9" * 300)
    assert all(0 <= i < t.vocab_size for i in ids)


@pytest.mark.parametrize("dense", [10**6, 24, 2], ids=["r-only-dense", "default", "dense>=2"])
def test_run_walker_equals_step_path_and_executor(dense, monkeypatch):
    """encode(text) walks word runs with walk_run (no offsets, one-token pops inlined); the offsets path
    and encode_word step state by state (wp_step), the executor in Python.  The vocabulary of
    test_wordpiece_layout has sparse states with > 16 and > 32 children (labels past the first SIMD
    chunk, failures there), hubs, long one-child chains and multi-token pops."""
    import random

    import fstok.compile.wordpiece as cw
    from test_wordpiece_layout import ALPHA, _vocab, _words

    monkeypatch.setattr(cw.build_tables, "__defaults__", (dense,))
    t = make(_vocab())
    ex = TableExecutor(t)
    words = _words(5, 300)
    # the last labels of the wide states (past index 16 and 32) and bytes no child has (failure there)
    words += ["q" + c for c in ALPHA[16:]] + ["q" + c + "zz" for c in ALPHA[30:]] + ["qé", "##xé", "x##"]
    rnd = random.Random(11)
    texts = [" ".join(rnd.sample(words, rnd.randint(1, 40))) + rnd.choice(["", ".", " !q?", "\u3000漢"]) for _ in range(80)]
    texts.append(" ".join(words))  # > STACK_IDS ids
    for x in texts:
        ids = t.encode(x)
        assert ids == t.encode_with_offsets(x)[0], x
        assert ids == ex.encode(x), x
    plain = [w for w in words if w.isascii() and w.isalnum()]  # one word each for BERT's pre-tokenizer
    assert t.encode(" ".join(plain)) == [i for w in plain for i in t.encode_word(w)]


@needs_shared
@pytest.mark.parametrize("cap", ["0", "1", "300", "65535"])
def test_int_slots_and_the_per_id_table(monkeypatch, cap):
    # id_int: the first slot_cap distinct ids get a slot (slot_of[id] -> slots[]) in first-use order,
    # later ones the per-id table.  $FSTOK_WP_SLOTS lowers the cap so that a few hundred lines reach
    # the second table; every route (list, batch, threads reading without the GIL, offsets, bytes)
    # must give the same ids, and a cached id is the same object on every call.
    name = "bert-base-multilingual-cased"
    lines = read_corpus("multilingual").splitlines()[:300]
    want = [tok(name).encode(x) for x in lines]
    monkeypatch.setenv("FSTOK_WP_SLOTS", cap)
    t = fresh(name)
    long_text = " ".join(lines)
    assert t._model.encode_split(long_text, 2, 8) == [i for w in want for i in w]  # cold, on threads
    for _ in range(2):
        assert [t.encode(x) for x in lines] == want
        assert t.encode_batch(lines, num_threads=2) == want
        assert t._model.encode_split(long_text, 2, 8) == [i for w in want for i in w]  # warm: borrowed
    assert [t.encode_with_offsets(x)[0] for x in lines[:50]] == want[:50]
    assert [np.frombuffer(t._model.encode(x, 2), dtype=np.uint32).tolist() for x in lines[:50]] == want[:50]
    a, b = t.encode(long_text), t.encode(long_text)
    assert all(x is y for x, y in zip(a, b)) and len(set(map(id, a))) == len(set(a))
    del t
    gc.collect()
    assert [x + 0 for x in a] == [i for w in want for i in w]  # the ints outlive the model
