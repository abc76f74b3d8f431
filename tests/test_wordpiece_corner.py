"""LinMaxMatch corner cases (paper Section 3.3, TF Text's spec table) and property tests
against the original quadratic MaxMatch."""
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok.compile.wordpiece import NONE, build_tables, node_fields
from fstok.reference.wordpiece import TableExecutor, original_maxmatch
from fstok.wordpiece import WordPieceTokenizer
from fstok.loaders.bert import WordPieceSource

FIG1 = ["[UNK]", "a", "abcdx", "##b", "##c", "##cdy", "##dz"]


def make(vocab, prefix="##", unk="[UNK]", max_chars=100, **opts):
    t2i = {}
    for i, t in enumerate(vocab):
        t2i[t] = i
    src = WordPieceSource(tokens=list(vocab), token_to_id=t2i, unk_token=unk, continuing_subword_prefix=prefix,
                          max_input_chars_per_word=max_chars, lowercase=opts.get("lowercase", False),
                          strip_accents=opts.get("strip_accents", False), special_tokens=[unk],
                          source_bytes="\n".join(vocab).encode())
    return WordPieceTokenizer.from_source(src)


def words_of(tok, ids):
    return [tok.id_to_token(i) for i in ids]


def test_figure1_failure_links_and_pops():
    tok = make(FIG1)
    a, m = tok._tables, tok._art.meta
    # map node -> string by walking the trie
    es, nc, _, _ = node_fields(a["wp.node"])
    el, et = a["wp.edge_label"], a["wp.edge_target"]
    strings = {m["root"]: b""}
    stack = [m["root"]]
    while stack:
        u = stack.pop()
        for i in range(es[u], es[u] + nc[u]):
            v = int(et[i])
            strings[v] = strings[u] + bytes([el[i]])
            stack.append(v)
    node = {s.decode(): v for v, s in strings.items()}
    pool = a["wp.pool"]

    def F(s):
        p = int(a["wp.pops"][node[s]])
        return [tok.id_to_token(int(x)) for x in pool[p >> 8:(p >> 8) + (p & 0xFF)]]

    def f(s):
        x = int(a["wp.fail"][node[s]])
        return None if x == NONE else strings[x].decode()

    expected = {  # Figure 1b
        "a": (["a"], "##"), "ab": (["a"], "##b"), "abc": (["a", "##b"], "##c"), "abcd": (["a", "##b"], "##cd"),
        "abcdx": (["abcdx"], "##"), "##b": (["##b"], "##"), "##c": (["##c"], "##"), "##cd": (["##c"], "##d"),
        "##cdy": (["##cdy"], "##"), "##d": ([], None), "##dz": (["##dz"], "##"),
    }
    for s, (pops, link) in expected.items():
        assert f(s) == link, s
        if link is not None:
            assert F(s) == pops, s
    assert f("") is None and f("#") is None and f("##") is None


@pytest.mark.parametrize("word,expected", [
    ("abcdz", ["a", "##b", "##c", "##dz"]),  # Examples 1-3
    ("abcz", ["[UNK]"]),  # Example 4: stops inside the word
    ("abcd", ["[UNK]"]),  # Example 4: ##d cannot be tokenized
    ("abcdx", ["abcdx"]),
    ("abcdxa", ["[UNK]"]),
    ("##bc", ["##b", "##c"]),  # input starting with the suffix indicator
    ("a", ["a"]),
    ("z", ["[UNK]"]),
    ("", []),
])
def test_figure1_examples(word, expected):
    tok = make(FIG1)
    assert words_of(tok, tok.encode_word(word)) == expected
    t2i = {t: i for i, t in enumerate(FIG1)}
    assert original_maxmatch(word, t2i, "[UNK]", "##", 100) == expected or word == ""


SPECS = [
    # (vocab, prefix, max_chars, word, expected)   -- after TF Text's fast_wordpiece spec table
    (["[UNK]", "#", "##", "###"], "##", 100, "##", ["##"]),  # input equal to the suffix indicator
    (["[UNK]", "#", "##", "###"], "##", 100, "#", ["#"]),
    (["[UNK]", "#", "##", "###"], "##", 100, "###", ["###"]),
    (["[UNK]", "#", "##", "###"], "##", 100, "####", ["###", "###"]),
    (["[UNK]", "#", "###"], "##", 100, "##", ["#", "###"]),
    (["[UNK]", "a"], "##", 100, "##", ["[UNK]"]),
    (["[UNK]", "a", "##a"], "##", 100, "aaa", ["a", "##a", "##a"]),
    (["[UNK]", "a", "##a"], "##", 3, "aaa", ["a", "##a", "##a"]),
    (["[UNK]", "a", "##a"], "##", 2, "aaa", ["[UNK]"]),  # max chars
    (["[UNK]", "é", "##é"], "##", 3, "ééé", ["é", "##é", "##é"]),  # counted in characters, not bytes
    (["[UNK]", "é", "##é"], "##", 2, "ééé", ["[UNK]"]),
    (["[UNK]", "a", "b", "ab"], "", 100, "abab", ["ab", "ab"]),  # empty suffix indicator
    (["[UNK]", "a", "b"], "", 100, "abba", ["a", "b", "b", "a"]),
    (["[UNK]", "ab", "##c"], "##", 100, "abc", ["ab", "##c"]),
    (["[UNK]", "ab", "##c"], "##", 100, "ac", ["[UNK]"]),
    (["[UNK]", "", "##", "a"], "##", 100, "a", ["a"]),  # vocab containing "" and "##"
    (["[UNK]", "", "##", "a"], "##", 100, "##", ["##"]),
    (["[UNK]", "a", "@@a"], "@@", 100, "aa", ["a", "@@a"]),
    (["[UNK]", "中", "##国"], "##", 100, "中国", ["中", "##国"]),
    (["[UNK]", "中国"], "##", 100, "中", ["[UNK]"]),  # partial character never matches
]


