"""Readers for tokenizer source files (vocabularies, rank files, tokenizer.json).

Each reader only parses and validates a source format into plain Python data; compiling it into
an artifact is done by the tokenizer kind (`fstok.bpe`, `fstok.wordpiece`).
"""
