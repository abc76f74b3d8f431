#!/usr/bin/env bash
# Peers for `tools/bench <name>`, installed from PyPI into the current Python environment.
# Keep this a plain list of pip lines (one peer family per block).
# tensorflow-text 2.21 / tensorflow 2.21 install cleanly next to numpy 2.x (checked: `pip check` clean),
# so the WordPiece bench runs every peer in-process; no separate venv is needed.
set -euo pipefail
PIP="${PIP:-python -m pip}"

# --- WordPiece peers (tools/bench wordpiece) ---
$PIP install "tokenizers==0.23.3"
$PIP install "tensorflow-text==2.21.1"      # pulls tensorflow 2.21
$PIP install "flash-tokenizer==1.2.0"
$PIP install matplotlib                     # the time-vs-word-length PNG

# --- byte-level BPE peers (tools/bench bpe) ---
$PIP install "tiktoken==0.14.0"
$PIP install "tokenizers==0.23.3"
$PIP install "wordchipper==0.9.2"
$PIP install "bpe-openai==0.1.4"
$PIP install "gigatoken==0.10.0"
