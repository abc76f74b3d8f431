"""Artifacts of the tokenizer.json pipeline (kind "pipeline") and of tekken (kind "tekken").

    tok.save("falcon.fst"); fstok.load("falcon.fst")        # PipelineTokenizer / TekkenTokenizer

Pipeline (docs/artifact-format.md): meta {pipeline_meta_version, name, where, n_vocab, has_pp, pp_ids,
guards, standin_lo, mode, raw_guards, norm_guards, has_norm, normalizer, norm_sections, suffix, cut,
has_tables, model_native}; section `tokenizer.json` (the file's JSON, UTF-8), the normalizer's facts (sections `norm.*`,
fstok.pipeline.fastnorm) and, when the compiled byte-level
tables encode the file, section `tables` (a whole BPE artifact, kind 3, with its own checksums); when the
model stage runs in C instead (fstok.pipeline.model_tables), section `model` (a whole WordPiece or
SentencePiece artifact, kinds 1 and 7) and meta.model_native {kind, first_ok}.
Tekken: meta {tekken_meta_version, name, n_special, specials, bos_id, eos_id}; section `tables` (the
BPE artifact of the ranks).  Every meta field is checked and the nested BPE artifact validated (checksums,
every table C indexes) when the file is loaded, before anything runs; the tokenizer.json section (covered
by the checksums) is parsed when the Python stages are first needed, or at load where no tables encode.
"""
from __future__ import annotations

import json
from typing import Any

from .. import artifact as _art

PIPELINE_META_VERSION = 1
TEKKEN_META_VERSION = 1


def _bad(art: _art.Artifact, msg: str) -> _art.ArtifactError:
    return _art.ArtifactError(f"{art.path or '<bytes>'}: {msg}")


def _int(v: Any, lo: int = 0, hi: int = 1 << 31) -> bool:
    return type(v) is int and lo <= v < hi


def _ids(v: Any) -> bool:
    return isinstance(v, list) and all(_int(x) for x in v)


def _nested_bpe(art: _art.Artifact):
    from ..bpe import BPETokenizer

    if "tables" not in art.sections:
        raise _bad(art, "no 'tables' section")
    where = f"{art.path or '<bytes>'}: tables"
    s = art.sections["tables"]
    # a zero-copy view of the outer buffer (an mmap in the cache): the nested tables are not copied, and the
    # outer payload checksum, verified when `art` was parsed, covers them
    view = memoryview(art.buffer)[s.offset: s.offset + s.nbytes]
    inner = _art.parse_artifact(view, where=where, expect_kind=_art.KIND_BPE, verify_payload=False)
    inner.path = where  # the inner tables' errors name the outer file and its section
    return BPETokenizer(inner)


