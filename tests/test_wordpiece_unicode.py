"""Every code point: the pinned normalization/pre-tokenization facts == installed HF tokenizers,
and the compiled E2E table gives HF's result for every code point alone and inside words."""
import numpy as np
import pytest
from conftest import needs_shared
from wp_helpers import PLANE_IDS, PLANES, check_every_code_point_in_context

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
@pytest.mark.parametrize("lo,hi", PLANES, ids=PLANE_IDS)
def test_every_code_point_in_context(lo, hi):
    # (bert-base-multilingual-cased: tests/test_wordpiece_unicode_multilingual.py, a file of its own so that
    # the two long runs can go to two pytest-xdist workers under --dist loadfile)
    check_every_code_point_in_context("bert-base-uncased", lo, hi)
