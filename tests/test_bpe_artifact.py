"""BPE artifacts and public API: persistence, pickling, bundled encodings, crafted/corrupted files, errors."""
import json
import os
import pickle
import time

import numpy as np
import pytest
from bpe_helpers import fstok_encoding, tiktoken_encoding, tiktoken_path
from conftest import VOCAB, needs_shared

import fstok
from fstok import artifact as A
from fstok.artifact import ArtifactError
from fstok.bpe import BPETokenizer
from fstok.loaders.tiktoken_file import read_tiktoken_ranks

pytestmark = needs_shared

TEXT = "Hello wörld! 12345 <|endoftext|> 你好\n\n  x = f(y)  \t🙂"


def test_bundled_encodings_registered_and_cached(tmp_path):
    for name in ("r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"):
        assert name in fstok.list_encodings()
    tok = fstok.get_encoding("cl100k_base")
    assert fstok.get_encoding("cl100k_base") is tok
    assert tok.encode(TEXT, allowed_special="all") == tiktoken_encoding("cl100k_base").encode(TEXT, allowed_special="all")
    p = tmp_path / "c.fst"
    tok.save(p)
    t0 = time.perf_counter()
    tok2 = fstok.load(p)
    assert time.perf_counter() - t0 < 2.0  # mmap + validation; the benchmark reports the real figure
    assert tok2.encode(TEXT, disallowed_special=()) == tok.encode(TEXT, disallowed_special=())
    assert tok2.name == "cl100k_base" and tok2.n_vocab == 100277 == tok2.vocab_size


def test_roundtrips_bytes_pickle_nommap(tmp_path):
    tok = fstok_encoding("o200k_base")
    data = tok.to_bytes()
    assert fstok.loads(data).encode_ordinary(TEXT) == tok.encode_ordinary(TEXT)
    p = tmp_path / "o.fst"
    tok.save(p)
    assert fstok.load(p, use_mmap=False).encode_ordinary(TEXT) == tok.encode_ordinary(TEXT)
    tok3 = pickle.loads(pickle.dumps(tok))
    assert tok3.encode(TEXT, allowed_special="all") == tok.encode(TEXT, allowed_special="all")
    assert A.read_artifact(p).kind_name == "bpe"


def test_vocabulary_accessors():
    tok, ref = fstok_encoding("cl100k_base"), tiktoken_encoding("cl100k_base")
    assert tok.id_to_token(15339) == b"hello" == ref.decode_single_token_bytes(15339)
    assert tok.token_to_id(b"hello") == tok.token_to_id("hello") == 15339
    assert tok.token_to_id("<|endoftext|>") == 100257 == tok.eot_token
    assert tok.encode_single_token(b" world") == ref.encode_single_token(b" world")
    assert tok.is_special_token(100257) and not tok.is_special_token(15339)
    assert tok.special_tokens_set == ref.special_tokens_set
    with pytest.raises(KeyError):
        tok.token_to_id(b"definitely not one token \x00\xff")
    with pytest.raises(KeyError):
        tok.id_to_token(100256)  # an unused id in cl100k
    assert sorted(tok.token_byte_values()) == sorted(ref.token_byte_values())
    assert "cl100k_base" in repr(tok)


def test_from_ranks_and_compile_dispatch(tmp_path):
    import tiktoken

    ranks = read_tiktoken_ranks(tiktoken_path("r50k_base"))
    small = {b: r for b, r in ranks.items() if r < 3000}  # a prefix of a BPE vocabulary is one too
    pat = tiktoken_encoding("r50k_base")._pat_str
    tok = BPETokenizer.from_ranks(small, pat, {"<|eot|>": 3000}, name="small")
    ref = tiktoken.Encoding("small", pat_str=pat, mergeable_ranks=small, special_tokens={"<|eot|>": 3000})
    text = open(os.path.join(VOCAB, "..", "corpus", "english.txt"), encoding="utf-8").read()[:40_000]
    assert tok.encode(text + "<|eot|>", allowed_special="all") == ref.encode(text + "<|eot|>", allowed_special="all")
    assert tok.name == "small" and tok.n_vocab == 3001
    # fstok.compile dispatches on the file type; a known .tiktoken name implies pattern and specials
    p = tmp_path / "r50k_base.tiktoken"
    p.write_bytes(open(tiktoken_path("r50k_base"), "rb").read())
    assert fstok.compile(str(p)).encode(TEXT, allowed_special="all") == tiktoken_encoding("r50k_base").encode(TEXT, allowed_special="all")
    q = tmp_path / "mystery.tiktoken"
    q.write_bytes(p.read_bytes())
    with pytest.raises(ValueError, match="pattern"):
        fstok.compile(str(q))
    assert fstok.compile(str(q), pattern=pat, special_tokens={}).encode_ordinary("hi there") == [5303, 612]
    assert fstok.compile(os.path.join(VOCAB, "gpt2", "vocab.json")).encode_ordinary("hi there") == [5303, 612]


