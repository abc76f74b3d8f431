#!/usr/bin/env python3
"""Cold one-pass benchmark: the speed of tokenizing text the process has never seen.

    tools/bench cold                                   # the default cells, every installed peer
    tools/bench cold --models o200k_base --workloads docs --corpora english,multilingual --rounds 3
    tools/bench cold --list                            # models, workloads, peers

Quick runs (one cell set, a minute or two): name one model, one workload, one corpus, the peers to compare and one
round, e.g.
    tools/bench cold --models llama3 --workloads docs --corpora multilingual --peers fstok,fastokens,gigatoken --rounds 1
    tools/bench cold --models o200k_base --workloads lines --corpora english --threads 1,2,16 --peers fstok,fastokens
Each (peer, cell) costs one process start plus its model load (1-10 s) and about a second of text.  On a host
shared with other work, `--clock cpu` times each pass by the process's CPU time instead of the wall clock (1-thread
cells only: with several threads CPU time adds up over the threads); a quiet machine reports the wall clock.

How a cell is measured (one cell = model x workload x corpus x threads):
  * every (peer, cell) runs in a fresh process, so no cache survives from an earlier cell;
  * the process loads the model, warms up on *other* text of the same corpus (the second half of the
    corpus), then times ONE pass over the timed text (the first half): that is the cold figure;
  * a second pass over the same timed text in the same process is the warm figure, reported beside it
    (peers that cache pieces -- fstok, fastokens, gigatoken -- are much faster there);
  * rounds are interleaved (round 1 of every peer, then round 2, ...) and the median and the range of the
    rounds are reported;
  * every pass digests the ids it produced; a peer whose ids differ from the reference's (tiktoken for the
    OpenAI encodings, HF tokenizers for tokenizer.json and BERT) is marked "not exact".

Workloads: `docs` (documents of ~8 KB, one encode call each), `lines` (short lines, 1024 per batch call,
1 and 2 threads), `long` (one document of ~1 MB). MB/s counts UTF-8 bytes of input.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = next((c for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"),
                           "/work/shared/data") if c and os.path.isdir(os.path.join(c, "corpus"))), "../shared/data")
VOCAB = os.path.join(SHARED, "vocab")

# model -> (kind, reference peer, source used by the peers)
MODELS = {
    "o200k_base": ("tiktoken", "tiktoken"),
    "cl100k_base": ("tiktoken", "tiktoken"),
    "llama3": ("hfjson", "hf"),
    "bert-base-uncased": ("bert", "hf"),
}
PEERS = ["fstok", "tiktoken", "fastokens", "gigatoken", "tokie", "hf"]
DEFAULT = {"models": "o200k_base,cl100k_base,llama3,bert-base-uncased", "workloads": "docs,lines,long",
           "corpora": "english,multilingual,code"}
DOC_BYTES = 8192
TIMED_BYTES = {"docs": 600_000, "lines": 400_000, "long": 1_000_000}
WARM_BYTES = 200_000


# ----------------------------------------------------------------------------------------------- texts
def _corpus(name: str) -> str:
    with open(os.path.join(SHARED, "corpus", f"{name}.txt"), encoding="utf-8", newline="") as f:
        return f.read()


def _take_lines(lines: list[str], budget: int) -> list[str]:
    out, n = [], 0
    for ln in lines:
        if not ln.strip():
            continue
        out.append(ln)
        n += len(ln.encode("utf-8"))
        if n >= budget:
            break
    return out


def _docs(lines: list[str], budget: int) -> list[str]:
    docs, cur, n, total = [], [], 0, 0
    for ln in lines:
        cur.append(ln)
        n += len(ln.encode("utf-8")) + 1
        if n >= DOC_BYTES:
            docs.append("\n".join(cur) + "\n")
            total += n
            cur, n = [], 0
            if total >= budget:
                break
    return docs


def texts(workload: str, corpus: str) -> tuple[list[str], list[str]]:
    """(warm-up units, timed units): disjoint halves of the corpus, so the timed text is unseen."""
    lines = _corpus(corpus).split("\n")
    half = len(lines) // 2
    timed_src, warm_src = lines[:half], lines[half:]
    if workload == "lines":
        return _take_lines(warm_src, WARM_BYTES), _take_lines(timed_src, TIMED_BYTES["lines"])
    if workload == "docs":
        return _docs(warm_src, WARM_BYTES), _docs(timed_src, TIMED_BYTES["docs"])
    if workload == "long":
        timed = "\n".join(timed_src)
        b = timed.encode("utf-8")[: TIMED_BYTES["long"]].decode("utf-8", "ignore")
        return ["\n".join(warm_src)[: WARM_BYTES]], [b]
    raise SystemExit(f"unknown workload {workload!r}")


# ----------------------------------------------------------------------------------------------- peers
def _tiktoken_file(model: str) -> str:
    return os.path.join(VOCAB, "tiktoken", f"{model}.tiktoken")


def _hf_json(model: str) -> str:
    """A tokenizer.json for the model; for a tiktoken encoding, the equivalent one tools/bench bpe derives."""
    if MODELS[model][0] == "tiktoken":
        sys.path.insert(0, HERE)
        import bench_bpe

        bench_bpe.VOCAB = VOCAB
        return bench_bpe._hf_json_from_ranks(model)
    if model == "llama3":
        return os.path.join(VOCAB, "hf-derived", "llama3.tokenizer.json")
    if model == "bert-base-uncased":
        return os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")
    raise KeyError(model)


class Peer:
    """load() returns an object; docs() / lines() return a list of id sequences (lists or arrays)."""

    def __init__(self, model: str, threads: int):
        self.model, self.threads, self.kind = model, threads, MODELS[model][0]


class Fstok(Peer):
    def load(self):
        import fstok

        if self.kind == "hfjson":
            self.t = fstok.compile(_hf_json(self.model))
        else:
            self.t = fstok.get_encoding(self.model)

    def docs(self, docs):
        enc = self.t.encode_ordinary if hasattr(self.t, "encode_ordinary") and self.kind != "bert" else self.t.encode
        return [enc(d) for d in docs]

    def lines(self, lines):
        enc = self.t.encode_batch if self.kind == "bert" else self.t.encode_ordinary_batch
        out = []
        for i in range(0, len(lines), 1024):  # 1024 per call, as every peer
            out += enc(lines[i:i + 1024], num_threads=self.threads)
        return out


class Tiktoken(Peer):
    def load(self):
        if self.kind != "tiktoken":
            raise NotImplementedError
        sys.path.insert(0, HERE)
        import bench_bpe  # offline: tiktoken's own definition, read from the local rank file

        bench_bpe.VOCAB = VOCAB
        self.t = bench_bpe._tiktoken(self.model)

    def docs(self, docs):
        return [self.t.encode_ordinary(d) for d in docs]

    def lines(self, lines):
        return self.t.encode_ordinary_batch(lines, num_threads=self.threads)


class Fastokens(Peer):
    def load(self):
        import fastokens

        if self.kind == "tiktoken":
            self.t = fastokens.Tokenizer.from_tiktoken(_tiktoken_file(self.model), encoding=self.model)
        elif self.kind == "hfjson":
            self.t = fastokens.Tokenizer.from_file(_hf_json(self.model))
        else:
            raise NotImplementedError

    @staticmethod
    def _ids(e):
        return e.ids if hasattr(e, "ids") else e

    def docs(self, docs):
        return [self._ids(self.t.encode(d, add_special_tokens=False, split_special_tokens=True)) for d in docs]

    def lines(self, lines):
        out = []
        for i in range(0, len(lines), 1024):
            out += [self._ids(e) for e in self.t.encode_batch(lines[i:i + 1024], add_special_tokens=False,
                                                              split_special_tokens=True)]
        return out


class Gigatoken(Peer):
    def load(self):
        import gigatoken

        if self.kind == "tiktoken":
            self.t = gigatoken.Tokenizer.from_tiktoken(_tiktoken_file(self.model))
        elif self.kind == "hfjson":
            self.t = gigatoken.Tokenizer(_hf_json(self.model))
        else:
            raise NotImplementedError

    def docs(self, docs):
        return [self.t.encode(d) for d in docs]

    def lines(self, lines):
        out = []
        for i in range(0, len(lines), 1024):
            out += self.t.encode_batch_list(lines[i:i + 1024], parallel=self.threads > 1)
        return out


class Tokie(Peer):
    def load(self):
        import tokie

        self.t = tokie.Tokenizer.from_json(_hf_json(self.model))
        for m in ("no_truncation", "no_padding"):
            if hasattr(self.t, m):
                getattr(self.t, m)()

    def docs(self, docs):
        return [self.t.encode(d, add_special_tokens=False).ids for d in docs]

    def lines(self, lines):
        out = []
        for i in range(0, len(lines), 1024):
            out += [e.ids for e in self.t.encode_batch(lines[i:i + 1024], add_special_tokens=False)]
        return out


class HF(Peer):
    def load(self):
        from tokenizers import Tokenizer

        self.t = Tokenizer.from_file(_hf_json(self.model))
        self.t.no_truncation()
        self.t.no_padding()

    def docs(self, docs):
        return [self.t.encode(d, add_special_tokens=False).ids for d in docs]

    def lines(self, lines):
        out = []
        for i in range(0, len(lines), 1024):
            out += [e.ids for e in self.t.encode_batch(lines[i:i + 1024], add_special_tokens=False)]
        return out


PEER_CLASSES = {"fstok": Fstok, "tiktoken": Tiktoken, "fastokens": Fastokens, "gigatoken": Gigatoken,
                "tokie": Tokie, "hf": HF}


def _digest(seqs) -> str:
    import numpy as np

    h = hashlib.sha1()
    for s in seqs:
        a = np.asarray(s, dtype=np.int64)
        h.update(len(a).to_bytes(8, "little"))
        h.update(a.tobytes())
    return h.hexdigest()


def worker(peer: str, model: str, workload: str, corpus: str, threads: int, clock: str = "wall") -> dict:
    p = PEER_CLASSES[peer](model, threads)
    try:
        t0 = time.perf_counter()
        p.load()
        load_s = time.perf_counter() - t0
    except NotImplementedError:
        return {"skip": "does not load this model"}
    except ImportError as e:
        return {"skip": f"not installed ({e.name})"}
    warm, timed = texts(workload, corpus)
    run = p.lines if workload == "lines" else p.docs
    run(warm)  # warm-up on other text
    nbytes = sum(len(t.encode("utf-8")) for t in timed)
    now = time.process_time if clock == "cpu" else time.perf_counter
    t0 = now()
    ids = run(timed)
    cold = now() - t0
    t0 = now()
    ids2 = run(timed)
    warm_s = now() - t0
    d = _digest(ids)
    return {"cold_mbps": nbytes / cold / 1e6, "warm_mbps": nbytes / warm_s / 1e6, "digest": d,
            "stable": d == _digest(ids2), "bytes": nbytes, "load_s": load_s,
            "tokens": int(sum(len(x) for x in ids))}


def _run_worker(peer, model, workload, corpus, threads, timeout, clock="wall") -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), RAYON_RS_NUM_CPUS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false", OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", peer, model, workload, corpus, str(threads),
           "--clock", clock]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("fstok", "tiktoken", "tokenizers", "fastokens", "gigatoken", "tokie", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _cpu() -> str:
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/bench cold", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=5, metavar=("PEER", "MODEL", "WORKLOAD", "CORPUS", "THREADS"), help=argparse.SUPPRESS)
    ap.add_argument("--models", default=DEFAULT["models"])
    ap.add_argument("--workloads", default=DEFAULT["workloads"])
    ap.add_argument("--corpora", default=DEFAULT["corpora"])
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--threads", default="1", help="comma-separated thread counts for the lines workload")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per worker process")
    ap.add_argument("--out", help="write the report (markdown) and raw results (JSON) to this folder")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time passes by the wall clock (default) or by the process's CPU time (a shared host)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.worker:
        peer, model, workload, corpus, threads = a.worker
        print(json.dumps(worker(peer, model, workload, corpus, int(threads), a.clock)))
        return 0
    if a.list:
        print("models:", ", ".join(MODELS), "\nworkloads: docs, lines, long\npeers:", ", ".join(PEERS))
        return 0
    cells = []
    for model in a.models.split(","):
        if model not in MODELS:
            raise SystemExit(f"unknown model {model!r}; known: {', '.join(MODELS)}")
        for wl in a.workloads.split(","):
            for corpus in a.corpora.split(","):
                for th in ([int(x) for x in a.threads.split(",")] if wl == "lines" else [1]):
                    cells.append((model, wl, corpus, th))
    peers = a.peers.split(",")
    t_start = time.time()
    results = run_rounds(cells, peers, a.rounds,
                         lambda peer, cell: _run_worker(peer, *cell, timeout=a.timeout, clock=a.clock))
    lines = _report(results, cells, peers, a, time.time() - t_start)
    print("\n".join(lines))
    save_report(a.out, "cold", lines, results)
    return 0


def _report(results, cells, peers, a, elapsed) -> list[str]:
    out = [
        "# Cold one-pass benchmark",
        "",
        f"Command: `tools/bench cold --models {a.models} --workloads {a.workloads} --corpora {a.corpora} "
        f"--threads {a.threads} --rounds {a.rounds} --peers {a.peers}" + (" --clock cpu" if a.clock == "cpu" else "") + "`",
        f"Machine: {_cpu()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"versions: {', '.join(f'{k} {v}' for k, v in _versions().items())}; run took {elapsed / 60:.1f} min.",
        "",
        "MB/s of UTF-8 input, median of the rounds (range in brackets). Cold: one pass over text the process has",
        "not seen, after a warm-up on other text. Warm: a second pass over the same text. Ratio: fstok's cold",
        "speed over the peer's. `≠` marks a peer whose ids differ from the reference.",
        "",
        "| model | workload | corpus | threads | " + " | ".join(peers) + " | fstok warm | best peer warm |",
        "|---|---|---|---|" + "---|" * len(peers) + "---|---|",
    ]
    for cell in cells:
        model, wl, corpus, th = cell
        ref = MODELS[model][1]
        row = results.get(cell, {})
        cells_txt, med = peer_cells(row, peers, ref, 1)
        fw = f"{med['fstok'][1]:.1f}" if "fstok" in med else "–"
        others = {p: v[1] for p, v in med.items() if p != "fstok"}
        bw = max(others.items(), key=lambda kv: kv[1]) if others else None
        out.append(f"| {model} | {wl} | {corpus} | {th} | " + " | ".join(cells_txt) +
                   f" | {fw} | {f'{bw[1]:.1f} ({bw[0]})' if bw else '–'} |")
    out.append("")
    out.append("×N after a peer's figure: fstok's cold median divided by the peer's (above 1: fstok is faster).")
    return out


# ---------------------------------------------------------------------------------------------- shared by the cold benchmarks
def run_rounds(cells, peers, rounds: int, run_one) -> dict:
    """{cell: {peer: [result per round]}}: rounds interleaved (round r of every cell and peer before round r + 1),
    each result from run_one(peer, cell); a peer that skips a cell in round 1 is not asked again."""
    results: dict = {}
    for r in range(rounds):
        for cell in cells:
            for peer in peers:
                if r and any("skip" in x for x in results.get(cell, {}).get(peer, [])):
                    continue
                res = run_one(peer, cell)
                results.setdefault(cell, {}).setdefault(peer, []).append(res)
                msg = res.get("error") or res.get("skip") or f"cold {res['cold_mbps']:.1f} MB/s, warm {res['warm_mbps']:.1f}"
                print(f"round {r + 1} {'/'.join(map(str, cell)):<40} {peer:<14} {msg}", file=sys.stderr, flush=True)
    return results


def peer_cells(row: dict, peers, ref: str, digits: int) -> tuple[list[str], dict]:
    """One report row's peer cells -- cold median (range), `≠` where the ids differ from `ref`'s, ×(fstok ÷ peer) --
    and {peer: (cold median, warm median)}."""
    ref_digest = next((x["digest"] for x in row.get(ref, []) if "digest" in x), None)
    med: dict = {}
    txt = []
    for peer in peers:
        runs = [x for x in row.get(peer, []) if "cold_mbps" in x]
        if not runs:
            first = (row.get(peer) or [{}])[0]
            txt.append("–" if "skip" in first else f"error: {first.get('error', '?')[:40]}")
            continue
        cs = [x["cold_mbps"] for x in runs]
        med[peer] = (statistics.median(cs), statistics.median([x["warm_mbps"] for x in runs]))
        exact = ref_digest is None or all(x["digest"] == ref_digest for x in runs)
        t = f"{med[peer][0]:.{digits}f} ({min(cs):.{max(digits - 1, 0)}f}–{max(cs):.{max(digits - 1, 0)}f})" + ("" if exact else " ≠")
        if peer != "fstok" and "fstok" in med:
            t += f" ×{med['fstok'][0] / med[peer][0]:.2f}"
        txt.append(t)
    return txt, med


def save_report(out: str | None, stem: str, lines: list[str], results: dict) -> None:
    """The report as OUT/stem.md and the raw results as OUT/stem.json."""
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{stem}.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, f"{stem}.json"), "w", encoding="utf-8") as f:
        json.dump({"/".join(map(str, k)): v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
