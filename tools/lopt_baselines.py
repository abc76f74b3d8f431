"""Comparison-only baselines for tools/bench long; NOT exact, never used by fstok itself.

* delimiter baselines (whitespace / comma / period): cut the text at the first delimiter at or after
  each k*len/threads, encode the pieces on threads, concatenate ids (the paper's Delimiter-based
  ParallelTokenizer; the cut keeps the delimiter with the right piece).
* id-overlap baseline (ParallelTokenizer style): overlapping chunks, merged at the longest common
  run of token *ids* between the tail of chunk i and the head of chunk i+1 (no positions), found with a
  quadratic longest-common-substring DP over the overlap tokens.

Each function is ``fn(tokenizer, text, num_threads) -> list[int]`` with ``tokenizer.encode(text)``.
"""
from concurrent.futures import ThreadPoolExecutor


def _map(fn, items, nt):
    if nt <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(nt, len(items))) as ex:
        return list(ex.map(fn, items))


def delimiter_split(tok, text, num_threads, delim=" "):
    n = len(text)
    cuts = [0]
    for k in range(1, num_threads):
        j = text.find(delim, max(cuts[-1] + 1, n * k // num_threads))
        if j == -1:
            break
        cuts.append(j)
    cuts.append(n)
    pieces = [text[cuts[k]:cuts[k + 1]] for k in range(len(cuts) - 1)]
    out = []
    for r in _map(tok.encode, pieces, num_threads):
        out.extend(r)
    return out


def _longest_common_run(a, b):
    """(i, j, length) of the longest common contiguous run of a and b (DP, O(len(a) * len(b)))."""
    best = (0, 0, 0)
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        ai = a[i - 1]
        for j in range(1, len(b) + 1):
            if ai == b[j - 1]:
                v = prev[j - 1] + 1
                cur[j] = v
                if v > best[2]:
                    best = (i - v, j - v, v)
        prev = cur
    return best


def id_overlap(tok, text, num_threads, overlap_chars=256):
    n = len(text)
    if num_threads <= 1 or n <= 2 * overlap_chars:
        return list(tok.encode(text))
    chunk = -(-n // num_threads)
    pieces = [text[s:min(n, s + chunk + overlap_chars)] for s in range(0, n, chunk)]
    res = _map(lambda p: list(tok.encode(p)), pieces, num_threads)
    out = list(res[0])
    for nxt in res[1:]:
        # compare the tail of what we have with the head of the next chunk (a window of tokens)
        w = max(8, overlap_chars // 2)
        tail, head = out[-w:], nxt[:w]
        i, j, ln = _longest_common_run(tail, head)
        if ln == 0:
            out.extend(nxt)
            continue
        del out[len(out) - len(tail) + i:]
        out.extend(nxt[j:])
    return out


BASELINES = {
    "delim-whitespace": lambda tok, text, nt: delimiter_split(tok, text, nt, " "),
    "delim-comma": lambda tok, text, nt: delimiter_split(tok, text, nt, ","),
    "delim-period": lambda tok, text, nt: delimiter_split(tok, text, nt, "."),
    "id-overlap": id_overlap,
}
