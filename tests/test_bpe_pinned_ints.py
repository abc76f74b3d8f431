"""Pinned token-id ints (fstok/runtime/csrc/pyids.h): BPE result lists hold borrowed pointers to ints
that can never be freed, so fstok skips Py_INCREF on them.  If an int were handed out that way without
being pinned, deleting a few result lists would free it while the model still points at it: the
subprocesses below would then see wrong values or crash.  FSTOK_PIN_INTS=0 keeps the counted path."""
import os
import subprocess
import sys
import textwrap

import pytest

import fstok

_CHILD = textwrap.dedent(
    r"""
    import gc, sys
    import fstok
    tok = fstok.get_encoding("cl100k_base")
    text = "Hello world, tokenizers are fun! 12345 " * 50 + "日本語のテキスト"
    want = tok.encode(text)
    # many lists created and dropped: every drop takes one count from each item
    for _ in range(3000):
        ids = tok.encode(text)
        del ids
    gc.collect()
    for _ in range(200):
        assert tok.encode(text) == want
    # the long-text path (pieces on threads) hands out the same ints
    long_text = text * 400
    one = tok.encode(long_text)
    for _ in range(30):
        assert tok.encode(long_text, num_threads=2) == one
    # batches: lists made while the workers run (pinned: from the items they write; counted: from each text's
    # own ids) and lists made after the encoding (one thread), the same ids
    texts = [text[k % 97:k] for k in range(0, 6000, 13)]
    rows = [tok.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 3):
        assert tok.encode_ordinary_batch(texts, num_threads=nt) == rows
    got = tok.encode(text)
    assert got == want
    # values survive the pinned objects being decremented far more than they were incremented
    assert [int(x) for x in got] == [int(str(x)) for x in want]
    pinned = sys.getrefcount(got[0]) > 1 << 40 or sys.version_info >= (3, 12)
    print("PINNED" if pinned else "COUNTED", sys.getrefcount(got[0]))
    """
)


def _run(env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)


def test_pinned_ints_survive_many_dropped_lists():
    r = _run({})
    assert r.returncode == 0, r.stderr[-2000:]
    if not hasattr(sys, "_is_gil_enabled") or sys._is_gil_enabled():
        assert "PINNED" in r.stdout, r.stdout


def test_counted_path_when_pinning_is_off():
    r = _run({"FSTOK_PIN_INTS": "0"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "COUNTED" in r.stdout or sys.version_info >= (3, 12), r.stdout
    if sys.version_info < (3, 12):
        # a model's own counted ints: the list item and the model's table (plus getrefcount's argument)
        assert int(r.stdout.split()[-1]) < 1000, r.stdout


@pytest.mark.parametrize("enc", ["r50k_base", "o200k_base"])
def test_same_int_objects_across_models(enc):
    # every model of the module shares one table of pinned ints: a second model hands out the same objects
    a = fstok.get_encoding(enc)
    ids1 = a.encode("pinned ints are shared")
    from fstok import bpe as fb

    b = fb.BPETokenizer.from_artifact(a._art)
    ids2 = b.encode("pinned ints are shared")
    assert ids1 == ids2
    if sys.getrefcount(ids1[0]) > 1 << 40:
        assert all(x is y for x, y in zip(ids1, ids2))


def test_side_by_side_ints_are_plain_ints():
    # The pinned ints from 257 up are byte copies of CPython's ints laid side by side (pyids.h pyids_make_run), and
    # batch workers compute an id's int from the id: each must be the one int object of its id (the same object
    # from a one-text encode and from a threaded batch) and behave as any int (value, hash, order, arithmetic,
    # pickling, str), small ids being CPython's own small ints.
    import pickle

    tok = fstok.get_encoding("o200k_base")
    texts = ["Hello world, tokenizers are fun! 12345 日本語のテキスト %d" % i for i in range(3000)]
    rows = tok.encode_ordinary_batch(texts, num_threads=2)
    one = tok.encode_ordinary(texts[7])
    assert rows[7] == one and all(a is b for a, b in zip(rows[7], one))
    assert [tok.decode(r) for r in rows] == texts  # the values themselves (a wrong slot decodes other bytes)
    seen = {}
    for row in rows:
        for x in row:
            assert seen.setdefault(int(str(x)), x) is x  # one object per id across the whole batch
    for v, x in list(seen.items())[:500]:
        assert type(x) is int and x == v and hash(x) == hash(v) and str(x) == str(v)
        assert x + 1 - 1 == v and (x < v + 1) and x.bit_length() == v.bit_length() and -x == -v
        assert pickle.loads(pickle.dumps(x)) == v
    small = [x for x in seen.values() if x < 257]
    assert all(x is int(str(x)) for x in small)  # CPython's shared small ints
    big = sorted(x for x in seen.values() if x >= 257)
    assert big and {x: 1 for x in big}[int(str(big[0]))] == 1
