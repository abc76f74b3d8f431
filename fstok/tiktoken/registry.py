"""Encodings by name (`tiktoken.registry`): the bundled OpenAI encodings, then `tiktoken_ext` plugins.

Plugins are found as tiktoken finds them: every module of the `tiktoken_ext` namespace package that
defines `ENCODING_CONSTRUCTORS` (name -> function returning `Encoding` keyword arguments).  tiktoken's
own `tiktoken_ext.openai_public` (present when tiktoken is installed) is skipped: it downloads its
rank files, and fstok bundles the same encodings (`fstok.tiktoken.openai_public`).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
import threading
from typing import Any, Callable, Sequence

from . import core as _core
from .core import Encoding

_lock = threading.RLock()
ENCODINGS: dict[str, Encoding] = {}
ENCODING_CONSTRUCTORS: dict[str, Callable[[], dict[str, Any]]] | None = None

_BUNDLED = "fstok.tiktoken.openai_public"
_UPSTREAM_BUNDLED = "tiktoken_ext.openai_public"


@functools.lru_cache
def _available_plugin_modules() -> Sequence[str]:
    mods = [_BUNDLED]
    try:
        import tiktoken_ext
    except ImportError:
        return mods
    for _, mod_name, _ in pkgutil.iter_modules(tiktoken_ext.__path__, tiktoken_ext.__name__ + "."):
        if mod_name != _UPSTREAM_BUNDLED:
            mods.append(mod_name)
    return mods


def _find_constructors() -> None:
    global ENCODING_CONSTRUCTORS
    with _lock:
        if ENCODING_CONSTRUCTORS is not None:
            return
        ENCODING_CONSTRUCTORS = {}
        try:
            for mod_name in _available_plugin_modules():
                mod = importlib.import_module(mod_name)
                try:
                    constructors = mod.ENCODING_CONSTRUCTORS
                except AttributeError as e:
                    raise ValueError(f"tiktoken plugin {mod_name} does not define ENCODING_CONSTRUCTORS") from e
                for enc_name, constructor in constructors.items():
                    if enc_name in ENCODING_CONSTRUCTORS:
                        raise ValueError(f"Duplicate encoding name {enc_name} in tiktoken plugin {mod_name}")
                    ENCODING_CONSTRUCTORS[enc_name] = constructor
        except Exception:
            # a failed scan is retried (and fails the same way) on the next call
            ENCODING_CONSTRUCTORS = None
            raise


def get_encoding(encoding_name: str) -> Encoding:
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")

    if encoding_name in ENCODINGS:
        return ENCODINGS[encoding_name]

    with _lock:
        if encoding_name in ENCODINGS:
            return ENCODINGS[encoding_name]

        if ENCODING_CONSTRUCTORS is None:
            _find_constructors()
            assert ENCODING_CONSTRUCTORS is not None

        if encoding_name not in ENCODING_CONSTRUCTORS:
            from .core import TIKTOKEN_VERSION as __version__

            raise ValueError(
                f"Unknown encoding {encoding_name}.\n"
                f"Plugins found: {_available_plugin_modules()}\n"
                f"tiktoken version: {__version__} (fstok.tiktoken)"
            )

        constructor = ENCODING_CONSTRUCTORS[encoding_name]
        bundled = getattr(constructor, "_fstok_bundled", None)
        if bundled == encoding_name:
            from .. import api

            enc = Encoding._from_tokenizer(api.get_encoding(encoding_name), encoding_name)
        else:
            enc = Encoding(**constructor())
        ENCODINGS[encoding_name] = enc
        return enc


def list_encoding_names() -> list[str]:
    with _lock:
        if ENCODING_CONSTRUCTORS is None:
            _find_constructors()
            assert ENCODING_CONSTRUCTORS is not None
        return list(ENCODING_CONSTRUCTORS)


def _registered(name: str, digest: str) -> Encoding:
    """Unpickle a registered encoding (Encoding.__reduce__): by name, as tiktoken does."""
    return get_encoding(name)


_core._REGISTRY = sys.modules[__name__]