def test_bad_sources(tmp_path):
    ranks = read_tiktoken_ranks(tiktoken_path("r50k_base"))
    pat = tiktoken_encoding("r50k_base")._pat_str
    with pytest.raises(ValueError, match="single byte"):
        BPETokenizer.from_ranks({b"ab": 0, b"a": 1}, pat, {})
    with pytest.raises(TypeError):
        BPETokenizer.from_ranks(ranks, 123, {})
    with pytest.raises(TypeError):
        BPETokenizer.from_ranks(list(ranks.items()), pat, {})
    with pytest.raises(ValueError, match="reuses the id"):
        BPETokenizer.from_ranks(ranks, pat, {"<|x|>": 5})
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"!!notbase64 1\n")
    with pytest.raises(ValueError, match="base64"):
        BPETokenizer.compile_tiktoken(bad, pattern=pat)
    dup = tmp_path / "dup.tiktoken"
    dup.write_bytes(b"YQ== 0\nYQ== 1\n")
    with pytest.raises(ValueError, match="twice"):
        BPETokenizer.compile_tiktoken(dup, pattern=pat)
    js = tmp_path / "t.json"
    js.write_text("{not json")
    with pytest.raises(ValueError):
        BPETokenizer.compile_tokenizer_json(js)


def _rewrite(art, **changes):
    """Re-serialize an artifact with some sections replaced (valid checksums: structural checks must catch it)."""
    secs = {}
    for name, sec in art.sections.items():
        if name == "meta":
            continue
        secs[name] = art.array(name).copy() if sec.dtype != "|u1" or not name.endswith("source") else art.raw(name)
    meta = dict(art.meta)
    for k, v in changes.items():
        if k == "meta":
            meta.update(v)
        elif v is None:
            del secs[k]
        else:
            secs[k] = v
    return A.write_artifact(None, A.KIND_BPE, meta, secs, art.unicode_version, art.source_hash)


def test_crafted_artifacts_raise_not_crash():
    tok = fstok_encoding("r50k_base")
    art = A.parse_artifact(tok.to_bytes())
    assert fstok.loads(_rewrite(art)).encode_ordinary(TEXT) == tok.encode_ordinary(TEXT)  # rewrite is faithful

    def mod(name, fn):
        a = art.array(name).copy()
        fn(a)
        return a

    n_int = art.meta["n_int"]
    crafted = {
        "int_info": mod("int_info", lambda a: a.__setitem__(4 * 300 + 1, n_int + 7)),
        "int_info_len": mod("int_info", lambda a: a.__setitem__(4 * 400, 99)),
        "int_ext": mod("int_ext", lambda a: a.__setitem__(5, 10**9)),
        "pair_tab": mod("pair_tab", lambda a: a.__setitem__(np.nonzero(a != np.uint64(2**64 - 1))[0][0], np.uint64((n_int + 5) << 43))),
        "pair_full": mod("pair_tab", lambda a: a.__setitem__(slice(None), np.uint64(0))),
        "span_tab": mod("span_tab", lambda a: a.__setitem__(1 + 2 * int(np.nonzero((a[1::2] & np.uint64(0xFFFFFFFF)) != np.uint64(0xFFFFFFFF))[0][0]), np.uint64(10**9))),
        "trie": mod("trie", lambda a: a.__setitem__(4, 2**31)),
        "dec_off": mod("dec_off", lambda a: a.__setitem__(10, 10**8)),
        "byte_tok": mod("byte_tok", lambda a: a.__setitem__(3, 10**7)),
        "byte_pair": mod("byte_pair", lambda a: a.__setitem__(100, 10**8)),
        "dfa.0.trans": mod("dfa.0.trans", lambda a: a.__setitem__(7, 2**31 - 1)),
        "dfa.0.classes": mod("dfa.0.classes", lambda a: a.__setitem__(65, 255)),
    }
    for name, arr in crafted.items():
        key = name if name in art.sections else {"int_info_len": "int_info", "pair_full": "pair_tab"}[name]
        with pytest.raises((ArtifactError, ValueError)):
            fstok.loads(_rewrite(art, **{key: arr}))
    
    for missing in ("int_info", "pair_tab", "dfa.0.trans"):
        with pytest.raises((ArtifactError, ValueError)):
            fstok.loads(_rewrite(art, **{missing: None}))
    for meta in ({"n_int": 3}, {"pair_bits": 99}, {"bpe_meta_version": 7}, {"da_size": 1}, {"pretok_mode": "split"}):
        with pytest.raises((ArtifactError, ValueError)):
            fstok.loads(_rewrite(art, meta=meta))
    # an artifact of the previous layout (no stored filters) asks for a new compile
    with pytest.raises(ArtifactError, match="bpe_meta_version.*recompile"):
        fstok.loads(_rewrite(art, meta={"bpe_meta_version": 1}, span_bloom=None, seg_big=None, seg_tri=None))


