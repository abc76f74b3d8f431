#!/usr/bin/env python3
"""Differential run of fstok against `sentencepiece` on SentencePiece `.model` files trained here with the
`sentencepiece` trainer over corpus lines, one per option the format defines: BPE and Unigram, byte_fallback
on and off, split_digits, add_dummy_prefix off, remove_extra_whitespaces off, the nmt_nfkc / nfkc /
nmt_nfkc_cf / nfkc_cf / identity normalization rules, user_defined_symbols, control symbols, treat_whitespace_as_suffix,
split_by_whitespace / split_by_unicode_script / split_by_number off, max_sentencepiece_length, a pad piece,
unk_surface, a custom normalization_rule_tsv. Each model is checked with
tools/diff_models.py's SentencePiece checks (ids with and without BOS, offsets, decode, decode of random ids).

    python tools/diff_spm_variants.py                   # every variant
    python tools/diff_spm_variants.py --list
    python tools/diff_spm_variants.py --only unigram    # variants whose name contains a word
    python tools/diff_spm_variants.py --lines 400       # every 400th line of each corpus file (default 800)

Where fstok refuses a model, the refusal must be a ValueError naming the file. Exit status 1 on any
mismatch or unclear refusal.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import diff_models as DM  # noqa: E402
import diff_variants as DV  # noqa: E402

BASE = dict(vocab_size=1600, character_coverage=0.9995, num_threads=1, minloglevel=2, hard_vocab_limit=False,
            bos_id=1, eos_id=2, unk_id=0, pad_id=-1)


RULES = "@rules.tsv"  # written into the run's folder: a few mappings of one and several code points


def _rules_tsv(tmpdir: str) -> str:
    """A normalization_rule_tsv: source code points (hex, space separated), TAB, target code points."""
    rows = [("41", "61"), ("42", "62"), ("61 62", "78"), ("E9", "65 301"), ("3000", "20"), ("FF01", "21"),
            ("2460", "31"), ("20 20", "20"), ("2014", "2D 2D")]
    path = os.path.join(tmpdir, "rules.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in rows))
    return path


def variants() -> list[tuple[str, dict]]:
    out = []
    for mt in ("bpe", "unigram"):
        out += [
            (f"{mt} default", {}),
            (f"{mt} byte_fallback", dict(byte_fallback=True, character_coverage=0.98)),
            (f"{mt} split_digits", dict(split_digits=True)),
            (f"{mt} no dummy prefix", dict(add_dummy_prefix=False)),
            (f"{mt} keep extra whitespace", dict(remove_extra_whitespaces=False)),
            (f"{mt} identity", dict(normalization_rule_name="identity")),
            (f"{mt} nfkc", dict(normalization_rule_name="nfkc")),
            (f"{mt} nmt_nfkc_cf", dict(normalization_rule_name="nmt_nfkc_cf")),
            (f"{mt} nfkc_cf", dict(normalization_rule_name="nfkc_cf")),
            (f"{mt} user_defined_symbols", dict(user_defined_symbols=["<sep>", "the", "hello world", "@@"])),
            (f"{mt} control_symbols", dict(control_symbols=["<ctl>", "<mask>"])),
            (f"{mt} whitespace as suffix", dict(treat_whitespace_as_suffix=True)),
            (f"{mt} no split by whitespace", dict(split_by_whitespace=False)),
            (f"{mt} no split by script", dict(split_by_unicode_script=False)),
            (f"{mt} max_sentencepiece_length 4", dict(max_sentencepiece_length=4)),
            (f"{mt} llama-like", dict(byte_fallback=True, split_digits=True, normalization_rule_name="identity",
                                      remove_extra_whitespaces=False, character_coverage=0.98, allow_whitespace_only_pieces=True)),
            (f"{mt} gemma-like", dict(byte_fallback=True, split_digits=True, normalization_rule_name="identity",
                                      add_dummy_prefix=False, remove_extra_whitespaces=False, character_coverage=0.98,
                                      user_defined_symbols=["<start_of_turn>", "\n\n", "  "])),
            (f"{mt} t5-like", dict(normalization_rule_name="nmt_nfkc", character_coverage=0.9995)),
            (f"{mt} pad and no eos", dict(pad_id=3, eos_id=-1)),
            (f"{mt} unk piece", dict(unk_piece="[UNK]", unk_surface=" ?? ")),
            (f"{mt} no split by number", dict(split_by_number=False)),
            (f"{mt} no dummy prefix keep whitespace", dict(add_dummy_prefix=False, remove_extra_whitespaces=False)),
            (f"{mt} whitespace as suffix no dummy prefix", dict(treat_whitespace_as_suffix=True, add_dummy_prefix=False)),
            (f"{mt} byte_fallback multibyte symbols", dict(byte_fallback=True, character_coverage=0.98,
                                                          user_defined_symbols=["日本", "é", "\u2581the", "💡"])),
            (f"{mt} custom rule tsv", dict(normalization_rule_tsv=RULES)),
        ]
    return [(n, dict(model_type=n.split()[0], **kw)) for n, kw in out]


def train(name: str, opts: dict, tmpdir: str) -> str:
    import sentencepiece as spm

    prefix = os.path.join(tmpdir, "".join(c if c.isalnum() else "_" for c in name))
    kw = dict(BASE, **opts)
    if kw.get("normalization_rule_tsv") == RULES:
        kw["normalization_rule_tsv"] = _rules_tsv(tmpdir)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(DV._training_lines()), model_prefix=prefix, **kw)
    return prefix + ".model"


def run_variant(name: str, opts: dict, items, tmpdir: str) -> tuple[str, DM.Report | None, str]:
    """('ok'|'mismatch'|'refused'|'unclear'|'spm-refuses', report, message)"""
    import fstok

    try:
        path = train(name, opts, tmpdir)
    except Exception as e:  # the trainer refuses the option set: nothing to compare
        return "spm-refuses", None, f"{type(e).__name__}: {str(e)[:200]}"
    try:
        fstok.compile(path)
    except (ValueError, NotImplementedError) as e:
        if os.path.basename(path) not in str(e):
            return "unclear", None, str(e)[:300]
        return "refused", None, str(e)[:300]
    r = DM.Report(path, "sentencepiece")
    try:
        DM.diff_sentencepiece(path, items, r)
    except Exception as e:
        r.check(False, "crashed", "-", "", "a result", f"{type(e).__name__}: {e}")
    return ("ok" if r.n_bad == 0 else "mismatch"), r, ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="variants whose name contains one of these words")
    ap.add_argument("--lines", type=int, default=800, help="every N-th line of each corpus file (default 800)")
    ap.add_argument("--hypothesis", type=int, default=300, help="hypothesis strings (default 300)")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    vs = [v for v in variants() if not args.only or any(w in v[0] for w in args.only)]
    if args.list:
        for name, opts in vs:
            print(f"{name:32s} {opts}")
        return 0
    items = DV.sample_inputs(args.lines, args.hypothesis)
    print(f"{len(vs)} variants, {len(items)} distinct inputs", flush=True)
    bad = 0
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        os.environ["FSTOK_CACHE_DIR"] = os.path.join(tmpdir, "cache")
        for name, opts in vs:
            t = time.time()
            status, r, msg = run_variant(name, opts, items, tmpdir)
            counts[status] = counts.get(status, 0) + 1
            n = f"{r.n} checks, {r.n_bad} mismatches" if r else msg
            print(f"{status:11s} {name}: {n} ({time.time() - t:.1f} s)", flush=True)
            if status in ("mismatch", "unclear"):
                bad += 1
                for line in (r.first[:4] if r else []):
                    print("    ", line, flush=True)
    print("TOTAL", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
