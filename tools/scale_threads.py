#!/usr/bin/env python3
"""Thread scaling of batch encoding: how much faster N threads encode a batch than 1 thread.

    python tools/scale_threads.py --model o200k_base --threads 1,2,4,8,16
    python tools/scale_threads.py --model o200k_base --workload docs --batch 64 --threads 1,2,16 --trace

Each thread count runs in a fresh process: load the model, warm up with the same thread count on the second
half of the corpus, then time (wall clock) each batch call over the first half, text the process has not
seen (cold), and a second pass over it (warm).  `lines`: non-empty lines, `--batch` per call (default 1024);
`docs`: ~8 KB documents, `--batch` per call (default 64).  `--no-memo` turns fstok's piece cache off (every
piece merged from its bytes: the scaling of the encoder alone).  "cold CPU ns/byte" is the process's CPU time
(every thread, spinning included) of the cold pass per byte: where it grows with threads, the threads do more work
than one thread does (colder private caches, contention), not only wait.  `--trace` also sums FSTOK_TRACE_THREADS's
per-call breakdown (the GIL-held part: preparation, the result lists, clean-up; the workers' CPU).
The speed-up column is the median MB/s divided by 1 thread's (use --threads starting with 1); `--procs N` runs N
fresh processes per thread count and reports the medians (one pass over a few MB at 16 threads lasts milliseconds).
FSTOK_SHARED_CACHE=0 in the environment turns off the piece cache that a call's threads share (A/B)."""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_cold  # noqa: E402  (the corpus halves and document cutting of tools/bench cold)


def worker(model: str, workload: str, corpus: str, nt: int, batch: int, memo: bool, rounds: int, mb: float,
           numpy: bool = False) -> dict:
    import fstok

    if mb:
        bench_cold.TIMED_BYTES[workload] = int(mb * 1e6)
        bench_cold.WARM_BYTES = int(mb * 1e6 / 2)

    kind = bench_cold.MODELS.get(model, ("tiktoken",))[0]
    t = fstok.compile(bench_cold._hf_json(model)) if kind == "hfjson" else fstok.get_encoding(model)
    if not memo:
        if not hasattr(t, "_model") or not hasattr(t._model, "set_memo"):
            raise SystemExit(f"--no-memo: {model} has no piece cache to turn off")
        t._model.set_memo(False)
    enc = t.encode_batch if kind == "bert" else t.encode_ordinary_batch
    if numpy:
        enc = (t.encode_batch_to_numpy if kind == "bert" else
               lambda texts, num_threads: t.encode_batch_to_numpy(texts, num_threads=num_threads, disallowed_special=()))
    warm, timed = bench_cold.texts(workload, corpus)
    calls = [timed[i:i + batch] for i in range(0, len(timed), batch)]
    for i in range(0, len(warm), batch):
        enc(warm[i:i + batch], num_threads=nt)
    nbytes = sum(len(x.encode("utf-8")) for x in timed)
    out = {}
    for name in ["cold"] + ["warm"] * rounds:
        c0, t0 = time.process_time(), time.perf_counter()
        for c in calls:
            enc(c, num_threads=nt)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        out.setdefault(name, []).append(nbytes / dt / 1e6)
        out.setdefault(name + "_cpu", []).append(dc / nbytes * 1e9)  # ns of CPU (all threads) per byte
    out["bytes"] = nbytes
    out["calls"] = len(calls)
    return out


TRACE = re.compile(r"prep ([\d.]+) us .*?lists ([\d.]+), encode ([\d.]+), wait ([\d.]+) \| join ([\d.]+) \| tail ([\d.]+) "
                   r"\| cleanup ([\d.]+) \| total ([\d.]+) us .*?workers' CPU ([\d.]+) \| GIL held ([\d.]+)")


def run_one(a, nt: int) -> dict:
    env = dict(os.environ)
    if a.trace:
        env["FSTOK_TRACE_THREADS"] = "1"
    cmd = [sys.executable, __file__, "--worker", json.dumps([a.model, a.workload, a.corpus, nt, a.batch, not a.no_memo, a.rounds, a.mb, a.numpy])]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if a.trace:
        rows = [tuple(map(float, m.groups())) for m in map(TRACE.search, p.stderr.splitlines()) if m]
        rows = rows[-res["calls"] * (1 + a.rounds):]  # the timed calls
        if rows:
            res["gil_us"] = statistics.median(r[9] for r in rows)
            res["workers_us"] = statistics.median(r[8] for r in rows)
            res["caller_lists_us"] = statistics.median(r[1] for r in rows)
            res["tail_us"] = statistics.median(r[5] for r in rows)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="o200k_base")
    ap.add_argument("--workload", default="lines", choices=["lines", "docs"])
    ap.add_argument("--corpus", default="english")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--batch", type=int, default=0, help="texts per call (default: 1024 lines, 64 documents)")
    ap.add_argument("--rounds", type=int, default=2, help="warm passes after the cold one")
    ap.add_argument("--procs", type=int, default=1, help="fresh processes per thread count (medians over them)")
    ap.add_argument("--no-memo", action="store_true")
    ap.add_argument("--mb", type=float, default=0, help="MB of timed text (default: tools/bench cold's; the warm-up is half)")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--numpy", action="store_true", help="encode_batch_to_numpy: no Python list per text")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(*json.loads(a.worker))))
        return 0
    a.batch = a.batch or (1024 if a.workload == "lines" else 64)
    print(f"model {a.model}, {a.workload} of {a.corpus} ({a.mb or 'default'} MB), {a.batch} per call, memo {'off' if a.no_memo else 'on'}, "
          f"{'numpy' if a.numpy else 'list'} output, "
          f"{os.cpu_count()} CPUs")
    print("| threads | cold MB/s | speed-up | warm MB/s | speed-up | cold CPU ns/byte | GIL-held us/call | "
          "workers' CPU us/call |")
    print("|---|---|---|---|---|---|---|---|")
    base = None
    for nt in [int(x) for x in a.threads.split(",")]:
        runs = [run_one(a, nt) for _ in range(a.procs)]
        r = runs[-1]
        cold = statistics.median(x["cold"][0] for x in runs)
        warm = statistics.median(statistics.median(x["warm"]) for x in runs)
        cold_cpu = statistics.median(x["cold_cpu"][0] for x in runs)
        base = base or (cold, warm)
        print(f"| {nt} | {cold:.1f} | {cold / base[0]:.2f}x | {warm:.1f} | {warm / base[1]:.2f}x | {cold_cpu:.1f} | "
              f"{r.get('gil_us', float('nan')):.0f} | {r.get('workers_us', float('nan')):.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
