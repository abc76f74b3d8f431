"""fstok.dataset on the local engine: every document's ids equal tok.encode(document) with the chosen
special-token policy, in input order, in every layout; long documents streamed in pieces cut at proven
boundaries; shard layout readable as nanoGPT (flat memmap) and Megatron (.idx) data; resumption after a
killed run; corrupted inputs reported with file and line."""
import gzip
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import fstok
from conftest import ROOT, needs_shared, read_corpus
from dataset_helpers import assert_docs, docs_of_dir, expected_ids, make_corpus_dir, shard_bytes, slice_lines
from fstok.dataset import InputError, open_shards, tokenize
from fstok.dataset import encode as ds_encode
from fstok.dataset import readers as ds_readers

pytestmark = needs_shared


@pytest.fixture(scope="module")
def o200k():
    return fstok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def bert():
    return fstok.get_encoding("bert-base-uncased")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("dsin") / "in")
    make_corpus_dir(d)
    return d


@pytest.fixture(scope="module")
def reference_out(tmp_path_factory, corpus_dir):
    out = str(tmp_path_factory.mktemp("dsref") / "out")
    tokenize(corpus_dir, "o200k_base", out, split="lines", shard_size="48k", append_eot=True,
             disallowed_special="all", quiet=True)
    return out


def test_mixed_inputs_exact_in_order(o200k, corpus_dir, reference_out):
    ds = open_shards(reference_out)
    m = ds.manifest
    assert len(m["shards"]) >= 4  # the text and JSON Lines files are cut into several shards
    docs = docs_of_dir(corpus_dir)
    assert_docs(ds, expected_ids(o200k, docs, eot=o200k.eot_token))
    assert m["documents"] == len(docs) and m["tokens"] == len(ds.tokens)
    assert m["dtype"] == "uint32" and m["tokenizer"]["n_vocab"] == o200k.n_vocab
    # the manifest names every input with size and hashes; the tokenizer by its artifact hash
    import hashlib

    assert m["tokenizer"]["artifact_sha256"] == hashlib.sha256(o200k.to_bytes()).hexdigest()
    for e in m["inputs"]:
        raw = open(e["path"], "rb").read()
        assert e["size"] == len(raw)
        if "sha256" in e:
            assert e["sha256"] == hashlib.sha256(raw).hexdigest()
        else:  # a file cut into segments: each segment's bytes are hashed
            for s in e["segments"]:
                assert s["sha256"] == hashlib.sha256(raw[s["lo"]:s["hi"]]).hexdigest()


def test_shard_size_does_not_change_documents(o200k, corpus_dir, reference_out, tmp_path):
    out = str(tmp_path / "one")
    tokenize(corpus_dir, "o200k_base", out, split="lines", shard_size="1GB", append_eot=True, quiet=True)
    a, b = open_shards(reference_out), open_shards(out)
    assert len(b.manifest["shards"]) == 1
    assert np.array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
    assert np.array_equal(a.doc_offsets, b.doc_offsets)


def test_two_workers_byte_identical(corpus_dir, reference_out, tmp_path):
    """Forked workers (a single-threaded caller) and spawned ones (another thread is running)."""
    import threading

    out = str(tmp_path / "w2")
    tokenize(corpus_dir, "o200k_base", out, split="lines", shard_size="48k", append_eot=True,
             disallowed_special="all", workers=2, quiet=True)
    assert shard_bytes(out) == shard_bytes(reference_out)
    ev = threading.Event()
    th = threading.Thread(target=ev.wait)
    th.start()
    try:
        out = str(tmp_path / "w3")
        tokenize(corpus_dir, "o200k_base", out, split="lines", shard_size="48k", append_eot=True,
                 disallowed_special="all", workers=3, quiet=True)
    finally:
        ev.set()
        th.join()
    assert shard_bytes(out) == shard_bytes(reference_out)


