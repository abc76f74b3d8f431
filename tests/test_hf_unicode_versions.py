"""Characters whose Unicode facts differ between HF tokenizers' (older) tables and Python's `unicodedata`:
fstok follows HF's.  U+1078D and U+1F16C have compatibility decompositions in Python's tables but none in
HF's; U+1AC0.. are combining marks HF treats as starters."""
import os

import pytest
from conftest import VOCAB, needs_shared

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402
from fstok.pipeline import unicode as hf_unicode  # noqa: E402
from fstok.pipeline.normalizers import Unicode  # noqa: E402

NEWER = ["\U0001078d", "\U0001f16c", "\U000107b2", "\u32ff", "a\u1df6\u1abc b", "Z\u1ac2\u1abf\u0329 x",
         "e\u0301\u1ac0\u0300", "\u1e9b\u0323 \U0001078d\u0301"]


@pytest.mark.parametrize("form", ["NFC", "NFKC", "NFD", "NFKD"])
def test_normalizer_equals_hf_on_every_character_that_differs(form):
    ref = getattr(tokenizers.normalizers, form)()
    ours = Unicode(form)
    chars = sorted(hf_unicode.opaque_compat())
    assert len(chars) > 100
    for c in chars:
        for t in (c, "a" + c, "a\u0301" + c + "\u0300b", c + "\u0327\u0301"):
            assert ours.normalize_str(t) == ref.normalize_str(t), (form, hex(ord(c)))
    for t in NEWER:
        assert ours.normalize_str(t) == ref.normalize_str(t), (form, t)


@needs_shared
def test_byte_level_bpe_behind_nfkc_equals_hf():
    path = os.path.join(VOCAB, "hf", "anthropic_tokenizer.json")
    tok, ref = fstok.compile(path), tokenizers.Tokenizer.from_file(path)
    texts = NEWER + ["plain ascii", "caf\u00e9 \u2167", "x" + "".join(sorted(hf_unicode.opaque_compat())[:40])]
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert [tok.encode(t) for t in texts] == want
    assert tok.encode_batch(texts) == want
    assert tok.count_batch(texts) == [len(w) for w in want]


@needs_shared
def test_byte_level_bpe_behind_nfc_every_differing_character(tmp_path):
    """The native pass skips the normalizer for a text already in NFC; the scan for the characters HF's
    tables know otherwise (a bitmap in C) must see every one of them, around reordering combining marks."""
    import json

    with open(os.path.join(VOCAB, "hf", "anthropic_tokenizer.json"), encoding="utf-8") as f:
        obj = json.load(f)
    obj["normalizer"] = {"type": "NFC"}
    path = tmp_path / "nfc.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    tok, ref = fstok.compile(str(path)), tokenizers.Tokenizer.from_file(str(path))
    texts = NEWER + ["caf\u00e9", "cafe\u0301 x"]
    for c in sorted(hf_unicode.opaque()):
        texts += ["\u00e9" + c, "a\u0301" + c + "\u0300b", c + "\u0327\u0301", "\u201cx" + c + "\u0323\u0302"]
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, allowed_special="all") for t in texts]
    assert [t for t, g, w in zip(texts, got, want) if g != w] == []
    assert tok.encode_batch(texts, allowed_special="all") == want
    # a batch is checked at once, joined: marks at the start of a text never combine with the text before
    for batch in (["e", "\u0301x", "\u0301", "a\u0327"], ["cafe\u0301", "x"], ["\u201c", "e\u0327\u0301"]):
        want = [e.ids for e in ref.encode_batch(batch, add_special_tokens=False)]
        assert tok.encode_batch(batch, allowed_special="all") == want, batch
        assert tok.count_batch(batch) == [len(w) for w in want]
