"""The package version (one definition: fstok/__init__.py and the cache keys read it)."""
__version__ = "0.1.0"
