"""Read a SentencePiece `.model` file (a serialized `ModelProto`) without the `sentencepiece` package.

Only the fields that encoding and decoding depend on are kept; every other field is skipped by
its wire type.  Defaults are those of `sentencepiece_model.proto` (proto2), so a field absent
from the file reads as the library reads it.

    m = read_model("tokenizer.model")
    m.pieces[i].piece, m.pieces[i].score, m.pieces[i].type
    m.trainer.model_type, m.trainer.byte_fallback, m.normalizer.precompiled_charsmap, ...
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {NORMAL: "normal", UNKNOWN: "unknown", CONTROL: "control", USER_DEFINED: "user_defined",
              UNUSED: "unused", BYTE: "byte"}
# TrainerSpec.ModelType
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
MODEL_TYPE_NAMES = {UNIGRAM: "unigram", BPE: "bpe", WORD: "word", CHAR: "char"}


class SentencePieceModelError(ValueError):
    """The file is not a readable SentencePiece model."""


@dataclass
class Piece:
    piece: str
    score: float = 0.0
    type: int = NORMAL


@dataclass
class TrainerSpec:
    model_type: int = UNIGRAM
    vocab_size: int = 8000
    byte_fallback: bool = False
    split_digits: bool = False
    treat_whitespace_as_suffix: bool = False
    allow_whitespace_only_pieces: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    unk_surface: str = " \u2047 "
    has_unk_surface: bool = False


@dataclass
class NormalizerSpec:
    name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    normalization_rule_tsv: str = ""
    present: bool = False


@dataclass
class ModelProto:
    pieces: list[Piece] = field(default_factory=list)
    trainer: TrainerSpec = field(default_factory=TrainerSpec)
    normalizer: NormalizerSpec = field(default_factory=NormalizerSpec)
    denormalizer: NormalizerSpec = field(default_factory=NormalizerSpec)


def _varint(buf: bytes, i: int, end: int, where: str) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= end:
            raise SentencePieceModelError(f"{where}: truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise SentencePieceModelError(f"{where}: varint longer than 10 bytes")


def _fields(buf: bytes, start: int, end: int, where: str):
    """Yield (field number, wire type, value) over a message; value is an int or a bytes slice."""
    i = start
    while i < end:
        key, i = _varint(buf, i, end, where)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise SentencePieceModelError(f"{where}: field number 0 (not a protobuf message)")
        if wt == 0:
            v, i = _varint(buf, i, end, where)
        elif wt == 1:
            if i + 8 > end:
                raise SentencePieceModelError(f"{where}: truncated 64-bit field")
            v = buf[i : i + 8]
            i += 8
        elif wt == 2:
            n, i = _varint(buf, i, end, where)
            if i + n > end:
                raise SentencePieceModelError(f"{where}: length-delimited field {num} runs past the end ({n} bytes)")
            v = (i, i + n)
            i += n
        elif wt == 5:
            if i + 4 > end:
                raise SentencePieceModelError(f"{where}: truncated 32-bit field")
            v = buf[i : i + 4]
            i += 4
        else:
            raise SentencePieceModelError(f"{where}: unsupported wire type {wt} (field {num})")
        yield num, wt, v


def _int32(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def _str(buf: bytes, v, where: str, what: str) -> str:
    try:
        return bytes(buf[v[0] : v[1]]).decode("utf-8")
    except UnicodeDecodeError:
        raise SentencePieceModelError(f"{where}: {what} is not valid UTF-8") from None


def _expect(wt: int, want: int, where: str, what: str) -> None:
    if wt != want:
        raise SentencePieceModelError(f"{where}: field {what} has wire type {wt}, expected {want}")


def _piece(buf: bytes, span, where: str) -> Piece:
    p = Piece(piece="")
    for num, wt, v in _fields(buf, span[0], span[1], where):
        if num == 1:
            _expect(wt, 2, where, "piece")
            p.piece = _str(buf, v, where, "a piece")
        elif num == 2:
            _expect(wt, 5, where, "score")
            p.score = struct.unpack("<f", v)[0]
        elif num == 3:
            _expect(wt, 0, where, "type")
            p.type = _int32(v)
    return p


_TRAINER_INTS = {3: "model_type", 4: "vocab_size", 40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}
_TRAINER_BOOLS = {35: "byte_fallback", 25: "split_digits", 24: "treat_whitespace_as_suffix",
                  26: "allow_whitespace_only_pieces"}
_TRAINER_STRS = {45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece", 44: "unk_surface"}


def _trainer(buf: bytes, span, where: str) -> TrainerSpec:
    t = TrainerSpec()
    for num, wt, v in _fields(buf, span[0], span[1], where):
        if num in _TRAINER_INTS:
            _expect(wt, 0, where, _TRAINER_INTS[num])
            setattr(t, _TRAINER_INTS[num], _int32(v))
        elif num in _TRAINER_BOOLS:
            _expect(wt, 0, where, _TRAINER_BOOLS[num])
            setattr(t, _TRAINER_BOOLS[num], bool(v))
        elif num in _TRAINER_STRS:
            _expect(wt, 2, where, _TRAINER_STRS[num])
            setattr(t, _TRAINER_STRS[num], _str(buf, v, where, _TRAINER_STRS[num]))
            if num == 44:
                t.has_unk_surface = True
    return t


def _normalizer(buf: bytes, span, where: str) -> NormalizerSpec:
    n = NormalizerSpec(present=True)
    for num, wt, v in _fields(buf, span[0], span[1], where):
        if num == 1:
            _expect(wt, 2, where, "name")
            n.name = _str(buf, v, where, "the normalizer name")
        elif num == 2:
            _expect(wt, 2, where, "precompiled_charsmap")
            n.precompiled_charsmap = bytes(buf[v[0] : v[1]])
        elif num in (3, 4, 5):
            _expect(wt, 0, where, "a normalizer flag")
            setattr(n, {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[num], bool(v))
        elif num == 6:
            _expect(wt, 2, where, "normalization_rule_tsv")
            n.normalization_rule_tsv = _str(buf, v, where, "normalization_rule_tsv")
    return n


_SCORE = struct.Struct("<f")


def _piece_fast(buf: bytes, s: int, e: int) -> Piece | None:
    """The usual layout of a piece message (piece, score, type; short lengths), or None."""
    if buf[s] != 0x0A or buf[s + 1] >= 0x80:
        return None
    j = s + 2 + buf[s + 1]
    if j > e:
        return None
    try:
        piece = buf[s + 2 : j].decode("utf-8")
    except UnicodeDecodeError:
        return None
    score, ty = 0.0, NORMAL
    if j < e and buf[j] == 0x15 and j + 5 <= e:
        score = _SCORE.unpack_from(buf, j + 1)[0]
        j += 5
    if j < e and buf[j] == 0x18 and j + 2 <= e and buf[j + 1] < 0x80:
        ty = buf[j + 1]
        j += 2
    return Piece(piece, score, ty) if j == e else None


def parse_model(data: bytes, where: str = "<bytes>") -> ModelProto:
    """Parse the bytes of a `.model` file; SentencePieceModelError when they are not one."""
    m = ModelProto()
    seen_trainer = False
    try:
        for num, wt, v in _fields(data, 0, len(data), where):
            if num == 1:
                _expect(wt, 2, where, "pieces")
                p = _piece_fast(data, v[0], v[1]) if v[1] - v[0] >= 2 else None
                m.pieces.append(p if p is not None else _piece(data, v, where))
            elif num == 2:
                _expect(wt, 2, where, "trainer_spec")
                m.trainer = _trainer(data, v, where)
                seen_trainer = True
            elif num == 3:
                _expect(wt, 2, where, "normalizer_spec")
                m.normalizer = _normalizer(data, v, where)
            elif num == 5:
                _expect(wt, 2, where, "denormalizer_spec")
                m.denormalizer = _normalizer(data, v, where)
    except SentencePieceModelError as e:
        raise SentencePieceModelError(f"{e} (is this a SentencePiece .model file?)") from None
    if not m.pieces:
        raise SentencePieceModelError(f"{where}: no pieces: not a SentencePiece model (ModelProto) file")
    if not seen_trainer:
        raise SentencePieceModelError(f"{where}: no trainer_spec: not a SentencePiece model (ModelProto) file")
    for i, p in enumerate(m.pieces):
        if not p.piece:
            raise SentencePieceModelError(f"{where}: piece {i} is empty")
        if p.type not in TYPE_NAMES:
            raise SentencePieceModelError(f"{where}: piece {i} ({p.piece!r}) has unknown type {p.type}")
    return m


def looks_like_model(data: bytes) -> bool:
    """A cheap content sniff: the file starts like a ModelProto (field 1, a SentencePiece message)."""
    if len(data) < 4 or data[0] != 0x0A:
        return False
    try:
        n, i = _varint(data, 1, min(len(data), 11), "")
        if i + n > len(data):
            return False
        for num, wt, _v in _fields(data, i, i + n, ""):
            if num not in (1, 2, 3) or wt not in (0, 2, 5):
                return False
        return True
    except SentencePieceModelError:
        return False


def read_model(path: str | os.PathLike) -> ModelProto:
    p = os.fspath(path)
    with open(p, "rb") as f:
        data = f.read()
    return parse_model(data, where=p)
