"""The builders: vocabularies, regexes and merge lists -> flat tables (offline work only).

`fstok.compile` is also the public function `fstok.compile(src, **options)`.  A package and a
function cannot share one attribute of `fstok`, so this package's module object is made
callable and forwards to `fstok.api.compile`; `fstok.compile("vocab.txt")` and
`import fstok.compile.wordpiece` both work.
"""
import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, src, **options):
        from ..api import compile as _compile

        return _compile(src, **options)


sys.modules[__name__].__class__ = _CallablePackage
