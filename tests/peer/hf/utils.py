"""Local replacements for the network fixtures of HF tokenizers' Python tests (tests/utils.py upstream).

Upstream downloads bert-base-uncased-vocab.txt and roberta-base-vocab.json / -merges.txt from the HF hub and
builds the tokenizers with `tokenizers.implementations`. Here the same files come from the shared data
(bert-base-uncased/vocab.txt; roberta-base's tokenizer.json, whose vocab and merges are written out as the
two files), HF's implementation class assembles the same pipeline, and `fstok.Tokenizer` runs its
tokenizer.json: every assertion is then about fstok's results.
"""
from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache

import fstok

DATA = "/work/shared/data"
if not os.path.isdir(DATA):
    DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data")
BERT_VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased", "vocab.txt")
ROBERTA_JSON = os.path.join(DATA, "vocab", "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
E5_SMALL_JSON = os.path.join(DATA, "vocab", "models", "unigram", "multilingual-e5-small", "tokenizer.json")


def as_fstok(hf_impl) -> "fstok.Tokenizer":
    """fstok.Tokenizer for the pipeline an HF implementation class (or Tokenizer) was built with."""
    inner = getattr(hf_impl, "_tokenizer", hf_impl)
    return fstok.Tokenizer.from_str(inner.to_str())


def bert_tokenizer(**kw):
    from tokenizers import BertWordPieceTokenizer

    return as_fstok(BertWordPieceTokenizer.from_file(BERT_VOCAB, **kw))


@lru_cache(maxsize=1)
def roberta_files() -> dict:
    d = tempfile.mkdtemp(prefix="fstok-roberta-")
    with open(ROBERTA_JSON, encoding="utf-8") as f:
        model = json.load(f)["model"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(model["vocab"], f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in model["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    return {"vocab": os.path.join(d, "vocab.json"), "merges": os.path.join(d, "merges.txt")}


def byte_level_tokenizer(**kw):
    from tokenizers import ByteLevelBPETokenizer

    f = roberta_files()
    return as_fstok(ByteLevelBPETokenizer.from_file(f["vocab"], f["merges"], **kw))


GPT2_DIR = os.path.join(DATA, "vocab", "gpt2")
BERT_CASED_VOCAB = os.path.join(DATA, "vocab", "bert-base-cased", "vocab.txt")
LLAMA3_JSON = os.path.join(DATA, "vocab", "hf-derived", "llama3.tokenizer.json")


@lru_cache(maxsize=1)
def gpt2_tokenizer() -> "fstok.Tokenizer":
    """GPT-2's tokenizer.json pipeline (byte-level BPE, ByteLevel pre-tokenizer, decoder and post-processor)
    over the shared gpt2 vocab.json / merges.txt (upstream: Tokenizer.from_pretrained("gpt2"))."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    hf = Tokenizer(BPE.from_file(os.path.join(GPT2_DIR, "vocab.json"), os.path.join(GPT2_DIR, "merges.txt")))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.post_processor = processors.ByteLevel(trim_offsets=False)
    hf.add_special_tokens(["<|endoftext|>"])
    return as_fstok(hf)


# Llama 3.1's first special tokens, in id order from 128000 (upstream reads
# hf-internal-testing/Llama-3.1-8B-Instruct; the shared Llama 3 tokenizer.json has the same 128000 BPE tokens)
LLAMA31_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]


@lru_cache(maxsize=1)
def llama31_tokenizer() -> "fstok.Tokenizer":
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(LLAMA3_JSON)
    hf.add_special_tokens(LLAMA31_SPECIALS)
    assert hf.token_to_id("<|eot_id|>") == 128009
    return as_fstok(hf)


@lru_cache(maxsize=1)
def bert_cased_dir() -> str:
    """A local model directory holding bert-base-cased's tokenizer.json (upstream downloads it)."""
    from tokenizers import BertWordPieceTokenizer

    d = tempfile.mkdtemp(prefix="fstok-bert-cased-")
    BertWordPieceTokenizer.from_file(BERT_CASED_VOCAB, lowercase=False, strip_accents=False).save(
        os.path.join(d, "tokenizer.json"))
    return d
