"""BPE `encode_to_numpy(text, num_threads=N)` and `count(text, num_threads=N)` on a long text: the proven split
(mod_bpe.c run_bounds with OUT_BYTES / OUT_COUNT: the pieces' ids copied into one uint32 buffer by the pool, or
only counted) must give exactly the one-shot ids and count, special tokens included, and reject bad arguments
as the one-thread call does."""
import numpy as np
import pytest

import fstok

LINE = "Tokenizers of 2024: naïve café, ΑΒΓ δέλτα, 東京タワー, emoji 🙂🙂, tabs\tand  spaces; x=[1,2,3]\n"


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def tok(request):
    return fstok.get_encoding(request.param)


def _text(tok, lines=3500, special_every=0):
    parts = []
    for i in range(lines):
        parts.append(f"{i} " + LINE)
        if special_every and i % special_every == 0:
            parts.append("<|endoftext|>")
    text = "".join(parts)
    assert len(text) >= tok.PARALLEL_THRESHOLD
    return text


@pytest.mark.parametrize("nt", [2, 3, 8])
def test_numpy_threads_equal_one_shot(tok, nt):
    text = _text(tok)
    want = tok.encode(text)
    got = tok.encode_to_numpy(text, num_threads=nt)
    assert got.dtype == np.uint32 and not got.flags.writeable
    assert got.tolist() == want
    # the pieces were really encoded apart: the native split found cuts (else this test would test nothing)
    assert tok._encode_split(text, nt, frozenset(), 1) is not None


@pytest.mark.parametrize("nt", [2, 5])
def test_count_threads_equal_one_shot(tok, nt):
    text = _text(tok)
    assert tok.count(text, num_threads=nt) == len(tok.encode(text)) == tok._encode_split(text, nt, frozenset(), 2)


def test_specials_across_parts(tok):
    text = _text(tok, special_every=97)
    want = tok.encode(text, allowed_special="all")
    assert tok.encode_to_numpy(text, allowed_special="all", num_threads=4).tolist() == want
    assert tok.count(text, allowed_special="all", num_threads=4) == len(want)
    # special-token text is ordinary text in count() by default, and disallowed in encode_to_numpy()
    assert tok.count(text, num_threads=4) == len(tok.encode_ordinary(text))
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode_to_numpy(text, num_threads=4)


def test_short_text_and_bad_threads(tok):
    assert tok.encode_to_numpy("hello world", num_threads=4).tolist() == tok.encode("hello world")
    assert tok.count("", num_threads=3) == 0
    assert tok.encode_to_numpy("", num_threads=2).tolist() == []
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="num_threads"):
            tok.encode_to_numpy("x", num_threads=bad)
        with pytest.raises(ValueError, match="num_threads"):
            tok.count("x", num_threads=bad)
    with pytest.raises(TypeError):
        tok.encode_to_numpy(b"bytes", num_threads=2)


def test_lone_surrogates_threaded(tok):
    text = _text(tok, lines=3000) + "\ud800 end"
    want = tok.encode(text)  # tiktoken's repair: the surrogate becomes U+FFFD
    assert tok.encode_to_numpy(text, num_threads=4).tolist() == want
    assert tok.count(text, num_threads=4) == len(want)
