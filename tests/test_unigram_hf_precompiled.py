"""The Precompiled step of the native SentencePiece-family pass copies runs of code points that are grapheme
clusters of their own and that the charsmap leaves as they are (a per-code-point table built at load), and
takes the cluster path for the last character of a run, which a following character may extend.  Its ids
equal `tokenizers` and the pure-Python string path (HFSentencePieceTokenizer._ids_fast, the oracle) where
that matters: a character followed by combining marks, ZWJ, spacing marks or a Prepend, CR LF, controls,
characters the charsmap replaces, Hangul jamo, regional indicators, characters past the BMP, and a Replace
step ahead of Precompiled that creates combining marks after a plain character."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from conftest import VOCAB, needs_shared

tokenizers = pytest.importorskip("tokenizers")

E5 = os.path.join(VOCAB, "models", "unigram/multilingual-e5-small/tokenizer.json")

# plain characters (runs of them are copied), characters that extend or join the one before, characters
# the charsmap replaces, and cluster rules of their own
ALPHABET = (
    "aeZ0 .,-\u00e9\u0436\u4e2d\u6587\u3042\u0915\u05d0"  # plain: Latin, Cyrillic, CJK, kana, Devanagari, Hebrew
    "\u0301\u0308\u094d\u093e\u200d\u200c\ufe0f"          # Extend, virama (InCB linker), SpacingMark, ZWJ, ZWNJ, VS16
    "\u0600\u0e33"                                        # Prepend, SpacingMark (Thai)
    "\r\n\t\x00\x7f\x85"                                  # CR, LF, controls
    "\uff21\ufb01\u2460\u3000\u00a0\u2126\u212b"         # replaced by the charsmap (NFKC and friends)
    "\u1100\u1161\u11a8\uac00"                            # Hangul L, V, T, LV
    "\U0001f1eb\U0001f1f7\U0001f600\U0001f3fd\U00020000"  # regional indicators, emoji, modifier, CJK ext B
)

EDGE = [
    "e\u0301", "e\u0301\u0308x", "abc\u0301def", "\u4e2d\u0301", "a\u200d\u4e2d", "x\u093e\u0915\u094d\u0937",
    "ab\r\ncd\r\r\n\n", "\u0600abc", "ab\u0600cd", "\uff21\u0301 A\u0301", "\u1100\u1161\u11a8\u1100\u1161",
    "\U0001f1eb\U0001f1f7\U0001f1eb a\U0001f3fd", "\u00e9" * 50 + "\u0301", "a" * 100 + "\u0308" + "b" * 7,
    "plain ascii text, nothing else", "\x00\x01\x7f abc \x85", "\u2126\u212b\u00c5 \u03a9",
]


@pytest.fixture(scope="module")
def e5():
    if not os.path.exists(E5):
        pytest.skip(f"{E5} not present")
    return fstok.compile(E5), tokenizers.Tokenizer.from_file(E5)


def _same(tok, hf, x):
    want = hf.encode(x, add_special_tokens=False).ids
    assert tok.encode(x) == want, x
    assert tok._ids_fast(x) == want, x


@needs_shared
def test_edges_equal_tokenizers_and_oracle(e5):
    tok, hf = e5
    assert tok._hf is not None
    for x in EDGE:
        _same(tok, hf, x)
        _same(tok, hf, "word " + x + " word")


@needs_shared
def test_every_pair_of_the_alphabet(e5):
    """each character after each other one, inside runs of plain text: the cut before a character that
    extends the previous one, and the copy of what follows"""
    tok, hf = e5
    chars = sorted(set(ALPHABET))
    for a in chars:
        x = " ".join("xy" + a + b + "zw" for b in chars)
        _same(tok, hf, x)


@needs_shared
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(x=st.text(alphabet=st.sampled_from(ALPHABET), max_size=60))
def test_hypothesis_strings(e5, x):
    tok, hf = e5
    _same(tok, hf, x)


@needs_shared
def test_replace_before_precompiled_creates_marks(e5, tmp_path):
    """a Replace ahead of Precompiled turns 'q' into a combining acute: the plain character before it must
    take the cluster path with it (the charsmap composes e + acute)"""
    obj = json.load(open(E5, encoding="utf-8"))
    norm = obj["normalizer"]
    steps = norm["normalizers"] if norm.get("type") == "Sequence" else [norm]
    obj["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "q"}, "content": "\u0301"}] + steps}
    p = tmp_path / "e5-replace.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    tok, hf = fstok.compile(str(p)), tokenizers.Tokenizer.from_file(str(p))
    assert tok._hf is not None
    for x in ["eq", "aeq bq", "Aq\u4e2dq", "eqq e\u0301q", "plain eq text eq", "e" * 40 + "q"]:
        _same(tok, hf, x)
