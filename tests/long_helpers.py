"""BPE tokenizers of every kind for the long-text tests (tiktoken encodings, Llama-3 tokenizer.model and
tokenizer.json with added tokens, Qwen), compiled once per session."""
import functools
import os

import pytest
from conftest import VOCAB

import fstok


@functools.lru_cache(maxsize=None)
def bpe(name):
    if name == "llama3-hf":
        path = os.path.join(VOCAB, "hf-derived", "llama3.tokenizer.json")
        if not os.path.exists(path):
            pytest.skip(f"{path} not present")
        # with added tokens (two special, one not, containing spaces) to test cuts around them
        import json
        import tempfile

        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        n = len(obj["model"]["vocab"])
        obj["added_tokens"] = [{"id": n + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                "normalized": False, "special": sp}
                               for i, (c, sp) in enumerate([("<|begin_of_text|>", True), ("<|eot_id|>", True),
                                                            (" <x> ", False)])]
        out = os.path.join(tempfile.mkdtemp(prefix="fstok-safe-"), "llama3.tokenizer.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(obj, f)
        return fstok.compile(out)
    if name == "qwen":
        path = os.path.join(VOCAB, "qwen", "qwen.tiktoken")
        if not os.path.exists(path):
            pytest.skip(f"{path} not present")
        from fstok.pretokenize import QWEN2_PAT  # (pattern="qwen2" would be the literal regex "qwen2")

        return fstok.compile(path, pattern=QWEN2_PAT, special_tokens={
            "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645})
    if name == "llama3":
        path = os.path.join(VOCAB, "llama3", "tokenizer.model")
        if not os.path.exists(path):
            pytest.skip(f"{path} not present")
        from fstok.pretokenize import LLAMA3_PAT

        return fstok.compile(path, pattern=LLAMA3_PAT, special_tokens={
            "<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|eot_id|>": 128009})
    try:
        return fstok.get_encoding(name)
    except (ValueError, KeyError, FileNotFoundError):
        path = os.path.join(VOCAB, "tiktoken", f"{name}.tiktoken")
        if not os.path.exists(path):
            pytest.skip(f"{path} not present")
        return fstok.compile(path)
