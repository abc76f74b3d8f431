"""Single-word LinMaxMatch == the original quadratic MaxMatch on the words of the real corpora.

Words are HF's own normalization + pre-tokenization of each corpus (distinct words; all of
multilingual, a slice of the others here; tools/diff_wordpiece.py --words runs everything)."""
import pytest
from conftest import needs_shared, read_corpus
from wp_helpers import VOCABS, fs_bert

from fstok.reference.wordpiece import original_maxmatch

pytestmark = needs_shared


def _words(name, corpus, limit):
    from tokenizers import normalizers, pre_tokenizers

    lower = VOCABS[name]
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lower)
    pre = pre_tokenizers.BertPreTokenizer()
    text = read_corpus(corpus)[:limit]
    return sorted({w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))})


@pytest.mark.parametrize("name", list(VOCABS))
@pytest.mark.parametrize("corpus,limit", [("multilingual", None), ("english", 400_000), ("stress", 300_000), ("code", 200_000)])
def test_words_equal_original_maxmatch(name, corpus, limit):
    tok = fs_bert(name)
    vocab = tok.get_vocab()
    words = _words(name, corpus, limit)
    assert len(words) > 500
    got = tok.encode_word_batch(words)
    for w, ids in zip(words, got):
        exp = [vocab[p] for p in original_maxmatch(w, vocab, "[UNK]", "##", 100)]
        assert ids == exp, w
        assert tok.encode_word(w) == ids
