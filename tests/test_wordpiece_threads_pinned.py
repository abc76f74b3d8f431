"""WordPiece long texts on threads with pinned ints (mod_wordpiece.c split_pinned): the pieces are encoded
on the module's persistent pool (tpool.h), the result list is allocated once and filled by the pool from
the pieces' ids without the GIL (pinned ints: no reference taken), and the ints no model had made yet are
made afterwards with the GIL.  The lists must equal one-shot encode(text) for every thread and piece count,
on a fresh process (every item still without an int), with ids past a model's slot table
($FSTOK_WP_SLOTS), with pieces that hold no token, while two Python threads call at once, in a forked child
(empty pool), and with pinning off (FSTOK_PIN_INTS=0: the counted, pipelined path)."""
import functools
import os
import random
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import needs_shared, read_corpus

import fstok

BERTS = ["bert-base-uncased", "bert-base-multilingual-cased"]


@functools.lru_cache(maxsize=None)
def tok(name):
    return fstok.get_encoding(name)


def _mixed_text(n_chars, seed=0):
    """Words of several scripts, accents, CJK, punctuation, and long whitespace runs (pieces of only
    whitespace hold no token)."""
    rnd = random.Random(seed)
    words = ["the", "quick", "brown", "fox", "naïve", "café", "Ünïcödé", "中文", "日本語", "한국어", "ελληνικά",
             "русский", "عربى", "हिन्दी", "tokenization", "12345", "x" * 150, "supercalifragilistic", "2026-11-23", "😀", "e\u0301\u0323", "a.b,c!"]
    out, size = [], 0
    while size < n_chars:
        if rnd.random() < 0.002:
            w = " " * rnd.randint(200, 3000) + "\n" * rnd.randint(1, 50)
        else:
            w = rnd.choice(words) + rnd.choice([" ", " ", "\n", "\t", "\u3000", ""])
        out.append(w)
        size += len(w)
    return "".join(out)


TEXT = _mixed_text(300_000)


@pytest.mark.parametrize("name", BERTS)
def test_lists_equal_one_shot_many_threads_and_parts(name):
    t = tok(name)
    want = t.encode(TEXT)
    assert len(want) > 32768  # the pool fills the list (not the caller alone)
    for threads in (2, 3, 4, 5, 7, 8, 16):
        assert t.encode(TEXT, num_threads=threads) == want, threads
    for threads, parts in ((2, 1), (2, 2), (3, 97), (6, 1000), (16, 4096), (9, 13)):
        assert t._model.encode_split(TEXT, threads, parts) == want, (threads, parts)
    # and the numpy path is unchanged
    assert t._model.encode_split(TEXT, 4, 0, 2) == t._model.encode(TEXT, 2)


def test_pieces_without_tokens():
    t = tok("bert-base-uncased")
    text = (" " * 40_000 + "word ") * 8 + " " * 100_000  # most pieces hold only whitespace
    want = t.encode(text)
    assert len(want) == 8
    for threads, parts in ((2, 0), (4, 64), (16, 4096)):
        assert t._model.encode_split(text, threads, parts) == want
    assert t._model.encode_split(" " * 300_000, 8, 100) == []


@needs_shared
@pytest.mark.parametrize("name", BERTS)
@pytest.mark.parametrize("corpus", ["english", "chinese_long", "multilingual"])
def test_corpus_lists(name, corpus):
    t = tok(name)
    text = read_corpus(corpus)[:400_000]
    if len(text) < t.PARALLEL_THRESHOLD:  # (multilingual.txt is smaller: repeated)
        text = (text + "\n") * 2
    want = t.encode(text)
    for threads in (2, 4, 11):
        assert t.encode(text, num_threads=threads) == want
    # numpy output: the ids copied into the bytes by the pool (>= 65536 ids) or by the caller
    want_np = t._model.encode(text, 2)
    assert len(want_np) // 4 >= 65536 or corpus == "multilingual"
    for threads, parts in ((2, 0), (4, 0), (16, 0), (3, 4096)):
        junk = bytes([255]) * len(want_np)  # (a freed block of the size: a piece not copied shows)
        del junk
        assert t._model.encode_split(text, threads, parts, 2) == want_np


def test_batch_on_the_pool():
    # encode_batch runs on the pool too (a thread per 8 KB of text at most: small batches stay on the caller)
    t = tok("bert-base-multilingual-cased")
    texts = [TEXT[i:i + 97 + i % 300] for i in range(0, 200_000, 101)]
    want = [t.encode(x) for x in texts]
    for threads in (1, 2, 4, 8, 16):
        assert t.encode_batch(texts, num_threads=threads) == want
        assert t.encode_batch(texts[:5], num_threads=threads) == want[:5]
    got_o = t.encode_batch(texts[:300], num_threads=4, with_offsets=True)
    assert got_o == [t.encode_with_offsets(x) for x in texts[:300]]


