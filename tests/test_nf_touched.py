"""The characters a normal-form check must look at (fstok.pipeline.unicode.touched): a text without any of them
is taken to be in NFC / NFKC without a closer look, so the set must hold every character that HF's tables (or
Python's) would change, reorder or compose with the character before it."""
import json
import os
import random
import unicodedata

import pytest
from conftest import VOCAB, needs_shared, spread_sample

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402
from fstok.pipeline import unicode as hf_unicode  # noqa: E402
from fstok.pipeline.normalizers import Unicode  # noqa: E402

FORMS = ["NFC", "NFKC"]


def _untouched(form):
    t = hf_unicode.touched(form)
    return [chr(cp) for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF and chr(cp) not in t]


@pytest.mark.parametrize("form", FORMS)
def test_untouched_characters_that_decompose_recompose_to_themselves(form):
    """(Combining classes and Python's own mappings go into the set directly.)  Every precomposed character left
    out -- e-acute, Hangul syllables ... -- normalizes to itself by HF's tables and by HF itself."""
    f = hf_unicode.facts()
    t = hf_unicode.touched(form)
    ref = getattr(tokenizers.normalizers, form)()
    ours = Unicode(form)
    keys = set(f.nfd) | (set(hf_unicode.compat_table()) if form == "NFKC" else set())
    decomposing = [chr(cp) for cp in sorted(keys) if cp >= 0x80 and chr(cp) not in t]
    assert len(decomposing) > 500
    for c in decomposing:
        assert f.ccc_list[ord(c)] == 0 and unicodedata.combining(c) == 0, hex(ord(c))
        assert ours.normalize_str(c) == c and ref.normalize_str(c) == c, hex(ord(c))


@pytest.mark.parametrize("form", FORMS)
def test_every_second_half_of_a_composition_is_touched(form):
    t = hf_unicode.touched(form)
    for (a, b), c in hf_unicode._compositions().items():
        assert b in t, (hex(ord(a)), hex(ord(b)), hex(ord(c)))
    for cp in list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3)):  # Hangul vowels, trailing consonants
        assert chr(cp) in t
    assert {"\u0301", "\u0b3e", "\u0cc2", "\u1161"} <= t
    assert not {"\u00e9", "\u201c", "\u2014", "\u4e2d", "\U0001f600"} & t
    if form == "NFKC":
        assert {"\u00a0", "\u2167", "\ufb01"} <= t


@pytest.mark.parametrize("form", FORMS)
def test_texts_of_untouched_characters_equal_hf_normalized(form):
    ref = getattr(tokenizers.normalizers, form)()
    pool = _untouched(form)
    rng = random.Random(7)
    for _ in range(400):
        t = "".join(rng.choice(pool) if rng.random() < 0.7 else rng.choice("ab c.") for _ in range(24))
        assert ref.normalize_str(t) == t and unicodedata.is_normalized(form, t), t.encode("unicode_escape")


@needs_shared
def test_nfc_bpe_ids_equal_hf_on_composing_texts(tmp_path):
    """A byte-level BPE behind NFC: texts that compose (a mark, an Oriya vowel sign, Hangul jamo) take the
    normalizer, those that do not skip it; ids as HF's either way."""
    with open(os.path.join(VOCAB, "hf", "anthropic_tokenizer.json"), encoding="utf-8") as fh:
        obj = json.load(fh)
    obj["normalizer"] = {"type": "NFC"}
    path = tmp_path / "nfc.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    tok, ref = fstok.compile(str(path)), tokenizers.Tokenizer.from_file(str(path))
    texts = ["cafe\u0301 \u201cx\u201d", "\u0b47\u0b3e \u0b4b", "\u1100\u1161\u11a8 \uac01", "\u00e9\u0323",
             "\u212b and \u00c5", "\u0cc6\u0cc2", "a\u0345\u0301", "\u2014 \u4e2d\u6587 \U0001f600"]
    texts += spread_sample(10)
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, allowed_special="all") for t in texts]
    assert [t for t, g, w in zip(texts, got, want) if g != w] == []
    assert tok.encode_batch(texts, allowed_special="all") == want


