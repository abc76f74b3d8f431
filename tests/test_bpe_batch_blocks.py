"""BPE `encode_batch` / `count_batch` on C threads (mod_bpe.c Model_encode_batch): texts are claimed in blocks
(<= 64 texts, about 1/32 of a thread's bytes; a long text alone), and count mode keeps only the number of each text.

Why these tests: a block split that skipped or repeated texts would show as wrong or missing results, a skewed
batch (a few long texts among many short ones) must give the same ids on any thread count, and `count_batch` once
held a 32 KB id buffer per text until the call ended (3 GB for 100k lines)."""
import random
import subprocess
import sys
import textwrap

import pytest

import fstok


@pytest.fixture(scope="module")
def tok():
    return fstok.get_encoding("cl100k_base")


def _batch(seed: int) -> list[str]:
    rnd = random.Random(seed)
    words = ["the", " café", " 東京", "🙂", " x=[1,2]", "\n", "  ", "<|endoftext|>", " naïve", "12345"]
    out = []
    for i in range(3000):
        k = rnd.choice([0, 1, 3, 8, 20]) if i % 500 else rnd.choice([2000, 20000])  # a few long texts
        out.append("".join(rnd.choice(words) for _ in range(k)))
    return out


@pytest.mark.parametrize("nt", [1, 2, 3, 7])
def test_batch_blocks_equal_one_by_one(tok, nt):
    texts = _batch(nt)
    want = [tok.encode_ordinary(t) for t in texts]
    assert tok.encode_ordinary_batch(texts, num_threads=nt) == want
    assert tok.count_batch(texts, num_threads=nt) == [len(w) for w in want]


def _batch_rss_growth_mb(call: str) -> int:
    """Peak-RSS growth (MB) of a child process over one batch call on 30k short lines (cl100k): `call` is the
    batch method with its arguments, the texts as {}, e.g. 'count_batch({}, num_threads=2)'; its result must equal
    one-by-one encoding (ids or counts)."""
    code = textwrap.dedent(f"""
        import resource, fstok
        tok = fstok.get_encoding("cl100k_base")
        texts = [f"line {{i}} of a short batch" for i in range(30000)]
        tok.{call.format("texts[:10]")}
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        got = tok.{call.format("texts")}
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        one = [tok.encode_ordinary(t) for t in texts]
        assert got == one or got == [len(x) for x in one]
        print(grew)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_count_batch_memory_is_per_text_bounded():
    # its peak RSS tells whether the per-text id buffers were kept (~1 GB for 30k texts)
    grew_mb = _batch_rss_growth_mb("count_batch({}, num_threads=2)")
    assert grew_mb < 150, f"count_batch of 30k short texts grew RSS by {grew_mb} MB"


def test_list_batch_reserves_per_text_bytes():
    # a text's id buffer is sized by its bytes (mod_bpe.c encode_pieces_cached `room`): it was 64 KB per text, so a
    # 1-thread list batch of 30k short lines touched a fresh page or two per line (+111 MB, most of a first call)
    grew_mb = _batch_rss_growth_mb("encode_ordinary_batch({}, num_threads=1)")
    assert grew_mb < 50, f"a list batch of 30k short texts grew RSS by {grew_mb} MB"


@pytest.mark.parametrize("nt", [2, 4])
def test_overlapped_lists_with_lone_surrogates(tok, nt):
    # a threaded list batch builds each text's list while the workers run; texts with lone surrogates come back
    # as None from the native call and are repaired in Python, at their own positions
    texts = _batch(11)[:1500]
    for i in range(0, len(texts), 97):
        texts[i] = texts[i] + "\ud800x"
    want = [tok.encode_ordinary(t) for t in texts]
    assert tok.encode_ordinary_batch(texts, num_threads=nt) == want
    assert tok.encode_batch(tuple(texts), num_threads=nt, disallowed_special=()) == want


class _Texts(list):
    """a list subclass: its items are read from the list's storage, as a plain list's"""


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("kind", ["list", "subclass", "tuple", "generator"])
def test_batch_holds_each_text_once(tok, nt, kind):
    # The native batch holds a reference to each text (not a copy of the list) while the GIL is released:
    # every reference it takes is given back (a leak or a missing reference would change the counts), and the
    # ids are those of one-by-one encoding whatever sequence type carries the texts.
    texts = [("%d " % i) + "naïve café 東京 " * (i % 7) for i in range(600)]
    before = [sys.getrefcount(t) for t in texts]
    want = [tok.encode_ordinary(t) for t in texts]
    seq = {"list": lambda: list(texts), "subclass": lambda: _Texts(texts), "tuple": lambda: tuple(texts),
           "generator": lambda: (t for t in texts)}[kind]()
    got = tok.encode_ordinary_batch(seq, num_threads=nt)
    del seq
    assert got == want
    assert [sys.getrefcount(t) for t in texts] == before


@pytest.mark.parametrize("nt", [1, 2, 3, 7])
def test_numpy_blocks_equal_one_by_one(tok, nt):
    # encode_batch_to_numpy: each block's texts append their ids to one buffer of the block, and the calling
    # thread copies the blocks into one array.  A block whose offsets were summed wrongly, or a text with no
    # ids (empty, or a lone surrogate repaired in Python) in the middle of a block, would shift every later
    # text's ids.
    texts = _batch(10 + nt)
    for i in range(0, len(texts), 97):
        texts[i] = "" if i % 2 else "bad \ud800 text"
    want = [tok.encode_ordinary(t) for t in texts]
    ids, starts = tok.encode_batch_to_numpy(texts, num_threads=nt, disallowed_special=())
    assert starts[0] == 0 and starts[-1] == len(ids) and len(starts) == len(texts) + 1
    assert [ids[starts[i]:starts[i + 1]].tolist() for i in range(len(texts))] == want
    ids, starts = tok.encode_batch_to_numpy([], num_threads=nt, disallowed_special=())
    assert len(ids) == 0 and starts.tolist() == [0]
