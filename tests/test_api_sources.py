"""fstok.compile(directory): the file inside is found by name, by a versioned name, or by content."""
import os
import shutil

import pytest
from conftest import VOCAB

import fstok

LLAMA2 = os.path.join(VOCAB, "models", "spm-bpe", "llama-2", "tokenizer.model")
BERT = os.path.join(VOCAB, "bert-base-uncased", "vocab.txt")


def _needs(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not in the shared data")


@pytest.mark.parametrize("name", ["tokenizer.model", "tokenizer.model.v1", "my_model.model", "tokenizer.llama"])
def test_directory_with_a_sentencepiece_model(tmp_path, name):
    _needs(LLAMA2)
    shutil.copy(LLAMA2, tmp_path / name)
    want = fstok.compile(LLAMA2).encode("Hello world, 1234")
    assert fstok.compile(tmp_path).encode("Hello world, 1234") == want


def test_directory_standard_name_first(tmp_path):
    _needs(BERT)
    shutil.copy(BERT, tmp_path / "vocab.txt")
    (tmp_path / "notes.txt").write_text("not a tokenizer")
    assert fstok.compile(tmp_path).encode("hello world") == fstok.compile(BERT).encode("hello world")


def test_directory_errors_name_the_problem(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(ValueError, match="directory has no tokenizer.json"):
        fstok.compile(tmp_path)
    _needs(LLAMA2)
    shutil.copy(LLAMA2, tmp_path / "a.model")
    shutil.copy(LLAMA2, tmp_path / "b.model")
    with pytest.raises(ValueError, match="several tokenizer files"):
        fstok.compile(tmp_path)
