#!/usr/bin/env python3
"""`fstok.tiktoken` vs tiktoken 0.14 through tiktoken's own API, one cold pass each, side by side.

    tools/bench tiktoken                          # cl100k_base and o200k_base, ~1-2 min on a shared 2-core machine
    tools/bench tiktoken --encodings o200k_base --mb 1

Both sides are built offline from the shared rank files (tiktoken: `tiktoken.Encoding` with the
arguments of tiktoken_ext.openai_public; fstok: `fstok.tiktoken.get_encoding`, its artifact cached by an
earlier run).  Each side is warmed up on the code corpus, then makes ONE pass over text the process
has not encoded before (fstok first, so its piece memos start cold), through the calls users make:

  load          CPU seconds of a fresh process importing the library, building the encoding (tiktoken:
                read the rank file and build CoreBPE; fstok: map and check the cached artifact) and
                encoding one word (median of 3 processes).
  encode lines  `enc.encode(line)` for each non-empty line of --mb MB of English (a Python loop: the
                per-call cost counts).
  encode doc    `enc.encode_ordinary(text)` on --mb MB of English as one string, and on the
                multilingual corpus (246 KB) as one string.
  batch lines   `enc.encode_batch(lines)` (default num_threads=8 on both sides) over the same lines.
  decode lines  `enc.decode(ids)` for each line's ids.
Single-thread cells are process CPU time (robust to other processes on a shared machine); the batch
cell is wall time.  Cells: MB/s of UTF-8 text; "x" = fstok / tiktoken; ids are checked equal.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
SHARED = next((c for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"),
                           "/work/shared/data") if c and os.path.isdir(os.path.join(c, "corpus"))),
              os.path.join(ROOT, "..", "shared", "data"))
CORPUS = os.path.join(SHARED, "corpus")
VOCAB = os.path.join(SHARED, "vocab")


def tiktoken_offline(name: str):
    import tiktoken
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe

    path = os.path.join(VOCAB, "tiktoken", f"{name}.tiktoken")
    orig = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(path, expected_hash=k.get("expected_hash"))
    try:
        spec = getattr(op, name)()
    finally:
        op.load_tiktoken_bpe = orig
    return tiktoken.Encoding(**spec)


def _read(name: str) -> str:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8", newline="") as f:
        return f.read()


def _load_seconds(side: str, name: str) -> float:
    """CPU seconds of importing, building the encoding and one encode, in a new process (median of 3)."""
    build = (f"import sys; sys.path.insert(0, {HERE!r}); from bench_tiktoken import tiktoken_offline as f; e = f({name!r})"
             if side == "tiktoken" else f"import fstok.tiktoken as t; e = t.get_encoding({name!r})")
    prog = f"import time; t0 = time.process_time(); {build}; e.encode('hello'); print(time.process_time() - t0)"
    runs = []
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
        runs.append(float(r.stdout.strip().splitlines()[-1]))
    return sorted(runs)[1]


def _cpu(f):
    t0 = time.process_time()
    out = f()
    return time.process_time() - t0, out


def _wall(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def bench(name: str, mb: float) -> list[tuple[str, float, float, bool]]:
    import fstok.tiktoken as ftk

    sides = {"fstok": ftk.get_encoding(name), "tiktoken": tiktoken_offline(name)}
    english = _read("english")
    cut = english.find("\n", int(mb * 1e6))
    doc = english[: cut if cut > 0 else len(english)]
    lines = [ln for ln in doc.split("\n") if ln]
    multi = _read("multilingual")
    warm = _read("code")[:300_000]
    for e in sides.values():  # warm-up on other text: code paths, allocator, branch predictors
        e.encode_ordinary(warm)
        e.encode_batch(warm.split("\n")[:2000])
        e.decode(e.encode_ordinary(warm[:50_000]))
    nbytes = len(doc.encode())
    rows = []
    res: dict[str, dict] = {}
    for side, e in sides.items():  # fstok first: it has not seen this text
        r = res[side] = {}
        r["encode lines"] = _cpu(lambda: [e.encode(ln) for ln in lines])
        r["encode doc"] = _cpu(lambda: e.encode_ordinary(doc))
        r["encode doc (multilingual)"] = _cpu(lambda: e.encode_ordinary(multi))
        r["batch lines"] = _wall(lambda: e.encode_batch(lines))
        ids = r["encode lines"][1]
        r["decode lines"] = _cpu(lambda: [e.decode(x) for x in ids])
    size = {"encode doc (multilingual)": len(multi.encode())}
    for cell in res["fstok"]:
        (tf, of), (tt, ot) = res["fstok"][cell], res["tiktoken"][cell]
        nb = size.get(cell, nbytes)
        rows.append((cell, nb / 1e6 / max(tf, 1e-9), nb / 1e6 / max(tt, 1e-9), of == ot))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encodings", default="cl100k_base,o200k_base")
    ap.add_argument("--mb", type=float, default=2.0, help="MB of the English corpus for the line and doc cells")
    args = ap.parse_args()
    import tiktoken

    import fstok

    print(f"fstok.tiktoken vs tiktoken {tiktoken.__version__}; fstok {fstok.__version__}; {os.cpu_count()} CPUs; "
          f"--mb {args.mb}")
    for name in args.encodings.split(","):
        import fstok.tiktoken as ftk

        ftk.get_encoding(name)  # compile into the cache once, before the load timing
        lf, lt = _load_seconds("fstok", name), _load_seconds("tiktoken", name)
        print(f"\n{name}\n| cell | fstok.tiktoken | tiktoken | x | ids equal |\n|---|---:|---:|---:|:---:|")
        print(f"| load (CPU s, new process) | {lf:.3f} | {lt:.3f} | {lt / lf:.1f} | |")
        for cell, f, t, same in bench(name, args.mb):
            print(f"| {cell} (MB/s) | {f:.1f} | {t:.1f} | {f / t:.1f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
