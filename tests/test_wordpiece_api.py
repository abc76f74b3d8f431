"""Public API, persistence and bad input for WordPiece tokenizers."""
import json
import os
import pickle
import struct

import numpy as np
import pytest
from conftest import needs_shared, read_corpus
from wp_helpers import fs_bert, hf_bert, vocab_path

import fstok
from fstok.artifact import ArtifactError


@pytest.fixture(scope="module")
def uncased():
    return fstok.get_encoding("bert-base-uncased")


def test_get_encoding_cached_and_fast(uncased, tmp_path):
    import time

    assert fstok.get_encoding("bert-base-uncased") is uncased
    p = tmp_path / "u.fst"
    uncased.save(p)
    t = time.perf_counter()
    tok = fstok.load(p)
    assert time.perf_counter() - t < 1.0  # generous: the benchmark reports the real number (ms)
    assert tok.encode("Hello World!") == [7592, 2088, 999]
    assert tok.vocab_size == 30522
    assert tok.id_to_token(7592) == "hello" and tok.token_to_id("hello") == 7592
    assert tok.token_to_id("not-a-token-xyz") is None and tok.id_to_token(10**9) is None


def test_compile_and_roundtrip(tmp_path):
    tok = fstok.compile(vocab_path("bert-base-cased"), lowercase=False)
    p = tmp_path / "c.fst"
    tok.save(p)
    tok2 = fstok.load(p)
    text = "Jim Henson was a puppeteer, naïve café. 中文 ok"
    assert tok2.encode(text) == tok.encode(text)
    assert pickle.loads(pickle.dumps(tok2)).encode(text) == tok.encode(text)
    assert fstok.loads(tok.to_bytes()).encode(text) == tok.encode(text)


def test_tokenizer_json(tmp_path):
    hf = hf_bert("bert-base-uncased")
    p = tmp_path / "tokenizer.json"
    hf.save(str(p))
    tok = fstok.compile(p)
    text = "The Quick brown fox, jumped! Ünïcödé and 中文."
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, add_special_tokens=True) == [101] + tok.encode(text) + [102]
    # stages the compiled WordPiece tables do not express: the stage-by-stage pipeline encodes them as HF does
    import tokenizers

    bad = tmp_path / "bad.json"
    for key, value in (("normalizer", {"type": "NFKC"}), ("pre_tokenizer", {"type": "Whitespace"})):
        obj = json.loads(p.read_text())
        obj[key] = value
        bad.write_text(json.dumps(obj))
        other, ref = fstok.compile(bad), tokenizers.Tokenizer.from_file(str(bad))
        assert type(other).__name__ == "PipelineTokenizer"
        for s in (text, "ﬁne ①, x²!"):
            assert other.encode(s, add_special_tokens=True) == ref.encode(s).ids
    obj = json.loads(p.read_text())
    obj["model"]["type"] = "Unigram"
    bad.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="Unigram"):
        fstok.compile(bad)


@needs_shared
def test_batch_threads_equal_single(uncased):
    lines = read_corpus("multilingual").split("\n")
    single = [uncased.encode(l) for l in lines]
    for nt in (1, 2, 4):
        assert uncased.encode_batch(lines, num_threads=nt) == single
    ids, offs = zip(*uncased.encode_batch(lines[:50], num_threads=2, with_offsets=True))
    assert list(ids) == single[:50]
    assert list(offs) == [uncased.encode_with_offsets(l)[1] for l in lines[:50]]


def test_numpy_outputs(uncased):
    text = "Hello, world! naïve"
    a = uncased.encode_to_numpy(text)
    assert a.dtype == np.uint32 and a.tolist() == uncased.encode(text)
    ids, offs = uncased.encode_with_offsets_numpy(text)
    assert ids.tolist() == uncased.encode(text)
    assert [tuple(x) for x in offs.tolist()] == uncased.encode_with_offsets(text)[1]
    assert uncased.count(text) == len(a)


def test_bytes_input(uncased):
    assert uncased.encode("café".encode()) == uncased.encode("café")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        uncased.encode(b"caf\xe9")


@pytest.mark.parametrize("bad", [None, 3, 1.5, ["a"], object()])
def test_wrong_types(uncased, bad):
    with pytest.raises(TypeError):
        uncased.encode(bad)
    with pytest.raises(TypeError):
        uncased.encode_batch([bad])


def test_lone_surrogate(uncased):
    with pytest.raises(ValueError, match="lone surrogate U\\+D800 at index 2"):
        uncased.encode("ab\ud800c")
    with pytest.raises(ValueError, match="surrogate"):
        uncased.encode_with_offsets("\udfff")
    with pytest.raises(ValueError, match="texts\\[1\\]"):
        uncased.encode_batch(["ok", "x\ud800"])


def test_unknown_special(uncased):
    with pytest.raises(ValueError, match="not a special token"):
        uncased.encode("x", allowed_special={"<|endoftext|>"})
    with pytest.raises(TypeError):
        uncased.encode("x", allowed_special="nope")


def test_decode_errors(uncased):
    with pytest.raises(ValueError, match="invalid token id"):
        uncased.decode([10**7])
    with pytest.raises(TypeError):
        uncased.decode("hello")