def test_any_in_finds_a_character_at_every_position():
    """fstok.runtime._norm.any_in (the scan behind the check) against `any(c in set)`, on str of each kind
    (Latin-1, UCS-2, UCS-4) and on UTF-8 bytes, the character at every offset of runs of ASCII that the scan
    skips 4, 8 or 16 code units at a time."""
    from fstok.pipeline.fastnorm import _bitmap, _native, _sorted_cps

    chars = ["\u00a0", "\u0301", "\u1161", "\U0001d15e"]
    bm = _bitmap(_sorted_cps(chars)).tobytes()
    any_in = _native().any_in
    fillers = {"latin1": "\u00e9", "ucs2": "\u201c", "ucs4": "\U0001f600"}
    for n in (0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 47, 70):
        for kind, other in fillers.items():
            base = ["a"] * n
            if n:
                base[n // 3] = other  # a non-ASCII character outside the set: the string's kind
            t = "".join(base)
            assert any_in(t, bm) is False and any_in(t.encode("utf-8"), bm) is False, (kind, n)
            for c in chars:
                for k in range(n):
                    u = t[:k] + c + t[k + 1:]
                    want = any(x in chars for x in u)
                    assert any_in(u, bm) is want and any_in(u.encode("utf-8"), bm) is want, (kind, n, k, c)


@pytest.mark.parametrize("form", FORMS)
def test_untouched_characters_decompose_to_a_starter_that_composes_with_nothing_before(form):
    """The text before an untouched character never changes its normalization: its decomposition (by
    Python's and HF's tables) starts with a starter that is no second half of a composition."""
    f = hf_unicode.facts()
    t = hf_unicode.touched(form)
    compat = form == "NFKC"
    seconds = {b for (_, b) in hf_unicode._compositions()} | set(map(chr, [*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]))
    keys = set(f.nfd) | (set(hf_unicode.compat_table()) if compat else set())
    for cp in sorted(keys):
        c = chr(cp)
        if cp < 0x80 or c in t:
            continue
        for first in (unicodedata.normalize("NFKD" if compat else "NFD", c)[0], hf_unicode.decompose(c, compat)[0]):
            assert f.ccc_list[ord(first)] == 0 and first not in seconds, (hex(cp), hex(ord(first)))


def test_runs_equal_oracle():
    from fstok.pipeline.fastnorm import _bitmap, _native, _sorted_cps

    chars = "\u0301\u0323\u09be\u1161"
    bm = _bitmap(_sorted_cps(chars)).tobytes()
    runs = _native().runs
    rng = random.Random(5)
    for _ in range(300):
        t = "".join(rng.choice("ab\u00e9\u09c7\U0001f600" + chars) for _ in range(rng.randint(0, 30)))
        want, i = [], 0
        while i < len(t):
            if t[i] in chars:
                j = i
                while j < len(t) and t[j] in chars:
                    j += 1
                want += [max(i - 1, 0), j]
                i = j
            else:
                i += 1
        assert runs(t, bm, 1000) == want, t.encode("unicode_escape")
        n = len(want) // 2
        assert runs(t, bm, n) == want and (n == 0 or runs(t, bm, n - 1) is None)


@pytest.mark.parametrize("form", FORMS)
def test_in_normal_form_equals_hf_on_composing_mixes(tmp_path, form):
    """BPETokenizer._in_normal_form (the spans around touched characters, or the whole text past 32 of them)
    against HF's normalizer and unicodedata, on texts full of characters that compose, reorder or decompose."""
    from fstok.bpe import BPETokenizer

    ref = getattr(tokenizers.normalizers, form)()
    tok = object.__new__(BPETokenizer)  # only the normal-form check's state
    tok.__dict__.update(_normalizer=form, _opaque_check=None)
    pool = ["a", "e", " ", "\u00e9", "\u1ec7", "\u0301", "\u0323", "\u0302", "\u09c7", "\u09be", "\u09cb", "\u1100",
            "\u1161", "\u11a8", "\uac00", "\u212b", "\u00c5", "\u201c", "\u00a0", "\ufb01", "\u0f73", "\u0344"]
    rng = random.Random(form)
    for _ in range(600):
        t = "".join(rng.choice(pool) for _ in range(rng.choice([3, 8, 40, 120])))
        want = ref.normalize_str(t) == t
        assert want == unicodedata.is_normalized(form, t)
        assert tok._in_normal_form(t) == want, t.encode("unicode_escape")


@needs_shared
def test_nfc_bpe_text_normalized_whole_equals_hf(tmp_path):
    """A text not in NFC and holding no first-pass token is normalized as a whole and encoded by the C pass
    (the second-pass tokens matched there); with a first-pass token in it, piece by piece.  Ids as HF's."""
    with open(os.path.join(VOCAB, "hf", "anthropic_tokenizer.json"), encoding="utf-8") as fh:
        obj = json.load(fh)
    obj["normalizer"] = {"type": "NFC"}
    n = max(obj["model"]["vocab"].values()) + 1 + len(obj.get("added_tokens") or [])
    obj["added_tokens"] = list(obj.get("added_tokens") or []) + [
        {"id": n, "content": "<\u00e9>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": n + 1, "content": "\u00c5ngstr", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": n + 2, "content": "<|sp\u0301|>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
    ]
    path = tmp_path / "nfc_added.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    tok, ref = fstok.compile(str(path)), tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(11)
    parts = ["<e\u0301>", "<\u00e9>", "A\u030angstr", "\u00c5ngstr", "<|sp\u0301|>", "<|sp|>", "cafe\u0301 ", "\u1100\u1161",
             "\u00e9\u0323", "Yor\u00f9b\u00e1 \u1eb9\u0300 ", " x ", "\u0b47\u0b3e", "\n"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 10))) for _ in range(150)]
    texts += [t for t in spread_sample(10) if not unicodedata.is_normalized("NFC", t)]
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, allowed_special="all") for t in texts]
    assert [t for t, g, w in zip(texts, got, want) if g != w] == []
    assert tok.encode_batch(texts, allowed_special="all") == want
    assert [tok.count(t, allowed_special="all") for t in texts] == [len(w) for w in want]
