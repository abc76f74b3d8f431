"""tiktoken's API on fstok's compiled BPE: `import fstok.tiktoken as tiktoken`.

    import fstok.tiktoken as tiktoken
    enc = tiktoken.get_encoding("o200k_base")         # bundled, offline, compiled once into the cache
    enc = tiktoken.encoding_for_model("gpt-4o")
    enc.encode("hello world"); enc.decode([...])

Every public name of tiktoken 0.14 is here (`Encoding`, `get_encoding`, `encoding_for_model`,
`encoding_name_for_model`, `list_encoding_names`, the modules `core`, `load`, `model`, `registry`) with
tiktoken's results and exception types; `tiktoken_ext` plugins are found as tiktoken finds them.
Rank files are read from local paths only: fstok never uses the network.  See docs/tiktoken.md.
"""
from __future__ import annotations

from . import core, load, model, registry  # noqa: F401  (tiktoken's submodules, as attributes)
from .core import Encoding as Encoding
from .model import encoding_for_model as encoding_for_model
from .model import encoding_name_for_model as encoding_name_for_model
from .registry import get_encoding as get_encoding
from .registry import list_encoding_names as list_encoding_names

# the tiktoken release whose API and results this module reproduces (code may gate features on it)
from .core import TIKTOKEN_VERSION as __version__

__all__ = ["Encoding", "encoding_for_model", "encoding_name_for_model", "get_encoding", "list_encoding_names"]
