"""tokenizer.json files with a Unigram or SentencePiece-style BPE model: ids, HF character offsets and
decode equal `tokenizers` 0.23.3, with and without add_special_tokens.  (The full differential run is
tools/diff_models.py.)"""
import json
import os
import pickle

import pytest

import fstok
from conftest import VOCAB, needs_shared, read_corpus

tokenizers = pytest.importorskip("tokenizers")

MODELS = os.path.join(VOCAB, "models")
FILES = {
    "multilingual-e5": "unigram/multilingual-e5-small/tokenizer.json",
    "phi-3-mini": "spm-bpe/phi-3-mini/tokenizer.json",
}
TRICKY = [
    "", " ", "  ", "  a  b  ", "\t\n x", "Hello world", "\u3000全角ｈｅｌｌｏ", "e\u0301 Ａ\u0301 a\u0308\u0301",
    "\r\n\r\n", "\x00a\x00", "😀👍🏽👨‍👩‍👧 🇫🇷🇩🇪", "<s>x</s> <pad><mask><unk>", "<|user|> hi <|end|>  x\n<|assistant|>",
    "▁ ▁▁x", "ﬁ ① ㌀ ǅ", "\u0600a \u0915\u094d\u0937", "a" * 300, "\ufffd\ufeff\u200b", "1234 3.14",
]


def _lines():
    out = []
    for name in ("multilingual", "stress", "code", "chinese_long"):
        ls = read_corpus(name).split("\n")
        out += ls[:40] + ls[-5:]
    return out + TRICKY


@pytest.fixture(scope="module", params=sorted(FILES))
def pair(request):
    path = os.path.join(MODELS, FILES[request.param])
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    return request.param, path, fstok.compile(path), tokenizers.Tokenizer.from_file(path)


@needs_shared
def test_ids_offsets_decode_equal_tokenizers(pair):
    name, _, tok, hf = pair
    for x in _lines():
        for add in (False, True):
            e = hf.encode(x, add_special_tokens=add)
            ids, offs = tok.encode_with_offsets(x, add_special_tokens=add)
            assert ids == e.ids, (name, add, x)
            assert offs == e.offsets, (name, add, x)
            assert tok.encode(x, add_special_tokens=add) == e.ids
        for skip in (True, False):
            assert tok.decode(e.ids, skip_special_tokens=skip) == hf.decode(e.ids, skip_special_tokens=skip), (name, x)


@needs_shared
def test_whole_document(pair):
    name, _, tok, hf = pair
    doc = read_corpus("multilingual")[:30000]
    e = hf.encode(doc, add_special_tokens=False)
    ids, offs = tok.encode_with_offsets(doc)
    assert ids == e.ids and offs == e.offsets


@needs_shared
def test_save_load_pickle_vocab(pair, tmp_path):
    name, _, tok, hf = pair
    p = tmp_path / f"{name}.fst"
    tok.save(p)
    for t in (fstok.load(p), pickle.loads(pickle.dumps(tok))):
        x = "Hello wörld 😀 " + name
        assert t.encode(x) == hf.encode(x, add_special_tokens=False).ids
        assert t.vocab_size == hf.get_vocab_size()
        assert t.id_to_token(100) == hf.id_to_token(100)
        assert t.token_to_id(hf.id_to_token(100)) == 100
        assert t.count(x) == len(t.encode(x))


def _edited(path, tmp_path, edit):
    obj = json.load(open(path, encoding="utf-8"))
    edit(obj)
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    return str(p)


@needs_shared
def test_refusals_name_the_component(tmp_path):
    phi = os.path.join(MODELS, FILES["phi-3-mini"])

    def dropout(o):
        o["model"]["dropout"] = 0.1

    with pytest.raises(ValueError, match="dropout"):
        fstok.compile(_edited(phi, tmp_path, dropout))

    def nfkd(o):
        o["normalizer"]["normalizers"].append({"type": "NFKD"})

    def rx(o):
        o["normalizer"]["normalizers"][1] = {"type": "Replace", "pattern": {"Regex": r"\p{L}+"}, "content": "x"}

    # stages the SentencePiece compiler does not express: the stage-by-stage pipeline encodes them as HF does
    import tokenizers

    for edit in (nfkd, rx):
        p = _edited(phi, tmp_path, edit)
        tok, hf = fstok.compile(p), tokenizers.Tokenizer.from_file(p)
        for s in ["Hello ﬁne world", "①②③ x²", "日本語 text", ""]:
            e = hf.encode(s, add_special_tokens=False)
            assert tok.encode_with_offsets(s) == (e.ids, e.offsets), (edit.__name__, s)
