"""fstok.train_bpe: inputs, errors, vocabulary layout, round trips, exports (tiktoken, tokenizer.json,
fstok artifact), progress and the `fstok train` CLI."""
import argparse
import io
import json
import os
import pathlib
import warnings

import pytest
from conftest import corpus_path, needs_shared, read_corpus

import fstok
from fstok.train import ProgressBar, TrainedBPE, train_bpe
from fstok.train.core import classify_inputs

SMALL = [
    "Hello hello world, the world says hello! Tokenizers split text into pieces; the pieces are merged.\n" * 5
    + "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light.\n" * 3,
    "low lower lowest newer wider <|endoftext|> new news 1234 5678 don't won't they're we've",
]


@pytest.fixture(scope="module")
def english_tok():
    if not os.path.exists(corpus_path("english")):
        pytest.skip("../shared/data not present")
    return train_bpe(corpus_path("english"), 4000, pattern="cl100k_base", special_tokens=["<|endoftext|>", "<|pad|>"])


# ----------------------------------------------------------------------------- inputs & errors

def test_input_kinds(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text(SMALL[0] + SMALL[1], encoding="utf-8")
    ref = train_bpe(SMALL, 300).merges
    assert ref == train_bpe([SMALL[0] + SMALL[1]], 300).merges
    assert train_bpe(str(p), 300).merges == ref
    assert train_bpe(p, 300).merges == ref
    assert train_bpe([p], 300).merges == ref
    assert train_bpe([str(p)], 300).merges == ref
    assert train_bpe((t for t in SMALL), 300).merges == ref
    assert train_bpe(iter(SMALL), 300).merges == ref
    q = tmp_path / "b.txt"
    q.write_text(SMALL[1], encoding="utf-8")
    r = tmp_path / "c.txt"
    r.write_text(SMALL[0], encoding="utf-8")
    assert train_bpe([r, q], 300).merges == ref


def test_classify_inputs():
    assert classify_inputs("x.txt") == ("files", ["x.txt"])
    assert classify_inputs(["data/x.txt", "y.txt"])[0] == "files"
    assert classify_inputs(["hello world", "x"])[0] == "texts"
    with pytest.raises(TypeError, match="mix of paths and texts"):
        classify_inputs([pathlib.Path("a"), "some text here"])


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="smaller than the 256 byte tokens"):
        train_bpe(SMALL, 256)
    with pytest.raises(ValueError, match=r"256 byte tokens \+ 2 special tokens = 258"):
        train_bpe(SMALL, 257, special_tokens=["<a>", "<b>"])
    train_bpe(SMALL, 256, special_tokens=())  # zero merges is fine
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        train_bpe(SMALL, 300.0)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        train_bpe(SMALL, True)
    with pytest.raises(ValueError, match="empty corpus"):
        train_bpe([], 300)
    with pytest.raises(ValueError, match="empty corpus"):
        train_bpe(["", "<|endoftext|>"], 300)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty corpus"):
        train_bpe(empty, 300)
    with pytest.raises(TypeError, match="corpus item 1 is int"):
        train_bpe(["ok", 3], 300)
    with pytest.raises(TypeError, match="corpus item 0 is bytes"):
        train_bpe(iter([b"abc"]), 300)
    with pytest.raises(TypeError, match="not bytes"):
        train_bpe(b"abc", 300)
    with pytest.raises(TypeError, match="corpus must be"):
        train_bpe(42, 300)
    with pytest.raises(FileNotFoundError, match="corpus file not found: .*missing.txt"):
        train_bpe(str(tmp_path / "missing.txt"), 300)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_bpe([str(empty), str(tmp_path / "missing.txt")], 300)
    with pytest.raises(IsADirectoryError):
        train_bpe(tmp_path, 300)
    with pytest.raises(ValueError, match="given twice"):
        train_bpe(SMALL, 300, special_tokens=["<a>", "<a>"])
    with pytest.raises(ValueError, match="must not be empty"):
        train_bpe(SMALL, 300, special_tokens=[""])
    with pytest.raises(TypeError, match="special tokens must be str"):
        train_bpe(SMALL, 300, special_tokens=[1])
    with pytest.raises(ValueError, match="unknown encoding name"):
        train_bpe(SMALL, 300, pattern="r51k_base")
    with pytest.raises(ValueError, match="num_threads"):
        train_bpe(SMALL, 300, num_threads=0)
    with pytest.raises(ValueError, match="tie_break"):
        train_bpe(SMALL, 300, tie_break="ids")
    with pytest.raises(TypeError, match="progress"):
        train_bpe(SMALL, 300, progress="yes")


def test_exhausted_corpus_warns():
    with pytest.warns(RuntimeWarning, match="ran out of pairs after 3 merges"):
        tok = train_bpe(["abcd"], 1000, special_tokens=["<s>"])
    assert len(tok.merges) == 3 and tok.n_vocab == 256 + 3 + 1
    assert tok.special_tokens == {"<s>": 259}


