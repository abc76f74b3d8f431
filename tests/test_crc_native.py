"""fstok.runtime._crc.crc32 (the artifact checksums) equals zlib.crc32 on every length around the folding steps,
at every alignment, with a starting value, on both of its paths (carry-less multiplies and the byte table)."""
from __future__ import annotations

import os
import random
import zlib

import pytest

_crc = pytest.importorskip("fstok.runtime._crc")


@pytest.mark.parametrize("clmul", [True, False])
def test_crc32_equals_zlib(clmul):
    prev = _crc._set_clmul(clmul)
    try:
        r = random.Random(7)
        base = os.urandom(300_000)
        for n in [*range(0, 200), 1000, 4096, 65535, 65536, 65537, 70001, 299_983]:
            for off in (0, 1, 7, 15):
                b = base[off:off + n]
                assert _crc.crc32(b) == zlib.crc32(b), (n, off)
            v = r.randrange(1 << 32)
            assert _crc.crc32(base[:n], v) == zlib.crc32(base[:n], v), n
        assert _crc.crc32(memoryview(base)[5:90_000]) == zlib.crc32(base[5:90_000])
        assert _crc.crc32(b"\0" * 100_000) == zlib.crc32(b"\0" * 100_000)
        assert _crc.crc32(b"\xff" * 1000) == zlib.crc32(b"\xff" * 1000)
    finally:
        _crc._set_clmul(prev)
