"""fstok BPE == tiktoken, id for id: corpus samples, special tokens, surrogates, hypothesis strings.

The full corpora (every line and every whole file) are checked by `tools/diff_bpe.py`; this file runs
a fast sample of the same comparisons.
"""
import numpy as np
import pytest
from bpe_helpers import OPENAI, fstok_encoding, sample_lines, tiktoken_encoding, token_concat_strings
from conftest import CORPORA, needs_shared, read_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = needs_shared

MAIN = ["r50k_base", "cl100k_base", "o200k_base"]


@pytest.mark.parametrize("name", OPENAI)
def test_metadata_matches_tiktoken(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    assert f.n_vocab == t.n_vocab and f.max_token_value == t.max_token_value
    assert f.special_tokens_set == t.special_tokens_set
    assert f.name == name
    for s in t.special_tokens_set:
        assert f.encode_single_token(s) == t.encode_single_token(s)
    assert f.eot_token == t.eot_token


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", MAIN + ["p50k_base"])
def test_corpus_sample_lines(name, corpus):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    lines = sample_lines(corpus, 150, seed=hash((name, corpus)) & 0xFFFF)
    for ln in lines:
        assert f.encode_ordinary(ln) == t.encode_ordinary(ln), ln
    batch = f.encode_ordinary_batch(lines, num_threads=2)
    assert batch == [t.encode_ordinary(ln) for ln in lines]


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", MAIN)
def test_corpus_whole_chunk(name, corpus):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    text = read_corpus(corpus)
    start = (len(text) // 3) & ~0xFF
    chunk = text[start : start + 60_000]  # a multi-line chunk from the middle (whole files: tools/diff_bpe.py)
    ids = f.encode_ordinary(chunk)
    assert ids == t.encode_ordinary(chunk)
    assert f.decode(ids) == chunk
    assert f.count(chunk) == len(ids)
    assert np.array_equal(f.encode_to_numpy(chunk, disallowed_special=()), np.array(ids, dtype=np.uint32))


def test_multilingual_whole_file():
    text = read_corpus("multilingual")
    for name in MAIN:
        assert fstok_encoding(name).encode_ordinary(text) == tiktoken_encoding(name).encode_ordinary(text)


@pytest.mark.parametrize("name", OPENAI)
def test_special_tokens_like_tiktoken(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    specials = sorted(t.special_tokens_set)
    texts = [
        "hello <|endoftext|> world",
        "<|endoftext|>",
        "  <|endoftext|>  x",
        "a\n\n<|endoftext|>\n\nb",
        "<|endoftext|><|endoftext|>",
        "x<|endoftext|",
        "".join(specials),
        " ".join(specials) + " tail",
        "<|fim_prefix|>def f():<|fim_suffix|> return 1<|fim_middle|>",
        "<|endofprompt|> 12345",
    ]
    for text in texts:
        for allowed in ("all", set(), set(specials[:1]), set(specials[1:])):
            for disallowed in ((), "all"):
                try:
                    want = t.encode(text, allowed_special=allowed, disallowed_special=disallowed)
                except ValueError as e:
                    with pytest.raises(ValueError) as got:
                        f.encode(text, allowed_special=allowed, disallowed_special=disallowed)
                    assert "disallowed special token" in str(got.value)
                    assert str(e).split("\n")[0] == str(got.value).split("\n")[0]
                    continue
                assert f.encode(text, allowed_special=allowed, disallowed_special=disallowed) == want, (text, allowed)
        assert f.encode_ordinary(text) == t.encode_ordinary(text)
        assert f.encode(text, disallowed_special=()) == t.encode_ordinary(text)


def test_special_token_argument_errors():
    f = fstok_encoding("cl100k_base")
    with pytest.raises(TypeError):
        f.encode("x", allowed_special="<|endoftext|>")
    with pytest.raises(TypeError):
        f.encode("x", disallowed_special="<|endoftext|>")
    with pytest.raises(TypeError):
        f.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        f.encode_batch("not a list")
    with pytest.raises(ValueError):
        f.encode_batch(["a"], num_threads=0)
    # names that are not special tokens are simply never matched (as in tiktoken)
    assert f.encode("<|nope|>", allowed_special={"<|nope|>"}) == tiktoken_encoding("cl100k_base").encode("<|nope|>")


@pytest.mark.parametrize("name", MAIN)
def test_surrogates_like_tiktoken(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    for text in ["\ud800", "a\udfffb", "\ud83d\ude00 pair as code units", "x\ud83d", "\udc00\ud800 \ud800\udc00",
                 "emoji 😀 \ud83d"]:
        assert f.encode(text) == t.encode(text), repr(text)
        assert f.encode_ordinary(text) == t.encode_ordinary(text)
        assert f.count(text) == len(t.encode_ordinary(text))


@pytest.mark.parametrize("name", MAIN)
def test_token_concatenations(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    for b in token_concat_strings(f, 400, seed=1):
        s = b.decode("utf-8", "replace")
        assert f.encode_ordinary(s) == t.encode_ordinary(s)


@pytest.mark.parametrize("name", MAIN)
def test_batch_numpy_count_offsets(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)
    texts = ["hello world", "", "héllo wörld 你好 🙂", "<|endoftext|> x", "a" * 1000, "12345678901234"]
    assert f.encode_batch(texts, allowed_special="all") == t.encode_batch(texts, allowed_special="all")
    assert f.encode_batch(texts, num_threads=1, disallowed_special=()) == [t.encode_ordinary(x) for x in texts]
    for x in texts:
        ids = t.encode(x, allowed_special="all")
        assert f.decode(ids) == t.decode(ids) == x
        assert f.decode_bytes(ids) == t.decode_bytes(ids)
        assert f.decode_with_offsets(ids) == t.decode_with_offsets(ids)
        got_ids, offs = f.encode_with_offsets(x, allowed_special="all")
        assert got_ids == ids and offs == t.decode_with_offsets(ids)[1]
        assert f.count(x, allowed_special="all") == len(ids)
        assert f.encode_to_numpy(x, allowed_special="all").tolist() == ids
    with pytest.raises(KeyError):
        f.decode([f.n_vocab + 5])
    with pytest.raises(KeyError):
        f.decode_single_token_bytes(-1)


text_strategy = st.lists(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
    | st.text(alphabet=st.sampled_from(list(" \n\t\r'sdtlmvreST0123456789<|>!?.,\u00a0\u3000")), max_size=8)
    | st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "'s", "'LL", "  ", "\r\n"]),
    max_size=16,
).map("".join)


@pytest.mark.parametrize("name", MAIN)
def test_hypothesis_unicode_and_specials(name):
    f, t = fstok_encoding(name), tiktoken_encoding(name)

    @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text_strategy)
    def check(s):
        assert f.encode_ordinary(s) == t.encode_ordinary(s)
        assert f.encode(s, allowed_special="all") == t.encode(s, allowed_special="all")
        assert f.decode(f.encode_ordinary(s)) == s

    check()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=40))
def test_hypothesis_any_text_incl_surrogates(s):
    f, t = fstok_encoding("o200k_base"), tiktoken_encoding("o200k_base")
    assert f.encode_ordinary(s) == t.encode_ordinary(s)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=60))
def test_hypothesis_bytes_roundtrip(b):
    f, t = fstok_encoding("cl100k_base"), tiktoken_encoding("cl100k_base")
    s = b.decode("utf-8", "replace")
    ids = f.encode_ordinary(s)
    assert ids == t.encode_ordinary(s)
    assert f.decode_bytes(ids) == s.encode("utf-8")