# ----------------------------------------------------------------------------- layout & round trips

def test_vocab_layout():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = train_bpe(SMALL, 300, special_tokens=["<|endoftext|>", "<|pad|>"])
    assert isinstance(tok, TrainedBPE)
    assert tok.n_vocab == 300 and len(tok.merges) == 300 - 256 - 2
    assert tok.vocab[:256] == [bytes([i]) for i in range(256)]
    assert tok.special_tokens == {"<|endoftext|>": 298, "<|pad|>": 299}
    for i, (a, b) in enumerate(tok.merges):
        assert tok.vocab[256 + i] == a + b and tok.ranks[a + b] == 256 + i
    assert "merges=42" in repr(tok)


def test_roundtrip_small():
    tok = train_bpe(SMALL, 320)
    for text in SMALL + ["", "unseen wörds ✓ 中文 🙂", "\x00\r\n\t  "]:
        ids = tok.encode(text, allowed_special="all")
        assert tok.decode(ids) == text
        assert ids == tok.encode_py(text, allowed_special="all")
    with pytest.raises(ValueError):
        tok.encode("x<|endoftext|>")
    assert tok.encode("<|endoftext|>", allowed_special="all") == [tok.special_tokens["<|endoftext|>"]]


@needs_shared
@pytest.mark.parametrize("name", ["english", "multilingual", "code", "chinese_long", "stress"])
def test_roundtrip_and_reference_encoder(english_tok, name):
    text = read_corpus(name)[:200_000]
    ids = english_tok.encode(text, disallowed_special=())
    assert english_tok.decode(ids) == text
    if name != "stress":  # stress has code points whose Unicode properties differ between `regex` and tiktoken
        assert ids == english_tok.encode_py(text, disallowed_special=())


# ----------------------------------------------------------------------------- exports

def test_export_tiktoken_roundtrip(tmp_path):
    tok = train_bpe(SMALL, 320, pattern="o200k_base")
    p = tmp_path / "t.tiktoken"
    tok.export(p)
    lines = p.read_text().splitlines()
    assert len(lines) == 320 - 1
    import base64

    assert [base64.b64decode(l.split()[0]) for l in lines[:256]] == [bytes([i]) for i in range(256)]
    assert [int(l.split()[1]) for l in lines] == list(range(319))
    comp = fstok.compile(str(p), pattern=tok.pattern, special_tokens=tok.special_tokens)
    for t in SMALL:
        assert comp.encode(t, allowed_special="all") == tok.encode(t, allowed_special="all")
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding("t", pat_str=tok.pattern, mergeable_ranks=tok.ranks, special_tokens=tok.special_tokens)
    for t in SMALL:
        assert enc.encode(t, allowed_special="all") == tok.encode(t, allowed_special="all")


@needs_shared
def test_export_tiktoken_matches_tiktoken_on_corpora(english_tok):
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding("t", pat_str=english_tok.pattern, mergeable_ranks=english_tok.ranks,
                            special_tokens=english_tok.special_tokens)
    for name in ["english", "multilingual", "code", "chinese_long", "stress"]:
        text = read_corpus(name)[:300_000]
        assert enc.encode_ordinary(text) == english_tok.encode(text, disallowed_special=()), name


@needs_shared
def test_export_tokenizer_json_hf_gives_same_ids(tmp_path, english_tok):
    tokenizers = pytest.importorskip("tokenizers")
    p = tmp_path / "tokenizer.json"
    english_tok.export(p, format="tokenizer.json")
    obj = json.loads(p.read_text(encoding="utf-8"))
    assert obj["model"]["type"] == "BPE" and isinstance(obj["model"]["merges"][0], list)
    assert [a["content"] for a in obj["added_tokens"]] == ["<|endoftext|>", "<|pad|>"]
    hf = tokenizers.Tokenizer.from_file(str(p))
    assert hf.get_vocab_size() == english_tok.n_vocab
    for name in ["english", "multilingual", "code", "chinese_long", "stress"]:
        text = read_corpus(name)[:300_000]
        lines = text.split("\n")
        want = [english_tok.encode(l, allowed_special="all") for l in lines]  # HF always matches added tokens
        got = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
        assert got == want, name
        assert hf.decode(want[0]) == lines[0]
    s = "a<|endoftext|>b<|pad|>"
    assert hf.encode(s).ids == english_tok.encode(s, allowed_special="all")


@pytest.mark.parametrize("pattern", ["r50k_base", "cl100k_base", "o200k_base", r"\p{N}{1,3}+|\p{L}+|\s+|[^\s\p{L}\p{N}]+"])
def test_export_tokenizer_json_patterns(tmp_path, pattern):
    tokenizers = pytest.importorskip("tokenizers")
    text = "In 2024, 1234567 people wrote 'hello' and HELLO'S.\n\n  Numbers: 3.14159 9999999\r\n" * 30
    tok = train_bpe([text], 290, pattern=pattern)
    p = tmp_path / "tokenizer.json"
    tok.export_tokenizer_json(p)
    hf = tokenizers.Tokenizer.from_file(str(p))
    probe = text + "unseen 12345678 Wörter\t\tend  "
    assert hf.encode(probe, add_special_tokens=False).ids == tok.encode(probe) == tok.encode_py(probe)
    back = fstok.compile(str(p))  # the exported file compiles back to the same tokenizer
    assert back.encode(probe) == tok.encode(probe)


