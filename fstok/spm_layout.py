"""The SentencePiece artifact's layout as the runtime reads it: piece types, flags, section dtypes, the trie
check and the C module, shared by fstok.spm and fstok.hf_spm (imports nothing from either)."""
from __future__ import annotations

import numpy as np

from . import artifact as _art

KIND_SPM = _art.KIND_SPM

SPT_NORMAL, SPT_UNKNOWN, SPT_CONTROL, SPT_USER, SPT_UNUSED, SPT_BYTE = 1, 2, 3, 4, 5, 6
SPF_ADD_DUMMY, SPF_REMOVE_WS, SPF_ESCAPE_WS, SPF_WS_SUFFIX = 1, 2, 4, 8
SPF_BYTE_FALLBACK, SPF_BPE, SPF_HF, SPF_FUSE_UNK = 16, 32, 64, 128
SPF_WORDS, SPF_CUTS = 256, 512
_SPACE = "\u2581"
# the layout and meaning of the compiled tables: stored in the artifact's meta ("tables") and part of the
# artifact cache key (fstok.spm_cache); an artifact of another layout is refused with a request to compile again
TABLES = "spm-tables-6"

_SECTIONS = {
    "cm_units": "<u4", "cm_norm": "|u1",
    "u_first": "<u4", "u_label": "|u1", "u_target": "<u4", "u_value": "<i4",
    "ptype": "|u1", "byte_id": "<i4", "pieces": "|u1", "piece_off": "<u4",
}


# the pieces trie in its walking layout and its lookup tables, built by the compiler (docs/artifact-format.md):
# the only form of the pieces trie an artifact holds
FT_SECTIONS = {"ft_nodes": "|u1", "ft_rows": "<u4", "ft_pairs": "|u1", "ft_chars": "<u8", "ft_ascii": "<i4",
               "ft_small": "<u8"}
# the byte trie of the piece strings the compiler builds (fstok.compile.spm_tables.build_trie): the input of
# the walking tables, never stored
TRIE_SECTIONS = ("p_first", "p_label", "p_target", "p_value")


def check_layout(art, where: str) -> None:
    """Refuses an artifact whose SentencePiece tables are of another layout than this runtime's (`TABLES`)."""
    got = art.meta.get("tables")
    if got != TABLES:
        was = repr(got) if isinstance(got, str) else "an older one (before 'spm-tables-4')"
        raise _art.ArtifactError(f"{where}: meta.tables: the SentencePiece tables are of layout {was}; this fstok reads {TABLES!r}: "
                                 f"compile the source again (fstok.compile)")


def walk_sections(art, where: str) -> tuple:
    """The stored walking tables of `art` in the order the native model takes them (None for an absent
    optional one).  Only presence and dtypes are checked here: the native model checks their content
    before any use."""
    out = []
    for name, dt in FT_SECTIONS.items():
        if not art.has(name):
            if name in ("ft_nodes", "ft_ascii"):
                raise _art.ArtifactError(f"{where}: section {name!r} is missing")
            out.append(None)
            continue
        if art.sections[name].dtype != dt:
            raise _art.ArtifactError(f"{where}: section {name!r} has dtype {art.sections[name].dtype}, expected {dt}")
        out.append(art.array(name))
    return tuple(out)


def walk_table_sections(trie, score, is64: bool, ptype, flags: int) -> dict:
    """The walking tables of the byte trie `trie` (TRIE_SECTIONS' arrays) of a model's piece strings, as
    artifact sections."""
    got = _native().ft_build(tuple(np.ascontiguousarray(t) for t in trie), np.ascontiguousarray(score), int(is64),
                             np.ascontiguousarray(ptype), int(flags))
    return {name: np.frombuffer(b, dtype=dt) for (name, dt), b in zip(FT_SECTIONS.items(), got) if b is not None}


