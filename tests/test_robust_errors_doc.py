"""docs/errors.md's table, walked: every call raises the documented exception type and its message
contains every quoted fragment.  A row added to the table is tested without touching this file."""
from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

import fstok
from fstok import artifact as A
from fstok.errors import InvalidTokenError

from conftest import VOCAB

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "errors.md")
SPM = os.path.join(VOCAB, "models", "spm-bpe", "llama-2", "tokenizer.model")


def _rows() -> list[tuple[str, str, list[str]]]:
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("## The table", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = []
    for line in lines:
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        call = cells[0].strip("`").replace("\\|", "|")
        raises = cells[1].strip("`")
        frags = [m.replace("\\|", "|") for m in re.findall(r"`([^`]+)`", cells[2])]
        rows.append((call, raises, frags))
    return rows


ROWS = _rows()


def test_the_table_is_not_empty():
    assert len(ROWS) >= 25


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("errors-doc")
    bpe = fstok.get_encoding("o200k_base")
    wp = fstok.get_encoding("bert-base-uncased")
    (d / "notes.txt").write_text("Meeting notes\nbuy milk\n")
    (d / "a_dir").mkdir()
    data = bpe.to_bytes()
    (d / "o200k.fst").write_bytes(data)
    art = A.parse_artifact(data)
    acc = art.array("dfa.0.accept")
    gb = [i for i in range(1, int(art.array("dfa.0.info")[7]) + 1) if acc[i] >> 4]
    s = art.sections["dfa.0.accept"]
    b = bytearray(data)
    b[s.offset + gb[0]] = (acc[gb[0]] & 0x0F) | 0x90
    (d / "crafted.fst").write_bytes(A.reseal(b))
    b = bytearray(data)
    f = list(A._HEADER.unpack(bytes(b[:A.HEADER_SIZE])))
    f[2] = A.KIND_WORDPIECE
    b[:A.HEADER_SIZE] = A._HEADER.pack(*f)
    (d / "relabelled.fst").write_bytes(A.reseal(b))
    if os.path.exists(SPM):
        shutil.copy(SPM, d / "llama2.model")
    shutil.copy(os.path.join(ROOT, "fstok", "data", "tiktoken", "r50k_base.tiktoken"), d / "r50k_base.tiktoken")

    (d / "big-id").mkdir()
    (d / "big-id" / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 10**8}, "unk_token": "[UNK]"},
        "normalizer": None, "pre_tokenizer": {"type": "BertPreTokenizer"}}))
    import base64

    (d / "big-rank.tiktoken").write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i if i else 5 * 10**7}\n"
                                                 for i in range(256)))
    (d / "gpt2").mkdir()
    shutil.copy(os.path.join(VOCAB, "gpt2", "vocab.json"), d / "gpt2" / "vocab.json")
    (d / "gpt2" / "merges.txt").write_text("")
    return {"dir": str(d), "bpe": bpe, "wp": wp}


@pytest.mark.parametrize("call,raises,frags", ROWS, ids=[r[0][:60] for r in ROWS])
def test_documented_error(env, call, raises, frags, monkeypatch):
    if "llama2.model" in call and not os.path.exists(SPM):
        pytest.skip("no SentencePiece model in the shared data")
    if call.startswith('fstok.load("/dev/') and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev")
    monkeypatch.chdir(env["dir"])
    ns = {"fstok": fstok, "bpe": env["bpe"], "wp": env["wp"], "np": np}
    exc = {"ArtifactError": A.ArtifactError, "InvalidTokenError": InvalidTokenError}.get(raises) or getattr(
        __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__, raises, None)
    if exc is None:
        import builtins

        exc = getattr(builtins, raises)
    with pytest.raises(exc) as ei:
        eval(call, ns)  # noqa: S307 - the documented calls themselves
    for frag in frags:
        assert frag in str(ei.value), (call, frag, str(ei.value))
