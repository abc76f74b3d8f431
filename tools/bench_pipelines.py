#!/usr/bin/env python3
"""tokenizer.json pipelines and tekken, cold one pass: fstok vs HF tokenizers, tokie, kitoken, fastokens,
gigatoken (and mistral-common for tekken), each where it loads the file.

    tools/bench pipelines                                       # every file, docs of english + multilingual
    tools/bench pipelines --models falcon,clip --corpora english --rounds 3

The method is tools/bench cold's (bench_cold.py): each (peer, cell) in a fresh process; load, warm up on the
second half of the corpus, time ONE pass over ~8 KB documents from the first half (cold), then a second pass
over the same documents (warm); rounds interleaved, medians with the range.  Ids are digested: a peer whose
ids differ from the reference (HF tokenizers, add_special_tokens=False; mistral-common for tekken) is marked
`≠`.  MB/s counts UTF-8 bytes of input.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_cold as C  # noqa: E402  (texts, digests, versions: one method for every cold benchmark)

M = os.path.join(C.VOCAB, "models")
FILES = {
    "falcon-7b": os.path.join(M, "bytelevel-bpe/falcon-7b/tokenizer.json"),
    "roberta-base": os.path.join(M, "bytelevel-bpe/roberta-base/tokenizer.json"),
    "clip": os.path.join(M, "charbpe/clip-vit-base-patch32/tokenizer.json"),
    "olmo-2": os.path.join(M, "bytelevel-bpe/olmo-2/allenai_dolma2.json"),
    "whisper-large-v3": os.path.join(M, "bytelevel-bpe/whisper-large-v3/tokenizer.json"),
    "tekken": os.path.join(M, "tekken/mistral-nemo/tekken_240718.json"),
}
PEERS = ["fstok", "hf", "tokie", "kitoken", "fastokens", "gigatoken", "mistral-common"]


def _loader(peer: str, model: str):
    """An encode function (text -> ids) for the peer, or raise NotImplementedError / ImportError."""
    path = FILES[model]
    tekken = model == "tekken"
    if peer == "fstok":
        import fstok

        t = fstok.compile(path)
        if hasattr(t, "encode_ordinary"):  # a BPETokenizer: the file's added tokens are matched as HF matches them
            return lambda d: t.encode(d, allowed_special="all")
        return t.encode
    if peer == "mistral-common":
        if not tekken:
            raise NotImplementedError
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        t = Tekkenizer.from_file(path)
        return lambda d: t.encode(d, bos=False, eos=False)
    if peer == "hf":
        if tekken:
            raise NotImplementedError
        from tokenizers import Tokenizer

        t = Tokenizer.from_file(path)
        return lambda d: t.encode(d, add_special_tokens=False).ids
    if peer == "tokie":
        import tokie

        t = tokie.Tokenizer.from_json(path)
        for m in ("no_truncation", "no_padding"):
            if hasattr(t, m):
                getattr(t, m)()
        return lambda d: t.encode(d, add_special_tokens=False).ids
    if peer == "kitoken":
        import kitoken

        t = kitoken.Kitoken.from_tekken_file(path) if tekken else kitoken.Kitoken.from_tokenizers_file(path)
        return lambda d: list(t.encode(d, True))
    if peer == "fastokens":
        import fastokens

        t = fastokens.Tokenizer.from_file(path)

        def f(d):
            e = t.encode(d, add_special_tokens=False)
            return e.ids if hasattr(e, "ids") else e
        return f
    if peer == "gigatoken":
        import gigatoken

        t = gigatoken.Tokenizer(path)
        return t.encode
    raise KeyError(peer)


def worker(peer: str, model: str, corpus: str, clock: str = "wall") -> dict:
    try:
        t0 = time.perf_counter()
        enc = _loader(peer, model)
        load_s = time.perf_counter() - t0
    except NotImplementedError:
        return {"skip": "not this format"}
    except ImportError as e:
        return {"skip": f"not installed ({e.name})"}
    except BaseException as e:  # a peer that refuses the file
        return {"skip": f"does not load it ({type(e).__name__}: {str(e)[:80]})"}
    warm, timed = C.texts("docs", corpus)
    try:
        for d in warm:
            enc(d)
    except BaseException as e:
        return {"skip": f"fails on the text ({type(e).__name__}: {str(e)[:80]})"}
    nbytes = sum(len(t.encode("utf-8")) for t in timed)
    now = time.process_time if clock == "cpu" else time.perf_counter
    t0 = now()
    ids = [enc(d) for d in timed]
    cold = now() - t0
    t0 = now()
    ids2 = [enc(d) for d in timed]
    warm_s = now() - t0
    d = C._digest(ids)
    return {"cold_mbps": nbytes / cold / 1e6, "warm_mbps": nbytes / warm_s / 1e6, "digest": d,
            "stable": d == C._digest(ids2), "bytes": nbytes, "load_s": load_s}


def _run(peer: str, model: str, corpus: str, timeout: int, clock: str = "wall") -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS="1", RAYON_RS_NUM_CPUS="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", peer, model, corpus, "--clock", clock]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=C.ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/bench pipelines", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--models", default=",".join(FILES))
    ap.add_argument("--corpora", default="english,multilingual")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time passes by the wall clock (default) or by the process's CPU time (a shared host)")
    ap.add_argument("--out", help="write the report (markdown) and raw results (JSON) to this folder")
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(*a.worker, a.clock)))
        return 0
    cells = [(m, c) for m in a.models.split(",") for c in a.corpora.split(",")]
    for m, _ in cells:
        if m not in FILES:
            raise SystemExit(f"unknown model {m!r}; known: {', '.join(FILES)}")
    peers = a.peers.split(",")
    t0 = time.time()
    results = C.run_rounds(cells, peers, a.rounds, lambda peer, cell: _run(peer, *cell, a.timeout, a.clock))
    lines = report(results, cells, peers, a, time.time() - t0)
    print("\n".join(lines))
    C.save_report(a.out, "pipelines", lines, results)
    return 0


def report(results, cells, peers, a, elapsed) -> list[str]:
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    out = [
        "# tokenizer.json pipelines and tekken, cold one pass",
        "",
        f"Command: `tools/bench pipelines --models {a.models} --corpora {a.corpora} --rounds {a.rounds} "
        f"--peers {a.peers}" + (" --clock cpu" if a.clock == "cpu" else "") + "`",
        f"Machine: {C._cpu()}, {os.cpu_count()} CPUs (load {load:.1f} at the end), Python "
        f"{platform.python_version()}; versions: {', '.join(f'{k} {v}' for k, v in C._versions().items())}; "
        f"run took {elapsed / 60:.1f} min.",
        "",
        "MB/s of UTF-8, median of the rounds (range). Cold: one pass over ~8 KB documents the process has not",
        "seen, after a warm-up on other text, 1 thread. ×N: fstok's cold median over the peer's (above 1: fstok",
        "is faster). `≠`: ids differ from the reference (HF tokenizers; mistral-common for tekken).",
        "",
        "| file | corpus | " + " | ".join(peers) + " | fstok warm |",
        "|---|---|" + "---|" * len(peers) + "---|",
    ]
    for cell in cells:
        row = results.get(cell, {})
        ref = "mistral-common" if cell[0] == "tekken" else "hf"
        txt, _ = C.peer_cells(row, peers, ref, 2)
        fw = [x["warm_mbps"] for x in row.get("fstok", []) if "warm_mbps" in x]
        out.append(f"| {cell[0]} | {cell[1]} | " + " | ".join(txt) + f" | {statistics.median(fw):.2f} |" if fw else
                   f"| {cell[0]} | {cell[1]} | " + " | ".join(txt) + " | – |")
    out.append("")
    out.append("– : the peer does not load the file (or is not installed); see the raw JSON for the reason.")
    return out


if __name__ == "__main__":
    sys.exit(main())
