"""tiktoken's rank-file readers (`tiktoken.load`), for local files only.

`load_tiktoken_bpe` reads a `.tiktoken` file (`base64(token) rank` lines); `data_gym_to_mergeable_bpe_ranks`
reads GPT-2's `vocab.bpe` + `encoder.json`.  Both return tiktoken's `dict[bytes, int]`, with tiktoken's
checks (`expected_hash` is a sha256; a mismatch raises ValueError).  A URL raises ValueError naming it:
fstok never downloads; fetch the file once and pass its path.

The parsing follows tiktoken 0.14's `tiktoken/load.py` (MIT License, Copyright (c) 2022 OpenAI, Shantanu Jain).
"""
from __future__ import annotations

import base64
import hashlib
import os


def read_file(blobpath: str) -> bytes:
    if "://" in str(blobpath):
        raise ValueError(
            f"{blobpath}: fstok.tiktoken reads local files only (no network access); "
            "download the file once and pass its local path"
        )
    with open(blobpath, "rb", buffering=0) as f:
        return f.read()


def check_hash(data: bytes, expected_hash: str) -> bool:
    actual_hash = hashlib.sha256(data).hexdigest()
    return actual_hash == expected_hash


def read_file_cached(blobpath: str, expected_hash: str | None = None) -> bytes:
    # local files need no download cache: read and check
    contents = read_file(blobpath)
    if expected_hash and not check_hash(contents, expected_hash):
        raise ValueError(
            f"Hash mismatch for data read from {blobpath} (expected {expected_hash}). "
            f"The file is not the one expected, or it is corrupted."
        )
    return contents


def data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file: str,
    encoder_json_file: str,
    vocab_bpe_hash: str | None = None,
    encoder_json_hash: str | None = None,
    clobber_one_byte_tokens: bool = False,
) -> dict[bytes, int]:
    # GPT-2's printable-character alphabet for bytes (the same table as HF's ByteLevel)
    rank_to_intbyte = [b for b in range(2**8) if chr(b).isprintable() and chr(b) != " "]

    data_gym_byte_to_byte = {chr(b): b for b in rank_to_intbyte}
    n = 0
    for b in range(2**8):
        if b not in rank_to_intbyte:
            rank_to_intbyte.append(b)
            data_gym_byte_to_byte[chr(2**8 + n)] = b
            n += 1
    assert len(rank_to_intbyte) == 2**8

    # vocab_bpe holds the merges in rank order
    vocab_bpe_contents = read_file_cached(vocab_bpe_file, vocab_bpe_hash).decode()
    bpe_merges = [tuple(merge_str.split()) for merge_str in vocab_bpe_contents.split("\n")[1:-1]]

    def decode_data_gym(value: str) -> bytes:
        return bytes(data_gym_byte_to_byte[b] for b in value)

    bpe_ranks = {bytes([b]): i for i, b in enumerate(rank_to_intbyte)}
    del rank_to_intbyte

    n = len(bpe_ranks)
    for first, second in bpe_merges:
        bpe_ranks[decode_data_gym(first) + decode_data_gym(second)] = n
        n += 1

    import json

    # the encoder must agree with the merges: ranks are merge priorities
    encoder_json = json.loads(read_file_cached(encoder_json_file, encoder_json_hash))
    encoder_json_loaded = {decode_data_gym(k): v for k, v in encoder_json.items()}
    # special tokens are not mergeable BPE tokens
    encoder_json_loaded.pop(b"<|endoftext|>", None)
    encoder_json_loaded.pop(b"<|startoftext|>", None)

    if clobber_one_byte_tokens:
        for k in encoder_json_loaded:
            if len(k) == 1:
                bpe_ranks[k] = encoder_json_loaded[k]

    assert bpe_ranks == encoder_json_loaded

    return bpe_ranks


def dump_tiktoken_bpe(bpe_ranks: dict[bytes, int], tiktoken_bpe_file: str) -> None:
    """Write ranks as a `.tiktoken` file (a local path)."""
    if "://" in str(tiktoken_bpe_file):
        raise ValueError(f"{tiktoken_bpe_file}: fstok.tiktoken writes local files only")
    with open(tiktoken_bpe_file, "wb") as f:
        for token, rank in sorted(bpe_ranks.items(), key=lambda x: x[1]):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")


def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
    contents = read_file_cached(tiktoken_bpe_file, expected_hash)
    ret = {}
    for line in contents.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ret[base64.b64decode(token)] = int(rank)
        except Exception as e:
            raise ValueError(f"Error parsing line {line!r} in {tiktoken_bpe_file}") from e
    return ret


__all__ = ["read_file", "read_file_cached", "check_hash", "data_gym_to_mergeable_bpe_ranks", "dump_tiktoken_bpe",
           "load_tiktoken_bpe"]