def test_bad_vocab_files(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("a\nb\n##c\n")
    with pytest.raises(ValueError, match="unk token '\\[UNK\\]' is not in the vocabulary"):
        fstok.compile(p)
    p.write_bytes(b"[UNK]\n\xff\xfe\n")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        fstok.compile(p)
    p.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="JSON"):
        fstok.compile(p)
    with pytest.raises(FileNotFoundError):
        fstok.compile(tmp_path / "missing.txt")
    with pytest.raises(TypeError):
        fstok.compile(123)
    p.write_text("[UNK]\na\n")
    with pytest.raises(TypeError, match="unknown WordPiece option"):
        fstok.compile(p, lowercse=True)
    with pytest.raises(ValueError, match="max_input_chars_per_word"):
        fstok.compile(p, max_input_chars_per_word=0)


def test_adversarial_linear(uncased):
    import time

    for ch in ("a", "中", "!", " ", "\u0301", "é"):
        small, big = ch * 100_000, ch * 1_000_000
        t = time.perf_counter(); uncased.encode(small); t1 = time.perf_counter() - t
        t = time.perf_counter(); r = uncased.encode(big); t2 = time.perf_counter() - t
        assert t2 < max(0.5, 30 * t1), (ch, t1, t2)  # ~10x for 10x input; generous bound
    assert uncased.encode("a" * 1_000_000) == [uncased.unk_id]  # one word over 100 chars


# ---------------------------------------------------------------- corrupted artifacts
@pytest.fixture(scope="module")
def art_bytes():
    return fstok.compile(vocab_path("bert-base-cased"), lowercase=False).to_bytes()


def test_truncated(art_bytes, tmp_path):
    for n in (0, 10, 127, 128, 1000, len(art_bytes) // 2, len(art_bytes) - 1):
        p = tmp_path / "t.fst"
        p.write_bytes(art_bytes[:n])
        with pytest.raises(ArtifactError):
            fstok.load(p)


def test_flipped_bytes(art_bytes, tmp_path):
    rng = np.random.default_rng(0)
    for pos in [0, 9, 20, 100, 130, 200] + rng.integers(128, len(art_bytes), 20).tolist():
        b = bytearray(art_bytes)
        b[pos] ^= 0x5A
        with pytest.raises(ArtifactError):
            fstok.loads(bytes(b))


def test_wrong_magic_and_version(art_bytes):
    with pytest.raises(ArtifactError, match="not an fstok artifact"):
        fstok.loads(b"GARBAGE!" + art_bytes[8:])
    b = bytearray(art_bytes)
    b[8:12] = struct.pack("<I", 99)
    with pytest.raises(ArtifactError, match="format version 99"):
        fstok.loads(bytes(b))


def test_crafted_tables_with_valid_checksum(art_bytes):
    """A file with correct checksums but out-of-range table entries must be rejected, not crash."""
    from fstok import artifact as A

    a = A.parse_artifact(art_bytes)
    secs = {k: a.array(k).copy() for k in a.sections if k != "meta"}
    for key, mutate in [
        ("wp.edge_target", lambda x: x.__setitem__(0, 10**8)),
        ("wp.failpops", lambda x: x.view("<u4").__setitem__(2 * 5, 10**8)),  # f(5) out of range
        ("wp.failpops", lambda x: x.view("<u4").__setitem__(2 * 10, 10)),  # f(10) = 10: a cycle would hang the runtime
        ("wp.depth", lambda x: x.__setitem__(slice(None), 0)),
        ("wp.failpops", lambda x: x.view("<u4").__setitem__(2 * 7 + 1, (10**7 << 8) | 3)),  # F(7) outside the pool
        ("wp.dense", lambda x: x.view("<u4").__setitem__(2 * 3, 10**8)),  # delta' out of range
        ("norm.stage1", lambda x: x.__setitem__(2, 60000)),
        ("wp.node", lambda x: x.__setitem__(3, np.uint64(10**9))),
        ("wp.node", lambda x: x.__setitem__(0, np.uint64(0xFFFE) << np.uint64(48))),
        ("wp.edge_label", lambda x: x.__setitem__(slice(None), x[::-1].copy())),
    ]:
        s2 = {k: v.copy() for k, v in secs.items()}
        mutate(s2[key])
        data = A.write_artifact(None, a.kind, a.meta, s2, a.unicode_version, a.source_hash)
        with pytest.raises(ArtifactError, match=r"(wp|norm|vocab)\.[a-z_0-9]+(\[\d+\])?: "):
            fstok.loads(data)
    bad_meta = dict(a.meta, n_nodes=a.meta["n_nodes"] + 5)
    with pytest.raises(ArtifactError):
        fstok.loads(A.write_artifact(None, a.kind, bad_meta, secs, a.unicode_version, a.source_hash))


@needs_shared
def test_encode_num_threads_routes_long_text(uncased):
    text = read_corpus("english")[:600_000]
    assert len(text) >= uncased.PARALLEL_THRESHOLD
    assert uncased.encode(text, num_threads=2) == uncased.encode(text)
    assert uncased.encode(text, num_threads=2, add_special_tokens=True) == uncased.encode(text, add_special_tokens=True)
    assert uncased.continuing_subword_prefix == "##"