@pytest.mark.parametrize("vocab,prefix,max_chars,word,expected", SPECS)
def test_spec_table(vocab, prefix, max_chars, word, expected):
    tok = make(vocab, prefix=prefix, max_chars=max_chars)
    t2i = {t: i for i, t in enumerate(vocab)}
    assert original_maxmatch(word, t2i, "[UNK]", prefix, max_chars) == expected
    assert words_of(tok, tok.encode_word(word)) == expected  # C
    ex = TableExecutor(tok)  # pure-Python executor of the same tables
    assert words_of(tok, ex.word(word.encode(), len(word))) == expected


def test_unk_missing_is_an_error():
    with pytest.raises(ValueError, match="unk token"):
        make(["a", "b"])


ALPHA = "abc#é"


@st.composite
def vocab_and_word(draw):
    prefix = draw(st.sampled_from(["##", "", "#", "@@"]))
    pieces = draw(st.lists(st.text(alphabet=ALPHA, min_size=1, max_size=4), min_size=1, max_size=12, unique=True))
    suffixes = draw(st.lists(st.text(alphabet=ALPHA, min_size=1, max_size=3), max_size=10, unique=True))
    vocab = ["[UNK]"] + pieces + [prefix + s for s in suffixes]
    vocab = list(dict.fromkeys(vocab))
    word = draw(st.text(alphabet=ALPHA, max_size=14))
    max_chars = draw(st.sampled_from([100, 5, 3]))
    return vocab, prefix, max_chars, word


@settings(max_examples=int(os.environ.get("FSTOK_HYPOTHESIS_EXAMPLES", "400")), deadline=None)
@given(vocab_and_word())
def test_linmaxmatch_equals_maxmatch(case):
    vocab, prefix, max_chars, word = case
    tok = make(vocab, prefix=prefix, max_chars=max_chars)
    t2i = {t: i for i, t in enumerate(vocab)}
    expected = original_maxmatch(word, t2i, "[UNK]", prefix, max_chars) if word else []
    got = words_of(tok, tok.encode_word(word))
    assert got == expected
    ex = TableExecutor(tok)
    assert words_of(tok, ex.word(word.encode(), len(word))) == expected


@settings(max_examples=int(os.environ.get("FSTOK_HYPOTHESIS_EXAMPLES", "300")), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .,#éÉ\u0301\u200d中\t\n")), max_size=30))
def test_e2e_equals_reference_pipeline(text):
    """E2E (C) == the table executor == BertNormalizer/BertPreTokenizer + MaxMatch from HF."""
    from tokenizers import normalizers, pre_tokenizers

    vocab = ["[UNK]", "a", "b", "##a", "##b", "ab", ".", ",", "#", "é", "e", "中", "##é"]
    tok = make(vocab, lowercase=True, strip_accents=None)
    t2i = {t: i for i, t in enumerate(vocab)}
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    words = [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(norm.normalize_str(text))]
    expected = [t2i[p] for w in words for p in original_maxmatch(w, t2i, "[UNK]", "##", 100)]
    assert tok.encode(text) == expected
    assert TableExecutor(tok).encode(text) == expected


def test_long_failure_pops_vs_maxmatch(tmp_path):
    """Failure-pop slices of 120-140 tokens (a 200-byte token sharing a long prefix of 'a's): the runtime
    tags inlined one-token pops with the low byte 0x81, which a 129-token slice also has."""
    import fstok

    toks = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "a", "##a", "c", "##c", "a" * 200 + "b"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(toks) + "\n", encoding="utf-8")
    tok = fstok.compile(str(path), lowercase=False, max_input_chars_per_word=400)
    vocab = {t: i for i, t in enumerate(toks)}
    for k in range(120, 140):
        w = "a" * k + "c"
        want = [vocab[p] for p in original_maxmatch(w, vocab, "[UNK]", "##", 400)]
        assert tok.encode(w) == want, k
        assert tok.encode_word(w) == want, k
        assert tok.encode_with_offsets(w)[0] == want, k