def test_error_then_pool_still_works():
    t = tok("bert-base-uncased")
    bad = "a b " * 70_000 + "\ud800"
    for _ in range(3):
        with pytest.raises(ValueError, match="lone surrogate"):
            t.encode(bad, num_threads=4)
        with pytest.raises(ValueError, match="lone surrogate U\\+D800 at index 280000"):
            t.encode_to_numpy(bad, num_threads=4)
        with pytest.raises(ValueError, match="lone surrogate"):
            t.encode_to_numpy(bad)
    want = t.encode(TEXT)
    assert t.encode(TEXT, num_threads=4) == want
    assert t.encode_to_numpy(TEXT, num_threads=4).tolist() == want


def test_two_python_threads_at_once():
    # one call holds the pool, the other starts threads of its own (encode, fill); both lists exact
    t = tok("bert-base-multilingual-cased")
    texts = [TEXT, _mixed_text(280_000, seed=1).upper()]
    want = [t.encode(x) for x in texts]
    want_np = t._model.encode_split(texts[0], 3, 0, 2)
    errors = []

    def run(i):
        try:
            for _ in range(12):
                if t.encode(texts[i], num_threads=3 + i) != want[i]:
                    errors.append(i)
                if i == 0 and t._model.encode_split(texts[0], 3, 0, 2) != want_np:
                    errors.append("np")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors


# A fresh process: the first calls meet ids no model has an int for yet (the fill leaves them NULL and the
# caller makes them), a second model of the same vocabulary reuses the module's pinned ints, slots past
# $FSTOK_WP_SLOTS, many dropped lists (an int handed out unpinned would be freed), a forked child.
_CHILD = textwrap.dedent(
    r"""
    import gc, os, random, sys
    sys.path.insert(0, os.environ["WP_TEST_DIR"])
    from test_wordpiece_threads_pinned import _mixed_text
    import fstok
    name = sys.argv[1]
    tok = fstok.get_encoding(name)
    text = _mixed_text(300_000, seed=5)
    # ids across the whole vocabulary, none seen before in this process: the first call is threaded
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    rnd = random.Random(3)
    words = [w for w, i in vocab if w.isalpha() and not w.startswith("##")]
    wide = " ".join(rnd.choice(words) for _ in range(60_000))
    got_wide = tok.encode(wide, num_threads=4)
    got = tok.encode(text, num_threads=3)
    assert got == tok.encode(text), "first threaded call"
    assert got_wide == tok.encode(wide), "first threaded call, wide vocabulary"
    assert len(set(got_wide)) > 5000, len(set(got_wide))
    want = tok.encode(text)
    for _ in range(300):
        ids = tok.encode(text, num_threads=2)
        del ids
    gc.collect()
    for nt in (2, 5, 8):
        assert tok.encode(text, num_threads=nt) == want
    tok2 = fstok.loads(tok.to_bytes())  # a second model: empty slots, the module's ints
    assert tok2.encode(wide, num_threads=4) == got_wide
    assert tok2.encode(wide) == got_wide
    pid = os.fork()
    if pid == 0:
        ok = tok.encode(text, num_threads=4) == want and tok2.encode(wide, num_threads=3) == got_wide
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, status
    assert tok.encode(text, num_threads=4) == want
    x = tok.encode("tokenization")[0]
    if sys.version_info >= (3, 12):
        print("PINNED" if sys.getrefcount(x) > 1 << 28 else "COUNTED", sys.getrefcount(x))
    else:
        print("PINNED" if sys.getrefcount(x) > 1 << 40 else "COUNTED", sys.getrefcount(x))
    """
)