def test_hf_pattern_translation():
    from fstok.train.export import hf_pattern

    assert hf_pattern(r"\p{N}{1,3}+|a") == r"(?>\p{N}{1,3})|a"
    assert hf_pattern(r"[a\]]{2}+") == r"(?>[a\]]{2})"
    assert hf_pattern(r"\s++$") == r"\s++\z"  # Oniguruma's $ also matches before a newline
    assert hf_pattern(r"[$]|\$|a$") == r"[$]|\$|a\z"
    with pytest.raises(ValueError):
        hf_pattern(r"(ab){1,2}+")


def test_save_artifact_and_load(tmp_path):
    tok = train_bpe(SMALL, 320)
    p = tmp_path / "t.fst"
    tok.save(p)
    loaded = fstok.load(p)
    for t in SMALL:
        assert loaded.encode(t, allowed_special="all") == tok.encode(t, allowed_special="all")
    assert loaded.n_vocab == tok.n_vocab
    tok.export(tmp_path / "t2.fst", format="fstok")
    assert fstok.load(tmp_path / "t2.fst").n_vocab == 320
    with pytest.raises(ValueError, match="unknown export format"):
        tok.export(tmp_path / "x", format="sentencepiece")


def test_delegates_to_bpe_tokenizer():
    tok = train_bpe(SMALL, 300)
    ft = tok.to_tokenizer()
    assert tok.to_tokenizer() is ft
    assert tok.encode_ordinary("hello world") == ft.encode_ordinary("hello world")  # via __getattr__
    assert tok.eot_token == tok.special_tokens["<|endoftext|>"]
    with pytest.raises(AttributeError):
        tok.no_such_attribute


# ----------------------------------------------------------------------------- progress & CLI

def test_progress_callback_and_bar(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text(SMALL[0] * 50, encoding="utf-8")
    seen = []
    train_bpe(p, 300, progress=lambda phase, done, total: seen.append((phase, done, total)))
    phases = [s[0] for s in seen]
    assert phases[0] == "pretokenize" and phases[-1] == "merge"
    assert seen[-1] == ("merge", 300 - 257, 300 - 257)
    buf = io.StringIO()
    bar = ProgressBar(buf, min_interval=0)
    train_bpe(p, 300, progress=bar)
    out = buf.getvalue()
    assert "pretokenize" in out and "merges/s" in out and "ETA" in out and "done in" in out


def _cli(argv):
    from fstok.train import cli

    parser = argparse.ArgumentParser(prog="fstok")
    sub = parser.add_subparsers(dest="command")
    cli.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli(tmp_path, capsys):
    c = tmp_path / "c.txt"
    c.write_text("".join(SMALL) * 10, encoding="utf-8")
    out = tmp_path / "o.tiktoken"
    assert _cli(["train", str(c), "--vocab-size", "300", "--pattern", "cl100k_base", "--special", "<|endoftext|>",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "merges/s" in err and "ETA" in err and "trained 300 tokens" in err
    ref = train_bpe(str(c), 300, pattern="cl100k_base")
    assert out.read_text() == (lambda p: (ref.export(p), open(p).read())[1])(str(tmp_path / "ref.tiktoken"))
    assert _cli(["train", str(c), "-v", "300", "-o", str(tmp_path / "t.json"), "-q", "--no-special"]) == 0
    assert json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))["added_tokens"] == []
    assert _cli(["train", str(c), "-v", "300", "-o", str(tmp_path / "t.fst"), "-q", "-s", "<a>", "-s", "<b>"]) == 0
    assert fstok.load(tmp_path / "t.fst").special_tokens == {"<a>": 298, "<b>": 299}
    with pytest.raises(FileNotFoundError):
        _cli(["train", str(tmp_path / "nope.txt"), "-v", "300", "-o", str(tmp_path / "x.fst"), "-q"])
    with pytest.raises(ValueError, match="smaller than"):
        _cli(["train", str(c), "-v", "10", "-o", str(tmp_path / "x.fst"), "-q"])


def test_cli_main_entry(tmp_path, capsys):
    c = tmp_path / "c.txt"
    c.write_text("".join(SMALL), encoding="utf-8")
    from fstok.train.cli import main

    assert main(["train", str(tmp_path / "missing.txt"), "-v", "300", "-o", str(tmp_path / "x.fst")]) == 2
    assert "corpus file not found" in capsys.readouterr().err
    assert main(["train", str(c), "-v", "300", "-o", str(tmp_path / "x.json"), "-q"]) == 0
