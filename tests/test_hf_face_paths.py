"""The native steps of `fstok.Tokenizer.encode` against HF, each checked to have served its texts:

- one text takes the batch path's steps: the byte-level offset trimming of RoBERTa's processor computed in
  the C row call (`_hfalign.rows` with a trim table; `fstok.postprocess._trim_offsets` is the oracle) and the
  processor's template;
- a byte-level BPE behind NFKC (anthropic's tokenizer.json): a text the normalizer changes is normalized with
  HF's alignments by stretches (`_BPECore._normalize_piece`; the whole-text Python normalizer is the oracle)
  and numbered in C;
- Falcon's vocabulary lacks some bytes: HF drops them from the word before merging and places the remaining
  symbols by their lengths; the face encodes those pieces again without the Python stages
  (`_PipelineCore._standin_ids`)."""
import os
import random

import numpy as np
import pytest
from conftest import VOCAB, needs_shared, spread_sample

import fstok
from fstok.hf_tokenizer import _BPECore, _PipelineCore

tokenizers = pytest.importorskip("tokenizers")
pytestmark = needs_shared

MODELS = os.path.join(VOCAB, "models", "bytelevel-bpe")
FIELDS = ("ids", "tokens", "offsets", "word_ids", "type_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids")


def _same(a, b, what):
    assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], what


def test_roberta_single_trimmed_in_c(monkeypatch):
    path = os.path.join(MODELS, "roberta-base", "tokenizer.json")
    tok, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    import fstok.postprocess as pp

    calls = []
    real = pp._trim_offsets
    monkeypatch.setattr(pp, "_trim_offsets", lambda *a: calls.append(1) or real(*a))
    texts = spread_sample(6) + ["  two  spaces ", " lead", "trail ", "a\u3000b", "x <mask> y", "<s>a</s>", ""]
    for t in texts:
        _same(tok.encode(t), hf.encode(t), t)
        _same(tok.encode(t, "and a pair "), hf.encode(t, "and a pair "), t)
    assert len(calls) < len(texts) // 4  # the C trimming served the texts, not the Python oracle
    # the C trimming against the Python oracle on every id's token string
    core = tok._core
    plan = core._words_plan()
    ids = list(range(0, len(plan.tok_len), 7))
    text = "".join(plan.tok_of(i) for i in ids)
    from fstok.hf_encoding import Encoding

    for aps in (False, True):
        from fstok.runtime import _hfalign

        n = len(ids)
        offs = [(k, k + 1) for k in range(n)]
        align = np.arange(n, dtype=np.int32).tobytes()
        got = _hfalign.rows(align, np.asarray(ids, dtype=np.uint32).tobytes(), np.ones(len(plan.tok_len), np.int64),
                            None, np.array([0, n], dtype=np.uint64).tobytes(),
                            np.arange(n, dtype=np.uint32).tobytes(), -1, 1, plan.trim_table(), aps)
        e = Encoding._raw(ids, [0] * n, [plan.tok_of(i) for i in ids], [0] * n, list(offs), [0] * n, [1] * n, [], {})
        real(e, aps)
        assert got[2] == e._offsets, (aps, text[:50])


def test_nfkc_bytelevel_native():
    path = os.path.join(VOCAB, "hf", "anthropic_tokenizer.json")
    tok, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    core = tok._core
    assert isinstance(core, _BPECore) and core.norm is not None
    real_norm = core.norm.normalize
    from fstok.pipeline.normalized import Piece

    texts = spread_sample(8) + [
        "ａｂｃ，．！ full width", "e\u0301 and \u00e9", "Å\u212b", "x\u3000\u3000y", "ﬁ ligature ½", "…", "한국어 ᄀ",
        "カ\u3099 ｶﾞ", "ab<EOT>cd，", "\u2460\u2461 ①", "a\u0323\u0307 q\u0307\u0323", "\u00a0\u2009 ", "中文，测试。",
        "\U0001d400\U0001d401", "ǅ ǆ", "x\u0345\u0301",
    ]
    for t in texts:
        _same(tok.encode(t), hf.encode(t), t)
    # the stretch-wise normalization equals the whole-text normalizer, alignments included
    for t in texts:
        p, q = core._normalize_piece(t, 0, len(t)), real_norm(Piece.original(t))
        assert (p.text, list(p.starts), list(p.ends)) == (q.text, list(q.starts), list(q.ends)), t
    got = tok.encode_batch(texts)
    for t, a, b in zip(texts, got, hf.encode_batch(texts)):
        _same(a, b, t)
    served = sum(core._normalized_row(t) is not None for t in texts if core.tok._text_needs_python(t))
    assert served >= 10


