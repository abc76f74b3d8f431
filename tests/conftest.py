import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def _find_shared() -> str:
    """The shared corpora/vocabularies: $FSTOK_SHARED_DATA, else ../shared/data next to the checkout."""
    cands = [os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"), "/work/shared/data"]
    for c in cands:
        if c and os.path.isdir(os.path.join(c, "corpus")):
            return os.path.normpath(c)
    return os.path.normpath(cands[1])


SHARED = _find_shared()
os.environ.setdefault("FSTOK_SHARED_DATA", SHARED)  # tools/ imported by tests read the same folder
CORPUS = os.path.join(SHARED, "corpus")
VOCAB = os.path.join(SHARED, "vocab")
CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]


def corpus_path(name: str) -> str:
    return os.path.join(CORPUS, f"{name}.txt")


def read_corpus(name: str) -> str:
    with open(corpus_path(name), encoding="utf-8", newline="") as f:
        return f.read()


def spread_sample(per_corpus: int = 15) -> list[str]:
    """`per_corpus` non-blank lines from each shared corpus, spread evenly over the file."""
    out = []
    for name in CORPORA:
        lines = [x for x in read_corpus(name).splitlines() if x.strip()]
        out += lines[:: max(1, len(lines) // per_corpus)][:per_corpus]
    return out


needs_shared = pytest.mark.skipif(not os.path.isdir(CORPUS), reason="../shared/data not present")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    # bundled encodings compile into a per-session cache so tests never read a stale one
    if "FSTOK_CACHE_DIR" not in os.environ:
        os.environ["FSTOK_CACHE_DIR"] = str(tmp_path_factory.mktemp("fstok-cache"))
    yield
