"""Per-call speed of a series of whole-document calls after `clear_cache()` (docs/design/bpe.md).

How many calls a text needs before fstok's caches reach their steady speed: each line is one series (the memos
emptied first), each number one `encode_ordinary(text)` call in MB/s of process CPU time, in call order.

    python tools/calls_bpe.py ENCODING CORPUS [CALLS] [SERIES]
    python tools/calls_bpe.py o200k_base multilingual 12 3

CORPUS is a file name in ../shared/data/corpus without `.txt` (english, multilingual, code, chinese_long).
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import fstok  # noqa: E402


def series(enc: "fstok.Encoding", text: str, calls: int) -> list[float]:
    """MB/s of each of `calls` calls, the first one with empty memos."""
    nb = len(text.encode("utf-8"))
    enc.clear_cache()
    out = []
    for _ in range(calls):
        t0 = time.process_time()
        enc.encode_ordinary(text)
        out.append(nb / 1e6 / max(time.process_time() - t0, 1e-9))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    name, corpus = argv[0], argv[1]
    calls = int(argv[2]) if len(argv) > 2 else 12
    reps = int(argv[3]) if len(argv) > 3 else 3
    path = os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus", corpus + ".txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    enc = fstok.get_encoding(name)
    for _ in range(reps):
        print(" ".join(f"{x:.0f}" for x in series(enc, text, calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
