"""One shard from its plan: read its segments, encode every document, write the shard, record it done.

``run_job(job)`` is what every engine runs (in-process, local processes, Dask, Ray): a plain function of
a small JSON-able dict, so a task carries the artifact's *path*, never the tokenizer.  Each worker
process loads the artifact once (mmap: the pages are shared by every process on the machine) and keeps
it for its later tasks.  The output depends on the job only, so every engine writes the same bytes.

A shard is complete when its ``shard_NNNNN.done.json`` exists: it is written (atomically) after the data
and index files are renamed into place, so a run killed at any point leaves either a complete shard or
files that the next run overwrites.
"""
from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Callable, Optional

from . import readers
from .encode import DocEncoder
from .readers import InputError, Loc
from .shards import ShardWriter, atomic_write_json, shard_name

_TOKENIZERS: dict = {}
MAX_EXAMPLES = 20


def load_tokenizer(path: str, sha256: str = ""):
    """The tokenizer of the artifact at ``path`` (mmap-loaded once per process, kept by content hash)."""
    key = sha256 or path
    tok = _TOKENIZERS.get(key)
    if tok is None:
        import fstok

        tok = _TOKENIZERS[key] = fstok.load(path)
    return tok


def remember_tokenizer(sha256: str, tok) -> None:
    """In-process runs reuse the caller's tokenizer for the artifact it was saved as."""
    _TOKENIZERS[sha256] = tok


def done_path(out: str, index: int) -> str:
    return os.path.join(out, shard_name(index) + ".done.json")


class _Progress:
    """Batches progress reports (raw bytes, tokens) to at most a few per second."""

    def __init__(self, cb: Optional[Callable[[int, int], None]]):
        self.cb = cb
        self.nb = self.nt = 0
        self.t = time.monotonic()

    def add(self, nb: int = 0, nt: int = 0) -> None:
        if self.cb is None:
            return
        self.nb += nb
        self.nt += nt
        now = time.monotonic()
        if now - self.t > 0.2:
            self.flush()
            self.t = now

    def flush(self) -> None:
        if self.cb is not None and (self.nb or self.nt):
            self.cb(self.nb, self.nt)
            self.nb = self.nt = 0


def _events(seg: dict, job: dict, tap):
    fmt, codec = seg["fmt"], seg["codec"]
    if fmt == readers.PARQUET:
        return readers.iter_parquet(seg["path"], seg["lo"], seg["hi"], job["field"], tap)
    if fmt == readers.JSONL:
        return readers.iter_delimited(seg["path"], codec, seg["lo"], seg["hi"], b"\n", jsonl_field=job["field"],
                                      progress=tap)
    if job["split"] == "whole":
        return readers.iter_whole(seg["path"], codec, tap)
    delim = b"\n" if job["split"] == "lines" else job["delimiter"].encode("utf-8")
    return readers.iter_delimited(seg["path"], codec, seg["lo"], seg["hi"], delim, keep_delim=job["keep_delimiter"],
                                  progress=tap)


def _special_hint(msg: str) -> str:
    import re

    m = re.search(r"disallowed special token ('.*?')", msg)
    if not m:
        return msg.splitlines()[0]
    return (f"the text holds the special token {m.group(1)}, which is disallowed (pass --allowed-special TOKEN / "
            f"allowed_special= to encode it as the special token, or --disallowed-special none / "
            f"disallowed_special=() to encode it as ordinary text)")


def process_shard(job: dict, progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Write shard ``job['index']`` and its done record; returns the record."""
    tok = load_tokenizer(job["artifact"], job.get("artifact_sha256", ""))
    enc = DocEncoder(tok, job["special"], job["eot"])
    w = ShardWriter(job["out"], job["index"], job["format"], job["dtype"])
    prog = _Progress(progress)
    skipped: list = []
    n_skipped = 0
    seg_info = []

    def bad(reason: str, loc: Loc) -> None:
        nonlocal n_skipped
        msg = f"{loc.describe()}: {reason}"
        if not job["skip_bad"]:
            raise InputError(msg)
        n_skipped += 1
        if len(skipped) < MAX_EXAMPLES:
            skipped.append(msg)

    try:
        for seg in job["segments"]:
            h = hashlib.sha256()
            whole_parquet = seg["fmt"] == readers.PARQUET

            def tap(b, h=h):
                if isinstance(b, int):
                    prog.add(b)
                else:
                    h.update(b)
                    prog.add(len(b))

            ev = _events(seg, job, tap)
            in_long = skipping = False
            try:
                for kind, val, loc in ev:
                    if skipping:  # the rest of a long document that failed
                        if kind != "bad":
                            skipping = kind == "part"
                            continue
                        skipping = False
                    try:
                        if kind == "doc":
                            ids = enc.encode(val)
                            in_long = False
                            w.add(ids)
                            prog.add(0, len(ids))
                        elif kind == "part":
                            in_long = True
                            enc.feed(val)
                        else:
                            enc.reset()
                            in_long = False
                            bad(val, loc)
                    except ValueError as e:
                        if isinstance(e, InputError):
                            raise
                        enc.reset()
                        if in_long and kind == "part":
                            skipping = True  # the rest of this document is still coming: drop it too
                        in_long = False
                        bad(_special_hint(str(e)), loc)
            except InputError as e:
                if not job["skip_bad"] or not _is_stream_error(e):
                    raise
                enc.reset()
                n_skipped += 1
                if len(skipped) < MAX_EXAMPLES:
                    skipped.append(str(e))
            info = {"path": seg["path"], "lo": seg["lo"], "hi": seg["hi"]}
            if whole_parquet:
                if seg["lo"] == 0:
                    from .shards import file_sha256

                    info["sha256"] = file_sha256(seg["path"])
            else:
                info["sha256"] = h.hexdigest()
            seg_info.append(info)
        prog.flush()
        files = w.commit()
    except BaseException:
        w.abort()
        raise
    rec = {"index": job["index"], "plan": job["plan_hash"], "files": files, "documents": w.documents,
           "tokens": w.tokens, "input_bytes": sum(s["nbytes"] for s in job["segments"]), "segments": seg_info,
           "skipped": n_skipped, "skipped_examples": skipped}
    atomic_write_json(done_path(job["out"], job["index"]), rec)
    return rec


def _is_stream_error(e: InputError) -> bool:
    s = str(e)
    return "truncated" in s or "corrupt" in s


def run_job(job: dict) -> dict:
    """Engine entry point: the done record, or {"error": message} for an input error (an exception's
    type does not always survive the trip back from a Dask / Ray worker)."""
    try:
        return process_shard(job)
    except InputError as e:
        return {"error": str(e), "index": job["index"]}


# state of a local worker process (set by the pool initializer)
_QUEUE: Any = None


def _init_local(queue) -> None:
    global _QUEUE
    _QUEUE = queue


def run_job_local(job: dict) -> dict:
    q = _QUEUE
    cb = (lambda nb, nt: q.put((nb, nt))) if q is not None else None
    try:
        return process_shard(job, cb)
    except InputError as e:
        return {"error": str(e), "index": job["index"]}
