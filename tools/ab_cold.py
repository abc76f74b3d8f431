"""Same-process A/B of `_bpe` builds on cold passes, as `tools/bench cold` measures them.

Each build's `_bpe*.so` (one folder per build) is loaded into one process under one module name, with one
tokenizer per build and model.  A measurement: write 96 MB (evicts the CPU caches), forget the tokenizer's memos
(`clear_cache()`), warm up on other text of the corpus, then time ONE pass over the timed text by the process's
CPU time -- the units and the split of `tools/bench cold` (documents of ~8 KB, one encode call each; short lines,
1024 per `encode_ordinary_batch` call on one thread).  Rounds are interleaved and alternate the builds' order;
each cell prints the median and the best MB/s of each build.  A MISMATCH line is printed if two builds disagree.
On a host shared with other work this compares builds far more steadily than separate processes do.

    python tools/ab_cold.py MODELS WORKLOADS ROUNDS DIR_A DIR_B ...
    python tools/ab_cold.py o200k_base,llama3 lines:english,docs:multilingual 7 /tmp/base /tmp/new
    python tools/ab_cold.py cl100k_base docs:english 5 /tmp/base /tmp/base@FSTOK_BPE_PC_LINES=16384

Models: o200k_base, cl100k_base, llama3 (the tokenizer.json `tools/bench cold` uses).  Workloads: WORKLOAD:CORPUS
with WORKLOAD docs or lines and CORPUS a file of the shared corpus (english, multilingual, code, ...).
DIR@NAME=VALUE sets the environment variable NAME while that build's module initialises (settings read at
import, e.g. FSTOK_BPE_PC_LINES); the module is then a separate copy, so give each such build a folder of its own.
Build a folder with `python setup.py build_ext -b /tmp/bx -t /tmp/bx_tmp && mkdir D && cp /tmp/bx/fstok/runtime/_bpe*.so D/`.
"""
from __future__ import annotations

import gc
import glob
import importlib.machinery
import importlib.util
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import bench_cold as bc  # noqa: E402
import fstok  # noqa: E402
import fstok.bpe as fb  # noqa: E402


def load_build(spec: str):
    d, _, env = spec.partition("@")
    k, _, v = env.partition("=")
    old = os.environ.get(k) if env else None
    if env:
        os.environ[k] = v
    try:
        so = glob.glob(os.path.join(d, "_bpe*.so"))[0]
        ld = importlib.machinery.ExtensionFileLoader("fstok.runtime._bpe", so)
        m = importlib.util.module_from_spec(importlib.util.spec_from_file_location("fstok.runtime._bpe", so, loader=ld))
        ld.exec_module(m)
    finally:  # only this build's initialisation sees the setting (a variable left set reached every later build)
        if env and old is None:
            del os.environ[k]
        elif env:
            os.environ[k] = old
    return m


def runner(tok, workload: str):
    if workload == "lines":
        return lambda xs: [y for k in range(0, len(xs), 1024)
                           for y in tok.encode_ordinary_batch(xs[k:k + 1024], num_threads=1)]
    return lambda xs: [tok.encode_ordinary(x) for x in xs]


def main() -> None:
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    models, cells, rounds, builds = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4:]
    for c in cells:
        if c.count(":") != 1 or c.split(":")[0] not in ("docs", "lines"):
            sys.exit(f"workload {c!r}: give docs:CORPUS or lines:CORPUS")
    mods = [load_build(b) for b in builds]
    toks = {}
    for name in models:
        base = fstok.compile(bc._hf_json(name)) if bc.MODELS[name][0] == "hfjson" else fstok.get_encoding(name)
        for i, m in enumerate(mods):
            fb._native = lambda m=m: m
            toks[name, i] = type(base)(base._art)
    texts = {c: bc.texts(*c.split(":")) for c in cells}
    flush = np.zeros(96 << 20, dtype=np.uint8)
    res: dict = {}
    gc.disable()
    for r in range(rounds):
        for name in models:
            for c in cells:
                warm, timed = texts[c]
                nb = sum(len(t.encode("utf-8")) for t in timed)
                for i in (range(len(mods)) if r % 2 == 0 else reversed(range(len(mods)))):
                    tok = toks[name, i]
                    run = runner(tok, c.split(":")[0])
                    flush += 1
                    tok.clear_cache()
                    run(warm)
                    t0 = time.process_time()
                    out = run(timed)
                    dt = time.process_time() - t0
                    ref = res.setdefault((name, c), {}).setdefault("ref", out)
                    if out != ref:
                        print("MISMATCH", name, c, builds[i], flush=True)
                    res[name, c].setdefault(i, []).append(nb / dt / 1e6)
        gc.collect()
    for (name, c), d in res.items():
        print(f"{name:12s} {c:22s} " + "  ".join(
            f"{builds[i]}: median {statistics.median(d[i]):6.1f} best {max(d[i]):6.1f} MB/s" for i in range(len(mods))),
            flush=True)


if __name__ == "__main__":
    main()
