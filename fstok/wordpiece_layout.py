"""The WordPiece artifact's table layout, as the runtime reads it (shared by the compiler, the runtime's
validation, the reference executor and the inspector; imports nothing from fstok).

Node records (`wp.node`, little-endian uint64): low word = first edge index, high word = number of children
(8 bits) | first child's label << 8 | dense row << 16 (0xFFFF: no dense row).
"""
from __future__ import annotations

import numpy as np

NONE = 0xFFFFFFFF  # no node / no failure link
NORM1_LEN = 0x110000 >> 8  # stage-1 rows of the two-stage BERT normalization table (one per 256 code points)


def node_fields(node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Unpack state records: (first edge index, number of children (<=255), first label, dense row or 0xFFFF).

    Views of the little-endian uint64 records as uint32 pairs: no 64-bit copies (load time)."""
    words = np.ascontiguousarray(node).view("<u4")
    lo, hi = words[0::2], words[1::2]
    return lo, hi & 0xFF, (hi >> 8) & 0xFF, hi >> 16
