"""`fstok.compile(tokenizer.json)` of every kind takes HF's `add_special_tokens` (the file's post-processor)
and `decode(ids, skip_special_tokens=...)` with HF's default, including the byte-level BPE tokenizers that
compile to `BPETokenizer`. The files are the shared models cut to a few hundred tokens (the same pipeline,
post-processor and added tokens; tools/fuzz_artifacts.py `shrink_tokenizer_json`), so each compiles in
well under a second."""
from __future__ import annotations

import copy
import json
import os
import sys

import pytest

from conftest import ROOT, VOCAB, needs_shared

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402
from fstok.bpe import BPETokenizer  # noqa: E402
from fstok.wordpiece import WordPieceTokenizer  # noqa: E402
from fstok import ArtifactError  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools"))
try:
    from fuzz_artifacts import shrink_tokenizer_json  # noqa: E402
finally:
    sys.path.pop(0)

FILES = {
    "whisper": "models/bytelevel-bpe/whisper-large-v3/tokenizer.json",  # TemplateProcessing, BPETokenizer
    "deepseek": "hf/deepseek_tokenizer.json",  # ByteLevel post-processor (offsets only), BPETokenizer
    "roberta": "models/bytelevel-bpe/roberta-base/tokenizer.json",  # RobertaProcessing
    "phi3": "models/spm-bpe/phi-3-mini/tokenizer.json",  # TemplateProcessing (BOS), SentencePiece-style BPE
    "minilm": "models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",  # BertProcessing-like template
}
TEXTS = ["Hello world", "  two  spaces <|endoftext|> <s> [CLS] tags", "", "héllo 東京 😀 123456", "x" * 50]


@pytest.fixture(scope="module", params=sorted(FILES))
def pair(request, tmp_path_factory):
    with open(os.path.join(VOCAB, FILES[request.param]), encoding="utf-8") as f:
        obj = shrink_tokenizer_json(json.load(f))
    obj["padding"] = obj["truncation"] = None  # (the HF face's business: fstok.Tokenizer applies them)
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    return request.param, fstok.compile(str(path)), tokenizers.Tokenizer.from_file(str(path))


def _all(tok) -> dict:
    """The tiktoken-style faces match special-token text only where allowed (HF always matches it)."""
    return {"allowed_special": "all"} if isinstance(tok, (BPETokenizer, WordPieceTokenizer)) else {}


def _enc(tok, text, add):
    return tok.encode(text, add_special_tokens=add, **_all(tok))


@needs_shared
def test_add_special_tokens_and_decode_as_hf(pair):
    name, tok, hf = pair
    for text in TEXTS:
        for add in (False, True):
            want = hf.encode(text, add_special_tokens=add).ids
            assert _enc(tok, text, add) == want, (name, text, add)
            for skip in (True, False):
                assert tok.decode(want, skip_special_tokens=skip) == hf.decode(want, skip_special_tokens=skip), \
                    (name, text, add, skip)
            assert tok.decode(want) == hf.decode(want), (name, text)  # HF's default: skip
    assert tok.encode_batch(TEXTS, add_special_tokens=True, **_all(tok)) == [e.ids for e in hf.encode_batch(TEXTS)]
    ids = [e.ids for e in hf.encode_batch(TEXTS)]
    assert tok.decode_batch(ids) == hf.decode_batch(ids)


@needs_shared
def test_post_processor_survives_the_artifact(pair):
    name, tok, hf = pair
    again = fstok.loads(tok.to_bytes())
    assert _enc(again, "Hello world", True) == hf.encode("Hello world").ids


@needs_shared
def test_bpe_decode_stream_follows_decode(tmp_path):
    tok = _small_whisper(tmp_path)
    assert isinstance(tok, BPETokenizer)
    ids = tok.encode("hi there", add_special_tokens=True)
    assert ids[0] != tok.encode("hi there")[0]
    stream = tok.decode_stream()
    assert "".join(stream.step(i) for i in ids) + stream.flush() == tok.decode(ids) == "hi there"
    stream = tok.decode_stream(skip_special_tokens=False)
    assert "".join(stream.step(i) for i in ids) + stream.flush() == tok.decode(ids, skip_special_tokens=False)


def _small_whisper(tmp_path):
    with open(os.path.join(VOCAB, FILES["whisper"]), encoding="utf-8") as f:
        obj = shrink_tokenizer_json(json.load(f))
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj), encoding="utf-8")
    return fstok.compile(str(tmp_path / "tokenizer.json"))


@needs_shared
def test_tiktoken_encodings_keep_tiktoken_decode():
    enc = fstok.get_encoding("gpt2")
    ids = enc.encode("a<|endoftext|>", allowed_special="all")
    assert enc.decode(ids) == "a<|endoftext|>"  # tiktoken spells special tokens out
    assert enc.decode(ids, skip_special_tokens=True) == "a"
    assert enc.encode("a", add_special_tokens=True) == enc.encode("a")  # no post-processor: unchanged


@needs_shared
def test_a_crafted_post_processor_is_refused_at_load(tmp_path):
    tok = _small_whisper(tmp_path)
    from fstok import artifact as A

    art = A.parse_artifact(tok.to_bytes())
    for bad in ({"type": "NoSuchProcessor"}, {"type": "TemplateProcessing", "single": 5}, [1, 2], "x"):
        meta = copy.deepcopy(art.meta)
        meta["post_processor"] = bad
        data = A.write_artifact(None, art.kind, meta, {n: art.array(n) for n in art.sections if n != "meta"},
                                art.unicode_version, art.source_hash)
        with pytest.raises(ArtifactError, match="post_processor"):
            fstok.loads(data)


@needs_shared
def test_allowed_special_is_all_for_hf_matching(pair):
    """Every kind takes `allowed_special`; the HF-style ones match all added tokens and refuse another value
    rather than ignore it."""
    name, tok, hf = pair
    text = "a <s> [CLS] <|endoftext|> b"
    assert tok.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    if isinstance(tok, (BPETokenizer, WordPieceTokenizer)):
        return  # tiktoken-style faces: allowed_special picks the specials (tests/test_bpe_*.py)
    for bad in (set(), {"<s>"}, "none"):
        with pytest.raises(ValueError, match="allowed_special"):
            tok.encode(text, allowed_special=bad)
        with pytest.raises(ValueError, match="allowed_special"):
            tok.encode_batch([text], allowed_special=bad)


@needs_shared
def test_tekken_allowed_special(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        from fuzz_artifacts import shrink_tekken
    finally:
        sys.path.pop(0)
    with open(os.path.join(VOCAB, "models/tekken/mistral-nemo/tekken_240718.json"), encoding="utf-8") as f:
        obj = shrink_tekken(json.load(f))
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    tok = fstok.compile(str(path))
    plain = tok.encode("x<s>y")
    assert tok.bos_id not in plain  # mistral-common: special-token text is ordinary text
    assert tok.encode("x<s>y", allowed_special="all") == tok.encode("x") + [tok.special_tokens["<s>"]] + tok.encode("y")
    assert tok.encode("x<s>y", allowed_special={"<s>"}) == tok.encode("x<s>y", allowed_special="all")
    assert tok.encode_batch(["<s>"], allowed_special="all") == [[tok.special_tokens["<s>"]]]
    with pytest.raises(ValueError, match="not a special token"):
        tok.encode("x", allowed_special={"<nope>"})
    with pytest.raises(TypeError):
        tok.encode("x", allowed_special="some")