# ---------------------------------------------------------------------------------------------- pipeline
def tokenizer_json(art: _art.Artifact, raw) -> dict:
    """The artifact's tokenizer.json section, parsed and checked (ArtifactError naming the file)."""
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(art, f"tokenizer.json section is not valid JSON ({e})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
        raise _bad(art, "tokenizer.json section has no 'model' object")
    return obj


class _LazyJSON:
    """The tokenizer.json section of an artifact, read (`raw()`) and parsed (`parse()`) on first use."""

    def __init__(self, art):
        self._art = art

    def raw(self) -> bytes:
        return self._art.raw("tokenizer.json")

    def parse(self) -> dict:
        return tokenizer_json(self._art, self.raw())


def pipeline_artifact(tok) -> bytes:
    obj = tok._obj if "_obj" in tok.__dict__ else None
    if isinstance(obj, _LazyJSON):
        obj = obj.raw()
    raw = bytes(obj) if isinstance(obj, (bytes, bytearray, memoryview)) else json.dumps(
        obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    norm_cfg = None
    # a normalizer the nested model runs (fstok.pipeline.model_tables) is kept there, not as fast-form facts
    fast = tok._norm_fast if tok._model_native is None or not tok._model_native.norm else None
    if fast is not None:
        norm_cfg = tok.__dict__.get("_norm_cfg")
        if norm_cfg is None:
            norm_cfg = (obj if isinstance(obj, dict) else json.loads(raw.decode("utf-8"))).get("normalizer")
    wrap = tok._pp_wrap() if tok._has_pp else None
    meta = {
        "pipeline_meta_version": PIPELINE_META_VERSION, "name": tok.name, "where": str(tok.where),
        "n_vocab": int(tok.n_vocab), "has_pp": bool(tok._has_pp), "guards": list(tok._guards),
        "pp_ids": [list(map(int, wrap[0])), list(map(int, wrap[1]))] if wrap is not None else None,
        "has_tables": tok._tables is not None,
        "standin_lo": tok._standin_lo,
        "mode": tok._mode, "raw_guards": list(tok._raw_guards), "norm_guards": list(tok._norm_guards),
        "has_norm": fast is not None, "suffix": bool(tok._suffix), "normalizer": norm_cfg,
        "norm_sections": fast is not None, "prefix_space": bool(tok._prefix_space),
        "cut": None if tok._pieces is None else dict(
            {"find": tok._pieces.find is not None, "split": tok._pieces.split is not None},
            **({} if tok._pieces.behaviors is None else {"behaviors": list(tok._pieces.behaviors)})),
        "model_native": None if tok._model_native is None else tok._model_native.meta(),
    }
    sections: dict[str, Any] = {"tokenizer.json": raw}
    if fast is not None:
        sections.update(fast.sections())  # the normalizer's facts: loading computes none
    if tok._pieces is not None:
        sections.update(tok._pieces.sections())
    if tok._model_native is not None:
        sections["model"] = tok._model_native.to_bytes()  # a whole artifact of the model's kind
    uv = "n/a"
    if tok._tables is not None:
        sections["tables"] = tok._tables.to_bytes()
        uv = tok._tables._art.unicode_version
    return _art.write_artifact(None, _art.KIND_PIPELINE, meta, sections, uv, _art.source_hash(b"pipeline", raw))


def load_pipeline(cls, art: _art.Artifact):
    m = art.meta
    if m.get("pipeline_meta_version") != PIPELINE_META_VERSION:
        raise _bad(art, f"pipeline meta version {m.get('pipeline_meta_version')!r} is not {PIPELINE_META_VERSION}")
    checks = {
        "name": isinstance(m.get("name"), str), "where": isinstance(m.get("where"), str),
        "n_vocab": _int(m.get("n_vocab")), "has_pp": isinstance(m.get("has_pp"), bool),
        "has_tables": isinstance(m.get("has_tables"), bool),
        "guards": isinstance(m.get("guards"), list) and all(isinstance(g, str) and g for g in m["guards"]),
        "standin_lo": m.get("standin_lo") is None or _int(m.get("standin_lo")),
        "mode": m.get("mode") in ("direct", "guarded"),
        "raw_guards": isinstance(m.get("raw_guards"), list) and all(isinstance(g, str) and g for g in m["raw_guards"]),
        "norm_guards": isinstance(m.get("norm_guards"), list) and all(isinstance(g, str) for g in m["norm_guards"]),
        "has_norm": isinstance(m.get("has_norm"), bool), "suffix": isinstance(m.get("suffix"), bool),
        "prefix_space": isinstance(m.get("prefix_space", False), bool),
        "normalizer": m.get("normalizer") is None or isinstance(m["normalizer"], dict),
        "cut": m.get("cut") is None or (isinstance(m["cut"], dict) and set(m["cut"]) - {"behaviors"} == {"find", "split"}
                                        and isinstance(m["cut"]["find"], bool) and isinstance(m["cut"]["split"], bool)
                                        and isinstance(m["cut"].get("behaviors", []), list)),
        "pp_ids": m.get("pp_ids") is None or (isinstance(m["pp_ids"], list) and len(m["pp_ids"]) == 2
                                                and all(_ids(x) for x in m["pp_ids"])),
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise _bad(art, f"pipeline meta field(s) {', '.join(bad)} missing or invalid")
    if "tokenizer.json" not in art.sections:
        raise _bad(art, "no 'tokenizer.json' section")
    obj = None
    if not m["has_tables"]:
        obj = tokenizer_json(art, art.raw("tokenizer.json"))
    inner = _nested_bpe(art) if m["has_tables"] else None
    native_model = None
    if m.get("model_native") is not None:
        if inner is not None or m["mode"] != "guarded" or m["suffix"] or m.get("prefix_space"):
            raise _bad(art, "meta.model_native beside the byte-level tables, or outside the guarded mode")
        from .model_tables import NativeModel

        native_model = NativeModel.from_artifact(art, m["model_native"])
    compiled = inner is not None or native_model is not None
    if inner is not None and inner.n_vocab > m["n_vocab"] + 512:  # + stand-ins for missing bytes, the sentinel
        raise _bad(art, f"tables hold {inner.n_vocab} ids, more than the pipeline's n_vocab {m['n_vocab']} + 512")
    if m["suffix"] and m.get("cut") is None:
        raise _bad(art, "meta.suffix: an end-of-word sentinel without a piece cutter (meta.cut)")
    cut = None
    if m.get("cut") is not None and compiled:
        from .native import Cutter

        cut = Cutter.from_sections(art, m["cut"]["find"], m["cut"]["split"], m["cut"].get("behaviors"))
    norm_fast = None
    if m["has_norm"] and compiled:
        from .fastnorm import NoFastForm, NormPlan, fast_normalizer_plan

        if "normalizer" in m:
            norm_cfg = m["normalizer"]
        else:
            obj = obj if obj is not None else tokenizer_json(art, art.raw("tokenizer.json"))
            norm_cfg = obj.get("normalizer")
        try:
            if m.get("norm_sections") is True:
                norm_fast = NormPlan.from_sections(norm_cfg, art)
            else:  # written before the facts were kept in the artifact: computed here
                norm_fast = fast_normalizer_plan(norm_cfg)
                if norm_fast is None:
                    raise NoFastForm()
        except NoFastForm:
            raise _bad(art, "the normalizer has no fast form, but the tables were compiled for one") from None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise _bad(art, f"normalizer tables (meta.normalizer, norm.*): {type(e).__name__}: {e}"[:400]) from None
    tok = cls.__new__(cls)
    tok.where, tok.name, tok.n_vocab = m["where"], m["name"], m["n_vocab"]
    # the file's JSON is parsed when the Python stages are first needed (decode, the paths the tables do not
    # take): the compiled tables encode without it
    tok._obj = obj if obj is not None else _LazyJSON(art)
    tok._artifact_where = art.path or "<bytes>"
    if norm_fast is not None:
        tok.__dict__["_norm_cfg"] = norm_cfg
    tok._has_pp = m["has_pp"]
    if m.get("pp_ids") is not None:
        tok.__dict__["_pp_ids"] = (list(m["pp_ids"][0]), list(m["pp_ids"][1]))
    tok._tables = inner
    tok._guards = tuple(m["guards"])
    tok._standin_lo = m.get("standin_lo") if inner is not None else None
    tok._mode = m["mode"]
    tok._raw_guards, tok._norm_guards = tuple(m["raw_guards"]), tuple(m["norm_guards"])
    tok._model_native = native_model
    if native_model is not None and native_model.norm:
        if norm_fast is not None:
            raise _bad(art, "meta.model_native.norm beside a normalizer fast form (meta.has_norm)")
        norm_fast = native_model.normalize
    tok._norm_fast, tok._pieces, tok._suffix = norm_fast, cut, m["suffix"] and inner is not None
    tok._prefix_space = m.get("prefix_space", False) and inner is not None
    if tok._prefix_space and tok._mode != "guarded":
        raise _bad(art, "a prefix space in 'direct' mode (the tables would not add it)")
    tok._lens = None
    if inner is not None:
        import numpy as np

        tok._lens = np.diff(inner._tables["dec_off"].astype(np.int64))
    return tok


# ------------------------------------------------------------------------------------------------ tekken
def tekken_artifact(tok) -> bytes:
    meta = {"tekken_meta_version": TEKKEN_META_VERSION, "name": tok.name, "n_special": int(tok.n_special),
            "specials": list(tok.specials), "bos_id": int(tok.bos_id), "eos_id": int(tok.eos_id)}
    inner = tok.inner.to_bytes()
    return _art.write_artifact(None, _art.KIND_TEKKEN, meta, {"tables": inner}, tok.inner._art.unicode_version,
                               _art.source_hash(b"tekken", json.dumps(meta, sort_keys=True), inner))


def load_tekken_artifact(cls, art: _art.Artifact):
    m = art.meta
    if m.get("tekken_meta_version") != TEKKEN_META_VERSION:
        raise _bad(art, f"tekken meta version {m.get('tekken_meta_version')!r} is not {TEKKEN_META_VERSION}")
    n = m.get("n_special")
    sp = m.get("specials")
    ok = (isinstance(m.get("name"), str) and _int(n) and isinstance(sp, list) and len(sp) == n
          and all(type(s) is str for s in sp) and len(set(sp)) == len(sp)
          and _int(m.get("bos_id"), 0, max(n, 1)) and _int(m.get("eos_id"), 0, max(n, 1)))
    if not ok:
        raise _bad(art, "tekken meta (name, n_special, specials, bos_id, eos_id) missing or invalid")
    return cls(_nested_bpe(art), n, list(sp), m["bos_id"], m["eos_id"], m["name"])