def test_layouts_nanogpt_megatron_npy_parquet(bert, corpus_dir, tmp_path):
    docs = docs_of_dir(corpus_dir)
    exp = expected_ids(bert, docs)
    outs = {}
    for fmt in ("bin", "npy", "parquet"):
        outs[fmt] = str(tmp_path / fmt)
        tokenize(corpus_dir, bert, outs[fmt], split="lines", shard_size="64k", format=fmt, quiet=True)
        assert_docs(open_shards(outs[fmt]), exp)
    m = open_shards(outs["bin"]).manifest
    assert m["dtype"] == "uint16"
    flat = np.concatenate([np.asarray(e) for e in exp])
    # nanoGPT: the .bin files are flat uint16 arrays, read with a plain memmap
    bins = [np.memmap(os.path.join(outs["bin"], s["files"][".bin"]["name"]), dtype=np.uint16, mode="r")
            for s in m["shards"]]
    assert np.array_equal(np.concatenate(bins), flat)
    # Megatron MMapIndexedDataset .idx, parsed here from its spec
    pos = 0
    for s in m["shards"]:
        raw = open(os.path.join(outs["bin"], s["files"][".idx"]["name"]), "rb").read()
        assert raw[:9] == b"MMIDIDX\x00\x00"
        version, code, n, ndoc = struct.unpack("<QBQQ", raw[9:34])
        assert (version, code, n, ndoc) == (1, 8, s["documents"], s["documents"] + 1)
        sizes = np.frombuffer(raw, "<i4", n, 34)
        ptrs = np.frombuffer(raw, "<i8", n, 34 + 4 * n)
        didx = np.frombuffer(raw, "<i8", n + 1, 34 + 12 * n)
        assert len(raw) == 34 + 12 * n + 8 * (n + 1)
        assert sizes.tolist() == [len(e) for e in exp[pos:pos + n]]
        assert ptrs.tolist() == (np.concatenate([[0], np.cumsum(sizes)[:-1]]) * 2).tolist()
        assert didx.tolist() == list(range(n + 1))
        pos += n
    # .npy shards load with np.load and hold the same ids
    npys = [np.load(os.path.join(outs["npy"], s["files"][".npy"]["name"]), mmap_mode="r")
            for s in open_shards(outs["npy"]).manifest["shards"]]
    assert np.array_equal(np.concatenate(npys), flat)
    # Parquet: list<int32> column "ids"
    import pyarrow.parquet as pq

    pm = open_shards(outs["parquet"]).manifest
    t = pq.read_table(os.path.join(outs["parquet"], pm["shards"][0]["files"][".parquet"]["name"]))
    import pyarrow as pa

    typ = t.schema.field("ids").type
    assert pa.types.is_list(typ) and typ.value_type == pa.int32()
    assert t.column("ids").to_pylist()[:5] == exp[:5]


