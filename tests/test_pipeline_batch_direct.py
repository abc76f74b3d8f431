"""PipelineTokenizer.encode_batch in one C call (the "direct" mode of the compiled tables): the same ids as
HF `tokenizers` and as `encode` on each text, the texts that need the stages (an lstrip added token, lone
surrogates) included, with and without the post-processor, on one and several threads."""
from __future__ import annotations

import pytest
from conftest import needs_shared

tokenizers = pytest.importorskip("tokenizers")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pipeline_helpers import ROBERTA, compiled, corpus_sample, hf  # noqa: E402

# RoBERTa's added tokens (<mask> has lstrip) around text the GPT-2 pattern splits in many ways
PARTS = ["<mask>", " <mask>", "<s>", "</s>", "<pad>", "<unk>", " ", "  ", "\n", "a", "Hello", " world", "'s", "é",
         "日本", "😀", "12", "!?", "\u0301", "\t"]


def _check(tok, ref, texts, threads):
    for special in (False, True):
        want = [e.ids for e in ref.encode_batch(list(texts), add_special_tokens=special)]
        got = tok.encode_batch(list(texts), add_special_tokens=special, num_threads=threads)
        assert got == want
        assert [tok.encode(t, add_special_tokens=special) for t in texts] == want


@needs_shared
def test_roberta_batch_is_one_call_and_equals_hf():
    tok, ref = compiled(ROBERTA), hf(ROBERTA)
    assert tok._mode == "direct" and tok._guards  # the path under test: tables + guarded texts
    texts = list(corpus_sample()) + ["x <mask> y", "<mask>", "a  <mask>", "plain line"] * 3
    for threads in (1, 2):
        _check(tok, ref, texts, threads)
    assert tok.encode_batch(iter(["a", "b"])) == [tok.encode("a"), tok.encode("b")]
    with pytest.raises(TypeError):
        tok.encode_batch("a str")
    with pytest.raises(TypeError):
        tok.encode_batch(["a", 3])


@needs_shared
def test_roberta_batch_lone_surrogates():
    tok = compiled(ROBERTA)
    texts = ["ok", "a\ud800b", "x\udfff", "fine"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]


@needs_shared
@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.sampled_from(PARTS), max_size=8).map("".join), min_size=1, max_size=12))
def test_roberta_batch_hypothesis(texts):
    _check(compiled(ROBERTA), hf(ROBERTA), texts, 1)


@needs_shared
def test_falcon_batch_bytes_the_vocabulary_lacks():
    """Falcon's vocabulary lacks some control bytes: the batch's texts that hold one take the stages."""
    from pipeline_helpers import FALCON

    tok, ref = compiled(FALCON), hf(FALCON)
    assert tok._mode == "direct" and tok._standin_lo is not None
    texts = list(corpus_sample(10)) + ["a\x03b", "x\x11 y", "plain", "\x1e", "1234 \x04!", "\U00080000z"]
    for threads in (1, 2):
        _check(tok, ref, texts, threads)
