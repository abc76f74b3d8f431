"""Every code point: the pinned normalization/pre-tokenization facts == installed HF tokenizers,
and the compiled E2E table gives HF's result for every code point alone and inside words."""
import numpy as np
import pytest
from conftest import needs_shared

from fstok.compile.bert_normalize import DATA


def test_facts_match_installed_hf(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "u.npz"
    subprocess.run([sys.executable, "tools/gen_bert_unicode.py", "-o", str(out)], check=True, capture_output=True)
    fresh = np.load(out)
    ref = np.load(DATA)
    for k in ref.files:
        if k == "source":
            continue
        assert np.array_equal(fresh[k], ref[k]), f"table {k} differs from installed HF tokenizers"


@needs_shared
@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-multilingual-cased"])
def test_every_code_point_in_context(name):
    from wp_helpers import fs_bert, hf_bert

    hf, fs = hf_bert(name), fs_bert(name)
    cps = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
    # one long text per block of code points: each char between letters, digits and spaces
    for start in range(0, len(cps), 20000):
        block = cps[start:start + 20000]
        text = " ".join(f"a{chr(c)}b 1{chr(c)} {chr(c)}" for c in block)
        e = hf.encode(text, add_special_tokens=False)
        ids, offs = fs.encode_with_offsets(text)
        assert ids == e.ids, f"ids differ in block starting U+{block[0]:04X}"