def _child(name, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    env["WP_TEST_DIR"] = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run([sys.executable, "-c", _CHILD, name], capture_output=True, text=True, env=env,
                          timeout=300)


def _gil():
    return not hasattr(sys, "_is_gil_enabled") or sys._is_gil_enabled()


@pytest.mark.parametrize("name", BERTS)
def test_fresh_process_pinned(name):
    r = _child(name, {"FSTOK_PIN_INTS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    if _gil():
        assert "PINNED" in r.stdout, r.stdout


@pytest.mark.parametrize("pin", ["1", "0"])
def test_fresh_process_few_slots(pin):
    # 40 slots: almost every id is past the model's slot table (pinned: the module table; counted: idcache)
    r = _child("bert-base-multilingual-cased", {"FSTOK_PIN_INTS": pin, "FSTOK_WP_SLOTS": "40"})
    assert r.returncode == 0, r.stderr[-3000:]


def test_fresh_process_counted():
    r = _child("bert-base-uncased", {"FSTOK_PIN_INTS": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    if sys.version_info < (3, 12):
        assert "COUNTED" in r.stdout, r.stdout


# tpool.h keeps one pool per extension module (its state is static: each .so has its own copy): a WordPiece
# call and a BPE call each start pool threads of their own, and both can run their jobs at the same time.
_POOLS = textwrap.dedent(
    r"""
    import os, sys, threading
    sys.path.insert(0, os.environ["WP_TEST_DIR"])
    from test_wordpiece_threads_pinned import _mixed_text
    import fstok
    def nthreads():
        return len(os.listdir("/proc/self/task"))
    wp = fstok.get_encoding("bert-base-uncased")
    bpe = fstok.get_encoding("cl100k_base")
    text = _mixed_text(300_000, seed=9)
    want_wp, want_bpe = wp.encode(text), bpe.encode_ordinary(text)
    n0 = nthreads()
    assert wp.encode(text, num_threads=5) == want_wp
    n1 = nthreads()
    assert bpe.encode_ordinary(text, num_threads=5) == want_bpe
    n2 = nthreads()
    assert wp.encode(text, num_threads=5) == want_wp and bpe.encode_ordinary(text, num_threads=5) == want_bpe
    n3 = nthreads()
    errors = []
    def run(f, want):
        for _ in range(10):
            if f() != want:
                errors.append(1)
    ths = [threading.Thread(target=run, args=(lambda: wp.encode(text, num_threads=5), want_wp)),
           threading.Thread(target=run, args=(lambda: bpe.encode_ordinary(text, num_threads=5), want_bpe))]
    for t in ths: t.start()
    for t in ths: t.join()
    print(n0, n1, n2, n3, nthreads(), "errors", len(errors))
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_one_pool_per_extension_module():
    env = dict(os.environ, WP_TEST_DIR=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", _POOLS], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    n0, n1, n2, n3, n4, _, errors = r.stdout.split()
    n0, n1, n2, n3, n4 = map(int, (n0, n1, n2, n3, n4))
    assert int(errors) == 0
    k = min(4, os.cpu_count() or 1)  # the pool keeps at most one thread per online CPU (tpool.h)
    assert n1 - n0 == k, r.stdout  # WordPiece's pool: 4 workers besides the caller (machine allowing), kept
    assert n2 - n1 == k, r.stdout  # BPE's own pool: as many more (not WordPiece's)
    assert n3 == n2, r.stdout      # both reused


def test_trace_threads_prints_the_phases():
    code = ("import fstok; t = fstok.get_encoding('bert-base-uncased'); x = ('a b ' * 80_000);"
            "assert t.encode(x, num_threads=3) == t.encode(x);"
            "assert list(t.encode_to_numpy(x, num_threads=3)) == t.encode(x)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, FSTOK_TRACE_THREADS="1", FSTOK_PIN_INTS="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    if _gil():
        assert "split_pinned:" in r.stderr and "filled" in r.stderr, r.stderr
    assert "encode_split (bytes)" in r.stderr and "encode busy" in r.stderr, r.stderr
    assert "12 pieces 3 threads" in r.stderr, r.stderr  # 4 pieces per thread by default
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, FSTOK_TRACE_THREADS="1", FSTOK_SPLIT_PARTS="7"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "21 pieces 3 threads" in r.stderr, r.stderr  # FSTOK_SPLIT_PARTS: pieces per thread


def test_garbage_collections_while_the_pool_fills():
    # the list is filled by the pool while this call has released the GIL; another thread's collections
    # must not see its items before they are written (the list is untracked until then)
    import gc

    t = tok("bert-base-uncased")
    texts = [TEXT, TEXT[::-1]]
    want = [t.encode(x) for x in texts]
    stop = threading.Event()
    errors = []

    def churn():
        junk = []
        while not stop.is_set():
            junk.append([[object()] for _ in range(200)])
            junk.append(bytes([255]) * (8 * len(want[0])))  # (freed blocks full of bad pointers)
            if len(junk) > 6:
                junk.clear()
            gc.collect(0)

    th = threading.Thread(target=churn)
    th.start()
    try:
        for i in range(40):
            if t.encode(texts[i % 2], num_threads=2 + i % 3) != want[i % 2]:
                errors.append(i)
    finally:
        stop.set()
        th.join()
    assert not errors
