"""fstok.compile(..., pattern=NAME) resolves named pre-tokenizers (a literal regex 'qwen2' would match
almost nothing and silently drop the rest of every text)."""
import os

import pytest
from conftest import SHARED, needs_shared

import fstok
from fstok.pretokenize import CL100K_PAT

R50K = os.path.join(SHARED, "vocab", "tiktoken", "r50k_base.tiktoken")


@needs_shared
def test_named_pattern_resolves(tmp_path):
    text = "Hello world's 12345 numbers!!  \n\n and more"
    named = fstok.compile(R50K, pattern="cl100k_base", name="x")
    literal = fstok.compile(R50K, pattern=CL100K_PAT, name="x")
    assert named.encode_ordinary(text) == literal.encode_ordinary(text)
    assert named.decode(named.encode_ordinary(text)) == text


@needs_shared
def test_hf_pattern_name_refused():
    with pytest.raises(ValueError, match="HF pre-tokenizer"):
        fstok.compile(R50K, pattern="hf-bytelevel", name="x")
