"""A byte-level BPE behind NFC / NFKC checks a text for the characters a normal-form check must look at in the
same C call that encodes it (Model.encode's `nf` bitmap): None exactly where fstok.runtime._norm.any_in finds
one in the str (around the 16-byte blocks of the ASCII skip, in every str kind), else the ids of the call
without it; and the ids of such texts equal HF tokenizers'."""
import json
import random

import pytest
from conftest import VOCAB, needs_shared

from fstok.runtime import _norm

pytestmark = needs_shared

LLAMA3 = f"{VOCAB}/hf-derived/llama3.tokenizer.json"


@pytest.fixture(scope="module", params=["NFC", "NFKC"])
def pair(request, tmp_path_factory):
    from tokenizers import Tokenizer

    import fstok

    with open(LLAMA3, encoding="utf-8") as f:
        obj = json.load(f)
    obj["normalizer"] = {"type": request.param}
    path = tmp_path_factory.mktemp("nf") / f"{request.param}.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    tok = fstok.compile(str(path))
    assert tok._normalizer == request.param
    return tok, Tokenizer.from_file(str(path))


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    # composing and compatibility characters, combining marks, Hangul jamo, wide characters
    odd = ["e\u0301", "\u0301", "\u212b", "\uff21", "\u1100\u1161", "\u00c5", "\ufb01", "\u2126", "\U0001d400",
           "\u0344", "\u0f73", "\u3099", "\u00e9", "é", "中", "\u2019", "ß", "\U0001f600", "\u00a0"]
    out = []
    for _ in range(400):
        n = rng.randrange(0, 40)
        base = "".join(rng.choice("ab cd\n.") for _ in range(n))
        k = rng.randrange(0, len(base) + 1)
        out.append(base[:k] + rng.choice(odd) + base[k:] if rng.random() < 0.8 else base)
    out += ["x" * n + c for n in range(0, 40) for c in ("\u0301", "\u212b", "é")]
    out += ["\u00e9" * n + "\u0301" for n in (1, 7, 8, 15, 16, 17)]  # Latin-1 kind
    out += ["\U0001f600" * n + "e\u0301" for n in (1, 5, 16)]  # UCS-4 kind
    return out


def test_nf_scan_matches_any_in(pair):
    tok, _ = pair
    tok._nf_touched()
    bm = tok.__dict__["_nf_touched_bm"]
    allowed = tok._resolve_special("all", "all")[0]
    sp1, sp2 = tok._matchers(allowed)
    m = tok._model
    for t in _texts(1):
        got = m.encode(t, sp1, 0, sp2, 1, bm)
        if not t.isascii() and _norm.any_in(t, bm):
            assert got is None, t
        else:
            assert got == m.encode(t, sp1, 0, sp2, 1), t
    with pytest.raises(ValueError):
        m.encode("é", sp1, 0, sp2, 1, b"\0" * 10)


def test_ids_equal_hf(pair):
    tok, hf = pair
    for t in _texts(2) + ["caf\u00e9 cafe\u0301 \u212bngstr\u00f6m \ufb01le"]:
        assert tok.encode(t, allowed_special="all") == hf.encode(t, add_special_tokens=False).ids, t
