"""``fstok.dataset.tokenize``: plan the shards, run the pending ones on an engine, write the manifest."""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
from typing import Any, Optional

from . import readers
from .encode import special_kwargs
from .plan import plan_shards
from .readers import InputError
from .shards import FORMATS, MANIFEST, atomic_write_json, data_ext, shard_name, token_dtype
from .worker import done_path, process_shard, remember_tokenizer, run_job

ARTIFACT = "tokenizer.fst"
MANIFEST_VERSION = 1
DEFAULT_SHARD_SIZE = 256 << 20


def parse_size(s) -> int:
    """'256MB', '1GiB', '64k', 1000 -> bytes (k/M/G/T are powers of 1024)."""
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(s))
    if not m:
        raise ValueError(f"bad size {s!r} (examples: 256MB, 1GB, 500k)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def _resolve_tokenizer(model):
    import fstok

    if isinstance(model, (str, os.PathLike)):
        p = os.fspath(model)
        if os.path.exists(p):
            with open(p, "rb") as f:
                magic = f.read(8)
            return fstok.load(p) if magic == b"FSTOKART" else fstok.compile(p)
        return fstok.get_encoding(p)
    if hasattr(model, "to_bytes") and hasattr(model, "encode"):
        return model
    raise TypeError(f"model must be an encoding name, a path or an fstok tokenizer, got {type(model).__name__}")


def _save_artifact(tok, out: str) -> tuple[str, str]:
    """Write the tokenizer's artifact to ``out/tokenizer.fst`` (kept when it is already that artifact;
    a hard link to the file the tokenizer was loaded from when possible)."""
    from .shards import file_sha256

    art = getattr(tok, "_art", None)
    sha = getattr(tok, "_fstok_artifact_sha256", None)
    buf = memoryview(art.buffer) if art is not None else memoryview(tok.to_bytes())  # no copy of an mmap
    if sha is None:
        sha = hashlib.sha256(buf).hexdigest()
        try:
            tok._fstok_artifact_sha256 = sha
        except AttributeError:  # pragma: no cover
            pass
    path = os.path.join(out, ARTIFACT)
    if os.path.exists(path) and os.path.getsize(path) == len(buf) and file_sha256(path) == sha:
        return path, sha
    tmp = f"{path}.tmp-{os.getpid()}"
    src = getattr(art, "path", None)
    try:
        if not src or os.path.getsize(src) != len(buf):
            raise OSError
        os.link(src, tmp)  # the loaded artifact file itself (artifacts are never modified in place)
    except OSError:
        with open(tmp, "wb") as f:
            f.write(buf)
    os.replace(tmp, path)
    return path, sha


def _eot_id(tok, append_eot: bool, eot_token: Optional[str]) -> Optional[int]:
    if not append_eot and eot_token is None:
        return None
    name = eot_token or "<|endoftext|>"
    sp = getattr(tok, "special_tokens", None)
    if isinstance(sp, dict):
        if name in sp:
            return int(sp[name])
    elif sp is not None:
        if name in sp:
            return int(tok.token_to_id(name))
    elif tok.token_to_id(name) is not None:
        return int(tok.token_to_id(name))
    known = ", ".join(sorted(sp or ())[:12]) or "none"
    if eot_token is None:
        raise ValueError(f"this tokenizer has no {name} token; name the end-of-document token with --eot-token / "
                         f"eot_token= (special tokens: {known})")
    raise ValueError(f"{name!r} is not a special token of this tokenizer (special tokens: {known})")


def _json_special(v):
    if v is None or v == "all":
        return v
    return sorted(v)


class _Bar:
    """tqdm on stderr: input MB/s, tokens/s, ETA; nothing when quiet or stderr is not a terminal."""

    def __init__(self, total: int, done: int, quiet: Optional[bool]):
        self.bar = None
        self.tokens = 0
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        if quiet is None:
            quiet = not sys.stderr.isatty()
        if quiet:
            return
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            return
        self.bar = tqdm(total=total, initial=done, unit="B", unit_scale=True, unit_divisor=1000, file=sys.stderr,
                        desc="tokenize", smoothing=0.1, dynamic_ncols=True)

    def update(self, nb: int, nt: int) -> None:
        with self.lock:
            self.tokens += nt
            if self.bar is not None:
                self.bar.update(nb)
                dt = max(time.monotonic() - self.t0, 1e-9)
                self.bar.set_postfix_str(f"{self.tokens / dt / 1e6:.2f}M tok/s", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def tokenize(inputs, model, out, *, format: str = "bin", input_format: Optional[str] = None,  # noqa: A002
             text_field: str = "text", split: str = "whole", delimiter: Optional[str] = None,
             keep_delimiter: bool = False, append_eot: bool = False, eot_token: Optional[str] = None,
             allowed_special=None, disallowed_special=None, shard_size=DEFAULT_SHARD_SIZE, workers: int = 1,
             engine: str = "local", address: Optional[str] = None, client: Any = None, skip_bad: bool = False,
             quiet: Optional[bool] = None) -> dict:
    """Tokenize files into training shards under ``out``; returns the manifest (also ``out/manifest.json``).

    inputs: paths, globs, directories (files sorted by name).  input_format: "text", "jsonl", "parquet"
    (default: by extension, ``.gz`` / ``.zst`` allowed).  text_field: the JSON field / Parquet column.
    split (text files): "whole" (a file is one document), "lines" (one per line, without its "\\n"), or
    "delimiter" (documents separated by ``delimiter``, which is not part of them unless
    ``keep_delimiter``).  format: "bin" (flat uint16/uint32 + Megatron .idx), "npy" or "parquet".
    allowed_special / disallowed_special: as ``tok.encode`` (None: the tokenizer's default).
    append_eot: add ``eot_token`` (default ``<|endoftext|>``) after every document.
    shard_size: input bytes per shard ("256MB").  workers / engine ("local", "dask", "ray") / address /
    client (a dask.distributed Client): where the shards run.  skip_bad: skip unreadable documents and
    count them in the manifest instead of stopping at the first."""
    t_start = time.monotonic()
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if split not in ("whole", "lines", "delimiter"):
        raise ValueError(f"split must be 'whole', 'lines' or 'delimiter', got {split!r}")
    if split == "delimiter" and not delimiter:
        raise ValueError("split='delimiter' needs a non-empty delimiter")
    if delimiter and split == "whole":
        split = "delimiter"
    if delimiter and split == "lines":
        raise ValueError("split='lines' and a delimiter exclude each other")
    if engine not in ("local", "dask", "ray"):
        raise ValueError(f"engine must be 'local', 'dask' or 'ray', got {engine!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    shard_bytes = parse_size(shard_size)
    out = os.path.abspath(os.fspath(out))
    tok = _resolve_tokenizer(model)
    special = special_kwargs(tok, allowed_special, disallowed_special)
    eot = _eot_id(tok, append_eot, eot_token)
    files = readers.expand_inputs(inputs)
    os.makedirs(out, exist_ok=True)
    art_path, art_sha = _save_artifact(tok, out)
    remember_tokenizer(art_sha, tok)
    n_vocab = int(getattr(tok, "n_vocab", 0) or tok.vocab_size)
    dtype = token_dtype(n_vocab)

    stats = [os.stat(p) for p in files]
    plan = plan_shards(files, shard_bytes, input_format=input_format, split=split,
                       delimiter=(delimiter or "\n").encode("utf-8"))
    options = {"format": format, "input_format": input_format, "text_field": text_field, "split": split,
               "delimiter": delimiter if split == "delimiter" else None, "keep_delimiter": keep_delimiter,
               "append_eot": eot is not None, "eot_id": eot,
               "allowed_special": _json_special(special.get("allowed_special")),
               "disallowed_special": _json_special(special.get("disallowed_special")),
               "shard_size": shard_bytes, "skip_bad": skip_bad}
    inputs_meta = [{"path": p, "size": st.st_size, "mtime_ns": st.st_mtime_ns} for p, st in zip(files, stats)]
    plan_key = json.dumps({"options": options, "inputs": inputs_meta, "tokenizer": art_sha,
                           "shards": [[s.to_json() for s in sh.segments] for sh in plan]}, sort_keys=True)
    plan_hash = hashlib.sha256(plan_key.encode()).hexdigest()

    _check_previous(out, plan_hash)
    _clean_temp(out)
    jobs, done = [], {}
    for sh in plan:
        rec = _load_done(out, sh.index, plan_hash, format)
        if rec is not None:
            done[sh.index] = rec
            continue
        jobs.append({"out": out, "index": sh.index, "segments": [s.to_json() for s in sh.segments],
                     "format": format, "dtype": dtype, "artifact": art_path, "artifact_sha256": art_sha, "special": special, "eot": eot,
                     "split": split, "delimiter": delimiter, "keep_delimiter": keep_delimiter, "field": text_field,
                     "skip_bad": skip_bad, "plan_hash": plan_hash})
    total = sum(sh.nbytes for sh in plan)
    # local worker processes start before any thread does (progress bar included), so they can be forked
    pool = _LocalPool(workers - 1) if engine == "local" and workers > 1 and len(jobs) > 1 else None
    bar = _Bar(total, total - sum(sum(s["nbytes"] for s in j["segments"]) for j in jobs), quiet)
    try:
        if jobs:
            results = _run_local(jobs, pool, bar) if engine == "local" else _run(jobs, engine, workers, address,
                                                                                  client, bar)
            for r in results:
                done[r["index"]] = r
    finally:
        bar.close()
        if pool is not None:
            pool.close()
    manifest = _manifest(out, plan, done, options, inputs_meta, tok, art_sha, n_vocab, dtype, format, plan_hash)
    atomic_write_json(os.path.join(out, MANIFEST), manifest)
    if quiet is False or (quiet is None and sys.stderr.isatty()):
        dt = time.monotonic() - t_start
        print(f"{manifest['documents']:,} documents, {manifest['tokens']:,} tokens in {len(plan)} shard(s) "
              f"({len(jobs)} written, {len(plan) - len(jobs)} already complete) in {dt:.1f}s -> {out}",
              file=sys.stderr)
    return manifest


def _check_previous(out: str, plan_hash: str) -> None:
    mpath = os.path.join(out, MANIFEST)
    if os.path.exists(mpath):
        try:
            with open(mpath, encoding="utf-8") as f:
                old = json.load(f).get("plan_hash")
        except (OSError, ValueError):
            old = None
        if old != plan_hash:
            raise ValueError(f"{out} holds shards made from other inputs or options (its manifest.json "
                             f"differs); choose another output directory or remove it")


def _clean_temp(out: str) -> None:
    """Temporary files a killed run left: shard data (".shard_*") and the atomic writes of shard records and
    the manifest ("shard_*.done.json.tmp-*", "manifest.json.tmp-*")."""
    for f in os.listdir(out):
        if ".tmp-" in f and f.startswith((".shard_", "shard_", "manifest.json")):
            try:
                os.unlink(os.path.join(out, f))
            except OSError:
                pass


def _load_done(out: str, index: int, plan_hash: str, fmt: str) -> Optional[dict]:
    p = done_path(out, index)
    if not os.path.exists(p):
        return None
    try:
        with open(p, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if rec.get("plan") != plan_hash:
        raise ValueError(f"{p}: a shard made from other inputs or options; choose another output directory "
                         f"or remove it")
    for info in rec["files"].values():
        fp = os.path.join(out, info["name"])
        if not os.path.exists(fp) or os.path.getsize(fp) != info["bytes"]:
            return None  # damaged since: write it again
    return rec


def _raise_errors(results: list) -> None:
    errs = [r for r in results if "error" in r]
    if errs:
        errs.sort(key=lambda r: r["index"])
        raise InputError(errs[0]["error"])


def _run(jobs: list, engine: str, workers: int, address, client, bar: _Bar) -> list:
    if engine == "dask":
        return _run_dask(jobs, workers, address, client, bar)
    return _run_ray(jobs, workers, address, bar)


class _LocalPool:
    """``n`` worker processes.  On Linux, forked when no other Python thread runs (they start at once and
    share the loaded tokenizer's pages; fstok's native threads live only inside a call, and idle BLAS
    pools handle fork themselves); spawned otherwise, since a fork can inherit a lock another thread holds."""

    def __init__(self, n: int):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from . import worker as wk

        fork = sys.platform.startswith("linux") and threading.active_count() == 1
        ctx = mp.get_context("fork" if fork else "spawn")
        self.n = n
        self.queue = ctx.Queue()
        self.ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=wk._init_local,
                                      initargs=(self.queue,))
        if fork:
            self.ex.submit(int).result()  # forks all n workers now, before any thread exists

    def close(self) -> None:
        self.ex.shutdown(wait=True, cancel_futures=True)
        self.queue.close()


def _run_local(jobs: list, pool: "Optional[_LocalPool]", bar: _Bar) -> list:
    """Shards on this process (a thread: the tokenizer is already loaded) and the pool's processes, each
    taking the next pending shard when it finishes one."""
    if pool is None:
        return [process_shard(j, bar.update) for j in jobs]
    import collections
    from concurrent.futures import FIRST_COMPLETED, wait

    from . import worker as wk

    q = pool.queue
    stop = threading.Event()
    todo = collections.deque(jobs)
    lock = threading.Lock()
    results: list = []
    failure: list = []

    def drain() -> None:
        import queue as _q

        while not stop.is_set():
            try:
                nb, nt = q.get(timeout=0.1)
            except _q.Empty:
                continue
            except (EOFError, OSError):
                return
            bar.update(nb, nt)

    def here() -> None:
        while True:
            with lock:
                if not todo or failure:
                    return
                j = todo.popleft()
            try:
                r = process_shard(j, bar.update)
            except BaseException as e:  # re-raised by the main thread
                with lock:
                    failure.append(e)
                return
            with lock:
                results.append(r)

    th = threading.Thread(target=drain, daemon=True)
    th.start()
    local = threading.Thread(target=here, daemon=True)
    local.start()
    try:
        ex, n = pool.ex, pool.n
        pending: set = set()
        while True:
            with lock:
                while todo and not failure and len(pending) < n:
                    pending.add(ex.submit(wk.run_job_local, todo.popleft()))
            if not pending:
                break
            fin, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in fin:
                r = f.result()
                with lock:
                    results.append(r)
                    if "error" in r:
                        todo.clear()
            if any("error" in r for r in results):
                for p in pending:
                    p.cancel()
                wait(pending)
                break
        local.join()
    finally:
        with lock:
            todo.clear()
        local.join()
        stop.set()
        th.join(timeout=2)
    if failure:
        raise failure[0]
    _raise_errors(results)
    return results


def _run_dask(jobs: list, workers: int, address, client, bar: _Bar) -> list:
    from distributed import Client, LocalCluster, as_completed

    own = None
    if client is None:
        if address:
            client = own = Client(address)
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = own = Client(cluster)
    try:
        futs = client.map(run_job, jobs, pure=False, key=[f"fstok-{shard_name(j['index'])}-{j['plan_hash'][:12]}"
                                                          for j in jobs])
        results = []
        for f in as_completed(futs):
            r = f.result()
            results.append(r)
            if "error" in r:
                client.cancel(futs)
                _raise_errors(results)
            bar.update(sum(s["nbytes"] for s in jobs_by_index(jobs)[r["index"]]["segments"]), r["tokens"])
        return results
    finally:
        if own is not None:
            cluster = getattr(own, "cluster", None)
            own.close()
            if cluster is not None and not address:
                cluster.close()


def jobs_by_index(jobs: list) -> dict:
    return {j["index"]: j for j in jobs}


def _run_ray(jobs: list, workers: int, address, bar: _Bar) -> list:
    import ray

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, log_to_driver=False, include_dashboard=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=2)(run_job)
        refs = [remote.remote(j) for j in jobs]
        by = jobs_by_index(jobs)
        results = []
        left = list(refs)
        while left:
            ready, left = ray.wait(left, num_returns=1)
            r = ray.get(ready[0])
            results.append(r)
            if "error" in r:
                for x in left:
                    ray.cancel(x)
                _raise_errors(results)
            bar.update(sum(s["nbytes"] for s in by[r["index"]]["segments"]), r["tokens"])
        return results
    finally:
        if started:
            ray.shutdown()


def _manifest(out, plan, done, options, inputs_meta, tok, art_sha, n_vocab, dtype, fmt, plan_hash) -> dict:
    shards = []
    per_file: dict = {m["path"]: [] for m in inputs_meta}
    for sh in plan:
        r = done[sh.index]
        shards.append({"index": sh.index, "files": r["files"], "documents": r["documents"], "tokens": r["tokens"],
                       "input_bytes": r["input_bytes"], "skipped": r["skipped"],
                       "segments": [{"path": s["path"], "lo": s["lo"], "hi": s["hi"]} for s in r["segments"]]})
        for s in r["segments"]:
            per_file[s["path"]].append(s)
    inputs = []
    for m in inputs_meta:
        segs = per_file[m["path"]]
        e = {"path": m["path"], "size": m["size"]}
        whole = [s for s in segs if s.get("sha256") and s["lo"] == 0 and (s["hi"] in (None, m["size"]) or
                                                                          len(segs) == 1)]
        if len(segs) == 1 and whole:
            e["sha256"] = whole[0]["sha256"]
        else:
            e["segments"] = [{"lo": s["lo"], "hi": s["hi"], "sha256": s.get("sha256")} for s in segs]
        inputs.append(e)
    skipped = sum(r["skipped"] for r in done.values())
    examples = [x for sh in plan for x in done[sh.index].get("skipped_examples", [])][:50]
    name = getattr(tok, "name", None) or ""
    return {"format": "fstok-shards", "version": MANIFEST_VERSION, "layout": fmt, "dtype": dtype,
            "data_suffix": data_ext(fmt), "index_suffix": None if fmt == "parquet" else ".idx",
            "tokenizer": {"name": name, "kind": type(tok).__name__, "artifact": ARTIFACT, "artifact_sha256": art_sha,
                          "n_vocab": n_vocab},
            "options": options, "inputs": inputs, "shards": shards,
            "documents": sum(s["documents"] for s in shards), "tokens": sum(s["tokens"] for s in shards),
            "input_bytes": sum(m["size"] for m in inputs_meta),
            "skipped": {"documents": skipped, "examples": examples}, "plan_hash": plan_hash}