def test_special_token_policies(o200k, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    lines = ["plain text", "a <|endoftext|> b", "<|fim_prefix|>x<|fim_suffix|>", "end<|endoftext|>"]
    (d / "x.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # default (tiktoken's): special-token text is an error, located
    with pytest.raises(InputError, match=r"x\.txt: line 2: .*<\|endoftext\|>.*--allowed-special"):
        tokenize(str(d), o200k, str(tmp_path / "o0"), split="lines", quiet=True)
    for i, kw in enumerate([{"allowed_special": "all"}, {"disallowed_special": ()},
                            {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}]):
        out = str(tmp_path / f"o{i + 1}")
        tokenize(str(d), o200k, out, split="lines", quiet=True, **kw)
        assert_docs(open_shards(out), expected_ids(o200k, lines, **kw))
    with pytest.raises(ValueError, match="not a special token"):
        tokenize(str(d), o200k, str(tmp_path / "bad"), split="lines", allowed_special={"<|nope|>"}, quiet=True)


def test_wordpiece_allowed_special_and_eot(bert, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    docs = ["hello [SEP] world", "[CLS] x [MASK]", "plain"]
    (d / "x.txt").write_text("\n".join(docs), encoding="utf-8")
    out = str(tmp_path / "o")
    tokenize(str(d), bert, out, split="lines", allowed_special="all", eot_token="[SEP]", quiet=True)
    sep = bert.token_to_id("[SEP]")
    assert_docs(open_shards(out), expected_ids(bert, docs, eot=sep, allowed_special="all"))
    with pytest.raises(ValueError, match="no <\\|endoftext\\|> token"):
        tokenize(str(d), bert, str(tmp_path / "o2"), split="lines", append_eot=True, quiet=True)


@pytest.mark.parametrize("model", ["o200k_base", "bert-base-uncased"])
def test_long_documents_streamed_at_proven_boundaries(model, tmp_path, monkeypatch):
    """Whole-file documents far longer than the reader's block and the encoder's piece: the text arrives
    in parts and is encoded in pieces cut only where fstok.parallel proves a cut is exact (special tokens
    across the cuts included); ids equal encoding the whole document at once."""
    tok = fstok.get_encoding(model)
    monkeypatch.setattr(ds_readers, "BLOCK", 997)
    monkeypatch.setattr(ds_readers, "LONG_DOC", 3000)
    monkeypatch.setattr(ds_encode, "PIECE_CHARS", 1500)
    d = tmp_path / "in"
    d.mkdir()
    sp = "<|endoftext|>" if model == "o200k_base" else "[SEP]"
    texts = {"a.txt": slice_lines("english", 0, 40_000).replace(". ", f". {sp}", 50),
             "b.txt": slice_lines("multilingual", 0, 30_000),
             "c.txt": read_corpus("stress")[:30_000] + sp + " tail",
             "d.txt": slice_lines("code", 0, 20_000) + sp}
    for k, v in texts.items():
        (d / k).write_text(v, encoding="utf-8", newline="")
    calls = []
    real = ds_encode.DocEncoder._ids
    monkeypatch.setattr(ds_encode.DocEncoder, "_ids", lambda self, t: calls.append(len(t)) or real(self, t))
    out = str(tmp_path / "o")
    tokenize(str(d), tok, out, split="whole", allowed_special="all", quiet=True)
    docs = [texts[k] for k in sorted(texts)]
    assert_docs(open_shards(out), expected_ids(tok, docs, allowed_special="all"))
    assert len(calls) > 3 * len(docs) and max(calls) < 40_000  # really encoded in pieces


def test_delimiter_documents_and_overlapping_delimiters(o200k, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    body = slice_lines("english", 0, 30_000)
    # "\n\n" can overlap itself: runs of newlines must split as a reader from the file start splits them
    body = body.replace("\n", "\n\n\n", 40)
    (d / "p.txt").write_text(body, encoding="utf-8", newline="")
    out = str(tmp_path / "o")
    tokenize(str(d), o200k, out, delimiter="\n\n", shard_size="3k", quiet=True)
    docs = body.split("\n\n")
    if docs[-1] == "":
        docs.pop()
    ds = open_shards(out)
    assert len(ds.manifest["shards"]) > 5
    assert_docs(ds, expected_ids(o200k, docs))


def test_parquet_input(o200k, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "in"
    d.mkdir()
    docs = [p for p in slice_lines("multilingual", 0, 50_000).split("\n") if p]
    pq.write_table(pa.table({"content": docs, "n": list(range(len(docs)))}), str(d / "x.parquet"), row_group_size=50)
    out = str(tmp_path / "o")
    tokenize(str(d), o200k, out, text_field="content", shard_size="8k", quiet=True)
    ds = open_shards(out)
    assert len(ds.manifest["shards"]) > 1
    assert_docs(ds, expected_ids(o200k, docs))
    with pytest.raises(InputError, match="no column 'text'"):
        tokenize(str(d), o200k, str(tmp_path / "o2"), quiet=True)


def test_corrupted_inputs_reported_with_file_and_line(o200k, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    good = [json.dumps({"text": f"document {i}"}).encode() for i in range(10)]
    bad_utf8 = b'{"text": "bad \xff\xfe here"}'
    (d / "a.jsonl").write_bytes(b"\n".join(good[:6] + [bad_utf8] + good[6:]) + b"\n")
    with pytest.raises(InputError, match=r"a\.jsonl: line 7: invalid UTF-8"):
        tokenize(str(d), o200k, str(tmp_path / "o1"), quiet=True)
    out = str(tmp_path / "o2")
    m = tokenize(str(d), o200k, out, skip_bad=True, quiet=True)
    assert m["documents"] == 10 and m["skipped"]["documents"] == 1
    assert "a.jsonl: line 7" in m["skipped"]["examples"][0]
    assert_docs(open_shards(out), expected_ids(o200k, [f"document {i}" for i in range(10)]))

    # a truncated .gz: the line where the cut-off document starts
    e = tmp_path / "gz"
    e.mkdir()
    data = b"".join(json.dumps({"text": slice_lines("english", 0, 200)}).encode() + b"\n" for _ in range(400))
    z = gzip.compress(data)
    (e / "t.jsonl.gz").write_bytes(z[: len(z) * 2 // 3])
    with pytest.raises(InputError, match=r"t\.jsonl\.gz: line \d+: truncated gzip"):
        tokenize(str(e), o200k, str(tmp_path / "o3"), quiet=True)
    m = tokenize(str(e), o200k, str(tmp_path / "o4"), skip_bad=True, quiet=True)
    assert m["skipped"]["documents"] == 1 and 0 < m["documents"] < 400
    # a truncated .zst (zstandard's own stream reader would end silently)
    import zstandard

    f = tmp_path / "zst"
    f.mkdir()
    zz = zstandard.ZstdCompressor().compress(data)
    (f / "t.jsonl.zst").write_bytes(zz[: len(zz) // 2])
    with pytest.raises(InputError, match=r"t\.jsonl\.zst: line \d+: truncated zstd"):
        tokenize(str(f), o200k, str(tmp_path / "o5"), quiet=True)
    # bad JSON, a missing field, invalid UTF-8 in a text file
    g = tmp_path / "misc"
    g.mkdir()
    (g / "j.jsonl").write_bytes(b'{"text": "ok"}\n{"text": \n')
    with pytest.raises(InputError, match=r"j\.jsonl: line 2: invalid JSON"):
        tokenize(str(g / "j.jsonl"), o200k, str(tmp_path / "o6"), quiet=True)
    (g / "k.jsonl").write_bytes(b'{"text": "ok"}\n{"body": "x"}\n')
    with pytest.raises(InputError, match=r"k\.jsonl: line 2: no field 'text'"):
        tokenize(str(g / "k.jsonl"), o200k, str(tmp_path / "o7"), quiet=True)
    (g / "t.txt").write_bytes(b"fine\nalso fine\nbroken \xc3(\n")
    with pytest.raises(InputError, match=r"t\.txt: line 3: invalid UTF-8"):
        tokenize(str(g / "t.txt"), o200k, str(tmp_path / "o8"), split="lines", quiet=True)


def test_resume_after_killed_run(tmp_path):
    """A run killed mid-way leaves complete shards (with their done records) and nothing else that looks
    complete; the rerun skips the complete shards and ends byte-identical to an uninterrupted run."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "e.txt").write_text(read_corpus("english")[:1_500_000], encoding="utf-8", newline="")
    out = str(tmp_path / "o")
    cmd = [sys.executable, "-m", "fstok", "tokenize", str(d), "-m", "o200k_base", "-o", out, "--lines",
           "--shard-size", "40k", "--append-eot", "--quiet"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        done = [f for f in os.listdir(out) if f.endswith(".done.json")] if os.path.isdir(out) else []
        if len(done) >= 2 or p.poll() is not None:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not os.path.exists(os.path.join(out, "manifest.json")), "the run finished before it was killed"
    done = sorted(f for f in os.listdir(out) if f.endswith(".done.json"))
    assert done
    # every shard file without a done record is an unfinished one: it is rewritten by the rerun
    before = {f: os.stat(os.path.join(out, f)).st_mtime_ns for f in done}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for f, mt in before.items():
        assert os.stat(os.path.join(out, f)).st_mtime_ns == mt  # complete shards were skipped
    assert not [f for f in os.listdir(out) if ".tmp-" in f]
    ref = str(tmp_path / "ref")
    tokenize(str(d), "o200k_base", ref, split="lines", shard_size="40k", append_eot=True, quiet=True)
    assert shard_bytes(out) == shard_bytes(ref)
    # a rerun with other options into the same directory is refused
    with pytest.raises(ValueError, match="other inputs or options"):
        tokenize(str(d), "o200k_base", out, split="lines", shard_size="41k", quiet=True)


def test_cli_tokenize_and_encode_special_options(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "hi <|endoftext|> there"}\n{"text": "second"}\n', encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = lambda *a: subprocess.run([sys.executable, "-m", "fstok", *a], env=env, capture_output=True, text=True,
                                    timeout=120)
    r = run("tokenize", str(d), "-m", "o200k_base", "-o", str(tmp_path / "o1"), "-q")
    assert r.returncode == 2 and "a.jsonl: line 1" in r.stderr and "--allowed-special" in r.stderr
    r = run("tokenize", str(d), "-m", "o200k_base", "-o", str(tmp_path / "o2"), "-q", "--allowed-special", "all",
            "--append-eot", "--format", "npy")
    assert r.returncode == 0, r.stderr
    tok = fstok.get_encoding("o200k_base")
    assert_docs(open_shards(str(tmp_path / "o2")),
                expected_ids(tok, ["hi <|endoftext|> there", "second"], eot=tok.eot_token, allowed_special="all"))
    f = tmp_path / "s.txt"
    f.write_text("hi <|endoftext|> there", encoding="utf-8")
    r = run("encode", "-m", "o200k_base", "-q", "--allowed-special", "<|endoftext|>", str(f))
    assert r.stdout.split() == [str(i) for i in tok.encode("hi <|endoftext|> there", allowed_special="all")]


def test_sentencepiece_model_documents_whole(tmp_path, monkeypatch):
    """A kind without proven cuts (a SentencePiece .model): long documents are still read in parts but
    encoded whole, so the ids equal tok.encode(document)."""
    from conftest import VOCAB

    path = os.path.join(VOCAB, "models", "spm-bpe", "llama-2", "tokenizer.model")
    if not os.path.exists(path):
        pytest.skip("llama-2 tokenizer.model not in the data folder")
    tok = fstok.compile(path)
    monkeypatch.setattr(ds_readers, "BLOCK", 997)
    monkeypatch.setattr(ds_readers, "LONG_DOC", 3000)
    monkeypatch.setattr(ds_encode, "PIECE_CHARS", 1500)
    d = tmp_path / "in"
    d.mkdir()
    docs = [slice_lines("english", 0, 20_000), slice_lines("multilingual", 0, 8_000) + "  double  spaces  "]
    for i, t in enumerate(docs):
        (d / f"{i}.txt").write_text(t, encoding="utf-8", newline="")
    out = str(tmp_path / "o")
    tokenize(str(d), tok, out, quiet=True, eot_token="</s>")
    assert_docs(open_shards(out), expected_ids(tok, docs, eot=tok.token_to_id("</s>")))
