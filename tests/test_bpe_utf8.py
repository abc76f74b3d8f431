"""The encoders' own UTF-8 of a str (fstok/runtime/csrc/pystr_utf8.h) equals CPython's, for every code point,
every str kind (1, 2, 4 bytes per code point), ASCII runs that start and end anywhere in the 16-unit SIMD
blocks, and strs whose UTF-8 CPython already holds.  decode(encode(text)) gives back the bytes the encoder saw,
so a transcoding error shows as a round-trip mismatch; ids are compared with the reference encoding too."""
import ctypes
import random

import pytest

import fstok

ENC = fstok.get_encoding("cl100k_base")


def _roundtrip(text: str) -> None:
    ids = ENC.encode_ordinary(text)
    assert ENC.decode_bytes(ids) == text.encode("utf-8")


def _chunks(lo: int, hi: int, size: int = 4096):
    cps = [c for c in range(lo, hi) if not 0xD800 <= c < 0xE000]
    for i in range(0, len(cps), size):
        yield "".join(map(chr, cps[i:i + size]))


@pytest.mark.parametrize("kind_char", ["", "\u0100", "\U00010000"], ids=["ucs1", "ucs2", "ucs4"])
def test_every_code_point(kind_char):
    hi = {"": 0x100, "\u0100": 0x10000, "\U00010000": 0x110000}[kind_char]
    for chunk in _chunks(0, hi):
        _roundtrip(kind_char + chunk)


@pytest.mark.parametrize("kind_char", ["\u00e9", "\u2014", "\U0001F600"], ids=["ucs1", "ucs2", "ucs4"])
def test_ascii_runs_across_blocks(kind_char):
    rng = random.Random(7)
    for _ in range(300):
        parts = []
        for _ in range(rng.randrange(1, 8)):
            parts.append("ab cd ef" * 5 if rng.random() < 0.3 else "x" * rng.randrange(0, 40))
            parts.append(kind_char * rng.randrange(0, 3))
        text = "".join(parts)
        _roundtrip(text)
        assert ENC.encode_ordinary(text) == ENC.encode(text, disallowed_special=())


def test_cached_utf8_is_used_and_equal():
    text = "caf\u00e9 \u2014 na\u00efve r\u00e9sum\u00e9 " * 50
    want = ENC.encode_ordinary(text)
    size = ctypes.c_ssize_t()
    api = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    api.restype = ctypes.c_void_p
    api.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
    assert api(text, ctypes.byref(size))  # CPython now holds the str's UTF-8
    assert ENC.encode_ordinary(text) == want


def test_lone_surrogates_as_tiktoken():
    for text in ["a\ud800b", "\udfff", "x" * 20 + "\ud83d" + "y" * 20, "\u00e9\udc00", "\U0001F600\ud800"]:
        ids = ENC.encode_ordinary(text)
        assert ENC.decode_bytes(ids) == text.encode("utf-8", "replace").replace(b"?", "\ufffd".encode())


def test_long_text_beyond_the_kept_buffer():
    text = ("word \u2014 " * 300_000)  # > 4 MiB of worst-case UTF-8: its own allocation
    _roundtrip(text)


def test_batch_items_transcoded_by_workers():
    texts = [c for k in ("", "\u0100", "\U00010000") for c in _chunks(0, 0x3000, 512)]
    texts = [("x" * (i % 37)) + t for i, t in enumerate(texts)] + ["plain ascii", "caf\u00e9" * 40, "a\ud800b"]
    got = ENC.encode_ordinary_batch(texts, num_threads=2)
    assert got == [ENC.encode_ordinary(t) for t in texts]
    for t, ids in zip(texts[:-1], got[:-1]):
        assert ENC.decode_bytes(ids) == t.encode("utf-8")
