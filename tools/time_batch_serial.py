"""The serial part of a batch call of short lines: the calling thread's CPU time while it holds the GIL (Python
wrapper, reading the strs, making the result lists) over the CPU time of the whole call (every thread), per call of
1024 lines the process has not seen.  That fraction s bounds what N threads can give (Amdahl: 1 / (s + (1 - s) / N)),
whatever the machine's load; the wall-clock speed-up needs free cores to show.

    python tools/time_batch_serial.py [--models o200k_base,bert-base-uncased] [--corpora english,multilingual]
                                      [--threads 2] [--calls 25] [--numpy]

The calling thread's CPU time that is not spent with the GIL held (encoding blocks itself, waiting) comes from
FSTOK_TRACE_THREADS=1 (docs/design/parallel.md); each cell runs in a fresh process.  --numpy times
encode_batch_to_numpy instead of the list result.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = next((c for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"),
                           "/work/shared/data") if c and os.path.isdir(os.path.join(c, "corpus"))), "../shared/data")


def child(model: str, corpus: str, nt: int, calls: int, numpy_out: bool) -> None:
    import time

    import fstok

    with open(os.path.join(SHARED, "corpus", f"{corpus}.txt"), encoding="utf-8") as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    tok = fstok.get_encoding(model)
    bert = not hasattr(tok, "encode_ordinary_batch")
    if numpy_out:
        kw = {} if bert else {"disallowed_special": ()}

        def enc(b, num_threads):
            return tok.encode_batch_to_numpy(b, num_threads=num_threads, **kw)
    else:
        enc = tok.encode_batch if bert else tok.encode_ordinary_batch
    half = len(lines) // 2
    enc(lines[half:half + 1024], num_threads=nt)  # warm-up on other text (starts the pool)
    out, i = [], 0
    for _ in range(calls):
        # fresh str objects (no UTF-8 stored in them), unseen lines where the corpus has enough
        b = [ln.encode().decode() for ln in lines[i:i + 1024]]
        i = i + 1024 if i + 2048 <= half else 0
        sys.stderr.flush()
        p0, t0 = time.process_time(), time.thread_time()
        r = enc(b, num_threads=nt)
        p1, t1 = time.process_time(), time.thread_time()
        out.append(r)
        print(f"CALL {(p1 - p0) * 1e6:.1f} {(t1 - t0) * 1e6:.1f}", flush=True)


def released(line: str):
    """The calling thread's CPU time of one call without the GIL (us), from its FSTOK_TRACE_THREADS line."""
    m = re.search(r"start (\d+) \| caller: lists \d+, encode (\d+), wait (\d+) \| join (\d+)", line)
    if m:
        return sum(float(x) for x in m.groups())
    m = re.search(r"encoding or waiting (\d+) us", line)
    return float(m.group(1)) if m else None


def cell(model: str, corpus: str, nt: int, calls: int, numpy_out: bool) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model, corpus, str(nt), str(calls)]
    if numpy_out:
        cmd.append("--numpy")
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, FSTOK_TRACE_THREADS="1"))
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    calls_ = [tuple(float(x) for x in ln.split()[1:]) for ln in r.stdout.splitlines() if ln.startswith("CALL")]
    rel = [x for x in (released(ln) for ln in r.stderr.splitlines()) if x is not None]
    if len(rel) != len(calls_) + 1:  # (one trace line per call, the warm-up call's first)
        raise SystemExit(f"{model} {corpus}: {len(rel)} trace lines for {len(calls_)} calls + 1:\n{r.stderr[-1500:]}")
    rel = rel[1:]
    frac = [max(0.0, main - g) / cpu for (cpu, main), g in zip(calls_, rel) if cpu > 0]
    s = statistics.median(frac)
    return {"model": model, "corpus": corpus, "threads": nt, "numpy": numpy_out,
            "cpu_us": statistics.median(c for c, _ in calls_), "serial": s,
            "q1": statistics.quantiles(frac, n=4)[0], "q3": statistics.quantiles(frac, n=4)[2],
            "bound16": 1 / (s + (1 - s) / 16)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), "--numpy" in sys.argv)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="o200k_base,bert-base-uncased")
    ap.add_argument("--corpora", default="english,multilingual")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts")
    ap.add_argument("--calls", type=int, default=25)
    ap.add_argument("--numpy", action="store_true", help="time encode_batch_to_numpy")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    print("| model | corpus | threads | output | CPU per call (us, all threads) | serial fraction (quartiles) | "
          "Amdahl bound, 16 threads |")
    print("|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for corpus in a.corpora.split(","):
            for nt in (int(x) for x in a.threads.split(",")):
                r = cell(model, corpus, nt, a.calls, a.numpy)
                if a.json:
                    print(json.dumps(r))
                print(f"| {model} | {corpus} | {nt} | {'numpy' if a.numpy else 'lists'} | {r['cpu_us']:.0f} | "
                      f"{r['serial']:.3f} ({r['q1']:.3f}-{r['q3']:.3f}) | {r['bound16']:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
