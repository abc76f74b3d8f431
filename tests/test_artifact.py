"""The artifact format module on its own."""
import numpy as np
import pytest

from fstok import artifact as A


def _mk(**sections):
    return A.write_artifact(None, A.KIND_WORDPIECE, {"x": 1}, sections, "16.0.0", A.source_hash("s"))


def test_roundtrip_and_alignment(tmp_path):
    secs = {"a": np.arange(10, dtype=np.uint32), "b": b"hello", "c": np.array([-1, 2], dtype=np.int64)}
    data = _mk(**secs)
    p = tmp_path / "x.fst"
    p.write_bytes(data)
    for art in (A.parse_artifact(data), A.read_artifact(p)):
        assert art.meta == {"x": 1} and art.kind_name == "wordpiece" and art.unicode_version == "16.0.0"
        assert art.array("a").tolist() == list(range(10))
        assert art.raw("b") == b"hello"
        assert art.array("c").tolist() == [-1, 2]
        for s in art.sections.values():
            assert s.offset % A.ALIGN == 0
    with pytest.raises(A.ArtifactError, match="no section"):
        A.parse_artifact(data).array("zzz")


def test_kind_check():
    data = _mk(a=np.zeros(3, np.uint8))
    with pytest.raises(A.ArtifactError, match="expected 'bpe'"):
        A.parse_artifact(data, expect_kind=A.KIND_BPE)


def test_every_truncation_is_an_error():
    data = _mk(a=np.arange(100, dtype=np.uint16))
    for n in range(0, len(data), 7):
        with pytest.raises(A.ArtifactError):
            A.parse_artifact(data[:n])


def test_every_single_byte_corruption_is_caught():
    data = _mk(a=np.arange(50, dtype=np.uint32))
    for pos in range(len(data)):
        b = bytearray(data)
        b[pos] ^= 1
        with pytest.raises(A.ArtifactError):
            A.parse_artifact(bytes(b))


def test_bad_dtype_rejected_at_write():
    with pytest.raises(TypeError):
        _mk(a=np.zeros(2, np.float64))