def test_falcon_missing_bytes_without_stages(monkeypatch):
    path = os.path.join(MODELS, "falcon-7b", "tokenizer.json")
    tok, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    core = tok._core
    assert isinstance(core, _PipelineCore) and core.tok._standin_lo is not None
    staged = []
    real = _PipelineCore.python_encode
    monkeypatch.setattr(_PipelineCore, "python_encode", lambda self, t: staged.append(t) or real(self, t))
    rng = random.Random(7)
    missing = ["\x03", "\x04", "\x0b", "\x11", "\x14", "\x19", "\U00080000", "\U000b0001"]
    parts = ["hello world", "!!!", "a", "123456", "  ", "é", "ab!!cd", "x-y", "\t", "中文", "...", " ok"]
    texts = ["a\x03b ok", "\x03", "!\x03!", " \x03 ", "1\x0323", "\U00080000\x19\x19\x04\U000b0001é"]
    texts += ["".join(rng.choice(parts + missing) for _ in range(rng.randint(1, 6))) for _ in range(150)]
    for t in texts:
        _same(tok.encode(t), hf.encode(t), t)
    for t, a, b in zip(texts, tok.encode_batch(texts), hf.encode_batch(texts)):
        _same(a, b, t)
    tok.enable_padding(pad_id=0, pad_token="x")
    hf.enable_padding(pad_id=0, pad_token="x")
    arr = tok.encode_batch_numpy(texts)["input_ids"]
    assert arr.tolist() == [e.ids for e in hf.encode_batch(texts)]
    assert not staged  # no text needed the Python stages


def test_spm_add_normalized_tokens_without_compiling(monkeypatch):
    """add_tokens / add_special_tokens on a Unigram file (a Precompiled normalizer): tokens HF matches in the
    normalized text (normalized=True), raw ones, single_word: the compiled core is kept, its added-token tables
    replaced (`HFSentencePieceTokenizer.with_added_tokens`); every field equals HF's."""
    import fstok.hf_tokenizer as ht

    path = os.path.join(VOCAB, "models", "unigram", "multilingual-e5-small", "tokenizer.json")
    tok, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)

    def refuse(*a, **k):
        raise AssertionError("compiled again")

    monkeypatch.setattr(ht, "_compile_core", refuse)
    ours = ["Hello World", "\uff46\uff55\uff4c\uff4c", " spaced tok", "zzqx", fstok.AddedToken("new", single_word=True)]
    theirs = ours[:4] + [tokenizers.AddedToken("new", single_word=True)]
    assert tok.add_tokens(ours) == hf.add_tokens(theirs)
    assert tok.add_special_tokens([fstok.AddedToken("[X]", normalized=True), "<raw>"]) == \
        hf.add_special_tokens([tokenizers.AddedToken("[X]", normalized=True), "<raw>"])
    texts = spread_sample(4) + ["hello world Hello World HELLO WORLD", "\uff46\uff55\uff4c\uff4c full FULL",
                                "a spaced tok b", "zzqxzzqx", "news new renew new.", "[X] [x] a<raw>b"]
    for t in texts:
        _same(tok.encode(t), hf.encode(t), t)
    for t, a, b in zip(texts, tok.encode_batch(texts), hf.encode_batch(texts)):
        _same(a, b, t)
    ids = tok.encode("hello zzqx [X] <raw>").ids
    assert ids == hf.encode("hello zzqx [X] <raw>").ids
    assert tok.decode(ids) == hf.decode(ids) and tok.decode(ids, False) == hf.decode(ids, False)
    assert [tok.id_to_token(i) for i in ids] == [hf.id_to_token(i) for i in ids]
    assert tok.get_vocab_size() == hf.get_vocab_size()


def test_wordpiece_add_tokens_keeps_the_core(monkeypatch):
    """add_tokens on a WordPiece file (BertNormalizer): the new tokens are matched by the face (normalized ones
    in the normalized text), so the compiled core stays the same and is not compiled or looked up again."""
    import fstok.hf_tokenizer as ht

    path = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")
    tok, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    core = tok._compiled

    def refuse(*a, **k):
        raise AssertionError("compiled again")

    monkeypatch.setattr(ht, "_compile_core", refuse)
    assert tok.add_tokens(["Hello World", "zzqx", fstok.AddedToken("new", single_word=True), "[NEW]"]) == \
        hf.add_tokens(["Hello World", "zzqx", tokenizers.AddedToken("new", single_word=True), "[NEW]"])
    assert tok._compiled is core
    for t in spread_sample(3) + ["hello world Hello World zzqxzzqx [new] [NEW] news new renew"]:
        _same(tok.encode(t), hf.encode(t), t)
