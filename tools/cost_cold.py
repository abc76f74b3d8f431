"""The cost of one cold pass of `_bpe` builds, counted rather than timed: instructions and simulated cache misses.

On a host shared with other work the time of a pass moves by +-10-20% from run to run, more than most changes to
the cold path are worth.  This runs each build's pass under valgrind's callgrind, which counts what the pass does
whatever else the machine runs: instructions (Ir), first-level data misses (D1mr) and last-level misses (LLmr) of
a simulated cache whose last level is --ll bytes (default 4 MiB: a share of a server's L3 that other work keeps
busy), per byte of input, and the functions that spend the most.  Same measurement as `tools/ab_cold.py` and
`tools/bench cold` (forget the memos, warm up on other text of the corpus, then ONE pass over the timed text),
only the timed pass is counted.  Counts say nothing of how memory latencies overlap: a change that only overlaps
misses shows in `tools/ab_cold.py`, not here.

    python tools/cost_cold.py MODEL WORKLOAD:CORPUS DIR [DIR ...] [--ll BYTES] [--top N]
    python tools/cost_cold.py o200k_base docs:multilingual /tmp/base /tmp/new
    python tools/cost_cold.py cl100k_base lines:english /tmp/base /tmp/base@FSTOK_BPE_LANES=0

DIR holds a `_bpe*.so` build (tools/ab_cold.py says how to make one); DIR@NAME=VALUE runs that build with the
environment variable NAME set.  Models and workloads as in tools/ab_cold.py.  Needs valgrind (apt-get install
valgrind); a pass takes a few minutes under it on a busy host.
"""
from __future__ import annotations

import argparse
import array
import hashlib
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The timed pass and the warm-up go through different entry points of the module, so that callgrind's
# --toggle-collect counts the timed pass alone (both share the thread's memo: memo_borrow hands back the last one).
ENTRY = {"docs": "Model_encode", "lines": "Model_encode_batch"}


def child(model: str, cell: str, build: str) -> None:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    import ab_cold
    import bench_cold as bc

    import fstok
    import fstok.bpe as fb

    mod = ab_cold.load_build(build)
    base = fstok.compile(bc._hf_json(model)) if bc.MODELS[model][0] == "hfjson" else fstok.get_encoding(model)
    fb._native = lambda: mod
    tok = type(base)(base._art)
    workload, corpus = cell.split(":")
    warm, timed = bc.texts(workload, corpus)
    tok.clear_cache()
    if workload == "docs":
        tok.encode_ordinary_batch(warm, num_threads=1)  # Model_encode_batch: not counted
        out = [tok.encode_ordinary(d) for d in timed]  # Model_encode: counted
    else:
        for x in warm:  # Model_encode: not counted
            tok.encode_ordinary(x)
        out = [y for k in range(0, len(timed), 1024) for y in tok.encode_ordinary_batch(timed[k:k + 1024], num_threads=1)]
    digest = hashlib.sha1(b"".join(array.array("I", x).tobytes() + b"|" for x in out)).hexdigest()[:16]
    print("BYTES", sum(len(t.encode("utf-8")) for t in timed), "TOKENS", sum(len(x) for x in out), "IDS", digest,
          flush=True)


def measure(model: str, cell: str, build: str, ll: int, top: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--toggle-collect={ENTRY[cell.split(':')[0]]}", "--cache-sim=yes",
               f"--LL={ll},16,64", f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__),
               "--child", model, cell, build]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        m = re.search(r"BYTES (\d+) TOKENS (\d+) IDS (\w+)", r.stdout)
        if r.returncode or not m:
            sys.exit(f"{build}: the pass failed:\n{r.stderr[-2000:]}")
        ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no", "--show=Ir,D1mr,DLmr", out],
                             capture_output=True, text=True).stdout
    rows = []
    for line in ann.splitlines():
        f = re.match(r"\s*([\d,]+) \([^)]*\)\s+([\d,.]+)(?: \([^)]*\))?\s+([\d,.]+)(?: \([^)]*\))?\s+(.*)", line)
        if f:
            num = [int(x.replace(",", "")) if x != "." else 0 for x in f.groups()[:3]]
            rows.append((num, f.group(4)))
    total = next(n for n, name in rows if "PROGRAM TOTALS" in name)
    funcs = {}
    for n, name in rows:
        if "PROGRAM TOTALS" in name or not name.strip():
            continue
        fn = name.split()[0].rsplit(":", 1)[-1]  # file:function [object] -> function (inlined parts summed)
        acc = funcs.setdefault(fn, [0, 0, 0])
        for i in range(3):
            acc[i] += n[i]
    return {"bytes": int(m.group(1)), "tokens": int(m.group(2)), "ids": m.group(3), "total": total,
            "top": sorted(funcs.items(), key=lambda kv: -kv[1][0])[:top]}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("cell", help="WORKLOAD:CORPUS, e.g. docs:multilingual")
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--ll", type=int, default=4 << 20, help="bytes of the simulated last-level cache (default 4 MiB)")
    ap.add_argument("--top", type=int, default=6, help="functions listed per build")
    a = ap.parse_args()
    if a.cell.count(":") != 1 or a.cell.split(":")[0] not in ENTRY:
        sys.exit(f"workload {a.cell!r}: give docs:CORPUS or lines:CORPUS")
    ids = None
    for b in a.builds:
        r = measure(a.model, a.cell, b, a.ll, a.top)
        if ids is not None and r["ids"] != ids:
            print(f"MISMATCH: the ids of {b} differ from the first build's")
        ids = r["ids"]
        nb = r["bytes"]
        ir, d1, llm = r["total"]
        print(f"{a.model} {a.cell} {b}: {ir / nb:7.1f} Ir/byte  {d1 / nb:6.3f} D1mr/byte  {llm / nb:6.3f} LLmr/byte"
              f"  ({nb} bytes, {r['tokens']} tokens)")
        for fn, (i, d, ll) in r["top"]:
            print(f"    {fn:34s} {i / nb:7.1f} Ir/byte  {d / nb:6.3f} D1mr  {ll / nb:6.3f} LLmr")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
