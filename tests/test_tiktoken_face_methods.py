"""fstok.tiktoken's Encoding methods against the installed tiktoken 0.14's, built offline from the shared
rank files: every encode / decode / unstable-completion / private helper on corpus samples and edge texts,
for three encodings.  (The definitions and call shapes: tests/test_tiktoken_face.py.)"""
from __future__ import annotations

import contextlib
import gc

import pytest

from bpe_helpers import sample_lines, upstream_spec
from conftest import needs_shared

import fstok.tiktoken as ftk

pytestmark = needs_shared


TEXTS = ["hello world", "hello fanta", "hello ", "hello  ", "hello\n", "hello\n\n", "x = 1;\n    ", "请考试我的软件",
         "<|endoftext|> hi <|fim_prefix|>x", "the <|endoftext|>", "don't", "  !", "\u00a0\u3000", "👍\U0001f44d",
         "a\r\n", "", " ", "abc'", "١٢٣٤ 1234567"]


@contextlib.contextmanager
def _gc_paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_harmony"])
def test_methods_match(name):
    import tiktoken

    ref, e = tiktoken.Encoding(**upstream_spec(name)), ftk.get_encoding(name)
    lines = TEXTS + sample_lines("multilingual", 40) + sample_lines("code", 20)
    unstable_sample = len(TEXTS) + 12
    for i, t in enumerate(lines):
        for kw in ({}, {"allowed_special": "all"}, {"disallowed_special": ()},
                   {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}):
            try:
                want = ref.encode(t, **kw)
            except ValueError:
                with pytest.raises(ValueError):
                    e.encode(t, **kw)
                continue
            assert e.encode(t, **kw) == want
            assert e.encode_to_numpy(t, **kw).tolist() == want
            if i < unstable_sample and kw.get("disallowed_special", 1) != ():
                # (a sample of the texts and two special-token modes: o200k's pieces have up to ~10^5 completions: compared as sets, since tiktoken's have no
                # repeats, equal lengths and sets mean the same lists in some order; and with the cyclic GC
                # paused, which would otherwise pass over the 10^6 new lists and tuples again and again)
                with _gc_paused():
                    s, c = ref.encode_with_unstable(t, **kw)
                    s2, c2 = e.encode_with_unstable(t, **kw)
                    same = s2 == s and len(c2) == len(c) and set(map(tuple, c2)) == set(map(tuple, c))
                    del c, c2
                assert same, t
        assert e.encode_ordinary(t) == ref.encode_ordinary(t)
        assert e._encode_only_native_bpe(t) == ref._encode_only_native_bpe(t)
        if t:
            assert e._encode_single_piece(t) == ref._encode_single_piece(t)
        b = t.encode()
        for cut in range(len(b) - 3, len(b) + 1):
            if cut >= 0:
                assert e._encode_bytes(b[:cut] + b"\xff\x80"[: len(b) - cut]) == ref._encode_bytes(b[:cut] + b"\xff\x80"[: len(b) - cut])
        ids = ref.encode(t, allowed_special="all")
        assert e.decode_tokens_bytes(ids) == ref.decode_tokens_bytes(ids)
        assert e.decode_with_offsets(ids) == ref.decode_with_offsets(ids)
    batch = lines[:30]
    assert e.encode_batch(batch, allowed_special="all") == ref.encode_batch(batch, allowed_special="all")
    assert e.encode_ordinary_batch(batch) == ref.encode_ordinary_batch(batch)
    ids = ref.encode_batch(batch, disallowed_special=())
    assert e.decode_batch(ids) == ref.decode_batch(ids) and e.decode_bytes_batch(ids) == ref.decode_bytes_batch(ids)
    assert e.token_byte_values() == ref.token_byte_values()
    assert (e.eot_token, e.n_vocab, e.max_token_value, e.special_tokens_set) == (
        ref.eot_token, ref.n_vocab, ref.max_token_value, ref.special_tokens_set)
    for tid in (0, 255, ref.eot_token, ref.max_token_value):
        assert e.is_special_token(tid) == ref.is_special_token(tid)
        assert e.decode_single_token_bytes(tid) == ref.decode_single_token_bytes(tid)
