"""Shared helpers for the WordPiece tests: HF reference tokenizers and fstok counterparts."""
import functools
import os


import fstok

VOCABS = {"bert-base-uncased": True, "bert-base-cased": False, "bert-base-multilingual-cased": False}


def vocab_path(name: str) -> str:
    """The bundled copy (byte-identical to ../shared/data/vocab/<name>/vocab.txt, see PROVENANCE)."""
    from fstok.registry import DATA_DIR

    return os.path.join(DATA_DIR, "bert", f"{name}.txt")


@functools.lru_cache(maxsize=None)
def hf_bert(name: str, **kw):
    from tokenizers import BertWordPieceTokenizer

    lower = kw.pop("lowercase", VOCABS[name])
    t = BertWordPieceTokenizer(vocab_path(name), lowercase=lower, **kw)
    t._tokenizer.encode_special_tokens = True  # special-token text is ordinary text, as fstok's default
    return t


@functools.lru_cache(maxsize=None)
def fs_bert(name: str):
    return fstok.get_encoding(name)
