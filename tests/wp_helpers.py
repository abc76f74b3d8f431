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


# one test per plane of 65,536 code points: pytest-xdist's --dist loadfile hands out files with the most tests
# first, so a file of a few long tests would be handed out last and run alone at the end of the suite
PLANES = [(p << 16, (p + 1) << 16) for p in range(17)]
PLANE_IDS = [f"U+{lo:04X}" for lo, _ in PLANES]
_HF_PLAIN: dict = {}


def check_every_code_point_in_context(name: str, lo: int = 0, hi: int = 0x110000) -> None:
    """fstok's ids == HF's for every code point in [lo, hi) (no surrogates) between letters, after a digit
    and alone."""
    if name not in _HF_PLAIN:
        _HF_PLAIN[name] = hf_bert(name)
    hf, fs = _HF_PLAIN[name], fs_bert(name)
    cps = [c for c in range(lo, hi) if not (0xD800 <= c <= 0xDFFF)]
    # one long text per block of code points: each char between letters, digits and spaces
    for start in range(0, len(cps), 20000):
        block = cps[start:start + 20000]
        text = " ".join(f"a{chr(c)}b 1{chr(c)} {chr(c)}" for c in block)
        e = hf.encode(text, add_special_tokens=False)
        ids, _ = fs.encode_with_offsets(text)
        assert ids == e.ids, f"{name}: ids differ in block starting U+{block[0]:04X}"
