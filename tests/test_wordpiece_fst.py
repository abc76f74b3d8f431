"""Independent check of the compiled tables with OpenFst (pynini): the LinMaxMatch FST of
Appendix A.7, composed with each word, gives the runtime's tokens."""
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pynini = pytest.importorskip("pynini")

from fstok.fst_bridge import transduce_word, wordpiece_fst  # noqa: E402
from test_wordpiece_corner import FIG1, make  # noqa: E402


def _check(tok, fst, word):
    got = tok.encode_word(word)
    via = transduce_word(fst, word)
    if word == "" or word == tok.options["continuing_subword_prefix"]:
        return  # the paper's special cases live outside the automaton
    if via is None:
        assert got == [tok.unk_id], word
    else:
        assert via == got, word


def test_figure1_fst():
    tok = make(FIG1)
    fst = wordpiece_fst(tok, alphabet=b"abcdxyz#")
    for w in ["abcdz", "abcdx", "abcz", "abcd", "##bc", "a", "z", "abcdxa", "ab", "#"]:
        _check(tok, fst, w)
    assert transduce_word(fst, "abcdz") == [FIG1.index(t) for t in ["a", "##b", "##c", "##dz"]]


@settings(max_examples=int(os.environ.get("FSTOK_HYPOTHESIS_EXAMPLES", "60")), deadline=None)
@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), min_size=1, max_size=8, unique=True),
       st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=8, unique=True),
       st.lists(st.text(alphabet="abc", max_size=8), min_size=1, max_size=10))
def test_random_vocab_fst(pieces, suffixes, words):
    vocab = list(dict.fromkeys(["[UNK]"] + pieces + ["##" + s for s in suffixes]))
    tok = make(vocab)
    fst = wordpiece_fst(tok, alphabet=b"abc#")
    for w in words:
        _check(tok, fst, w)
