"""Wall time of one BPE `encode_ordinary_batch` call over every non-empty line of a corpus, per thread count, with
the cyclic GC on and off (docs/design/bpe.md, "Result lists"): the per-text costs of a batch (making the result lists, the GC
passes they start) next to the encoding.

    python tools/time_batch_lines.py [ENCODING] [CORPUS] [CALLS]      # defaults: r50k_base english 6
"""
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fstok  # noqa: E402
import bench_bpe as bb  # noqa: E402


def main() -> None:
    enc = sys.argv[1] if len(sys.argv) > 1 else "r50k_base"
    corpus = sys.argv[2] if len(sys.argv) > 2 else "english"
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    tok = fstok.get_encoding(enc)
    lines = [ln for ln in bb._read(corpus, None).split("\n") if ln]
    print(f"{enc} {corpus}: {len(lines)} lines, {sum(len(ln.encode()) for ln in lines)} bytes; wall ms per call")
    for gc_on in (True, False, True):
        (gc.enable if gc_on else gc.disable)()
        for nt in (1, 2, 1, 2):
            ms = []
            for _ in range(calls):
                t0 = time.perf_counter()
                out = tok.encode_ordinary_batch(lines, num_threads=nt)
                ms.append((time.perf_counter() - t0) * 1e3)
                del out
            print(f"gc {'on ' if gc_on else 'off'} threads {nt}: " + " ".join(f"{x:.0f}" for x in ms))
    gc.enable()


if __name__ == "__main__":
    main()
