"""Compile and load times of every shared model fstok compiles, in one table, against the budgets (compile of a
source at most 5 s; loading its artifact at most 20 ms).

Each model runs in a fresh process with an empty compile cache (`FSTOK_CACHE_DIR` a new temporary folder):
`fstok.compile(path)` once, cold (fstok imported before; the compiler's own modules are part of it), wall and
CPU seconds; the artifact saved to a file; then `fstok.load(artifact)` (`--repeat` times after one untimed
load, best wall and CPU milliseconds), and the CPU time of a load and the first encode after it (one short
text) together, best of `--repeat` // 2 + 1.  The models: every tokenizer.json, SentencePiece `.model`,
tekken `.json`, BERT `vocab.txt` and GPT-2 `vocab.json` under the shared `vocab/` folder (tiktoken-format
files need a `pattern=`: the OpenAI encodings are timed through `fstok.get_encoding`'s builder).

    python tools/time_load.py
    python tools/time_load.py --repeat 9 --only gemma,llama-2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
if not os.path.isdir(os.path.join(SHARED, "vocab", "models")):
    SHARED = "/work/shared/data"
V = os.path.join(SHARED, "vocab")
COMPILE_S, LOAD_MS = 5.0, 20.0


def sources() -> dict[str, str]:
    """name -> source file: the files fstok.compile reads without options, then the OpenAI encodings."""
    out = {}
    for d, _, fs in sorted(os.walk(V)):
        for f in sorted(fs):
            p = os.path.join(d, f)
            low = f.lower()
            if low.endswith(".md") or "license" in low or low.endswith((".tiktoken", "merges.txt")):
                continue
            if low == "tokenizer.model" and os.path.basename(d) in ("llama3", "llama4"):
                continue  # tiktoken format: needs the model's pattern=
            out[os.path.relpath(p, V)] = p
    for enc in ("cl100k_base", "o200k_base"):
        out[f"get_encoding({enc})"] = enc
    return out


def child(src: str, repeat: int) -> dict:
    import fstok

    tmp = tempfile.mkdtemp(prefix="fstok-time-load-")
    os.environ["FSTOK_CACHE_DIR"] = tmp  # an empty cache: the compile is cold
    t, c = time.perf_counter(), time.process_time()
    if os.path.exists(src):
        tok = fstok.compile(src)
    else:
        from fstok.api import ENCODINGS

        tok = ENCODINGS[src].build()
    res = {"compile_s": time.perf_counter() - t, "compile_cpu_s": time.process_time() - c}
    art = os.path.join(tmp, "model.fst")
    tok.save(art)
    del tok
    res["mb"] = os.path.getsize(art) / 1e6
    fstok.load(art)  # the loader's modules imported
    lw = lc = both = 1e9
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        tok = fstok.load(art)
        lw, lc = min(lw, time.perf_counter() - t), min(lc, time.process_time() - c)
        del tok
    for _ in range(repeat // 2 + 1):
        c = time.process_time()
        tok = fstok.load(art)
        tok.encode("Hello world, a b.")
        both = min(both, time.process_time() - c)
        del tok
    res.update(load_ms=lw * 1e3, load_cpu_ms=lc * 1e3, first_cpu_ms=both * 1e3)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated substrings of the model names to time")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.repeat)))
        return 0
    names = sources()
    if args.only:
        names = {k: v for k, v in names.items() if any(s in k for s in args.only.split(","))}
    print("| model | artifact MB | compile: s wall / CPU | load: ms wall / CPU | load + first encode: ms CPU | budget |")
    print("|---|---:|---:|---:|---:|---|")
    for name, src in names.items():
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", src, "--repeat", str(args.repeat)],
                             capture_output=True, text=True)
        try:
            r = json.loads(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            err = (out.stderr.strip().splitlines() or ["crashed"])[-1][:120]
            print(f"| {name} | — | — | — | — | not compiled: {err} |", flush=True)
            continue
        over = [w for w, bad in (("compile", r["compile_cpu_s"] > COMPILE_S), ("load", r["load_cpu_ms"] > LOAD_MS)) if bad]
        print(f"| {name} | {r['mb']:.1f} | {r['compile_s']:.2f} / {r['compile_cpu_s']:.2f} | {r['load_ms']:.1f} / "
              f"{r['load_cpu_ms']:.1f} | {r['first_cpu_ms']:.1f} | {'over: ' + ', '.join(over) if over else 'within'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