def with_walk_tables(meta: dict, sections: dict, src_hash: bytes, load, where: str):
    """The tokenizer `load(artifact)` of (meta, sections) once the pieces trie of `sections` (TRIE_SECTIONS)
    is replaced by its walking tables and the layout named in meta."""
    sections = dict(sections)
    trie = [sections.pop(k) for k in TRIE_SECTIONS]
    is64 = "score64" in sections
    score = sections["score64" if is64 else "score32"]
    sections.update(walk_table_sections(trie, score, is64, sections["ptype"], int(meta["flags"])))
    meta = {**meta, "tables": TABLES}
    blob = _art.write_artifact(None, KIND_SPM, meta, sections, "n/a", src_hash)
    return load(_art.parse_artifact(blob, where=where, expect_kind=KIND_SPM))


def decode_pieces(blob, offsets, n: int) -> list[str]:
    """The piece strings of the `pieces` / `piece_off` sections (validated UTF-8), in id order."""
    b, po = bytes(blob), offsets.tolist() if hasattr(offsets, "tolist") else list(offsets)
    return [b[po[i] : po[i + 1]].decode("utf-8") for i in range(n)]


class ArtifactIO:
    """to_bytes / save / pickling of a tokenizer kept in its artifact (`self._art`); `from_artifact` rebuilds."""

    def to_bytes(self) -> bytes:
        return self._art.to_bytes()

    def save(self, path) -> None:
        import os

        data = self.to_bytes()
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    @classmethod
    def _from_bytes(cls, data: bytes):
        return cls.from_artifact(_art.parse_artifact(data, expect_kind=KIND_SPM))

    def __reduce__(self):
        return (self.__class__._from_bytes, (self.to_bytes(),))


def _native():
    from .runtime import _spm

    return _spm


def make_model(where: str, arrays: tuple, *args):
    """The native model handle; the C side checks the user-defined pieces' trie in one pass (`_check_trie`
    is its pure-Python oracle) and the stored walking tables, the last argument (`fstok.validate_spm_walk`
    is that check's oracle); a failure becomes an ArtifactError naming the sections."""
    try:
        return _native().make(arrays, *args)
    except ValueError as e:
        p, _, msg = str(e).partition(": ")
        if p == "ft":
            sec, _, what = msg.partition(": ")
            raise _art.ArtifactError(f"{where}: section {sec!r}: {what}") from None
        if p != "u":
            raise _art.ArtifactError(f"{where}: {e}") from None
        raise _art.ArtifactError(f"{where}: trie {p!r} (sections {p}_first, {p}_label, {p}_target, {p}_value): "
                                 f"{msg}") from None


def _check_trie(a: dict, p: str, n_values: int, where: str, values2: bool = False) -> None:
    first, label, target, value = a[f"{p}_first"], a[f"{p}_label"], a[f"{p}_target"], a[f"{p}_value"]
    n = len(value)

    def bad(msg):
        raise _art.ArtifactError(f"{where}: trie {p!r} (sections {p}_first, {p}_label, {p}_target, {p}_value): {msg}")

    if n == 0:
        if len(first) or len(label) or len(target):
            bad("empty trie with edges")
        return
    if len(first) != n + 1 or first[0] != 0 or first[-1] != len(label) or len(label) != len(target):
        bad("edge ranges do not match the edge arrays")
    if np.any(np.diff(first.astype(np.int64)) < 0):
        bad("edge ranges are not monotonic")
    if len(target):
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(first.astype(np.int64)))
        if np.any(target.astype(np.int64) <= owner) or np.any(target >= n):
            bad("an edge does not lead to a later node")
        same = owner[1:] == owner[:-1]
        if np.any(same & (label[1:] <= label[:-1])):
            bad("labels are not strictly sorted within a node")
    if np.any(value < -1) or np.any(value >= n_values):
        bad("a value is out of range")
    if values2:
        v2 = a[f"{p}_value2"]
        if len(v2) != n or np.any(v2 < -1) or np.any(v2 >= n_values):
            bad("value2 is out of range")
