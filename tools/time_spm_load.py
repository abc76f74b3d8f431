"""In-process load time of compiled SentencePiece-family artifacts: for each `.model` / Unigram and
SentencePiece-style tokenizer.json file of the shared models, `fstok.compile(path)` with a warm cache (the
artifact compiled before; the source unchanged) and `fstok.load(artifact)` of the cached artifact, best of
`--repeat` calls, wall and CPU milliseconds; the CPU time of the first encode after a load (one short text),
and of the load and that first encode together.  The compiler stores the walking layout of the pieces trie and
its pair and character tables in the artifact (the only form of the pieces trie it holds), so the first
encode builds nothing.

    python tools/time_spm_load.py
    python tools/time_spm_load.py --repeat 9
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
if not os.path.isdir(os.path.join(SHARED, "vocab", "models")):
    SHARED = "/work/shared/data"
M = os.path.join(SHARED, "vocab", "models")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import fstok
    from fstok.spm_cache import lookup

    from fstok._cache import cache_dir

    os.makedirs(cache_dir(), exist_ok=True)

    files = sorted(glob.glob(os.path.join(M, "spm-bpe", "*", "*")) + glob.glob(os.path.join(M, "unigram", "*", "*")))
    print("| file | artifact MB | compile, warm cache: ms wall / CPU | load: ms wall / CPU | first encode: ms CPU "
          "| load + first encode: ms CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for p in files:
        fstok.compile(p)  # into the cache (the first time), then mapped from it
        art = lookup(p)._art.path
        best = {"c": [1e9, 1e9], "l": [1e9, 1e9]}
        for _ in range(args.repeat):
            for k, f in (("c", lambda: fstok.compile(p)), ("l", lambda: fstok.load(art))):
                t, c = time.perf_counter(), time.process_time()
                f()
                best[k][0] = min(best[k][0], (time.perf_counter() - t) * 1e3)
                best[k][1] = min(best[k][1], (time.process_time() - c) * 1e3)
        first = both = 1e9
        for _ in range(max(1, args.repeat // 2)):
            c0 = time.process_time()
            tok = fstok.load(art)
            c = time.process_time()
            tok.encode("a b")
            first = min(first, (time.process_time() - c) * 1e3)
            both = min(both, (time.process_time() - c0) * 1e3)
        print(f"| {os.path.relpath(p, M)} | {os.path.getsize(art) / 1e6:.1f} | {best['c'][0]:.1f} / {best['c'][1]:.1f} "
              f"| {best['l'][0]:.1f} / {best['l'][1]:.1f} | {first:.1f} | {both:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
