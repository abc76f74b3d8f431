#!/usr/bin/env python3
"""Pre-tokenization benchmark: fstok's compiled DFA spanner vs the `regex` module, one thread.

    tools/bench pretokenize                     # cl100k_base and o200k_base on english, multilingual, code
    tools/bench pretokenize --patterns r50k_base,o200k_base,hf-llama3 --corpora english --repeats 5
    tools/bench pretokenize --lines             # also per-line calls (Python call overhead included)
    tools/bench pretokenize --no-bpe            # skip the whole-pipeline rows (BPE encode)
    tools/bench pretokenize --clock cpu         # thread CPU time instead of wall time (a loaded machine)

Rows (MB/s of UTF-8 input, best of --repeats, whole corpus file as one text):
  fstok core        C spanner only: all piece boundaries into a C buffer (what BPE calls from C)
  fstok byte_spans  the same, returned as a numpy [k, 2] array of byte offsets
  fstok spans       the public API: list of (start, end) character-offset tuples
  regex finditer    the `regex` module on the original pattern: list of m.span() (same output)
  tiktoken encode / fstok BPE encode   the whole pipeline (regex + BPE), when available
All fstok rows are checked to give exactly the regex module's spans before timing.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
CORPUS = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus"))
VOCAB = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "vocab"))


CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = time.perf_counter


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeats):
            t = _clock()
            fn()
            best = min(best, _clock() - t)
    finally:
        gc.enable()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patterns", default="cl100k_base,o200k_base")
    ap.add_argument("--corpora", default="english,multilingual,code")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--regex-repeats", type=int, default=2, help="repeats for the (slow) regex module rows")
    ap.add_argument("--lines", action="store_true", help="also time per-line calls")
    ap.add_argument("--no-bpe", action="store_true", help="skip the whole-pipeline BPE rows")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: elapsed time (default); cpu: this thread's CPU time, steadier when other processes "
                         "share the cores (every row is single-threaded, so both measure the same work)")
    args = ap.parse_args()
    global _clock
    _clock = CLOCK[args.clock]

    import numpy as np
    import regex

    from fstok.pretokenize import NAMED_PATTERNS, get_pattern

    print(f"# tools/bench pretokenize  ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, regex {regex.__version__}; one thread; {args.clock} clock)")
    try:
        load = os.getloadavg()[0]
        print(f"# load average {load:.2f} (other processes share the cores: absolute MB/s drift, ratios hold)")
    except OSError:
        pass
    rows = []
    for name in args.patterns.split(","):
        t0 = time.perf_counter()
        cp = get_pattern(name)
        compile_s = time.perf_counter() - t0
        spec = NAMED_PATTERNS[name]
        rx = regex.compile(spec.levels[0][0])
        enc_tk = enc_fs = None
        if not args.no_bpe and name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base"):
            try:
                import tiktoken
                from tiktoken.load import load_tiktoken_bpe

                ranks = load_tiktoken_bpe(os.path.join(VOCAB, "tiktoken", f"{name}.tiktoken"))
                enc_tk = tiktoken.Encoding(name, pat_str=spec.levels[0][0], mergeable_ranks=ranks, special_tokens={})
            except Exception as e:  # noqa: BLE001
                print(f"# tiktoken unavailable: {e}")
            try:
                import fstok

                enc_fs = fstok.get_encoding(name)
            except Exception as e:  # noqa: BLE001
                print(f"# fstok BPE unavailable: {e}")
        print(f"# {name}: {cp!r}, ready in {compile_s:.2f}s (compile or cache load)")
        for corpus in args.corpora.split(","):
            with open(os.path.join(CORPUS, f"{corpus}.txt"), encoding="utf-8", newline="") as f:
                text = f.read()
            data = text.encode("utf-8")
            mb = len(data) / 1e6
            want = [m.span() for m in rx.finditer(text)] if spec.mode == "find" else None
            got = cp.spans(text)
            if want is not None and got != want:
                sys.exit(f"MISMATCH on {name}/{corpus}: fstok spans differ from the regex module")
            sp = cp.spanner
            r = {"pattern": name, "corpus": corpus, "MB": mb, "pieces": len(got)}
            r["fstok core"] = mb / best_time(lambda: sp.count(data), args.repeats)
            r["fstok byte_spans"] = mb / best_time(lambda: cp.byte_spans(data), args.repeats)
            r["fstok spans"] = mb / best_time(lambda: cp.spans(text), args.repeats)
            if spec.mode == "find":
                r["regex finditer"] = mb / best_time(lambda: [m.span() for m in rx.finditer(text)], args.regex_repeats)
            if args.lines:
                lines = text.split("\n")
                r["fstok spans/line"] = mb / best_time(lambda: [cp.spans(x) for x in lines], max(1, args.repeats // 2))
                r["regex finditer/line"] = mb / best_time(
                    lambda: [[m.span() for m in rx.finditer(x)] for x in lines], 1)
            if enc_tk is not None:
                r["tiktoken encode"] = mb / best_time(lambda: enc_tk.encode_ordinary(text), args.regex_repeats)
            if enc_fs is not None:
                try:
                    r["fstok BPE encode"] = mb / best_time(lambda: enc_fs.encode_ordinary(text), args.regex_repeats)
                except Exception as e:  # noqa: BLE001
                    print(f"# fstok BPE encode failed: {e}")
            rows.append(r)
            print(f"  {name:12s} {corpus:13s} " + "  ".join(
                f"{k} {v:7.1f}" for k, v in r.items() if isinstance(v, float) and k != "MB"), flush=True)
    cols = []
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and k != "MB" and k not in cols:
                cols.append(k)
    print()
    print("| pattern | corpus | MB | pieces | " + " | ".join(cols) + " | core / regex |")
    print("|---|---|---:|---:|" + "---:|" * len(cols) + "---:|")
    for r in rows:
        ratio = r["fstok core"] / r["regex finditer"] if "regex finditer" in r else float("nan")
        print(f"| {r['pattern']} | {r['corpus']} | {r['MB']:.2f} | {r['pieces']:,} | "
              + " | ".join(f"{r[c]:.1f}" if c in r else "-" for c in cols) + f" | {ratio:.0f}x |")
    print(f"\nMB/s of UTF-8 input, single thread, best of the repeats ({args.clock} clock); 'fstok core' is the C "
          "spanner alone.")
    del np


if __name__ == "__main__":
    main()
