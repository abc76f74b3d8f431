"""Bundled byte-level BPE encodings (OpenAI's tiktoken encodings), compiled on first use.

Rank files are in fstok/data/tiktoken/ (see fstok/data/PROVENANCE.md); patterns and special tokens
are tiktoken's (fstok.loaders.bpe_source.OPENAI_ENCODINGS). No network access, ever.
"""
from __future__ import annotations

from .registry import EncodingSpec, register

# file -> sha256 that tiktoken 0.14.0 expects for it
TIKTOKEN_SHA256 = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

for _name, _file in (
    ("r50k_base", "r50k_base"),
    ("p50k_base", "p50k_base"),
    ("p50k_edit", "p50k_base"),
    ("cl100k_base", "cl100k_base"),
    ("o200k_base", "o200k_base"),
    ("gpt2", "r50k_base"),
    ("o200k_harmony", "o200k_base"),
):
    register(
        EncodingSpec(_name, "fstok.bpe:build_bundled", (f"tiktoken/{_file}.tiktoken",), {"sha256": TIKTOKEN_SHA256[_file]})
    )
