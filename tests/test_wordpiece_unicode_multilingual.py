"""Every code point through bert-base-multilingual-cased (its cased, accent-keeping normalizer): fstok's ids
equal installed HF tokenizers' for each code point alone and inside words (bert-base-uncased:
tests/test_wordpiece_unicode.py)."""
import pytest
from conftest import needs_shared
from wp_helpers import PLANE_IDS, PLANES, check_every_code_point_in_context


@needs_shared
@pytest.mark.parametrize("lo,hi", PLANES, ids=PLANE_IDS)
def test_every_code_point_in_context(lo, hi):
    check_every_code_point_in_context("bert-base-multilingual-cased", lo, hi)