def test_corrupted_bytes_raise(tmp_path):
    data = bytearray(fstok_encoding("r50k_base").to_bytes())
    for pos in (3, 200, len(data) // 2, len(data) - 5):
        bad = bytearray(data)
        bad[pos] ^= 0x41
        with pytest.raises(ArtifactError):
            fstok.loads(bytes(bad))
    with pytest.raises(ArtifactError):
        fstok.loads(bytes(data[: len(data) // 3]))
    with pytest.raises(TypeError):
        fstok.loads("not bytes")


def test_api_type_errors():
    tok = fstok_encoding("r50k_base")
    for fn in (tok.encode, tok.encode_ordinary, tok.count, tok.encode_to_numpy, tok.encode_with_offsets):
        with pytest.raises(TypeError):
            fn(None)
    with pytest.raises(TypeError):
        tok.decode(["a"])
    with pytest.raises(TypeError):
        tok.encode_batch([b"bytes"])
    with pytest.raises(TypeError):
        tok.encode_ordinary_batch(["ok", 3])
    assert tok.encode_batch([]) == [] and tok.encode("") == [] and tok.count("") == 0
    assert tok.decode([]) == "" and tok.encode_with_offsets("") == ([], [])


def test_encode_batch_threads_and_count_batch():
    tok, ref = fstok_encoding("o200k_base"), tiktoken_encoding("o200k_base")
    texts = [f"line {i}: " + "héllo wörld " * (i % 17) + "\ud800" * (i % 5 == 0) for i in range(300)]
    want = [ref.encode_ordinary(t) for t in texts]
    for nt in (1, 2, 4):
        assert tok.encode_ordinary_batch(texts, num_threads=nt) == want
    assert tok.count_batch(texts, num_threads=2) == [len(w) for w in want]
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode_batch(["ok", "<|endoftext|>"])


def test_single_text_on_threads_is_exact():
    from conftest import read_corpus

    tok, ref = fstok_encoding("cl100k_base"), tiktoken_encoding("cl100k_base")
    text = read_corpus("code")[:400_000] + "<|endoftext|>" + read_corpus("multilingual")[:200_000] + "\ud800 end"
    want = ref.encode(text, allowed_special="all")
    for nt in (2, 3, 8):
        assert tok.encode(text, allowed_special="all", num_threads=nt) == want
    plain = read_corpus("english")[:300_000]
    assert tok.encode_ordinary(plain, num_threads=2) == ref.encode_ordinary(plain)
    with pytest.raises(ValueError):
        tok.encode(plain, num_threads=0)


def test_concurrent_python_threads():
    from concurrent.futures import ThreadPoolExecutor

    from conftest import read_corpus

    tok, ref = fstok_encoding("o200k_base"), tiktoken_encoding("o200k_base")
    text = read_corpus("multilingual")
    chunks = [text[i : i + 20_000] for i in range(0, len(text), 20_000)] * 3
    want = [ref.encode_ordinary(c) for c in chunks]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(tok.encode_ordinary, chunks))
        got2 = list(ex.map(lambda c: tok.encode_batch([c, c[:999]], num_threads=2, disallowed_special=())[0], chunks))
    assert got == want and got2 == want
